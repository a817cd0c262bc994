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
