"""Which split each decision point goes to: grouped causal splits by default, or the paper
protocol's per-sample split.

The shared corpora have a *published* split (``published_splits.json``): which conversation
group of each corpus is train, validation or test. A full build of a shared corpus with the
default split options takes it, so the split is a property of the groups, not of the points:
a change to what a decision point is (a reader fix, a voice rule, another pause unit) never
moves an episode or a meeting between train and test, and the shipped model's training
groups stay out of every later test split. A group the table does not list (a new episode or
meeting beside the shared ones) goes to a split by a hash of its id, which no label and no
other group can move. A build of part of a corpus (``--limit-conversations``,
``--annotated-only``), other fractions or another seed is split afresh.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from functools import cache
from importlib import resources
from typing import Any

from polylogue.turntaking.dataset.options import BuildOptions
from polylogue.turntaking.splits import (
    SPLITS,
    balanced_indices,
    grouped_split,
    stratified_subsample,
)
from polylogue.turntaking.types import (
    DecisionPoint,
)

#: The package file holding the published splits.
PUBLISHED_SPLITS = "published_splits.json"


@cache
def published_splits() -> dict[str, Any]:
    """``{"fractions", "seed", "splits": {corpus: {group: split}}}`` (package data)."""
    text = resources.files(__package__).joinpath(PUBLISHED_SPLITS).read_text(encoding="utf-8")
    return dict(json.loads(text))


def published_split(corpus: str, groups: set[str], options: BuildOptions) -> dict[str, str] | None:
    """The published split of ``corpus`` when this build can take it: the default split
    options, and every published group of the corpus present (a full build)."""
    table = published_splits()
    published = table["splits"].get(corpus)
    if (
        published is None
        or options.seed != table["seed"]
        or options.min_annotated_groups != BuildOptions().min_annotated_groups
        or tuple(options.fractions) != tuple(table["fractions"])
        or not set(published) <= groups
    ):
        return None
    return {g: published.get(g) or hash_split(corpus, g, options.fractions) for g in groups}


def hash_split(corpus: str, group: str, fractions: tuple[float, float, float]) -> str:
    """A split for a group from its id alone (uniform in [0, 1) by SHA-256 of corpus/group)."""
    digest = hashlib.sha256(f"{corpus}/{group}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    bound = 0.0
    for name, fraction in zip(SPLITS, fractions, strict=True):
        bound += fraction
        if u < bound:
            return name
    return SPLITS[-1]


def assign_splits(
    points: list[DecisionPoint],
    options: BuildOptions,
    annotated_groups: set[str],
    fixed_split: dict[str, str] | None = None,
) -> list[DecisionPoint]:
    fixed_split = fixed_split or {}
    by_corpus: dict[str, list[int]] = {}
    for i, p in enumerate(points):
        by_corpus.setdefault(p.input.corpus, []).append(i)
    split_of = [""] * len(points)
    for corpus, all_idx in sorted(by_corpus.items()):
        published = published_split(corpus, {points[i].group for i in all_idx}, options)
        if published is not None:
            for i in all_idx:
                split_of[i] = published[points[i].group]
            continue
        # Pinned groups keep their split; the rest share the splits nobody pinned.
        pinned = {fixed_split[points[i].group] for i in all_idx if points[i].group in fixed_split}
        for i in all_idx:
            if points[i].group in fixed_split:
                split_of[i] = fixed_split[points[i].group]
        idx = [i for i in all_idx if points[i].group not in fixed_split]
        if not idx:
            continue
        fractions = options.fractions
        if pinned:
            kept = [0.0 if name in pinned else f for name, f in zip(SPLITS, fractions, strict=True)]
            fractions = (kept[0] / sum(kept), kept[1] / sum(kept), kept[2] / sum(kept))
        groups = [points[i].group for i in idx]
        strata = [points[i].gold.category.value for i in idx]
        if pinned and len(set(groups)) < 3:
            assignment = dict.fromkeys(groups, "train")
        elif len(set(groups)) < 3:
            # Too few conversations to split (e.g. one user transcript): evaluation only.
            assignment = dict.fromkeys(groups, "test")
        else:
            group_strata = {
                g: ("annotated" if g in annotated_groups else "plain") for g in set(groups)
            }
            assignment = grouped_split(
                groups,
                strata,
                fractions,
                options.seed,
                group_strata,
                min_groups={"annotated": options.min_annotated_groups},
            )
        for i in idx:
            split_of[i] = assignment[points[i].group]
    out = [replace(p, split=s) for p, s in zip(points, split_of, strict=True)]
    if options.max_points:
        keep: list[DecisionPoint] = []
        for name in SPLITS:
            members = [p for p in out if p.split == name]
            limit = options.max_points.get(name)
            if limit is not None and limit < len(members):
                strata = [f"{p.input.corpus}/{p.gold.category.value}" for p in members]
                members = [members[i] for i in stratified_subsample(strata, limit, options.seed)]
            keep.extend(members)
        out = keep
    return out


def paper_splits(points: list[DecisionPoint], options: BuildOptions) -> list[DecisionPoint]:
    """The authors' protocol: per corpus, 50/50 classes, then a per-sample split stratified by
    their four-way category (so neighbouring points of one meeting land in every split)."""
    import random

    out: list[DecisionPoint] = []
    by_corpus: dict[str, list[DecisionPoint]] = {}
    for p in points:
        by_corpus.setdefault(p.input.corpus, []).append(p)
    for corpus in sorted(by_corpus):
        pts = by_corpus[corpus]
        cats = [p.gold.paper_category or p.gold.category.value for p in pts]
        keep = balanced_indices([p.gold.label.value for p in pts], cats, options.seed)
        by_cat: dict[str, list[DecisionPoint]] = {}
        for i in keep:
            by_cat.setdefault(cats[i], []).append(pts[i])
        rng = random.Random(options.seed)
        for cat in sorted(by_cat):
            members = by_cat[cat]
            rng.shuffle(members)
            n_train = int(options.fractions[0] * len(members))
            n_val = int(options.fractions[1] * len(members))
            for j, p in enumerate(members):
                split = "train" if j < n_train else "validation" if j < n_train + n_val else "test"
                out.append(replace(p, split=split))
    return out
