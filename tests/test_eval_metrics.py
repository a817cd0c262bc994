"""Metrics against hand-computed cases and against scikit-learn on random data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, f1_score

from polylogue.evaluation.metrics import (
    accuracy,
    balanced_accuracy,
    bootstrap_ci,
    compute_metrics,
    confusion,
    count_table,
    f1_avg,
    false_interruption_rate,
    metrics_from_counts,
    missed_turn_rate,
    paired_balanced_accuracy_difference,
    per_category_accuracy,
    threshold_sweep,
    unparseable_rate,
)

# Hand case: 2 SPEAK (one right, one unparseable), 3 SILENT (one interrupted, two right).
GOLD = ["SPEAK", "SPEAK", "SILENT", "SILENT", "SILENT"]
PRED = ["SPEAK", None, "SPEAK", "SILENT", "SILENT"]
CATS = ["I1", "I2", "S1", "S2", "S2"]


def test_hand_computed_case() -> None:
    assert accuracy(GOLD, PRED) == pytest.approx(3 / 5)
    # SPEAK: P = 1/2, R = 1/2 -> F1 1/2. SILENT: P = 2/2, R = 2/3 -> F1 0.8.
    assert f1_avg(GOLD, PRED) == pytest.approx((0.5 + 0.8) / 2)
    assert balanced_accuracy(GOLD, PRED) == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert false_interruption_rate(GOLD, PRED) == pytest.approx(1 / 3)
    assert missed_turn_rate(GOLD, PRED) == pytest.approx(1 / 2)
    assert unparseable_rate(PRED) == pytest.approx(1 / 5)
    # SA (benchmark v2) and S3 (v2.1) have no points here: None.
    assert per_category_accuracy(GOLD, PRED, CATS) == {
        "I1": 1.0,
        "I2": 0.0,
        "S1": 0.0,
        "S2": 1.0,
        "S3": None,
        "SA": None,
    }
    assert confusion(GOLD, PRED) == {
        "SPEAK": {"SPEAK": 1, "SILENT": 0, "UNPARSEABLE": 1},
        "SILENT": {"SPEAK": 1, "SILENT": 2, "UNPARSEABLE": 0},
    }


def test_unparseable_is_never_counted_correct() -> None:
    gold = ["SPEAK", "SILENT"] * 5
    all_none = [None] * 10
    assert accuracy(gold, all_none) == 0.0
    assert balanced_accuracy(gold, all_none) == 0.0
    assert f1_avg(gold, all_none) == 0.0
    # Replacing a correct answer by an unparseable one lowers every headline metric.
    right = list(gold)
    broken = [None, *gold[1:]]
    for fn in (accuracy, balanced_accuracy, f1_avg):
        assert fn(gold, broken) < fn(gold, right)


def test_count_path_matches_sklearn_on_random_data() -> None:
    rng = np.random.default_rng(7)
    n = 500
    gold = rng.choice(["SPEAK", "SILENT"], size=n, p=[0.3, 0.7]).tolist()
    pred = rng.choice(["SPEAK", "SILENT", None], size=n, p=[0.45, 0.45, 0.1]).tolist()
    cats = rng.choice(["I1", "I2", "S1", "S2"], size=n).tolist()
    table, _ = count_table(gold, pred, cats)
    counts = metrics_from_counts(table.sum(axis=0))
    pred_str = ["NONE" if p is None else p for p in pred]
    assert counts["accuracy"] == pytest.approx(accuracy(gold, pred))
    assert counts["f1_avg"] == pytest.approx(
        f1_score(gold, pred_str, labels=["SPEAK", "SILENT"], average="macro")
    )
    assert counts["balanced_accuracy"] == pytest.approx(balanced_accuracy(gold, pred))
    # sklearn's own balanced accuracy agrees once "NONE" is a (never-gold) predicted class.
    with pytest.warns(UserWarning):
        assert counts["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(gold, pred_str))
    per_cat = per_category_accuracy(gold, pred, cats)
    for c in ("I1", "I2", "S1", "S2"):
        assert counts[c] == pytest.approx(per_cat[c])


def test_bootstrap_resamples_groups() -> None:
    rng = np.random.default_rng(3)
    gold, pred, groups = [], [], []
    # 20 meetings whose accuracy varies a lot between meetings.
    for g in range(20):
        acc = 0.3 if g % 2 else 0.9
        for _ in range(30):
            y = rng.choice(["SPEAK", "SILENT"])
            right = rng.random() < acc
            gold.append(y)
            pred.append(y if right else ("SILENT" if y == "SPEAK" else "SPEAK"))
            groups.append(f"m{g}")
    point = accuracy(gold, pred)
    by_group = bootstrap_ci(gold, pred, None, groups, n_boot=500, seed=1)
    by_point = bootstrap_ci(gold, pred, None, None, n_boot=500, seed=1)
    lo, hi = by_group["accuracy"]
    assert lo < point < hi
    # Correlated points: the group interval is wider than the naive per-point one.
    assert hi - lo > by_point["accuracy"][1] - by_point["accuracy"][0]
    assert bootstrap_ci(gold, pred, None, groups, n_boot=500, seed=1) == by_group


def test_single_group_gives_degenerate_interval() -> None:
    lo, hi = bootstrap_ci(GOLD, PRED, CATS, ["g"] * 5, n_boot=50)["accuracy"]
    assert lo == hi == pytest.approx(0.6)


def test_threshold_sweep_hand_case() -> None:
    gold = ["SPEAK", "SPEAK", "SILENT", "SILENT"]
    probs = [0.9, 0.4, 0.6, 0.1]
    sweep = threshold_sweep(gold, probs)
    assert sweep is not None
    at = dict(zip(sweep.thresholds, sweep.balanced_accuracy, strict=True))
    # t=0.9: speak only on 0.9 -> recall SPEAK 1/2, SILENT 2/2 -> 0.75.
    assert at[0.9] == pytest.approx(0.75)
    # t=0.4: speak on 0.9, 0.6, 0.4 -> SPEAK 2/2, SILENT 1/2 -> 0.75; t=0.6 -> 1/2, 1/2.
    assert at[0.4] == pytest.approx(0.75)
    assert at[0.6] == pytest.approx(0.5)
    assert sweep.roc_auc == pytest.approx(0.75)
    assert sweep.coverage == 1.0
    fir = dict(zip(sweep.thresholds, sweep.false_interruption_rate, strict=True))
    assert fir[0.1] == 1.0 and fir[0.9] == 0.0


def test_threshold_sweep_skips_missing_probabilities() -> None:
    sweep = threshold_sweep(["SPEAK", "SILENT", "SPEAK"], [0.8, 0.2, None])
    assert sweep is not None and sweep.coverage == pytest.approx(2 / 3)
    assert threshold_sweep(["SPEAK", "SILENT"], [None, None]) is None


def test_compute_metrics_report() -> None:
    m = compute_metrics(GOLD, PRED, CATS, ["a", "a", "b", "b", "c"], [0.9, None, 0.6, 0.2, 0.1])
    assert m["n"] == 5 and m["n_unparseable"] == 1
    assert m["per_category_n"] == {"I1": 1, "I2": 1, "S1": 1, "S2": 2, "S3": 0, "SA": 0}
    assert m["bootstrap"]["unit"] == "group" and m["bootstrap"]["n_units"] == 3
    lo, hi = m["ci95"]["balanced_accuracy"]
    assert lo <= m["balanced_accuracy"] <= hi
    # The point without a probability is the unparseable one: it is in the sweep, counted wrong.
    assert m["threshold_sweep"]["coverage"] == 1.0


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="equal lengths"):
        accuracy(["SPEAK"], ["SPEAK", "SILENT"])
    with pytest.raises(ValueError, match="SPEAK or SILENT"):
        accuracy(["MAYBE"], ["SPEAK"])
    with pytest.raises(ValueError, match="zero decision points"):
        accuracy([], [])
    assert math.isnan(false_interruption_rate(["SPEAK"], ["SPEAK"]))


def test_paired_difference_resamples_both_rows_by_group() -> None:
    """Against a plain loop: the same group draws, each replicate's points gathered and
    scored with scikit-learn, the difference of the two rows taken per replicate."""
    rng = np.random.default_rng(5)
    n, k = 400, 12
    group = [f"g{i}" for i in rng.integers(0, k, n)]
    gold = list(rng.choice(["SPEAK", "SILENT"], n))
    a = [g if rng.random() < 0.7 else ("SILENT" if g == "SPEAK" else "SPEAK") for g in gold]
    b = [None if rng.random() < 0.05 else str(x) for x in rng.choice(["SPEAK", "SILENT"], n)]
    point, lo, hi = paired_balanced_accuracy_difference(gold, a, b, group, n_boot=300, seed=3)
    assert point == pytest.approx(balanced_accuracy(gold, a) - balanced_accuracy(gold, b))
    keys = list(dict.fromkeys(group))
    draws = np.random.default_rng(3).integers(0, len(keys), size=(300, len(keys)))
    by_group = {key: [i for i in range(n) if group[i] == key] for key in keys}
    diffs = []
    for row in draws:
        idx = [i for j in row for i in by_group[keys[j]]]
        g = [gold[i] for i in idx]
        diffs.append(
            balanced_accuracy(g, [a[i] for i in idx]) - balanced_accuracy(g, [b[i] for i in idx])
        )
    assert (lo, hi) == pytest.approx(tuple(np.quantile(diffs, [0.025, 0.975])))
    assert lo < point < hi
    # A row against itself differs by nothing, in every replicate.
    assert paired_balanced_accuracy_difference(gold, a, a, group) == (0.0, 0.0, 0.0)
