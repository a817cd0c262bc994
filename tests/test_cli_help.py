"""Every command's help shows every flag name whole at 80 columns (no '…' cuts)."""

from __future__ import annotations

from typing import Any

import pytest
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


def test_every_benchmark_script_starts_and_prints_its_help(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The scripts behind the docs' figures import and parse their arguments (a moved module or
    a '%' in a help text broke ``--help`` of two of them once). Each runs as ``__main__`` in
    this process (their shared imports load once; a new interpreter each cost most of the
    test)."""
    import runpy
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    # Modules the scripts share start with "_" and are not scripts.
    scripts = sorted(p for p in (root / "benchmarks").glob("*.py") if not p.name.startswith("_"))
    assert len(scripts) >= 15
    monkeypatch.syspath_prepend(str(root / "benchmarks"))  # as `python benchmarks/X.py` has it
    monkeypatch.chdir(root)
    for script in scripts:
        monkeypatch.setattr("sys.argv", [str(script), "--help"])
        with pytest.raises(SystemExit) as stopped:
            runpy.run_path(str(script), run_name="__main__")
        out, err = capsys.readouterr()
        assert stopped.value.code in (0, None), (script.name, err[-2000:])
        assert "usage:" in out.lower(), (script.name, out[:500])
