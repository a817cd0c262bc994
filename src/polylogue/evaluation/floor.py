"""Floor decomposition: split a turn-taking model's errors into *does the floor change?* and
*who takes it?*.

Every pause has one decision point per present listener, and at most one of them is SPEAK
(the listener who spoke next). So "should the target speak?" factorises into

* **floor change**: does any present listener speak next, or does the current speaker go on?
  A model's estimate is the sum of its P(SPEAK) over the listeners at the pause (the events are
  mutually exclusive), scored by ROC AUC;
* **selection**: when a listener does take the floor, is it the one the model rates highest?
  Scored as top-1 accuracy against chance (1 / listeners) and any baseline.

The *floor-change oracle* zeroes the model's P(SPEAK) at every pause where the current speaker
went on, i.e. it gives the model perfect knowledge of the first factor and leaves the second
as it is. Its balanced accuracy is an upper bound on what better floor-change prediction alone
(timing, prosody, words) could add to that model, and shows how much has to come from selection.

All functions are pure: they take aligned per-point arrays (pause key, gold 0/1, probability).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from sklearn.metrics import balanced_accuracy_score, roc_auc_score


@dataclass(frozen=True)
class FloorDecomposition:
    """Floor-change and selection figures for one set of decision points."""

    points: int
    pauses: int
    #: Share of pauses at which a present listener spoke next.
    floor_change_rate: float
    #: ROC AUC of the summed P(SPEAK) of the listeners as a floor-change predictor.
    floor_change_auc: float | None
    #: Pauses where exactly one of two or more listeners spoke next (the selection set).
    selection_pauses: int
    #: Top-1 accuracy of the model's highest P(SPEAK) listener on the selection set.
    selection_accuracy: float | None
    #: Expected top-1 accuracy of picking a listener uniformly at random.
    selection_chance: float | None
    #: Balanced accuracy of the model at ``threshold``.
    balanced_accuracy: float
    #: Balanced accuracy when the model is told, at each pause, whether the floor changes.
    oracle_floor_balanced_accuracy: float
    #: The same, at the threshold that is best for the oracle (an optimistic upper bound).
    oracle_floor_best_balanced_accuracy: float

    def to_dict(self) -> dict[str, float | int | None]:
        return dict(self.__dict__)


def pause_index(keys: Sequence[Hashable]) -> NDArray[np.int64]:
    """Dense pause ids (0..n_pauses-1) for per-point pause keys such as (conversation, index)."""
    ids: dict[Hashable, int] = {}
    return np.fromiter((ids.setdefault(k, len(ids)) for k in keys), dtype=np.int64, count=len(keys))


def selection_pauses(pause: NDArray[np.int64], y: NDArray[np.int8]) -> NDArray[np.bool_]:
    """Per pause: exactly one of two or more listeners spoke next (where selection is scored)."""
    n_pauses = int(pause.max()) + 1 if len(pause) else 0
    listeners = np.bincount(pause, minlength=n_pauses)
    speakers = np.bincount(pause, weights=y, minlength=n_pauses)
    return np.asarray((speakers == 1) & (listeners >= 2))


def top1_accuracy(
    pause: NDArray[np.int64], y: NDArray[np.int8], score: NDArray[np.float64]
) -> float | None:
    """Top-1 accuracy over pauses with exactly one SPEAK among two or more listeners.

    Ties are scored by expectation (a correct listener tied with k-1 others counts 1/k), so a
    constant score gets chance, not an artefact of point order.
    """
    eligible = selection_pauses(pause, y)
    n_pauses = len(eligible)
    if not eligible.any():
        return None
    best = np.full(n_pauses, -np.inf)
    np.maximum.at(best, pause, score)
    at_best = score >= best[pause]
    ties = np.bincount(pause, weights=at_best, minlength=n_pauses)
    hit = np.bincount(pause, weights=at_best & (y == 1), minlength=n_pauses)
    return float((hit[eligible] / ties[eligible]).mean())


def floor_decomposition(
    pause_keys: Sequence[Hashable],
    gold: Sequence[int] | NDArray[np.int8],
    p_speak: Sequence[float] | NDArray[np.float64],
    threshold: float,
) -> FloorDecomposition:
    """Decompose ``p_speak`` (one value per decision point) into floor change and selection."""
    if not (len(pause_keys) == len(gold) == len(p_speak)):
        raise ValueError(
            f"pause_keys, gold and p_speak differ in length: "
            f"{len(pause_keys)}, {len(gold)}, {len(p_speak)}"
        )
    if not len(gold):
        raise ValueError("no decision points to decompose")
    pause = pause_index(pause_keys)
    y = np.asarray(gold, dtype=np.int8)
    p = np.asarray(p_speak, dtype=np.float64)
    if ((y != 0) & (y != 1)).any():
        raise ValueError("gold must be 0 (SILENT) or 1 (SPEAK)")
    n_pauses = int(pause.max()) + 1
    changed = np.bincount(pause, weights=y, minlength=n_pauses) > 0
    summed = np.bincount(pause, weights=p, minlength=n_pauses)
    auc = float(roc_auc_score(changed, summed)) if 0 < changed.sum() < n_pauses else None

    oracle = np.where(changed[pause], p, 0.0)
    sweep = [
        balanced_accuracy_score(y, oracle >= t) for t in (*np.arange(0.01, 1.0, 0.01), threshold)
    ]
    return FloorDecomposition(
        points=len(y),
        pauses=n_pauses,
        floor_change_rate=float(changed.mean()),
        floor_change_auc=auc,
        selection_pauses=int(selection_pauses(pause, y).sum()),
        selection_accuracy=top1_accuracy(pause, y, p),
        # A constant score ties every listener: its expected top-1 accuracy is chance.
        selection_chance=top1_accuracy(pause, y, np.zeros_like(p)),
        balanced_accuracy=float(balanced_accuracy_score(y, p >= threshold)),
        oracle_floor_balanced_accuracy=float(balanced_accuracy_score(y, oracle >= threshold)),
        oracle_floor_best_balanced_accuracy=float(max(sweep)),
    )
