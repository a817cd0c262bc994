"""Real decision points for the evaluation tests: a small benchmark built from Friends season 10.

Other ``test_eval_*`` modules import :func:`friends_benchmark`; the tests here check that the
material is what those tests assume (real text, several episodes, all four categories).
"""

from __future__ import annotations

import itertools
from functools import cache
from pathlib import Path

from benches import cached_benchmark

from polylogue.corpora import load_corpus
from polylogue.turntaking.dataset import BuildOptions, build_benchmark, save_benchmark

# Scenes from several episodes, so splits and the group bootstrap have more than one group.
N_SCENES = 120


@cache
def _conversations() -> tuple:
    return tuple(itertools.islice(load_corpus("friends", source="s10json"), N_SCENES))


def friends_benchmark(folder: Path) -> Path:
    """Save a benchmark of real Friends points into ``folder`` (built once, then copied).

    Test and validation get a third of the episodes each, so the evaluation tests have
    several groups (episodes) to bootstrap over.
    """

    def build(out: Path) -> Path:
        options = BuildOptions(fractions=(0.34, 0.33, 0.33), seed=1)
        return save_benchmark(build_benchmark(_conversations(), options), out)

    return cached_benchmark(folder, "friends-s10-eval", build)


def test_benchmark_has_real_varied_points(tmp_path: Path) -> None:
    from polylogue.turntaking.dataset import load_benchmark

    bench = load_benchmark(friends_benchmark(tmp_path / "bench"))
    points = bench.points("test")
    assert len(points) > 200
    # v2 adds SA (silent although individually addressed), v2.1 S3 (silent participant of the
    # exchange) next to the paper's four.
    assert (
        {"I1", "I2", "S1", "S2"}
        <= {p.gold.category.value for p in points}
        <= {
            "I1",
            "I2",
            "S1",
            "S2",
            "S3",
            "SA",
        }
    )
    assert len({p.group for p in points}) >= 2
    assert all(p.input.context and p.input.current.text.strip() for p in points[:50])
