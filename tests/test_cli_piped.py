"""What a user sees when polylogue's output goes to a pipe or a log file, and in its help.

The commands run as real subprocesses with stdout and stderr piped and no ``COLUMNS``: lines
that name run folders stay whole (rich used to wrap them at 80 columns), ``tom run`` prints
about ten progress lines (it printed one per ten records), ``build`` shows a total. The help
tests read the command lists at 80 columns.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from polylogue.cli import app
from polylogue.models.base import BASELINE_NAMES

# A path longer than 80 columns on its own, as run folders under a project often are.
LONG = "a-run-folder-under-a-project-whose-path-is-longer-than-eighty-columns-by-itself"


def _polylogue(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "polylogue.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


@pytest.fixture(scope="module")
def bench(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("piped") / LONG / "friends-bench"
    proc = _polylogue("build", "-c", "friends", "--limit-conversations", "12", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_build_piped_keeps_the_folder_whole_and_shows_a_total(
    bench: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, proc = bench
    wrote = [line for line in proc.stderr.splitlines() if line.startswith("wrote ")]
    assert len(wrote) == 1 and wrote[0].startswith(f"wrote {out}  (")
    progress = [line for line in proc.stderr.splitlines() if "building" in line]
    assert progress and "1/1 inputs, 12 conversations" in progress[-1]


def test_inspect_piped_prints_each_point_line_whole(
    bench: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    from polylogue.turntaking.dataset import load_benchmark, render_point

    out, _ = bench
    proc = _polylogue("inspect", str(out), "-n", "20")
    assert proc.returncode == 0, proc.stderr
    points = load_benchmark(out).points("test")[:20]
    expected = [line for p in points for line in render_point(p).splitlines()]
    assert max(map(len, expected)) > 80  # the check means something: long lines exist
    printed = set(proc.stdout.splitlines())
    assert [line for line in expected if line not in printed] == []
    table_title = [line for line in proc.stdout.splitlines() if "/test" in line and "─" not in line]
    assert table_title  # the summary table is still drawn


def test_tom_run_piped_prints_about_ten_progress_lines_and_whole_paths(tmp_path: Path) -> None:
    root = tmp_path / LONG
    proc = _polylogue("tom", "run", "--model", "majority", "--out", str(root))
    assert proc.returncode == 0, proc.stderr
    progress = [line for line in proc.stderr.splitlines() if line.startswith("records: ")]
    assert 5 <= len(progress) <= 11 and progress[-1] == "records: 1200/1200"
    folder = proc.stdout.strip().splitlines()[-1]
    assert folder.startswith(str(root)) and Path(folder).is_dir()
    summary = [line for line in proc.stderr.splitlines() if line.startswith(f"{folder}: ")]
    assert summary == [f"{folder}: 1200 new, 0 reused, 0 errors"]
    assert any(line.endswith("with the joint prompt") for line in proc.stderr.splitlines())


def _first_sentence(text: str) -> str:
    words = text.split("\n\n")[0].split()
    for i, w in enumerate(words):
        if w.endswith("."):
            return " ".join(words[: i + 1])
    return " ".join(words)


@pytest.mark.parametrize("group", [(), ("tom",), ("annotate",)])
def test_help_lists_each_command_description_whole(group: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*group, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    section = result.output.split("Commands:", 1)[1]
    assert "..." not in section
    assert max(len(line) for line in section.splitlines()) <= 80
    flat = " ".join(section.split())
    cmd: typer.core.TyperGroup = typer.main.get_command(app)  # type: ignore[assignment]
    for part in group:
        cmd = cmd.commands[part]  # type: ignore[assignment]
    for name, sub in cmd.commands.items():
        assert sub.help, name
        assert f"{name} {_first_sentence(sub.help)}" in flat, name


def test_eval_help_names_every_baseline() -> None:
    result = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    flat = re.sub(r"\s+", " ", result.output)
    assert "Baselines: " + ", ".join(BASELINE_NAMES) + "." in flat
