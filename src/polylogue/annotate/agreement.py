"""Inter-annotator agreement for nominal labels.

Pure functions over label sequences. A *rating table* maps each annotator to a sequence of
labels aligned by item (``None`` = that annotator did not label that item). The statistics:

* :func:`cohen_kappa` — two annotators, items both labelled (Cohen 1960).
* :func:`fleiss_kappa` — any number of annotators, items labelled by *all* of them (Fleiss
  1971 needs the same number of ratings per item, so incomplete items are left out and counted).
* :func:`krippendorff_alpha` — nominal α from the coincidence matrix; uses every item with at
  least two labels, so missing answers cost nothing but information (Krippendorff 2011).

Undefined values (e.g. κ when both annotators used one label only) are ``nan``, never a
silently chosen number.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

RatingLabel = Hashable
RatingTable = Mapping[str, Sequence[RatingLabel | None]]


def _check_aligned(ratings: RatingTable) -> int:
    lengths = {len(v) for v in ratings.values()}
    if len(lengths) > 1:
        raise ValueError(f"rating sequences must be aligned by item; got lengths {sorted(lengths)}")
    return lengths.pop() if lengths else 0


def cohen_kappa(
    a: Sequence[RatingLabel | None], b: Sequence[RatingLabel | None]
) -> tuple[float, int]:
    """Cohen's κ over the items both annotators labelled; returns ``(kappa, n_items)``."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: sequences differ in length ({len(a)} vs {len(b)})")
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    n = len(pairs)
    if n == 0:
        return math.nan, 0
    observed = sum(x == y for x, y in pairs) / n
    count_a = Counter(x for x, _ in pairs)
    count_b = Counter(y for _, y in pairs)
    expected = sum(count_a[c] * count_b.get(c, 0) for c in count_a) / (n * n)
    if expected >= 1.0:  # both used a single, identical label: chance agreement is total
        return math.nan, n
    return (observed - expected) / (1.0 - expected), n


def fleiss_kappa(ratings: RatingTable) -> tuple[float, int]:
    """Fleiss' κ over items labelled by every annotator; returns ``(kappa, n_items)``."""
    n_items = _check_aligned(ratings)
    raters = list(ratings)
    if len(raters) < 2:
        return math.nan, 0
    complete = [
        [ratings[r][i] for r in raters]
        for i in range(n_items)
        if all(ratings[r][i] is not None for r in raters)
    ]
    if not complete:
        return math.nan, 0
    m = len(raters)
    per_item = [Counter(row) for row in complete]
    p_items = [(sum(c * c for c in cnt.values()) - m) / (m * (m - 1)) for cnt in per_item]
    p_bar = sum(p_items) / len(p_items)
    totals: Counter[RatingLabel | None] = Counter()
    for cnt in per_item:
        totals.update(cnt)
    total = len(complete) * m
    p_e = sum((c / total) ** 2 for c in totals.values())
    if p_e >= 1.0:
        return math.nan, len(complete)
    return (p_bar - p_e) / (1.0 - p_e), len(complete)


def krippendorff_alpha(ratings: RatingTable) -> tuple[float, int]:
    """Krippendorff's α (nominal) over items with ≥ 2 labels; returns ``(alpha, n_items)``.

    α = 1 − D_o / D_e with the coincidence matrix o_ck = Σ_u (pairs c–k in unit u) / (m_u − 1).
    """
    n_items = _check_aligned(ratings)
    coincidence: dict[tuple[RatingLabel, RatingLabel], float] = {}
    used = 0
    for i in range(n_items):
        values = [v[i] for v in ratings.values() if v[i] is not None]
        m_u = len(values)
        if m_u < 2:
            continue
        used += 1
        for x, y in itertools.permutations(values, 2):
            coincidence[(x, y)] = coincidence.get((x, y), 0.0) + 1.0 / (m_u - 1)
    if used == 0:
        return math.nan, 0
    marginals: dict[RatingLabel, float] = {}
    for (c, _), w in coincidence.items():
        marginals[c] = marginals.get(c, 0.0) + w
    n = sum(marginals.values())
    disagreement_observed = sum(w for (c, k), w in coincidence.items() if c != k)
    expected_pairs = sum(
        marginals[c] * marginals[k] for c in marginals for k in marginals if c != k
    )
    if expected_pairs == 0:  # a single label value in the whole table
        return math.nan, used
    return 1.0 - (n - 1) * disagreement_observed / expected_pairs, used


def percent_agreement(ratings: RatingTable) -> tuple[float, int]:
    """Share of annotator pairs (within items) that agree; returns ``(share, n_items)``."""
    n_items = _check_aligned(ratings)
    agree = pairs = used = 0
    for i in range(n_items):
        values = [v[i] for v in ratings.values() if v[i] is not None]
        if len(values) < 2:
            continue
        used += 1
        for x, y in itertools.combinations(values, 2):
            pairs += 1
            agree += x == y
    return (agree / pairs if pairs else math.nan), used


@dataclass(frozen=True, slots=True)
class PairKappa:
    a: str
    b: str
    kappa: float
    n_items: int


@dataclass(frozen=True, slots=True)
class AgreementSummary:
    """All statistics for one slice (a question, optionally restricted to one category)."""

    slice: str
    n_items: int
    n_annotators: int
    pairwise: tuple[PairKappa, ...]
    fleiss: float
    fleiss_items: int
    alpha: float
    alpha_items: int
    agreement: float

    @property
    def mean_cohen(self) -> float:
        vals = [p.kappa for p in self.pairwise if not math.isnan(p.kappa)]
        return sum(vals) / len(vals) if vals else math.nan


def summarize(slice_name: str, ratings: RatingTable) -> AgreementSummary:
    """Every statistic above for one rating table."""
    n_items = _check_aligned(ratings)
    names = sorted(ratings)
    pairwise = tuple(
        PairKappa(a, b, *cohen_kappa(ratings[a], ratings[b]))
        for a, b in itertools.combinations(names, 2)
    )
    fk, fk_n = fleiss_kappa(ratings)
    alpha, alpha_n = krippendorff_alpha(ratings)
    agree, _ = percent_agreement(ratings)
    return AgreementSummary(
        slice=slice_name,
        n_items=n_items,
        n_annotators=len(names),
        pairwise=pairwise,
        fleiss=fk,
        fleiss_items=fk_n,
        alpha=alpha,
        alpha_items=alpha_n,
        agreement=agree,
    )


def majority_label(labels: Sequence[RatingLabel | None]) -> RatingLabel | None:
    """The strict plurality label, or ``None`` on a tie or when nobody answered."""
    counts = Counter(x for x in labels if x is not None)
    if not counts:
        return None
    (top, n_top), *rest = counts.most_common()
    if rest and rest[0][1] == n_top:
        return None
    return top


__all__ = [
    "AgreementSummary",
    "PairKappa",
    "RatingTable",
    "cohen_kappa",
    "fleiss_kappa",
    "krippendorff_alpha",
    "majority_label",
    "percent_agreement",
    "summarize",
]
