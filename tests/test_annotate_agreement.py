"""Agreement statistics against hand-computed values and library implementations."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from polylogue.annotate.agreement import (
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    majority_label,
    percent_agreement,
    summarize,
)


def test_cohen_kappa_hand_computed() -> None:
    # p_o = 7/10; marginals a: Y6 N4, b: Y5 N5 -> p_e = (30 + 20)/100 = 0.5; kappa = 0.2/0.5
    a = list("YYNNYNYYNY")
    b = list("YNNNYYYYNN")
    kappa, n = cohen_kappa(a, b)
    assert n == 10
    assert kappa == pytest.approx(0.4)


def test_cohen_kappa_matches_sklearn_with_pairwise_deletion() -> None:
    from sklearn.metrics import cohen_kappa_score

    rng = random.Random(3)
    labels = ["SPEAK", "SILENT", "UNSURE"]
    for _ in range(20):
        n = rng.randint(15, 60)
        a: list[str | None] = [rng.choice(labels) for _ in range(n)]
        b: list[str | None] = [x if rng.random() < 0.6 else rng.choice(labels) for x in a]
        for seq in (a, b):
            for i in rng.sample(range(n), n // 6):
                seq[i] = None
        kept = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
        kappa, used = cohen_kappa(a, b)
        assert used == len(kept)
        expected = cohen_kappa_score([x for x, _ in kept], [y for _, y in kept])
        assert kappa == pytest.approx(expected, abs=1e-12)


def test_cohen_kappa_undefined_when_chance_agreement_is_total() -> None:
    kappa, n = cohen_kappa(["SPEAK"] * 5, ["SPEAK"] * 5)
    assert n == 5 and math.isnan(kappa)
    assert math.isnan(cohen_kappa([None, "A"], ["B", None])[0])
    with pytest.raises(ValueError, match="differ in length"):
        cohen_kappa(["A"], ["A", "B"])


def test_fleiss_kappa_hand_computed() -> None:
    # Items: AAA, AAB, BBB, ABB. P_i = 1, 1/3, 1, 1/3 -> P_bar = 2/3; p_A = p_B = 1/2 -> P_e = 1/2.
    ratings = {"r1": list("AABA"), "r2": list("AABB"), "r3": list("ABBB")}
    kappa, n = fleiss_kappa(ratings)
    assert n == 4
    assert kappa == pytest.approx(1 / 3)


def test_fleiss_kappa_matches_statsmodels() -> None:
    from statsmodels.stats.inter_rater import aggregate_raters
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

    rng = np.random.default_rng(5)
    for n_raters, n_cats in [(2, 2), (3, 2), (3, 4), (5, 3)]:
        truth = rng.integers(0, n_cats, size=80)
        noisy = np.where(
            rng.random((80, n_raters)) < 0.7,
            truth[:, None],
            rng.integers(0, n_cats, (80, n_raters)),
        )
        ratings = {f"r{j}": [f"c{v}" for v in noisy[:, j]] for j in range(n_raters)}
        kappa, n = fleiss_kappa(ratings)
        table, _ = aggregate_raters(noisy)
        assert n == 80
        assert kappa == pytest.approx(sm_fleiss(table, method="fleiss"), abs=1e-12)


def test_fleiss_kappa_uses_complete_items_only() -> None:
    from statsmodels.stats.inter_rater import aggregate_raters
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

    ratings: dict[str, list[str | None]] = {
        "r1": ["A", "A", "B", None, "B", "A"],
        "r2": ["A", "B", "B", "A", "B", "A"],
        "r3": ["A", "A", "B", "B", None, "B"],
    }
    kappa, n = fleiss_kappa(ratings)
    complete = np.array([[0, 0, 0], [0, 1, 0], [1, 1, 1], [0, 0, 1]])  # items 0, 1, 2, 5
    assert n == 4
    assert kappa == pytest.approx(sm_fleiss(aggregate_raters(complete)[0]), abs=1e-12)


def test_krippendorff_alpha_hand_computed_with_missing_values() -> None:
    # Units: AAA, AAB, BBB, AB (one rater missing), A (single value: not pairable).
    # Coincidences o_AA = 3 + 1 = 4, o_AB = o_BA = 1 + 1 = 2, o_BB = 3; n_A = 6, n_B = 5, n = 11.
    # alpha = 1 - (n - 1) * sum_{c != k} o_ck / sum_{c != k} n_c n_k = 1 - 10 * 4 / 60 = 1/3.
    ratings: dict[str, list[str | None]] = {
        "r1": ["A", "A", "B", "A", "A"],
        "r2": ["A", "A", "B", "B", None],
        "r3": ["A", "B", "B", None, None],
    }
    alpha, n = krippendorff_alpha(ratings)
    assert n == 4
    assert alpha == pytest.approx(1 / 3)


def _alpha_by_value_pairs(ratings: dict[str, list[str | None]]) -> float:
    """Krippendorff's alpha from its definition over pairable values (independent check)."""
    units = [
        [r[i] for r in ratings.values() if r[i] is not None]
        for i in range(len(next(iter(ratings.values()))))
    ]
    units = [u for u in units if len(u) >= 2]
    values = [v for u in units for v in u]
    n = len(values)
    d_o = (
        sum(sum(x != y for x, y in itertools.permutations(u, 2)) / (len(u) - 1) for u in units) / n
    )
    d_e = sum(x != y for x, y in itertools.permutations(values, 2)) / (n * (n - 1))
    return 1 - d_o / d_e


def test_krippendorff_alpha_matches_definition_on_random_tables() -> None:
    rng = random.Random(11)
    for _ in range(15):
        n_items, n_raters = rng.randint(8, 25), rng.randint(2, 4)
        truth = [rng.choice("ABC") for _ in range(n_items)]
        ratings: dict[str, list[str | None]] = {
            f"r{j}": [
                None if rng.random() < 0.2 else (t if rng.random() < 0.7 else rng.choice("ABC"))
                for t in truth
            ]
            for j in range(n_raters)
        }
        alpha, _ = krippendorff_alpha(ratings)
        assert alpha == pytest.approx(_alpha_by_value_pairs(ratings), abs=1e-12)


def test_alpha_close_to_fleiss_on_complete_data() -> None:
    # With every item fully rated, alpha and Fleiss' kappa differ only by alpha's small-sample
    # correction: alpha = kappa + (1 - kappa) / (N m) for N items and m raters.
    rng = np.random.default_rng(2)
    noisy = np.where(
        rng.random((60, 3)) < 0.75, rng.integers(0, 2, 60)[:, None], rng.integers(0, 2, (60, 3))
    )
    ratings = {f"r{j}": [str(v) for v in noisy[:, j]] for j in range(3)}
    kappa, _ = fleiss_kappa(ratings)
    alpha, _ = krippendorff_alpha(ratings)
    assert alpha == pytest.approx(kappa + (1 - kappa) / (60 * 3), abs=1e-12)


def test_percent_agreement_and_majority() -> None:
    ratings: dict[str, list[str | None]] = {
        "a": ["X", "X", None],
        "b": ["X", "Y", "Y"],
        "c": ["X", "Y", None],
    }
    share, n = percent_agreement(ratings)
    # item 0: 3/3 pairs agree, item 1: 1/3, item 2: a single label, not counted
    assert n == 2 and share == pytest.approx(4 / 6)
    assert majority_label(["A", "B", "A"]) == "A"
    assert majority_label(["A", "B"]) is None
    assert majority_label([None, None]) is None
    assert majority_label(["A", None, None]) == "A"


def test_summarize_reports_every_pair() -> None:
    ratings = {"h1": list("SSKKS"), "h2": list("SKKKS"), "h3": list("SSKSS")}
    s = summarize("decision/all", ratings)
    assert [(p.a, p.b) for p in s.pairwise] == [("h1", "h2"), ("h1", "h3"), ("h2", "h3")]
    assert s.mean_cohen == pytest.approx(sum(p.kappa for p in s.pairwise) / 3)
    assert s.fleiss == pytest.approx(fleiss_kappa(ratings)[0])
    assert s.n_items == 5 and s.n_annotators == 3
