"""The shipped turn-taking model and its streaming engine, on real shared data."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from polylogue.conversation import Conversation, Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.deployment import Deployment
from polylogue.engine.engine import TurnTakingEngine
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.features import FEATURE_NAMES
from polylogue.engine.model import DEFAULT_MODEL_DIR, load_model
from polylogue.models.base import Predictor, load_predictor
from polylogue.turntaking.points import conversation_points, prepare_conversation
from polylogue.turntaking.types import Decision, DecisionInput, DecisionPoint

pytestmark = pytest.mark.slow


def _first_conversation(corpus: str) -> Conversation:
    return next(iter(load_corpus(corpus)))


def _points(corpus: str, n: int = 60) -> list[DecisionPoint]:
    # Points deep enough into the conversation that speaker statistics exist.
    pts = list(conversation_points(_first_conversation(corpus)))
    return pts[len(pts) // 3 : len(pts) // 3 + n]


@pytest.fixture(scope="module")
def predictor() -> Predictor:
    return load_predictor("default")


@pytest.mark.parametrize("corpus", ["ami", "friends", "earnings21", "icsi"])
def test_shipped_model_decides_on_real_points(predictor: Predictor, corpus: str) -> None:
    points = _points(corpus)
    assert points, f"no decision points in the first {corpus} conversation"
    preds = predictor.predict([p.input for p in points])
    assert [q.point_id for q in preds] == [p.point_id for p in points]
    dep = Deployment.resolve()
    assert predictor.describe()["deployment"]["operating_point"] == "matched"
    for q in preds:
        assert q.p_speak is not None and 0.0 <= q.p_speak <= 1.0
        # The floor decision is SPEAK exactly when the three-way action is.
        action = q.extra["action"]
        assert (q.decision is Decision.SPEAK) == (action == "SPEAK")
        if action == "SPEAK":
            # Above the threshold, or the words address the target (every point answers).
            addressed = q.cues["address"]["target"] == "addressed"
            assert addressed or q.p_speak >= dep.take_floor_threshold
        elif action == "BACKCHANNEL":
            assert q.extra["p_backchannel"] >= dep.thresholds.backchannel
        assert {"active", "people_present"} <= set(q.cues)
    # Deciding is order independent: a fresh predictor on a shuffled batch agrees point by point.
    fresh = load_predictor("default")
    shuffled = list(reversed([p.input for p in points]))
    again = {q.point_id: q.p_speak for q in fresh.predict(shuffled)}
    for q in preds:
        assert again[q.point_id] == pytest.approx(q.p_speak, abs=1e-6)


def test_model_separates_speakers_better_than_chance(predictor: Predictor) -> None:
    convs = itertools.islice(load_corpus("friends"), 12)  # a dozen scenes of the first episodes
    points = [p for conv in convs for p in conversation_points(conv)]
    preds = predictor.predict([p.input for p in points])
    p = np.asarray([q.p_speak for q in preds])
    y = np.asarray([pt.gold.label is Decision.SPEAK for pt in points])
    from sklearn.metrics import roc_auc_score

    from polylogue.models.baselines import held_floor_before

    # Actual next speakers are ranked above those who stayed silent far more often than chance
    # (v2 labels: a backchannel is not a floor take), and better than the one-line rule.
    rule = np.asarray([held_floor_before(pt.input) for pt in points], dtype=float)
    assert roc_auc_score(y, p) > max(0.7, roc_auc_score(y, rule))


def _with_current_text(inp: DecisionInput, text: str) -> DecisionInput:
    ctx = list(inp.context)
    ctx[-1] = replace(ctx[-1], text=text)
    return replace(inp, point_id=inp.point_id + ":" + text, context=tuple(ctx))


def test_vocative_to_target_raises_p_speak(predictor: Predictor) -> None:
    """Real behaviour: naming the target as addressee beats naming someone else or nobody."""
    points = [p for p in _points("friends", 400) if not p.gold.addressed and not p.gold.referenced]
    checked = 0
    for p in points[:40]:
        inp = p.input
        others = [q for q in inp.present if q.id not in {inp.target.id, inp.current.speaker}]
        if not others or not inp.target.name or not others[0].name:
            continue
        to_target = _with_current_text(inp, f"{inp.target.name}, what do you think?")
        to_other = _with_current_text(inp, f"{others[0].name}, what do you think?")
        about_target = _with_current_text(inp, f"What does {inp.target.name} think?")
        fresh = load_predictor("default")  # no shared state between the variants
        a, b, c = (fresh.predict([v])[0].p_speak for v in (to_target, to_other, about_target))
        assert a is not None and b is not None and c is not None
        assert a > b, (inp.point_id, a, b)
        assert a > c, (inp.point_id, a, c)
        checked += 1
    assert checked >= 10


def test_engine_streaming_matches_batch_features() -> None:
    """One feature implementation: the live engine and the batch extractor agree exactly."""
    model = load_model()
    # Points index the prepared conversation (end-ordered where the call is fully timed).
    conv = prepare_conversation(_first_conversation("earnings21"))
    points = list(itertools.islice(conversation_points(conv), 200))
    batch = FeatureExtractor(model.yield_model, model.relation_model).features(
        [p.input for p in points]
    )
    # Participants join the engine as they become present, exactly as the benchmark sees them
    # (earnings calls have no roster: a speaker is present once they have spoken).
    engine = TurnTakingEngine(model)
    fed = 0
    for row, p in enumerate(points):
        engine.add_participants((*p.input.present, p.input.target))
        while fed <= p.index:
            u = conv.utterances[fed]
            engine.observe(Utterance(u.speaker, u.text, u.start, u.end))
            fed += 1
        d = engine.decide(p.input.target.id, present=[q.id for q in p.input.present], explain=True)
        live = np.asarray([d.features[n] for n in FEATURE_NAMES], dtype=np.float32)
        np.testing.assert_array_equal(np.isnan(live), np.isnan(batch[row]))
        np.testing.assert_allclose(np.nan_to_num(live), np.nan_to_num(batch[row]), rtol=1e-6)
        assert 0.0 <= d.p_speak <= 1.0
        assert len(d.contributions) == 5


def test_batch_features_do_not_depend_on_point_order() -> None:
    """Shuffled points (a per-sample split, a balanced view) give the same rows and relation
    keys as conversation order: the extractor visits them in conversation order itself."""
    model = load_model()
    convs = list(itertools.islice(load_corpus("friends"), 3))
    points = [p for c in convs for p in itertools.islice(conversation_points(c), 120)]
    inputs = [p.input for p in points]
    ordered_keys: list[tuple[int, ...]] = []
    ordered = FeatureExtractor(model.yield_model, model.relation_model).features(
        inputs, ordered_keys
    )
    shuffle = np.random.default_rng(3).permutation(len(inputs))
    shuffled_keys: list[tuple[int, ...]] = []
    shuffled = FeatureExtractor(model.yield_model, model.relation_model).features(
        [inputs[i] for i in shuffle], shuffled_keys
    )
    np.testing.assert_array_equal(shuffled, ordered[shuffle])
    assert shuffled_keys == [ordered_keys[i] for i in shuffle]
    assert len(set(ordered_keys)) > 10


def test_shipped_files_are_small_and_plain() -> None:
    files = {p.name: p.stat().st_size for p in DEFAULT_MODEL_DIR.iterdir() if p.is_file()}
    assert {
        "model.json",
        "trees.npz",
        "backchannel_trees.npz",
        "yield_weights.npy",
        "relation_weights.npy",
    } <= set(files)
    assert sum(files.values()) < 100 * 2**20
    meta = load_model().metadata
    assert meta["features"] == list(FEATURE_NAMES)
    assert 0.0 < meta["threshold"] < 1.0
    assert set(meta["metrics"]["test"]["corpora"]) == {
        "ami",
        "friends",
        "earnings21",
        "icsi",
        "molweni",
    }
    assert meta["format"] == "polylogue.turntaking.gbdt/2"


def test_three_outcomes_on_real_ami_pauses() -> None:
    """P(take floor) + P(backchannel) + P(silent) = 1, and P(backchannel) ranks real ones up."""
    from sklearn.metrics import roc_auc_score

    from polylogue.turntaking.dataset import reader_options
    from polylogue.turntaking.types import Outcome

    model = load_model()
    convs = itertools.islice(load_corpus("ami", **reader_options("ami")), 4)
    points = [p for conv in convs for p in conversation_points(conv)]
    x = FeatureExtractor(model.yield_model, model.relation_model).features(
        [p.input for p in points]
    )
    out = model.outcomes(x)
    np.testing.assert_allclose(out.take_floor + out.backchannel + out.silent, 1.0, atol=1e-9)
    assert (out.backchannel >= 0).all() and (out.silent >= -1e-12).all()
    np.testing.assert_allclose(out.take_floor, model.proba(x))
    # The live path (one row, both ensembles walked together) equals the batch path.
    for i in range(0, len(x), max(1, len(x) // 40)):
        one = model.outcomes(x[i : i + 1])
        assert one.take_floor[0] == pytest.approx(out.take_floor[i], abs=1e-12)
        assert one.backchannel[0] == pytest.approx(out.backchannel[i], abs=1e-12)
    y_back = np.asarray([p.gold.floor_outcome is Outcome.BACKCHANNEL for p in points])
    assert 10 < y_back.sum() < len(points)
    assert roc_auc_score(y_back, out.backchannel) > 0.7
