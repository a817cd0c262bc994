"""The live one-row scoring path equals the reference walk, on real data.

The engine scores one (pause, target) row through a per-row next-node table
(``TreeEnsemble._row_walker``); training and offline evaluation score batches level by level
(``TreeEnsemble._step``). Both must take the same split at every node, so the leaves are the
same and the probabilities agree to rounding.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from polylogue.conversation import Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.engine import TurnTakingEngine
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.model import TurnTakingModel, load_model
from polylogue.engine.trees import TreeEnsemble
from polylogue.turntaking.points import conversation_points

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model() -> TurnTakingModel:
    return load_model()


@pytest.fixture(scope="module")
def rows(model: TurnTakingModel) -> np.ndarray:
    """Real feature rows: untimed Friends scenes (timing features NaN) and a timed AMI meeting."""
    points = [
        p for c in itertools.islice(load_corpus("friends"), 6) for p in conversation_points(c)
    ]
    ami = next(iter(load_corpus("ami")))
    points += list(itertools.islice(conversation_points(ami), 300))
    x = FeatureExtractor(model.yield_model, model.relation_model).features(
        [p.input for p in points]
    )
    assert np.isnan(x).any(axis=1).mean() > 0.2 and (~np.isnan(x)).all(axis=1).any()
    return x


def test_one_row_walk_reaches_the_reference_leaves(
    model: TurnTakingModel, rows: np.ndarray
) -> None:
    stacked = model.trees.stacked(model.backchannel_trees) if model.backchannel_trees else None
    for ens in filter(None, (model.trees, model.backchannel_trees, stacked)):
        for row in rows:
            reference = ens.value[ens._leaves_by_level(row)]
            np.testing.assert_array_equal(ens.leaf_values(row), reference)
            np.testing.assert_array_equal(ens._leaves(row), ens._leaves_by_level(row))


def test_float32_thresholds_split_float32_values_exactly(model: TurnTakingModel) -> None:
    """``x <= t`` (float64) equals ``x <= t32`` for float32 x next to every shipped threshold."""
    walker = model.trees._row_walker
    t64 = model.trees.threshold[walker.node_ids[: walker.n_internal]]
    t32 = walker.threshold32
    near = [t32, np.nextafter(t32, np.float32(np.inf)), np.nextafter(t32, np.float32(-np.inf))]
    near.append(t64.astype(np.float32))
    for x in near:
        np.testing.assert_array_equal(x.astype(np.float64) <= t64, x <= t32)
    assert (t32.astype(np.float64) != t64).any()  # some thresholds are not float32 values


def test_explanations_equal_the_reference_walk(model: TurnTakingModel, rows: np.ndarray) -> None:
    for row in rows[::3]:
        reference = model.trees._contributions_by_level(row)
        np.testing.assert_array_equal(model.trees.contributions(row), reference)
        np.testing.assert_array_equal(model.contributions(row), reference)  # stacked table


def test_one_row_probabilities_equal_the_batch_path(
    model: TurnTakingModel, rows: np.ndarray
) -> None:
    batch = model.outcomes(rows)
    floor_only = model.proba(rows)
    for i in range(len(rows)):
        one = model.outcomes(rows[i : i + 1])
        assert abs(one.take_floor[0] - batch.take_floor[i]) <= 1e-12
        assert abs(one.backchannel[0] - batch.backchannel[i]) <= 1e-12
        assert abs(model.proba(rows[i : i + 1])[0] - floor_only[i]) <= 1e-12


def test_engine_decisions_equal_the_batch_path_on_an_ami_replay(model: TurnTakingModel) -> None:
    """What ``decide`` returns at each pause is the batch model's answer for the same row."""
    conv = next(iter(load_corpus("ami")))
    engine = TurnTakingEngine(model, conv.participants)
    rows: list[np.ndarray] = []
    got: list[tuple[float, float, bool]] = []
    for u in conv.utterances[:400]:
        engine.observe(Utterance(u.speaker, u.text, u.start, u.end))
        for target in engine.listeners():
            rows.append(engine.state.features(target, None))
            d = engine.decide(target)
            got.append((d.p_speak, d.p_backchannel, d.addressed))
    out = model.outcomes(np.stack(rows))
    np.testing.assert_allclose([g[0] for g in got], out.take_floor, rtol=0, atol=1e-12)
    np.testing.assert_allclose([g[1] for g in got], out.backchannel, rtol=0, atol=1e-12)
    assert any(g[2] for g in got)


def test_zero_as_missing_splits_follow_lightgbm(rows: np.ndarray) -> None:
    """Missing type Zero (absent from the shipped model) against LightGBM's own predictions."""
    lgb = pytest.importorskip("lightgbm")
    x = np.nan_to_num(rows[:, :20], nan=0.0)  # zeros and NaN both go the default way here
    x[::7, 3] = np.nan
    y = (np.arange(len(x)) % 3 == 0) ^ (x[:, 0] > np.median(x[:, 0]))
    booster = lgb.train(
        {
            "objective": "binary",
            "num_leaves": 15,
            "min_data_in_leaf": 5,
            "zero_as_missing": True,
            "verbose": -1,
            "num_threads": 1,
        },
        lgb.Dataset(x, label=y.astype(float)),
        num_boost_round=20,
    )
    ens = TreeEnsemble.from_lightgbm(booster)
    assert (ens.missing == 1).any(), "the booster has no Zero-type split to test"
    expected = booster.predict(x, raw_score=True)
    for i, row in enumerate(x):
        np.testing.assert_array_equal(ens._leaves(row), ens._leaves_by_level(row))
        assert ens.raw_score(row[None, :])[0] == pytest.approx(expected[i], abs=1e-9)
