"""Report details a reader needs: distinct legends, the threshold on the curves, readable cells."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_eval_support import friends_benchmark

from polylogue.evaluation.report import (
    ci_cell,
    confusion_text_color,
    find_runs,
    legend_names,
    sweep_row,
    threshold_marker,
    write_report,
)
from polylogue.evaluation.runner import load_points, run_evaluation
from polylogue.models import load_predictor


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bench = friends_benchmark(tmp_path_factory.mktemp("bench") / "friends-s10")
    out = tmp_path_factory.mktemp("runs")
    model = load_predictor("default")
    for split in ("test", "validation"):  # the same model and dataset twice
        points, info = load_points(bench, split)
        run_evaluation(points, info, model, out, progress=False, n_boot=0)
    return out


def test_legend_entries_are_keyed_by_dataset_and_split(runs: Path) -> None:
    found = find_runs([runs])
    names = legend_names(found)
    assert len(set(names)) == len(found) == 2
    assert {n.rsplit("/", 1)[1] for n in names} == {"test", "validation"}
    assert all(r.threshold is not None and 0 < r.threshold < 1 for r in found)


def test_report_marks_threshold_and_defines_categories(runs: Path, tmp_path: Path) -> None:
    md, _, page = write_report([runs], tmp_path / "rep")
    text = md.read_text(encoding="utf-8")
    assert "S2 referenced, not addressed" in text and "SA addressed, silent" in text
    html = page.read_text(encoding="utf-8")
    assert "Threshold curves" in html and "S1 no reference" in html


def test_threshold_dot_is_the_runs_own_operating_point(runs: Path) -> None:
    """The dot at the decision threshold shows the table's numbers (every point has P(SPEAK)),
    not the nearest row of the thinned sweep."""
    for run in find_runs([runs]):
        assert run.threshold is not None
        pt = threshold_marker(run, run.threshold)
        assert pt.balanced_accuracy == pytest.approx(run.metrics["balanced_accuracy"])
        assert pt.false_interruption_rate == pytest.approx(run.metrics["false_interruption_rate"])
        assert pt.missed_turn_rate == pytest.approx(run.metrics["missed_turn_rate"])


def test_small_helpers() -> None:
    # p >= 0.35 decides as p >= 0.6 on these rows (no score in between), not as the nearer 0.3.
    assert sweep_row([1.0, 0.6, 0.3, 0.0], 0.35) == 1
    assert sweep_row([1.0, 0.6, 0.3, 0.0], 0.3) == 2
    assert sweep_row([0.9, 0.6], 0.95) == 0
    assert confusion_text_color(90, 100) == "white"
    assert confusion_text_color(10, 100) == "black"
    assert confusion_text_color(0, 0) == "black"
    assert ci_cell([0.5, 0.6], 4) == "n/a (4 groups)"
    assert ci_cell([0.5, 0.6], 12) == "50.0–60.0"
    assert ci_cell(None, None) == "–"
