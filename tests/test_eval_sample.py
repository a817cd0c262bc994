"""``polylogue eval --limit N --sample-seed S``: a category-stratified random sample whose larger
sizes extend the smaller ones, so a growing experiment resumes its run folder."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from test_eval_support import friends_benchmark

from polylogue.evaluation.runner import load_points, stratified_order

POLYLOGUE = [sys.executable, "-m", "polylogue.cli"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return friends_benchmark(tmp_path_factory.mktemp("bench") / "friends-s10")


def test_every_prefix_keeps_the_category_shares(bench: Path) -> None:
    points, _ = load_points(bench, "test")
    order = stratified_order(points, seed=7)
    assert sorted(p.point_id for p in order) == sorted(p.point_id for p in points)
    assert [p.point_id for p in order] == [p.point_id for p in stratified_order(points, 7)]
    assert [p.point_id for p in order] != [p.point_id for p in stratified_order(points, 8)]
    total = Counter(p.gold.category.value for p in points)
    for n in (20, 50, len(points) // 2):
        got = Counter(p.gold.category.value for p in order[:n])
        for cat, count in total.items():
            assert abs(got[cat] - n * count / len(points)) <= 1.0, (n, cat)


def _eval(bench: Path, out: Path, limit: int) -> dict:
    subprocess.run(
        [
            *POLYLOGUE,
            "eval",
            "--data",
            str(bench),
            "--model",
            "baseline:previous-speaker",
            "--limit",
            str(limit),
            "--sample-seed",
            "7",
            "--out",
            str(out),
            "--no-progress",
            "--n-boot",
            "50",
        ],
        check=True,
        capture_output=True,
    )
    (folder,) = out.glob("baseline-*")
    return {
        "ids": [json.loads(x)["point_id"] for x in (folder / "predictions.jsonl").open()],
        "manifest": json.loads((folder / "manifest.json").read_text()),
        "metrics": json.loads((folder / "metrics.json").read_text()),
    }


def test_a_larger_sample_resumes_the_same_run_folder(bench: Path, tmp_path: Path) -> None:
    points, _ = load_points(bench, "test")
    order = [p.point_id for p in stratified_order(points, 7)]
    small = _eval(bench, tmp_path / "runs", 20)
    assert small["ids"] == order[:20] and small["metrics"]["n"] == 20
    assert small["manifest"]["sample"]["seed"] == 7
    big = _eval(bench, tmp_path / "runs", 45)
    assert big["ids"][:20] == small["ids"] and big["ids"] == order[:45]
    assert big["metrics"]["n"] == 45
