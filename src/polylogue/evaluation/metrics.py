"""Turn-taking metrics: pure functions over aligned arrays.

Inputs are per decision point: ``gold`` (SPEAK/SILENT), ``pred`` (SPEAK/SILENT or ``None`` when
the answer was unparseable), ``category`` (I1/I2/S1/S2 or ``None``), ``group`` (meeting, episode or
call: the bootstrap resampling unit) and ``p_speak`` (``None`` where a backend gives none).

An unparseable prediction is wrong in every metric: it is a miss in the recall of its gold
class (so it lowers accuracy, balanced accuracy and both F1s) and is reported on its own as
``unparseable_rate``. SPEAK is the positive class. Definitions follow the paper (§4.1):
``f1_avg`` = mean of the SPEAK and SILENT F1; ``balanced_accuracy`` = mean of the two recalls.

Point estimates come from scikit-learn; the bootstrap uses the same formulas on confusion
counts (one count table per group, resampled groups summed) so a thousand replicates cost
milliseconds. ``tests/test_eval_metrics.py`` checks that both paths agree.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from polylogue.turntaking.types import CATEGORIES, Decision

GOLD_LABELS: tuple[str, ...] = (Decision.SPEAK.value, Decision.SILENT.value)
PRED_LABELS: tuple[str, ...] = (*GOLD_LABELS, "UNPARSEABLE")
#: Category slots in count tables; the last one holds points without a category.
CATEGORY_SLOTS: tuple[str, ...] = (*(c.value for c in CATEGORIES), "other")

Label = Decision | str
FloatArray = NDArray[np.float64]


def _gold_codes(gold: Sequence[Label]) -> NDArray[np.int64]:
    index = {lab: i for i, lab in enumerate(GOLD_LABELS)}
    try:
        return np.array([index[str(g)] for g in gold], dtype=np.int64)
    except KeyError as exc:
        raise ValueError(f"gold labels must be SPEAK or SILENT, got {exc.args[0]!r}") from None


def _pred_codes(pred: Sequence[Label | None]) -> NDArray[np.int64]:
    index = {lab: i for i, lab in enumerate(GOLD_LABELS)}
    out = np.empty(len(pred), dtype=np.int64)
    for i, p in enumerate(pred):
        if p is None:
            out[i] = 2
        else:
            try:
                out[i] = index[str(p)]
            except KeyError:
                raise ValueError(f"predictions must be SPEAK, SILENT or None, got {p!r}") from None
    return out


def _pred_strings(pred: Sequence[Label | None]) -> list[str]:
    return [PRED_LABELS[c] for c in _pred_codes(pred)]


def _validated(gold: Sequence[Label], pred: Sequence[Label | None]) -> tuple[list[str], list[str]]:
    """Gold and prediction labels as strings (None -> UNPARSEABLE), checked."""
    _check_lengths(gold, pred)
    return [GOLD_LABELS[c] for c in _gold_codes(gold)], _pred_strings(pred)


def _check_lengths(*arrays: Sequence[Any] | None) -> int:
    lengths = {len(a) for a in arrays if a is not None}
    if len(lengths) > 1:
        raise ValueError(f"arrays must have equal lengths, got {sorted(lengths)}")
    n = lengths.pop() if lengths else 0
    if n == 0:
        raise ValueError("cannot compute metrics over zero decision points")
    return n


# ----------------------------------------------------------------------------- point metrics


def accuracy(gold: Sequence[Label], pred: Sequence[Label | None]) -> float:
    from sklearn.metrics import accuracy_score

    g, p = _validated(gold, pred)
    return float(accuracy_score(g, p))


def f1_avg(gold: Sequence[Label], pred: Sequence[Label | None]) -> float:
    """Mean of the SPEAK and SILENT F1 scores (an F1 with no support is 0)."""
    from sklearn.metrics import f1_score

    g, p = _validated(gold, pred)
    return float(
        f1_score(
            g,
            p,
            labels=list(GOLD_LABELS),
            average="macro",
            zero_division=0,
        )
    )


def balanced_accuracy(gold: Sequence[Label], pred: Sequence[Label | None]) -> float:
    """Mean recall of the gold classes present (unparseable answers are misses)."""
    from sklearn.metrics import recall_score

    g, p = _validated(gold, pred)
    present = [lab for lab in GOLD_LABELS if lab in g]
    return float(
        recall_score(
            g,
            p,
            labels=present,
            average="macro",
            zero_division=0,
        )
    )


def confusion(gold: Sequence[Label], pred: Sequence[Label | None]) -> dict[str, dict[str, int]]:
    """Counts as ``{gold: {pred: n}}`` with pred in SPEAK, SILENT, UNPARSEABLE."""
    from sklearn.metrics import confusion_matrix

    g, p = _validated(gold, pred)
    m = confusion_matrix(g, p, labels=list(PRED_LABELS))
    return {
        g: {p: int(m[i, j]) for j, p in enumerate(PRED_LABELS)} for i, g in enumerate(GOLD_LABELS)
    }


def false_interruption_rate(gold: Sequence[Label], pred: Sequence[Label | None]) -> float:
    """Share of SILENT points where the model spoke."""
    g, p = _gold_codes(gold), _pred_codes(pred)
    silent = g == 1
    return float(np.mean(p[silent] == 0)) if silent.any() else math.nan


def missed_turn_rate(gold: Sequence[Label], pred: Sequence[Label | None]) -> float:
    """Share of SPEAK points where the model did not speak (SILENT or unparseable)."""
    g, p = _gold_codes(gold), _pred_codes(pred)
    speak = g == 0
    return float(np.mean(p[speak] != 0)) if speak.any() else math.nan


def unparseable_rate(pred: Sequence[Label | None]) -> float:
    _check_lengths(pred)
    return float(np.mean(_pred_codes(pred) == 2))


def per_category_accuracy(
    gold: Sequence[Label], pred: Sequence[Label | None], category: Sequence[str | None]
) -> dict[str, float | None]:
    """Accuracy within each category (None when a category has no points)."""
    _check_lengths(gold, pred, category)
    g, p = _gold_codes(gold), _pred_codes(pred)
    cats = np.array([None if c is None else str(c) for c in category], dtype=object)
    out: dict[str, float | None] = {}
    for c in CATEGORIES:
        mask = cats == c.value
        out[c.value] = float(np.mean(g[mask] == p[mask])) if mask.any() else None
    return out


# ----------------------------------------------------------------------------- count tables


def count_table(
    gold: Sequence[Label],
    pred: Sequence[Label | None],
    category: Sequence[str | None] | None = None,
    group: Sequence[Hashable] | None = None,
) -> tuple[NDArray[np.int64], list[Hashable]]:
    """Counts of shape (groups, category slots, 2 gold, 3 pred) and the group keys."""
    n = _check_lengths(gold, pred, category, group)
    g, p = _gold_codes(gold), _pred_codes(pred)
    slot = {c: i for i, c in enumerate(CATEGORY_SLOTS[:-1])}
    other = len(CATEGORY_SLOTS) - 1
    c = np.array(
        [other if category is None else slot.get(str(x), other) for x in (category or [None] * n)],
        dtype=np.int64,
    )
    keys: list[Hashable] = list(range(n)) if group is None else list(dict.fromkeys(group))
    gindex = {k: i for i, k in enumerate(keys)}
    gi = np.arange(n) if group is None else np.array([gindex[k] for k in group], dtype=np.int64)
    table = np.zeros((len(keys), len(CATEGORY_SLOTS), 2, 3), dtype=np.int64)
    np.add.at(table, (gi, c, g, p), 1)
    return table, keys


def _safe_div(num: FloatArray, den: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def metrics_from_counts(counts: NDArray[Any]) -> dict[str, FloatArray]:
    """Every scalar metric from count tables of shape (..., category slots, 2, 3).

    Vectorised over leading dimensions (bootstrap replicates).
    """
    n = counts.astype(np.float64)
    cm = n.sum(axis=-3)  # (..., 2, 3)
    total = cm.sum(axis=(-2, -1))
    tp, fn_sil, fn_unp = cm[..., 0, 0], cm[..., 0, 1], cm[..., 0, 2]
    fp, tn, _ = cm[..., 1, 0], cm[..., 1, 1], cm[..., 1, 2]
    speak_n, silent_n = cm[..., 0, :].sum(-1), cm[..., 1, :].sum(-1)
    rec_speak, rec_silent = _safe_div(tp, speak_n), _safe_div(tn, silent_n)
    prec_speak, prec_silent = _safe_div(tp, tp + fp), _safe_div(tn, tn + fn_sil)

    def f1(prec: FloatArray, rec: FloatArray) -> FloatArray:
        p, r = np.nan_to_num(prec), np.nan_to_num(rec)  # no support -> 0, as sklearn does
        den = p + r
        return np.where(den > 0, 2 * p * r / np.where(den > 0, den, 1), 0.0)

    f1_speak, f1_silent = f1(prec_speak, rec_speak), f1(prec_silent, rec_silent)
    recalls = np.stack([rec_speak, rec_silent])
    present = np.isfinite(recalls)
    # Mean over the gold classes present (sklearn's balanced accuracy does the same).
    bal = _safe_div(np.where(present, recalls, 0).sum(0), present.sum(0).astype(np.float64))
    out: dict[str, FloatArray] = {
        "accuracy": _safe_div(tp + tn, total),
        "f1_avg": (f1_speak + f1_silent) / 2,
        "balanced_accuracy": bal,
        "f1_speak": f1_speak,
        "f1_silent": f1_silent,
        "recall_speak": rec_speak,
        "recall_silent": rec_silent,
        "false_interruption_rate": _safe_div(fp, silent_n),
        "missed_turn_rate": _safe_div(fn_sil + fn_unp, speak_n),
        "unparseable_rate": _safe_div(cm[..., :, 2].sum(-1), total),
    }
    for i, c in enumerate(CATEGORY_SLOTS[:-1]):
        cat = n[..., i, :, :]
        correct = cat[..., 0, 0] + cat[..., 1, 1]
        out[c] = _safe_div(correct, cat.sum(axis=(-2, -1)))
    return out


# ----------------------------------------------------------------------------- bootstrap


def bootstrap_ci(
    gold: Sequence[Label],
    pred: Sequence[Label | None],
    category: Sequence[str | None] | None = None,
    group: Sequence[Hashable] | None = None,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, tuple[float, float]]:
    """Percentile intervals from resampling whole groups with replacement.

    Decision points of one meeting share context, so resampling points would understate the
    uncertainty; without ``group`` every point is its own group.
    """
    table, keys = count_table(gold, pred, category, group)
    rng = np.random.default_rng(seed)
    n_groups = len(keys)
    draws = rng.integers(0, n_groups, size=(n_boot, n_groups))
    weights = np.zeros((n_boot, n_groups), dtype=np.float64)
    np.add.at(weights, (np.repeat(np.arange(n_boot), n_groups), draws.ravel()), 1.0)
    replicates = np.tensordot(weights, table.astype(np.float64), axes=(1, 0))
    values = metrics_from_counts(replicates)
    alpha = (1 - confidence) / 2
    out: dict[str, tuple[float, float]] = {}
    for name, arr in values.items():
        finite = arr[np.isfinite(arr)]
        if finite.size == 0:
            continue
        lo, hi = np.quantile(finite, [alpha, 1 - alpha])
        out[name] = (float(lo), float(hi))
    return out


def paired_balanced_accuracy_difference(
    gold: Sequence[Label],
    pred_a: Sequence[Label | None],
    pred_b: Sequence[Label | None],
    group: Sequence[Hashable],
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """BalAcc(a) − BalAcc(b) on the same points and its percentile interval.

    Both rows are resampled together, by whole groups: the interval is the difference's own,
    narrower than the two rows' separate intervals suggest when the rows err on the same
    points. Unparseable answers are misses, as in :func:`balanced_accuracy`.
    """
    _check_lengths(gold, pred_a, pred_b, group)
    g = _gold_codes(gold)
    a, b = _pred_codes(pred_a), _pred_codes(pred_b)
    keys = {k: i for i, k in enumerate(dict.fromkeys(group))}
    gi = np.array([keys[k] for k in group], dtype=np.int64)
    # Per group: [SPEAK hits, SPEAK points, SILENT hits, SILENT points] for each row.
    counts = np.zeros((2, len(keys), 4))
    for row, pred in enumerate((a, b)):
        np.add.at(counts[row, :, 0], gi, (g == 0) & (pred == 0))
        np.add.at(counts[row, :, 1], gi, g == 0)
        np.add.at(counts[row, :, 2], gi, (g == 1) & (pred == 1))
        np.add.at(counts[row, :, 3], gi, g == 1)

    def balanced(totals: NDArray[np.float64]) -> NDArray[np.float64]:
        recalls = [_safe_div(totals[..., hits], totals[..., n]) for hits, n in ((0, 1), (2, 3))]
        present = [totals[..., n] > 0 for n in (1, 3)]
        with np.errstate(invalid="ignore"):
            return np.asarray(
                (np.where(present[0], recalls[0], 0) + np.where(present[1], recalls[1], 0))
                / (present[0].astype(float) + present[1].astype(float)),
                dtype=np.float64,
            )

    point = balanced(counts.sum(axis=1))
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(keys), size=(n_boot, len(keys)))
    diff = balanced(counts[0][draws].sum(axis=1)) - balanced(counts[1][draws].sum(axis=1))
    alpha = (1 - confidence) / 2
    finite = diff[np.isfinite(diff)]
    lo, hi = np.quantile(finite, [alpha, 1 - alpha]) if finite.size else (math.nan, math.nan)
    return float(point[0] - point[1]), float(lo), float(hi)


# ----------------------------------------------------------------------------- thresholds


@dataclass(frozen=True, slots=True)
class ThresholdSweep:
    """Decisions ``SPEAK if p_speak >= threshold`` over the points that have a probability."""

    thresholds: list[float]
    balanced_accuracy: list[float]
    false_interruption_rate: list[float]
    missed_turn_rate: list[float]
    #: Share of all points that had a probability (the sweep covers only those).
    coverage: float
    roc_auc: float | None
    best_threshold: float
    best_balanced_accuracy: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "thresholds": self.thresholds,
            "balanced_accuracy": self.balanced_accuracy,
            "false_interruption_rate": self.false_interruption_rate,
            "missed_turn_rate": self.missed_turn_rate,
            "coverage": self.coverage,
            "roc_auc": self.roc_auc,
            "best_threshold": self.best_threshold,
            "best_balanced_accuracy": self.best_balanced_accuracy,
        }


#: Scores an unparseable point gets in :func:`threshold_sweep`: outside [0, 1] on the wrong side,
#: so it is wrong at every threshold and ranks below (gold SPEAK) or above (gold SILENT) every
#: point that has a real probability: a backend's P(SPEAK) for an answer it could not give in
#: the required format never counts.
UNPARSEABLE_SCORE_SPEAK = -1.0
UNPARSEABLE_SCORE_SILENT = 2.0


def threshold_sweep(
    gold: Sequence[Label],
    p_speak: Sequence[float | None],
    *,
    pred: Sequence[Label | None] | None = None,
    max_points: int = 201,
) -> ThresholdSweep | None:
    """Balanced accuracy and the interruption / missed-turn trade-off across thresholds.

    With ``pred``, a point whose answer was unparseable (``None``) counts as wrong whatever its
    probability: it is scored :data:`UNPARSEABLE_SCORE_SPEAK` / :data:`UNPARSEABLE_SCORE_SILENT`
    (the wrong end, beyond [0, 1]) in the ROC AUC and at every threshold of the table, which
    then lists thresholds in [0, 1] only. Points with a parsed answer and no probability are
    left out (``coverage`` says how many are in). Returns None when no parsed point has a
    probability or only one gold class is covered.
    """
    from sklearn.metrics import roc_auc_score, roc_curve

    n = _check_lengths(gold, p_speak, pred)
    swept = _sweep_scores(gold, p_speak, pred)
    if swept is None:
        return None
    y, scores, n_penalised = swept
    fpr, tpr, thr = roc_curve(y, scores, drop_intermediate=False)
    if n_penalised:  # rows beyond [0, 1] exist only because of the penalty scores
        inside = (thr >= 0.0) & (thr <= 1.0)
        fpr, tpr, thr = fpr[inside], tpr[inside], thr[inside]
    thr = np.clip(thr, 0.0, 1.0)  # sklearn's first threshold is +inf ("never speak")
    if len(thr) > max_points:  # keep the curve's shape, thin the table
        idx = np.unique(np.linspace(0, len(thr) - 1, max_points).round().astype(int))
        fpr, tpr, thr = fpr[idx], tpr[idx], thr[idx]
    bal = (tpr + (1 - fpr)) / 2
    best = int(np.argmax(bal))
    return ThresholdSweep(
        thresholds=[float(t) for t in thr],
        balanced_accuracy=[float(b) for b in bal],
        false_interruption_rate=[float(f) for f in fpr],
        missed_turn_rate=[float(1 - t) for t in tpr],
        coverage=len(y) / n,
        roc_auc=float(roc_auc_score(y, scores)),
        best_threshold=float(thr[best]),
        best_balanced_accuracy=float(bal[best]),
    )


def _sweep_scores(
    gold: Sequence[Label], p_speak: Sequence[float | None], pred: Sequence[Label | None] | None
) -> tuple[NDArray[np.int64], NDArray[np.float64], int] | None:
    """(1 = SPEAK gold, score, number of penalised unparseable points) over the points a
    threshold sweep covers, or None when it covers no real probability or one class only."""
    gold_speak = _gold_codes(gold) == 0
    scores_by_point: list[float | None] = []
    n_real = n_penalised = 0
    for i, p in enumerate(p_speak):
        if pred is not None and pred[i] is None:
            scores_by_point.append(
                UNPARSEABLE_SCORE_SPEAK if gold_speak[i] else UNPARSEABLE_SCORE_SILENT
            )
            n_penalised += 1
        elif p is not None and math.isfinite(p):
            scores_by_point.append(float(p))
            n_real += 1
        else:
            scores_by_point.append(None)
    if n_real == 0:
        return None
    keep = [i for i, sc in enumerate(scores_by_point) if sc is not None]
    y = gold_speak[keep].astype(np.int64)
    if y.min() == y.max():
        return None
    scores = np.array([scores_by_point[i] for i in keep], dtype=np.float64)
    return y, scores, n_penalised


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """The threshold sweep evaluated at one threshold (fractions)."""

    threshold: float
    balanced_accuracy: float
    false_interruption_rate: float
    missed_turn_rate: float


def sweep_point(
    gold: Sequence[Label],
    p_speak: Sequence[float | None],
    threshold: float,
    *,
    pred: Sequence[Label | None] | None = None,
) -> SweepPoint | None:
    """:func:`threshold_sweep`'s curve at exactly ``threshold`` (``SPEAK if p >= threshold``,
    same points and unparseable penalty), not at the nearest swept row: the sweep's table is
    thinned to ``max_points`` rows, so its nearest row can be a different operating point."""
    _check_lengths(gold, p_speak, pred)
    swept = _sweep_scores(gold, p_speak, pred)
    if swept is None:
        return None
    y, scores, _ = swept
    speak = scores >= threshold
    fir = float(speak[y == 0].mean())
    mtr = float((~speak[y == 1]).mean())
    return SweepPoint(float(threshold), 1.0 - (fir + mtr) / 2, fir, mtr)


# ----------------------------------------------------------------------------- arrays
# Array-level metrics on 0/1 labels (1 = SPEAK) and P(SPEAK): the default model's training,
# its benchmark scripts and ``polylogue tune-threshold`` use these.


def balanced_accuracy_binary(y: np.ndarray, pred: np.ndarray) -> float:
    """Mean of the SPEAK and SILENT recalls of 0/1 arrays (a class absent from ``y`` is skipped)."""
    pos, neg = y == 1, y == 0
    tpr = float((pred[pos] == 1).mean()) if pos.any() else float("nan")
    tnr = float((pred[neg] == 0).mean()) if neg.any() else float("nan")
    return float(np.nanmean([tpr, tnr]))


def expected_calibration_error(y: np.ndarray, p: np.ndarray, bins: int = 15) -> float:
    """Expected calibration error of P(SPEAK) over ``bins`` equal-width bins."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    idx = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    ece = 0.0
    for b in range(bins):
        m = idx == b
        if m.any():
            ece += m.mean() * abs(float(y[m].mean()) - float(p[m].mean()))
    return float(ece)


def best_mean_balanced_accuracy_threshold(
    y: np.ndarray,
    p: np.ndarray,
    groups: np.ndarray,
    grid: np.ndarray | None = None,
) -> float:
    """The threshold maximising the mean over ``groups`` (corpora) of balanced accuracy."""
    names = sorted(set(groups.tolist()))
    grid = np.round(np.arange(0.05, 0.80, 0.01), 2) if grid is None else grid
    best_t, best = 0.5, -1.0
    for t in grid:
        pred = (p >= t).astype(np.int8)
        score = float(
            np.mean([balanced_accuracy_binary(y[groups == g], pred[groups == g]) for g in names])
        )
        if score > best:
            best_t, best = float(t), score
    return best_t


def sweep_thresholds(
    y: np.ndarray,
    p: np.ndarray,
    interruption_cost: float = 1.0,
    max_interruption_rate: float | None = None,
    grid: np.ndarray | None = None,
) -> tuple[list[dict[str, Any]], float]:
    """Rates at each threshold and the chosen one.

    interruption rate = P(model speaks | should stay silent); missed-turn rate =
    P(model silent | should speak). Rates are per class, so the choice does not depend on the
    class ratio of the tuning set. Without ``max_interruption_rate`` the threshold minimises
    ``interruption_cost * interruption_rate + missed_turn_rate``; with it, the lowest threshold
    (fewest missed turns) whose interruption rate stays at or below the limit.
    """
    y = np.asarray(y).astype(bool)
    p = np.asarray(p, dtype=np.float64)
    if not y.any() or y.all():
        raise ValueError("tuning needs both SPEAK and SILENT points")
    grid = np.round(np.arange(0.02, 0.99, 0.02), 2) if grid is None else grid
    rows: list[dict[str, Any]] = []
    for t in grid:
        speak = p >= t
        interruption = float(speak[~y].mean())
        missed = float((~speak[y]).mean())
        rows.append(
            {
                "threshold": float(t),
                "interruption_rate": interruption,
                "missed_turn_rate": missed,
                "balanced_accuracy": 1.0 - (interruption + missed) / 2,
                "cost": interruption_cost * interruption + missed,
            }
        )
    if max_interruption_rate is not None:
        ok = [r for r in rows if r["interruption_rate"] <= max_interruption_rate]
        chosen = ok[0]["threshold"] if ok else rows[-1]["threshold"]
    else:
        chosen = min(rows, key=lambda r: (r["cost"], r["threshold"]))["threshold"]
    return rows, float(chosen)


# ----------------------------------------------------------------------------- everything


def compute_metrics(
    gold: Sequence[Label],
    pred: Sequence[Label | None],
    category: Sequence[str | None] | None = None,
    group: Sequence[Hashable] | None = None,
    p_speak: Sequence[float | None] | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """All metrics as a JSON-ready dict (``metrics.json`` of a run)."""
    n = _check_lengths(gold, pred, category, group, p_speak)
    result: dict[str, Any] = {
        "n": n,
        "n_speak": int(sum(str(g) == "SPEAK" for g in gold)),
        "n_silent": int(sum(str(g) == "SILENT" for g in gold)),
        "n_unparseable": int(sum(p is None for p in pred)),
        "accuracy": accuracy(gold, pred),
        "f1_avg": f1_avg(gold, pred),
        "balanced_accuracy": balanced_accuracy(gold, pred),
        "false_interruption_rate": _nan_to_none(false_interruption_rate(gold, pred)),
        "missed_turn_rate": _nan_to_none(missed_turn_rate(gold, pred)),
        "unparseable_rate": unparseable_rate(pred),
        "confusion": confusion(gold, pred),
        "per_category": per_category_accuracy(gold, pred, category or [None] * n),
        "per_category_n": {
            c.value: int(sum(str(x) == c.value for x in (category or []))) for c in CATEGORIES
        },
    }
    if n_boot > 0:
        ci = bootstrap_ci(gold, pred, category, group, n_boot=n_boot, seed=seed)
        result["ci95"] = {k: [lo, hi] for k, (lo, hi) in ci.items()}
        result["bootstrap"] = {
            "n_boot": n_boot,
            "seed": seed,
            "unit": "group" if group is not None else "point",
            "n_units": len(set(group)) if group is not None else n,
        }
    if p_speak is not None:
        sweep = threshold_sweep(gold, p_speak, pred=pred)
        result["threshold_sweep"] = None if sweep is None else sweep.to_dict()
    return result


def _nan_to_none(x: float) -> float | None:
    return None if math.isnan(x) else x


# ----------------------------------------------------------------------------- three outcomes

#: Gold outcomes at a pause (benchmark v2) and the prediction columns of their confusion.
OUTCOME_LABELS: tuple[str, ...] = ("TAKE_FLOOR", "BACKCHANNEL", "SILENT")
OUTCOME_PRED_LABELS: tuple[str, ...] = (*OUTCOME_LABELS, "UNPARSEABLE")
#: Below this many resampling groups a bootstrap interval is reported with a warning.
MIN_BOOTSTRAP_GROUPS = 10


def _outcome_pred(p: Label | None) -> str:
    """A binary SPEAK/SILENT answer or a three-way one, as an outcome prediction."""
    if p is None:
        return "UNPARSEABLE"
    s = str(p)
    if s == "SPEAK":
        return "TAKE_FLOOR"
    if s in OUTCOME_LABELS:
        return s
    raise ValueError(
        f"predictions must be SPEAK, SILENT, TAKE_FLOOR, BACKCHANNEL or None, got {p!r}"
    )


def outcome_metrics(outcome: Sequence[str], pred: Sequence[Label | None]) -> dict[str, Any]:
    """Metrics over the three gold outcomes (TAKE_FLOOR, BACKCHANNEL, SILENT).

    ``pred`` may be binary (SPEAK = TAKE_FLOOR) or three-way. Returns the confusion matrix
    ``{gold: {pred: n}}``; ``precision`` per predicted outcome (None when never predicted);
    ``recall`` per outcome (exact: a binary model never predicts
    BACKCHANNEL, so its BACKCHANNEL recall is 0 and ``three_way`` is False); ``floor_recall``
    per outcome (the floor decision is right: TAKE_FLOOR taken, BACKCHANNEL/SILENT not taken;
    unparseable answers are wrong); ``floor_balanced_accuracy`` = mean of the floor recall of
    TAKE_FLOOR and of the not-taking outcomes pooled (equal to the binary balanced accuracy
    when the binary label is the floor decision); ``backchannel_floor_take_rate`` = share of
    BACKCHANNEL points where the model took the floor (an interruption where a "mm-hmm" was
    all that was due).
    """
    _check_lengths(outcome, pred)
    gold = [str(o) for o in outcome]
    bad = sorted(set(gold) - set(OUTCOME_LABELS))
    if bad:
        raise ValueError(f"gold outcomes must be {', '.join(OUTCOME_LABELS)}, got {bad[0]!r}")
    preds = [_outcome_pred(p) for p in pred]
    conf = {g: dict.fromkeys(OUTCOME_PRED_LABELS, 0) for g in OUTCOME_LABELS}
    for g, p in zip(gold, preds, strict=True):
        conf[g][p] += 1
    n_of = {g: sum(conf[g].values()) for g in OUTCOME_LABELS}

    def share(num: int, den: int) -> float | None:
        return num / den if den else None

    recall = {g: share(conf[g][g], n_of[g]) for g in OUTCOME_LABELS}
    # Of the points predicted as an outcome, the share whose gold outcome it was.
    precision = {
        p: share(conf[p][p], sum(conf[g][p] for g in OUTCOME_LABELS)) for p in OUTCOME_LABELS
    }
    not_taken = {g: conf[g]["BACKCHANNEL"] + conf[g]["SILENT"] for g in OUTCOME_LABELS}
    floor_recall = {
        "TAKE_FLOOR": share(conf["TAKE_FLOOR"]["TAKE_FLOOR"], n_of["TAKE_FLOOR"]),
        "BACKCHANNEL": share(not_taken["BACKCHANNEL"], n_of["BACKCHANNEL"]),
        "SILENT": share(not_taken["SILENT"], n_of["SILENT"]),
    }
    rest = share(
        not_taken["BACKCHANNEL"] + not_taken["SILENT"], n_of["BACKCHANNEL"] + n_of["SILENT"]
    )
    parts = [v for v in (floor_recall["TAKE_FLOOR"], rest) if v is not None]
    return {
        "n": len(gold),
        "n_per_outcome": n_of,
        "confusion": conf,
        "three_way": any(p == "BACKCHANNEL" for p in preds),
        "recall": recall,
        "precision": precision,
        "floor_recall": floor_recall,
        "floor_balanced_accuracy": sum(parts) / len(parts) if parts else None,
        "backchannel_floor_take_rate": share(
            conf["BACKCHANNEL"]["TAKE_FLOOR"], n_of["BACKCHANNEL"]
        ),
    }


def bootstrap_warning(n_groups: int | None) -> str | None:
    """A warning to print next to a bootstrap interval drawn from too few groups."""
    if n_groups is None or n_groups >= MIN_BOOTSTRAP_GROUPS:
        return None
    return (
        f"bootstrap over only {n_groups} group{'s' if n_groups != 1 else ''} "
        f"(< {MIN_BOOTSTRAP_GROUPS}): the interval is unreliable"
    )


# ----------------------------------------------------------------------------- agent behaviour


def listener_minutes(
    conversation: Sequence[Hashable], target: Sequence[Hashable], time: Sequence[float | None]
) -> float | None:
    """Minutes an agent would sit in: per (conversation, listener), the conversation's span.

    The span is first to last pause time of the conversation's points; untimed points give
    None. Per-10-minute rates divide by this, so they read "if the agent were one of the
    listeners, how often per 10 minutes of meeting would it ...".
    """
    t = np.asarray([np.nan if v is None else float(v) for v in time], dtype=float)
    if len(t) == 0 or np.isnan(t).any():
        return None
    spans: dict[Hashable, tuple[float, float]] = {}
    for c, v in zip(conversation, t.tolist(), strict=True):
        lo, hi = spans.get(c, (v, v))
        spans[c] = (min(lo, v), max(hi, v))
    pairs = set(zip(conversation, target, strict=True))
    seconds = sum(spans[c][1] - spans[c][0] for c, _ in sorted(pairs))
    return seconds / 60.0 if seconds > 0 else None


def agent_metrics(
    gold_take: Sequence[bool] | np.ndarray,
    speak: Sequence[bool] | np.ndarray,
    category: Sequence[str | None] | None = None,
    minutes: float | None = None,
) -> dict[str, Any]:
    """What an agent acting on ``speak`` would do, against what the person did.

    ``speak_ratio`` = predicted SPEAK rate / real TAKE_FLOOR rate (1.0: talks as often as
    people did); ``precision`` = share of SPEAKs where the target did take the floor;
    ``false_interruption_rate`` = SPEAK among the pauses where the target stayed silent (or
    only backchannelled); ``missed_turn_rate`` = SILENT among floor takes; ``i1_recall`` =
    SPEAK among explicitly addressed points (category I1). With ``minutes``
    (:func:`listener_minutes`): false interjections and missed I1 turns per 10 minutes.
    """
    y = np.asarray(gold_take, dtype=bool)
    s = np.asarray(speak, dtype=bool)
    if y.shape != s.shape:
        raise ValueError(f"gold and predictions differ in length ({len(y)} vs {len(s)})")
    n = len(y)

    def share(num: float, den: float) -> float | None:
        return float(num / den) if den else None

    real, pred = share(y.sum(), n), share(s.sum(), n)
    out: dict[str, Any] = {
        "n": n,
        "real_speak_rate": real,
        "speak_rate": pred,
        "speak_ratio": None if not real or pred is None else pred / real,
        "precision": share((s & y).sum(), s.sum()),
        "false_interruption_rate": share((s & ~y).sum(), (~y).sum()),
        "missed_turn_rate": share((~s & y).sum(), y.sum()),
        "i1_recall": None,
        "n_I1": 0,
    }
    i1 = np.zeros(n, dtype=bool)
    if category is not None:
        i1 = np.asarray([c == "I1" for c in category], dtype=bool)
        out["i1_recall"] = share((s & i1).sum(), i1.sum())
        out["n_I1"] = int(i1.sum())
    if minutes:
        out["minutes"] = minutes
        out["false_interjections_per_10min"] = float((s & ~y).sum() / minutes * 10)
        out["missed_addressed_per_10min"] = float((~s & i1).sum() / minutes * 10)
    return out


def backchannel_metrics(
    gold_backchannel: Sequence[bool] | np.ndarray, suggested: Sequence[bool] | np.ndarray
) -> dict[str, Any]:
    """Backchannel suggestions against the points whose outcome was BACKCHANNEL."""
    y = np.asarray(gold_backchannel, dtype=bool)
    s = np.asarray(suggested, dtype=bool)
    n = len(y)
    tp = float((s & y).sum())
    real = float(y.mean()) if n else None
    rate = float(s.mean()) if n else None
    return {
        "n": n,
        "real_rate": real,
        "rate": rate,
        "rate_ratio": None if not real or rate is None else rate / real,
        "suggested": int(s.sum()),
        "precision": tp / s.sum() if s.any() else None,
        "recall": tp / y.sum() if y.any() else None,
    }


THRESHOLD_GRID = np.round(np.arange(0.01, 1.0, 0.01), 2)


def _log_rate_gap(pred_rate: float, real_rate: float) -> float:
    if real_rate <= 0:
        return 0.0 if pred_rate <= 0 else float("inf")
    if pred_rate <= 0:
        return float("inf")
    return abs(float(np.log(pred_rate / real_rate)))


def rate_matched_threshold(y: np.ndarray, p: np.ndarray, groups: np.ndarray) -> float:
    """The threshold whose SPEAK rate is closest to the real rate, in log ratio, averaged
    over ``groups`` (corpora), so a small corpus counts as much as a big one."""
    y, p, groups = np.asarray(y, bool), np.asarray(p, float), np.asarray(groups)
    names = sorted(set(groups.tolist()))
    best, best_gap = float(THRESHOLD_GRID[0]), float("inf")
    for t in THRESHOLD_GRID:
        gaps = [
            _log_rate_gap(float((p[groups == g] >= t).mean()), float(y[groups == g].mean()))
            for g in names
        ]
        gap = float(np.mean(gaps))
        if gap < best_gap - 1e-12:
            best, best_gap = float(t), gap
    return best


def capped_interruption_threshold(
    y: np.ndarray, p: np.ndarray, groups: np.ndarray, cap: float = 0.05
) -> float:
    """The lowest threshold whose false-interruption rate is at most ``cap`` in every group."""
    y, p, groups = np.asarray(y, bool), np.asarray(p, float), np.asarray(groups)
    names = sorted(set(groups.tolist()))
    for t in THRESHOLD_GRID:
        worst = max(
            float((p[(groups == g) & ~y] >= t).mean()) if ((groups == g) & ~y).any() else 0.0
            for g in names
        )
        if worst <= cap:
            return float(t)
    return 1.0


#: Margins tried for the backchannel rule (P(back) >= margin x P(take)).
BACKCHANNEL_MARGINS = (1.0, 0.85, 0.7, 0.6, 0.5)


def choose_backchannel_rule(
    gold_backchannel: np.ndarray,
    p_take: np.ndarray,
    p_back: np.ndarray,
    groups: np.ndarray,
    min_precision: float = 0.30,
    min_suggestions: int = 20,
) -> tuple[float, float]:
    """``(threshold, margin)`` of the backchannel rule whose suggestion rate is closest to
    the real BACKCHANNEL rate (log ratio, averaged over groups) among the rules with at least
    ``min_suggestions`` suggestions and precision >= ``min_precision`` in *every* group where
    they suggest one; ``(2.0, 1.0)`` (never suggest) when no rule is that precise.

    Every group, not pooled: pooled over a domain's corpora, the corpus whose backchannels
    the words predict well (ICSI's, labelled from the next words) carried a rule that was
    right about 1 time in 8 on the other (AMI's, labelled by annotators), and the domain's
    deployments cannot tell the two apart. The same reason makes ``polite`` hold its cap on
    every corpus."""
    yb = np.asarray(gold_backchannel, bool)
    pt, pb, groups = np.asarray(p_take, float), np.asarray(p_back, float), np.asarray(groups)
    names = sorted(set(groups.tolist()))
    best: tuple[float, float] = (2.0, 1.0)
    best_key = (float("inf"), 0.0)
    for margin in BACKCHANNEL_MARGINS:
        for t in THRESHOLD_GRID:
            s = (pb >= t) & (pb >= margin * pt)
            if s.sum() < min_suggestions:
                continue
            precision = float((s & yb).sum() / s.sum())
            worst = min(
                float((s & yb)[groups == g].sum() / s[groups == g].sum())
                for g in names
                if s[groups == g].any()
            )
            if worst < min_precision:
                continue
            gap = float(
                np.mean(
                    [
                        _log_rate_gap(float(s[groups == g].mean()), float(yb[groups == g].mean()))
                        for g in names
                        if yb[groups == g].any()
                    ]
                    or [float("inf")]
                )
            )
            key = (gap, -precision)
            if key < best_key:
                best, best_key = (float(t), float(margin)), key
    return best
