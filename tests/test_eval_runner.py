"""Run folders, resume (incl. SIGKILL of a real CLI process), reports and the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from test_eval_support import friends_benchmark

from polylogue.evaluation.report import write_report
from polylogue.evaluation.runner import RunError, load_points, read_predictions, run_evaluation
from polylogue.models import Prediction, PredictionError, load_predictor
from polylogue.models.baselines import RandomBaseline
from polylogue.turntaking.types import DecisionInput

POLYLOGUE = [sys.executable, "-m", "polylogue.cli"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return friends_benchmark(tmp_path_factory.mktemp("bench") / "friends-s10")


def _ids(folder: Path) -> list[str]:
    lines = (folder / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["point_id"] for line in lines]


def test_run_folder_contents(bench: Path, tmp_path: Path) -> None:
    points, info = load_points(bench, "test")
    res = run_evaluation(
        points,
        info,
        load_predictor("baseline:explicit-address"),
        tmp_path,
        spec="baseline:explicit-address",
        progress=False,
        n_boot=200,
    )
    assert res.complete and res.n_new == len(points)
    ids = _ids(res.folder)
    assert sorted(ids) == sorted(p.point_id for p in points)
    rec = read_predictions(res.folder / "predictions.jsonl")[0]
    gold = {p.point_id: p.gold for p in points}[rec["point_id"]]
    assert rec["gold"] == gold.label.value and rec["category"] == gold.category.value
    manifest = json.loads((res.folder / "manifest.json").read_text())
    assert manifest["dataset"]["data_hash"] == info.data_hash
    assert manifest["status"] == "complete" and "numpy" in manifest["versions"]
    metrics = json.loads((res.folder / "metrics.json").read_text())
    assert metrics["n"] == len(points) and metrics["class_ratio"] == "natural"
    assert metrics["bootstrap"]["unit"] == "group" and metrics["bootstrap"]["n_units"] > 1
    # Same setup, same folder, nothing to redo.
    again = run_evaluation(
        points,
        info,
        load_predictor("baseline:explicit-address"),
        tmp_path,
        progress=False,
        n_boot=0,
    )
    assert again.folder == res.folder and again.n_new == 0


def test_limit_then_resume_and_truncated_line(bench: Path, tmp_path: Path) -> None:
    points, info = load_points(bench, "test")
    pred = load_predictor("baseline:random", seed=3)
    first = run_evaluation(points, info, pred, tmp_path, limit=40, progress=False, n_boot=0)
    assert first.n_done == 40 and not first.complete
    assert json.loads((first.folder / "metrics.json").read_text())["complete"] is False
    # A write cut by a kill leaves half a line without its newline.
    with open(first.folder / "predictions.jsonl", "a", encoding="utf-8") as f:
        f.write('{"point_id": "half-writ')
    rest = run_evaluation(points, info, pred, tmp_path, progress=False, n_boot=0)
    assert rest.folder == first.folder and rest.n_new == len(points) - 40
    ids = _ids(rest.folder)
    assert len(ids) == len(set(ids)) == len(points)
    # Answers are the same as in one uninterrupted run.
    fresh = run_evaluation(points, info, pred, tmp_path / "fresh", progress=False, n_boot=0)
    by_id = {
        r["point_id"]: r["decision"] for r in read_predictions(fresh.folder / "predictions.jsonl")
    }
    assert by_id == {
        r["point_id"]: r["decision"] for r in read_predictions(rest.folder / "predictions.jsonl")
    }


class _DiesAfter:
    """A real baseline whose 'server' goes away after ``n`` points (the backend contract)."""

    def __init__(self, n: int) -> None:
        self.inner = RandomBaseline(seed=1)
        self.left = n
        self.name = self.inner.name
        self.batch_size = 8

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        ok = self.inner.predict(inputs[: max(0, self.left)])
        self.left -= len(ok)
        if len(ok) < len(inputs):
            raise PredictionError("connection refused", completed=ok)
        return ok


def test_backend_failure_keeps_finished_work(bench: Path, tmp_path: Path) -> None:
    points, info = load_points(bench, "test")
    with pytest.raises(RunError, match="rerun the same command to resume"):
        run_evaluation(points, info, _DiesAfter(21), tmp_path, progress=False, n_boot=0)
    folder = next(tmp_path.iterdir())
    assert len(_ids(folder)) == 21
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "connection refused" in manifest["error"]
    done = run_evaluation(points, info, RandomBaseline(seed=1), tmp_path, progress=False, n_boot=0)
    assert done.folder == folder and done.complete
    assert len(set(_ids(folder))) == len(_ids(folder)) == len(points)


def test_sigkill_of_a_real_cli_run_loses_and_duplicates_nothing(
    bench: Path, tmp_path: Path
) -> None:
    out = tmp_path / "runs"
    cmd = [
        *POLYLOGUE,
        "eval",
        "--data",
        str(bench),
        "--model",
        "baseline:random",
        "--out",
        str(out),
        "--limit",
        "120",
        "--batch-size",
        "1",
        "--no-progress",
        "--n-boot",
        "0",
    ]
    proc = subprocess.Popen(
        [*cmd, "-O", "delay_s=0.05"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    pred_file = None
    while time.monotonic() < deadline:
        found = list(out.glob("*/predictions.jsonl"))
        if found and found[0].read_text().count("\n") >= 15:
            pred_file = found[0]
            break
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.05)
    assert pred_file is not None, "the run never wrote predictions"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = _ids(pred_file.parent)
    assert 15 <= len(killed_at) < 120
    # delay_s is not part of the run key: the resumed run finds the same folder.
    subprocess.run(cmd, check=True, capture_output=True)
    ids = _ids(pred_file.parent)
    assert len(ids) == len(set(ids)) == 120
    assert ids[: len(killed_at)] == killed_at
    points, _ = load_points(bench, "test")
    assert set(ids) == {p.point_id for p in points[:120]}


def test_cli_eval_balanced_and_report(bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    for model in ("baseline:always-silent", "baseline:explicit-address"):
        r = subprocess.run(
            [
                *POLYLOGUE,
                "eval",
                "--data",
                str(bench),
                "--model",
                model,
                "--out",
                str(out),
                "--no-progress",
                "--n-boot",
                "100",
                "--balanced",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "balanced class ratio" in r.stderr
    runs = sorted(out.glob("baseline-*"))
    assert len(runs) == 2 and all("-balanced__" in r.name for r in runs)
    ref = next(r for r in runs if "always-silent" in r.name)
    rep = subprocess.run(
        [
            *POLYLOGUE,
            "report",
            *map(str, runs),
            "--reference",
            str(ref),
            "--out",
            str(tmp_path / "report"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert rep.returncode == 0
    page = (tmp_path / "report" / "report.html").resolve()
    assert rep.stdout.splitlines()[-1] == f"open in a browser: {page.as_uri()}"
    md = (tmp_path / "report" / "report.md").read_text()
    assert "Class ratio: balanced" in md
    assert "| baseline:explicit-address |" in md and "(+" in md  # deltas vs the reference
    html = (tmp_path / "report" / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 3 and "<script" not in html
    csv_lines = (tmp_path / "report" / "report.csv").read_text().splitlines()
    assert csv_lines[0].startswith("model,dataset,split,class_ratio")
    assert len(csv_lines) == 2


def test_report_from_python_without_metrics_json(bench: Path, tmp_path: Path) -> None:
    points, info = load_points(bench, "test")
    res = run_evaluation(
        points, info, RandomBaseline(seed=5), tmp_path / "runs", progress=False, n_boot=0
    )
    (res.folder / "metrics.json").unlink()
    paths = write_report([tmp_path / "runs"], tmp_path / "rep")
    assert "baseline:random" in paths[0].read_text()
    assert "Threshold curves" in paths[2].read_text()


def test_cli_rejects_bad_model_spec(bench: Path, tmp_path: Path) -> None:
    r = subprocess.run(
        [
            *POLYLOGUE,
            "eval",
            "--data",
            str(bench),
            "--model",
            "baseline:nope",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode != 0 and "unknown baseline" in r.stderr


def test_previous_speaker_baseline_on_real_points(bench: Path) -> None:
    """``baseline:previous-speaker`` speaks exactly for whoever held the floor before the
    current turn, recounted here from the gold next speakers of the same conversation."""
    points, _ = load_points(bench, "test")
    preds = {
        q.point_id: q
        for q in load_predictor("baseline:previous-speaker").predict([p.input for p in points])
    }
    checked = speak = 0
    for p in points:
        speakers = [u.speaker for u in p.input.context]
        turns = [s for i, s in enumerate(speakers) if i == 0 or speakers[i - 1] != s]
        expected = len(turns) > 1 and turns[-2] == p.input.target.id
        q = preds[p.point_id]
        assert (q.decision.value == "SPEAK") is expected, p.point_id
        assert q.p_speak == (1.0 if expected else 0.0)
        checked += 1
        speak += expected
    assert checked == len(points) and 0 < speak < checked
