"""Real decision points for the evaluation tests: a small benchmark built from Friends season 10.

Other ``test_eval_*`` modules import :func:`friends_benchmark`; the tests here check that the
material is what those tests assume (real text, several episodes, all four categories).
"""

from __future__ import annotations

import itertools
from functools import cache
from pathlib import Path

from polylogue.corpora import load_corpus
from polylogue.turntaking.dataset import BenchmarkBuild, BuildOptions, save_benchmark
from polylogue.turntaking.points import conversation_points, with_split

# Scenes from several episodes, so splits and the group bootstrap have more than one group.
N_SCENES = 120


@cache
def _conversations() -> tuple:
    return tuple(itertools.islice(load_corpus("friends", source="s10json"), N_SCENES))


def friends_benchmark(folder: Path) -> Path:
    """Save a benchmark of real Friends points into ``folder`` (once per folder).

    Splits are fixed by episode here (every third episode is test) so these tests do not
    depend on the builder's split algorithm, only on its point construction and file format.
    """
    if (folder / "manifest.json").is_file():
        return folder
    convs = list(_conversations())
    episodes = sorted({c.group_id for c in convs})
    split_of = {e: ("test" if i % 3 == 0 else "train") for i, e in enumerate(episodes)}
    points = [with_split(p, split_of[p.group]) for c in convs for p in conversation_points(c)]
    build = BenchmarkBuild(conversations=convs, points=points, options=BuildOptions(), counts={})
    save_benchmark(build, folder)
    return folder


def test_benchmark_has_real_varied_points(tmp_path: Path) -> None:
    from polylogue.turntaking.dataset import load_benchmark

    bench = load_benchmark(friends_benchmark(tmp_path / "bench"))
    points = bench.points("test")
    assert len(points) > 200
    assert {p.gold.category.value for p in points} == {"I1", "I2", "S1", "S2"}
    assert len({p.group for p in points}) >= 2
    assert all(p.input.context and p.input.current.text.strip() for p in points[:50])
