"""Floor decomposition (floor change vs selection): hand-computed cases and real AMI points."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, roc_auc_score

from polylogue.corpora import load_corpus
from polylogue.evaluation.floor import floor_decomposition, pause_index, top1_accuracy
from polylogue.models.base import load_predictor
from polylogue.turntaking.points import conversation_points
from polylogue.turntaking.types import Decision


def test_pause_index_is_dense_and_order_preserving() -> None:
    ids = pause_index([("m", 3), ("m", 3), ("m", 4), ("n", 0), ("m", 3)])
    assert ids.tolist() == [0, 0, 1, 2, 0]


def test_top1_accuracy_counts_ties_by_expectation() -> None:
    # Pause 0: listener 1 spoke and is rated highest (hit). Pause 1: listener 3 spoke but
    # listener 2 is rated highest (miss). Pause 2: nobody spoke (not scored). Pause 3: the
    # speaker is tied with one other listener (half a hit).
    pause = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    y = np.array([1, 0, 0, 1, 0, 0, 1, 0], dtype=np.int8)
    score = np.array([0.9, 0.1, 0.8, 0.3, 0.5, 0.4, 0.5, 0.5])
    assert top1_accuracy(pause, y, score) == pytest.approx((1 + 0 + 0.5) / 3)
    # A constant score is chance (1 / listeners), whatever the point order.
    assert top1_accuracy(pause, y, np.zeros(8)) == pytest.approx(0.5)


def test_floor_decomposition_hand_computed() -> None:
    keys = [("c", 0)] * 2 + [("c", 1)] * 2 + [("c", 2)] * 2
    gold = [1, 0, 0, 0, 0, 1]  # pause 1: the current speaker went on
    p = [0.6, 0.1, 0.5, 0.2, 0.3, 0.4]
    d = floor_decomposition(keys, gold, p, threshold=0.35)
    assert (d.points, d.pauses, d.selection_pauses) == (6, 3, 2)
    assert d.floor_change_rate == pytest.approx(2 / 3)
    # Summed P per pause: 0.7 (changed), 0.7 (kept), 0.7 (changed): no separation.
    assert d.floor_change_auc == pytest.approx(0.5)
    assert d.selection_accuracy == pytest.approx(1.0)
    assert d.selection_chance == pytest.approx(0.5)
    assert d.balanced_accuracy == pytest.approx(
        balanced_accuracy_score(gold, np.asarray(p) >= 0.35)
    )
    # The oracle silences pause 1 (0.5 was a false SPEAK): both recalls become 1.
    assert d.oracle_floor_balanced_accuracy == pytest.approx(1.0)
    assert d.oracle_floor_best_balanced_accuracy == pytest.approx(1.0)


def test_floor_decomposition_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        floor_decomposition([("c", 0)], [1, 0], [0.5, 0.5], 0.5)
    with pytest.raises(ValueError, match="no decision points"):
        floor_decomposition([], [], [], 0.5)
    with pytest.raises(ValueError, match="0 \\(SILENT\\) or 1 \\(SPEAK\\)"):
        floor_decomposition([("c", 0), ("c", 0)], [2, 0], [0.5, 0.5], 0.5)


@pytest.mark.slow
def test_floor_decomposition_of_the_shipped_model_on_real_ami_points() -> None:
    conv = next(iter(load_corpus("ami")))
    # Whole pauses only: every point of the first 500 utterances.
    points = list(itertools.takewhile(lambda pt: pt.index < 500, conversation_points(conv)))
    preds = load_predictor("default").predict([p.input for p in points])
    p = np.asarray([q.p_speak for q in preds], dtype=np.float64)
    y = np.asarray([pt.gold.label is Decision.SPEAK for pt in points], dtype=np.int8)
    keys = [(pt.input.conversation_id, pt.index) for pt in points]
    d = floor_decomposition(keys, y, p, threshold=0.21)

    # Independent recount from the gold next speaker of each pause.
    by_pause: dict[int, tuple[set[str], str | None]] = {}
    for pt in points:
        by_pause.setdefault(pt.index, (set(), pt.gold.next_speaker))[0].add(pt.input.target.id)
    changed = [nxt in listeners for listeners, nxt in by_pause.values()]
    assert d.pauses == len(by_pause)
    assert d.floor_change_rate == pytest.approx(np.mean(changed))
    summed = {}
    for pt, prob in zip(points, p, strict=True):
        summed[pt.index] = summed.get(pt.index, 0.0) + prob
    assert d.floor_change_auc == pytest.approx(roc_auc_score(changed, list(summed.values())))
    # Four people: three listeners at every pause, so chance is exactly one in three, and the
    # model must pick the next speaker clearly more often than that.
    assert d.selection_chance == pytest.approx(1 / 3)
    assert d.selection_accuracy is not None and d.selection_accuracy > 0.4
    # Knowing when the floor changes can only remove false SPEAKs.
    assert d.oracle_floor_balanced_accuracy >= d.balanced_accuracy
    assert d.oracle_floor_best_balanced_accuracy >= d.oracle_floor_balanced_accuracy
