"""Three-outcome metrics and report sections on a real benchmark (Friends season 10)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_eval_support import friends_benchmark

from polylogue.evaluation.metrics import (
    balanced_accuracy,
    bootstrap_warning,
    outcome_metrics,
)
from polylogue.evaluation.report import write_report
from polylogue.evaluation.runner import load_points, run_evaluation
from polylogue.models import load_predictor
from polylogue.models.baselines import ConstantBaseline
from polylogue.turntaking.types import Decision, Outcome


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return friends_benchmark(tmp_path_factory.mktemp("bench"))


def test_outcome_metrics_of_the_shipped_model(bench: Path) -> None:
    points, _ = load_points(bench, "test")
    outcomes = [p.gold.floor_outcome.value for p in points]
    assert set(outcomes) == {"TAKE_FLOOR", "BACKCHANNEL", "SILENT"}
    preds = load_predictor("default").predict([p.input for p in points])
    decisions = [None if q.decision is None else q.decision.value for q in preds]
    om = outcome_metrics(outcomes, decisions)
    assert om["n"] == len(points)
    assert sum(sum(row.values()) for row in om["confusion"].values()) == len(points)
    for o in ("TAKE_FLOOR", "BACKCHANNEL", "SILENT"):
        assert om["n_per_outcome"][o] == outcomes.count(o)
    # A binary model never says BACKCHANNEL; its floor decision is scored like the binary view.
    assert not om["three_way"] and om["recall"]["BACKCHANNEL"] == 0.0
    gold_binary = [p.gold.label.value for p in points]
    assert om["floor_balanced_accuracy"] == pytest.approx(balanced_accuracy(gold_binary, decisions))
    bc_taken = om["confusion"]["BACKCHANNEL"]["TAKE_FLOOR"]
    assert om["backchannel_floor_take_rate"] == pytest.approx(
        bc_taken / om["n_per_outcome"]["BACKCHANNEL"]
    )
    # A three-way prediction scores BACKCHANNEL exactly.
    exact = outcome_metrics(outcomes, outcomes)
    assert exact["three_way"] and all(v == 1.0 for v in exact["recall"].values())
    assert exact["floor_balanced_accuracy"] == 1.0


def test_outcome_metrics_reject_bad_labels() -> None:
    with pytest.raises(ValueError, match="gold outcomes"):
        outcome_metrics(["SPEAK"], ["SPEAK"])
    with pytest.raises(ValueError, match="predictions must be"):
        outcome_metrics([Outcome.SILENT.value], ["MAYBE"])
    assert bootstrap_warning(3) and "3 groups" in (bootstrap_warning(3) or "")
    assert bootstrap_warning(10) is None and bootstrap_warning(None) is None


def test_report_has_outcomes_and_warns_on_few_groups(bench: Path, tmp_path: Path) -> None:
    points, info = load_points(bench, "test")
    n_groups = len({p.group for p in points})
    assert n_groups < 10  # a third of the episodes of 120 scenes
    run_evaluation(
        points,
        info,
        ConstantBaseline(Decision.SILENT),
        tmp_path / "runs",
        progress=False,
        n_boot=50,
    )
    paths = write_report([tmp_path / "runs"], tmp_path / "rep")
    md = paths[0].read_text()
    assert f"n/a ({n_groups} groups)" in md and "too few to be meaningful" in md
    assert "SA addressed, silent" in md and "I1 explicit address" in md  # categories defined
    assert "## Three outcomes (benchmark v2)" in md
    assert "| BACKCHANNEL |" in md and "Floor-decision BalAcc: 50.00" in md
    assert "Three outcomes" in paths[2].read_text()
