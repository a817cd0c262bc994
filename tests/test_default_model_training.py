"""Training the default model end to end on a small real subset, and threshold tuning."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from polylogue.corpora import load_corpus
from polylogue.engine.model import load_model
from polylogue.evaluation.metrics import sweep_thresholds
from polylogue.models.default_model import load_default_predictor
from polylogue.training.engine_models.default_model import (
    TrainOptions,
    fit_hashed_logistic,
    train_default_model,
)
from polylogue.turntaking.dataset import (
    BuildOptions,
    build_benchmark,
    load_benchmark,
    save_benchmark,
)


def _small_benchmark(tmp: Path, corpus: str, n: int) -> Path:
    build = build_benchmark(
        itertools.islice(load_corpus(corpus), n), BuildOptions(fractions=(0.5, 0.25, 0.25))
    )
    return save_benchmark(build, tmp / f"bench-{corpus}", formats=("parquet",))


def test_train_end_to_end_on_real_subset(tmp_path: Path) -> None:
    folders = [
        _small_benchmark(tmp_path, "friends", 8),
        _small_benchmark(tmp_path, "earnings21", 4),
    ]
    benches = [load_benchmark(f) for f in folders]
    result = train_default_model(
        benches,
        TrainOptions(num_boost_round=5, early_stopping_rounds=5, num_leaves=7, min_data_in_leaf=20),
        log=lambda _: None,
    )
    out = result.model.save(tmp_path / "model")
    model = load_model(out)
    assert model.metadata["trees"] >= 1
    assert 0.0 < model.threshold < 1.0
    val = result.metrics["validation"]
    assert set(val["corpora"]) <= {"friends", "earnings21"}
    assert 0.0 <= val["all"]["balanced_accuracy"] <= 1.0
    # The saved folder is a working predictor.
    predictor = load_default_predictor(model_dir=out)
    inputs = benches[0].inputs("validation")[:20]
    preds = predictor.predict(inputs)
    assert all(p.p_speak is not None and 0.0 <= p.p_speak <= 1.0 for p in preds)
    # Three outcomes from the saved folder; the floor probability is the binary model's.
    from polylogue.engine.extract import FeatureExtractor

    x = FeatureExtractor(model.yield_model, model.relation_model).features(inputs)
    out = model.outcomes(x)
    np.testing.assert_allclose(out.take_floor + out.backchannel + out.silent, 1.0, atol=1e-9)
    np.testing.assert_allclose(out.take_floor, model.proba(x))

    def backchannels(split: str) -> int:
        return sum(
            pt.gold.floor_outcome.value == "BACKCHANNEL" for b in benches for pt in b.points(split)
        )

    # A backchannel booster exists exactly when both train and validation have backchannels.
    learnable = backchannels("train") > 0 and backchannels("validation") > 0
    assert (model.backchannel_trees is not None) == learnable
    if not learnable:
        assert not out.backchannel.any()
    assert set(model.domain_thresholds) <= {"tv", "earnings"}
    # The saved folder carries its operating points, per domain it was trained on; matched
    # speaks no more often than balanced on validation (a higher or equal floor threshold).
    points = model.operating_points
    assert set(points) == {"balanced", "matched", "polite"}
    from polylogue.engine.model import domain_of_corpus

    assert set(points["matched"]) == {"default"} | {domain_of_corpus(c) for c in val["corpora"]}
    for domain, v in points["matched"].items():
        assert 0.0 < v["take_floor"] < 1.0
        assert points["polite"][domain]["take_floor"] >= v["take_floor"] - 1e-9
    assert predictor.describe()["deployment"]["operating_point"] == "matched"


def test_yield_model_learns_that_questions_hand_over_the_floor() -> None:
    from polylogue.engine.text import text_facts

    conv = next(iter(load_corpus("friends")))
    utts = conv.utterances
    rows = [text_facts(u.text).hashed for u in utts[:-1]]
    labels = [int(b.speaker != a.speaker) for a, b in itertools.pairwise(utts)]
    model = fit_hashed_logistic(rows, labels, c=1.0)
    assert model.weights.shape == (2**18,)
    scores = np.asarray([model(r) for r in rows])
    y = np.asarray(labels, dtype=bool)
    assert scores[y].mean() > scores[~y].mean()


def test_sweep_thresholds_trades_interruptions_for_missed_turns() -> None:
    rng = np.random.default_rng(0)
    y = rng.random(2000) < 0.3
    p = np.clip(y * 0.3 + rng.random(2000) * 0.7, 0, 1)
    rows, chosen = sweep_thresholds(y, p)
    interrupt = [r["interruption_rate"] for r in rows]
    missed = [r["missed_turn_rate"] for r in rows]
    assert interrupt == sorted(interrupt, reverse=True)
    assert missed == sorted(missed)
    _, cautious = sweep_thresholds(y, p, interruption_cost=5.0)
    assert cautious >= chosen
    _, capped = sweep_thresholds(y, p, max_interruption_rate=0.05)
    capped_row = next(r for r in rows if r["threshold"] == capped)
    assert capped_row["interruption_rate"] <= 0.05
    with pytest.raises(ValueError, match="both"):
        sweep_thresholds(np.zeros(5, dtype=bool), p[:5])
