"""The shared corpora's published split: a property of the groups, not of the points."""

from __future__ import annotations

from collections import Counter

import pytest

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus
from polylogue.turntaking.dataset import BuildOptions, build_benchmark
from polylogue.turntaking.dataset.assign import hash_split, published_split, published_splits
from polylogue.turntaking.points import PointOptions
from polylogue.turntaking.splits import SPLITS


@pytest.fixture(scope="module")
def calls() -> list[Conversation]:
    return list(load_corpus("earnings21"))


def _group_splits(points: list) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in points:
        assert out.setdefault(p.group, p.split) == p.split, p.group
    return out


def test_a_full_build_takes_the_published_split_whatever_the_points(
    calls: list[Conversation],
) -> None:
    published = published_splits()["splits"]["earnings21"]
    default = build_benchmark(calls)
    assert _group_splits(default.points) == published
    # Another pause length makes other points (and other category counts), not another split.
    longer = build_benchmark(calls, BuildOptions(points=PointOptions(gap=0.6)))
    assert len(longer.points) != len(default.points)
    assert _group_splits(longer.points) == published
    # Other split options, or part of the corpus, are split afresh (and still grouped).
    wider = BuildOptions(fractions=(0.6, 0.2, 0.2))
    assert published_split("earnings21", set(published), wider) is None
    resplit = _group_splits(build_benchmark(calls, wider).points)
    assert Counter(resplit.values())["test"] > Counter(published.values())["test"]
    part = _group_splits(build_benchmark(calls[:12]).points)
    assert set(part.values()) == set(SPLITS) and len(part) < len(published)


def test_every_published_corpus_has_all_three_splits() -> None:
    table = published_splits()
    assert set(table["splits"]) == {"ami", "earnings21", "friends", "icsi", "molweni"}
    for corpus, groups in table["splits"].items():
        counts = Counter(groups.values())
        assert set(counts) == set(SPLITS), corpus
        assert counts["train"] > counts["validation"], corpus


def test_a_new_group_beside_the_published_ones_goes_by_its_id_alone() -> None:
    published = published_splits()["splits"]["friends"]
    options = BuildOptions()
    new = {f"s11e{n:02d}" for n in range(1, 41)}
    split = published_split("friends", set(published) | new, options)
    assert split is not None
    assert {g: split[g] for g in published} == published  # nobody moved
    by_id = {g: hash_split("friends", g, options.fractions) for g in new}
    assert {g: split[g] for g in new} == by_id
    # Uniform by construction: about 80/10/10 over many ids.
    many = Counter(hash_split("friends", f"episode-{i}", (0.8, 0.1, 0.1)) for i in range(4000))
    assert 0.77 < many["train"] / 4000 < 0.83 and 0.08 < many["test"] / 4000 < 0.12
    # A build missing a published group is part of the corpus: no published split.
    assert published_split("friends", set(published) - {next(iter(published))}, options) is None
    assert published_split("my-calls", {"a", "b", "c"}, options) is None
