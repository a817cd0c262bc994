"""Every command's help shows every flag name whole at 80 columns (no '…' cuts)."""

from __future__ import annotations

from typing import Any

import typer
from typer.testing import CliRunner

from polylogue.cli import app


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # a group (typer ships its own click)
            out += _commands(cmd, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


def test_help_keeps_every_flag_name_at_80_columns() -> None:
    root: Any = typer.main.get_command(app)
    paths = _commands(root)
    assert len(paths) > 20
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, (path, result.output)
        assert "…" not in result.output, path
        cmd = root
        for part in path:
            cmd = cmd.commands[part]
        for param in cmd.params:
            if param.param_type_name == "option" and not param.hidden:
                for flag in (*param.opts, *param.secondary_opts):
                    assert flag in result.output, (path, flag)
        assert max(len(line) for line in result.output.splitlines()) <= 80, path


def test_every_benchmark_script_prints_its_help() -> None:
    """``benchmarks/*.py --help`` exits 0: a help text with a bare ``%`` made argparse crash
    (default_model_eval.py), and a stale import broke a script whole (default_model_ceiling.py)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    # Scripts without a command line (vtt_adversarial.py) would run their whole benchmark.
    scripts = [
        p
        for p in sorted((root / "benchmarks").glob("*.py"))
        if "argparse" in p.read_text(encoding="utf-8")
    ]
    assert len(scripts) > 10
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "COLUMNS": "100"}
    for script in scripts:
        done = subprocess.run(
            [sys.executable, str(script), "--help"],
            capture_output=True,
            text=True,
            env=env,
            cwd=root,
            timeout=120,
        )
        assert done.returncode == 0, (script.name, done.stderr[-2000:])
        assert "usage:" in done.stdout, script.name
