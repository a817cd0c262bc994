"""``polylogue train-default`` and ``polylogue tune-threshold`` on a small real benchmark."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from polylogue.cli import app
from polylogue.corpora import load_corpus
from polylogue.engine.model import load_model
from polylogue.turntaking.dataset import BuildOptions, build_benchmark, save_benchmark

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small_bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Four earnings calls: each call is its own group, so every split gets one.
    build = build_benchmark(
        itertools.islice(load_corpus("earnings21"), 4), BuildOptions(fractions=(0.5, 0.25, 0.25))
    )
    return save_benchmark(
        build, tmp_path_factory.mktemp("bench") / "earnings", formats=("parquet",)
    )


def test_train_default_cli_writes_a_loadable_model(small_bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "model"
    result = CliRunner().invoke(
        app, ["train-default", "--bench", str(small_bench), "--out", str(out), "--rounds", "3"]
    )
    assert result.exit_code == 0, result.output
    model = load_model(out)
    assert model.metadata["trained_on"]["earnings"]["corpora"] == ["earnings21"]
    # The training conversations are recorded, so eval can tell a test split that holds them.
    trained = set(model.metadata["trained_on"]["earnings"]["train_conversations"])
    from polylogue.turntaking.dataset import load_benchmark

    assert trained == load_benchmark(small_bench).conversation_ids("train")
    assert "test" in model.metadata["metrics"]


def test_tune_threshold_sweeps_and_respects_an_interruption_budget(small_bench: Path) -> None:
    runner = CliRunner()
    free = runner.invoke(app, ["tune-threshold", "--data", str(small_bench), "--json"])
    assert free.exit_code == 0, free.output
    sweep = json.loads(free.stdout)
    assert 0.0 < sweep["chosen"] < 1.0
    capped = runner.invoke(
        app,
        ["tune-threshold", "--data", str(small_bench), "--json", "--max-interruption-rate", "0.05"],
    )
    assert capped.exit_code == 0, capped.output
    chosen = json.loads(capped.stdout)["chosen"]
    row = next(r for r in sweep["sweep"] if r["threshold"] == chosen)
    # Either within budget, or the most conservative threshold available.
    assert row["interruption_rate"] <= 0.05 or chosen == sweep["sweep"][-1]["threshold"]
    table = runner.invoke(app, ["tune-threshold", "--data", str(small_bench)])
    assert table.exit_code == 0 and "chosen threshold" in table.stdout


def test_eval_and_report_warn_when_test_is_in_the_shipped_models_training_data(
    tmp_path: Path,
) -> None:
    # A 20-meeting AMI build splits afresh: its test split holds meetings (ES2004...) that the
    # shipped model was trained on, and its scores are then not held-out.
    runner = CliRunner()
    bench = tmp_path / "ami20"
    built = runner.invoke(
        app, ["build", "--corpus", "ami", "--limit-conversations", "20", "--out", str(bench)]
    )
    assert built.exit_code == 0, built.output
    from polylogue.evaluation.leakage import training_conversations
    from polylogue.turntaking.dataset import load_benchmark

    trained = training_conversations(load_model().metadata)
    assert trained, "the shipped model.json records its training conversations"
    leaked = load_benchmark(bench).conversation_ids("test") & trained
    assert leaked
    runs = tmp_path / "runs"
    result = runner.invoke(
        app,
        ["eval", "--data", str(bench), "--model", "default", "--out", str(runs), "--no-progress"],
    )
    assert result.exit_code == 0, result.output
    assert "training data" in result.stderr and "not held-out" in result.stderr
    manifest = json.loads(next(runs.glob("*/manifest.json")).read_text(encoding="utf-8"))
    assert set(manifest["training_overlap"]["conversations"]) == leaked
    report = runner.invoke(app, ["report", str(runs), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    assert "training data" in report.stderr
    assert "not held-out" in (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    # The real held-out test split of a full build overlaps nothing (checked by the card's
    # benchmarks/default_model_eval.py); a baseline is never checked.
    base = runner.invoke(
        app,
        [
            "eval", "--data", str(bench), "--model", "baseline:previous-speaker",
            "--out", str(runs), "--no-progress",
        ],
    )  # fmt: skip
    assert base.exit_code == 0 and "training data" not in base.stderr
