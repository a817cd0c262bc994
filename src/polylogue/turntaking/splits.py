"""Grouped, stratified splits and stratified subsampling.

Splits are made per corpus at the level of the conversation *group* (an AMI meeting series, a
Friends episode, an earnings call): adjacent boundaries share most of their context, so a
per-sample split would leak. Within that constraint scikit-learn's ``StratifiedGroupKFold``
keeps the category proportions of each split close to the corpus's.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence

import numpy as np

SPLITS: tuple[str, ...] = ("train", "validation", "test")


def grouped_split(
    groups: Sequence[str],
    strata: Sequence[str],
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    seed: int = 13,
    group_strata: dict[str, str] | None = None,
    min_groups: dict[str, int] | None = None,
) -> dict[str, str]:
    """Assign each group to train/validation/test; returns ``{group: split}``.

    Groups are first partitioned by ``group_strata`` (e.g. whether a meeting series carries
    addressee annotation, which is what makes I1 points possible), and each partition is split
    on its own with ``StratifiedGroupKFold`` over the per-point ``strata``, using
    ``round(1/min(fraction))`` folds. ``min_groups`` asks for at least that many groups of a
    partition in each of validation and test (AMI: annotated series from two teams each), by
    using fewer, larger folds. Deterministic for a given seed and input.
    """
    if abs(sum(fractions) - 1.0) > 1e-6:
        raise ValueError(f"split fractions must sum to 1, got {fractions}")
    unique_groups = sorted(set(groups))
    if len(unique_groups) < 3:
        raise ValueError(
            "need at least 3 conversation groups to make train/validation/test, "
            f"got {len(unique_groups)}"
        )
    partitions: dict[str, list[int]] = {}
    for i, grp in enumerate(groups):
        key = (group_strata or {}).get(grp, "")
        partitions.setdefault(key, []).append(i)

    # A partition with fewer than 3 groups cannot be split on its own: merge it into the largest.
    def n_groups(key: str) -> int:
        return len({groups[i] for i in partitions[key]})

    largest = max(partitions, key=n_groups)
    for key in sorted(partitions):
        if key != largest and n_groups(key) < 3:
            partitions[largest].extend(partitions.pop(key))
    assignment: dict[str, str] = {}
    for key in sorted(partitions):
        idx = partitions[key]
        assignment.update(
            _split_partition(
                [groups[i] for i in idx],
                [strata[i] for i in idx],
                fractions,
                seed,
                (min_groups or {}).get(key, 1),
            )
        )
    return assignment


def _split_partition(
    groups: Sequence[str],
    strata: Sequence[str],
    fractions: tuple[float, float, float],
    seed: int,
    min_groups: int = 1,
) -> dict[str, str]:
    from sklearn.model_selection import StratifiedGroupKFold

    n_unique = len(set(groups))
    smallest = min(f for f in fractions if f > 0)
    # Each fold should hold >= min_groups groups, while validation and test are one fold each.
    n_folds = max(3, min(round(1 / smallest), n_unique // max(1, min_groups)))
    n_val = max(1, round(fractions[1] * n_folds)) if fractions[1] > 0 else 0
    n_test = max(1, round(fractions[2] * n_folds)) if fractions[2] > 0 else 0
    g = np.asarray(groups)
    # Rare strata are merged into a catch-all so small corpora still split without warnings.
    counts = Counter(strata)
    y = np.asarray([s if counts[s] >= n_folds else "_rare" for s in strata])
    skf = StratifiedGroupKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    assignment: dict[str, str] = {}
    with warnings.catch_warnings():
        # A catch-all smaller than the number of folds cannot reach every fold; stratifying
        # is best effort there, and the split is what it would be with the warning shown.
        warnings.filterwarnings("ignore", "The least populated class", UserWarning)
        folds = list(skf.split(np.zeros(len(y)), y, g))
    for fold, (_, test_idx) in enumerate(folds):
        if fold < n_test:
            name = "test"
        elif fold < n_test + n_val:
            name = "validation"
        else:
            name = "train"
        for grp in set(g[test_idx].tolist()):
            assignment[grp] = name
    return assignment


def stratified_subsample(strata: Sequence[str], n: int, seed: int = 13) -> list[int]:
    """Indices of a subsample of size ``n`` preserving stratum proportions (largest remainder).

    The returned indices are sorted so the subsample keeps the original order.
    """
    total = len(strata)
    if n >= total:
        return list(range(total))
    rng = np.random.default_rng(seed)
    by_stratum: dict[str, list[int]] = {}
    for i, s in enumerate(strata):
        by_stratum.setdefault(s, []).append(i)
    keys = sorted(by_stratum)
    exact = {k: len(by_stratum[k]) * n / total for k in keys}
    quota = {k: int(exact[k]) for k in keys}
    short = n - sum(quota.values())
    for k in sorted(keys, key=lambda k: exact[k] - quota[k], reverse=True)[:short]:
        quota[k] += 1
    chosen: list[int] = []
    for k in keys:
        idx = np.asarray(by_stratum[k])
        chosen.extend(rng.choice(idx, size=quota[k], replace=False).tolist())
    return sorted(chosen)


def balanced_indices(labels: Sequence[str], strata: Sequence[str], seed: int = 13) -> list[int]:
    """Indices of a class-balanced view: the majority label is subsampled to the minority size,
    preserving its category proportions. Natural ratios stay the default everywhere else."""
    by_label: dict[str, list[int]] = {}
    for i, lab in enumerate(labels):
        by_label.setdefault(lab, []).append(i)
    if len(by_label) < 2:
        return list(range(len(labels)))
    size = min(len(v) for v in by_label.values())
    chosen: list[int] = []
    for lab in sorted(by_label):
        idx = by_label[lab]
        sub = stratified_subsample([strata[i] for i in idx], size, seed)
        chosen.extend(idx[j] for j in sub)
    return sorted(chosen)
