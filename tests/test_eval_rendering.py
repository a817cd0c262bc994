"""``polylogue eval --rendering recognizer``: the words as a streaming recognizer writes them
(lower case, no punctuation) in every utterance a model sees, the labels untouched, in a run
folder of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_eval_support import friends_benchmark

from polylogue.evaluation.runner import load_points, render_points
from polylogue.rendering import recognizer_text

POLYLOGUE = [sys.executable, "-m", "polylogue.cli"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return friends_benchmark(tmp_path_factory.mktemp("bench") / "friends")


def test_points_in_the_recognizer_rendering(bench: Path) -> None:
    written, info = load_points(bench, "test")
    heard, heard_info = load_points(bench, "test", rendering="recognizer")
    assert info.rendering == "original" and heard_info.rendering == "recognizer"
    assert [p.point_id for p in heard] == [p.point_id for p in written]
    changed = 0
    for a, b in zip(written, heard, strict=True):
        assert b.gold == a.gold and b.group == a.group and b.input.target == a.input.target
        assert len(b.input.context) == len(a.input.context)
        for u, v in zip(a.input.context, b.input.context, strict=True):
            assert v.text == recognizer_text(u.text)
            assert (v.speaker, v.start, v.end) == (u.speaker, u.start, u.end)
            changed += v.text != u.text
    assert changed > 0  # Friends is written with capitals and punctuation
    assert render_points(written, "original") == written
    with pytest.raises(ValueError, match="original, recognizer"):
        render_points(written[:1], "phonetic")


def _eval(bench: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *POLYLOGUE,
            "eval",
            "--data",
            str(bench),
            "--model",
            "baseline:explicit-address",
            "--limit",
            "40",
            "--sample-seed",
            "3",
            "--out",
            str(out),
            "--no-progress",
            "--n-boot",
            "50",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_each_rendering_has_its_run_folder_and_report_row(bench: Path, tmp_path: Path) -> None:
    written = _eval(bench, tmp_path)
    heard = _eval(bench, tmp_path, "--rendering", "recognizer")
    assert written.returncode == 0 and heard.returncode == 0, written.stderr + heard.stderr
    said = heard.stdout + heard.stderr
    assert "recognizer rendering" in said
    assert " rendering)" not in written.stdout + written.stderr
    (a,) = [p for p in tmp_path.iterdir() if "recognizer" not in p.name]
    (b,) = [p for p in tmp_path.iterdir() if p.name != a.name]
    assert b.name.split("__")[2] == "test-recognizer"
    manifest = json.loads((b / "manifest.json").read_text())
    assert manifest["dataset"]["rendering"] == "recognizer"
    assert json.loads((b / "metrics.json").read_text())["rendering"] == "recognizer"

    def ids(folder: Path) -> list[str]:
        return [json.loads(line)["point_id"] for line in (folder / "predictions.jsonl").open()]

    assert sorted(ids(a)) == sorted(ids(b))  # the same sampled points, heard differently
    report = subprocess.run(
        [*POLYLOGUE, "report", str(a), str(b), "--out", str(tmp_path / "report")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr
    tables = "".join(p.read_text() for p in (tmp_path / "report").glob("*.md"))
    assert "friends/test (recognizer rendering)" in tables and "| friends/test |" in tables

    wrong = _eval(bench, tmp_path, "--rendering", "phonetic")
    assert wrong.returncode != 0
    assert "unknown rendering 'phonetic'" in wrong.stderr + wrong.stdout
