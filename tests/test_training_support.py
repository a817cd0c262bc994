"""Shared set-up for the training tests: tiny benchmarks built from the real Friends corpus."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from benches import friends_benchmark


def tiny_friends(folder: Path, conversations: int = 40) -> Path:
    """What ``polylogue build --corpus friends --limit-conversations N`` writes (built once)."""
    return friends_benchmark(folder, conversations)


def test_tiny_friends_has_all_four_categories_in_train(tmp_path: Path) -> None:
    from polylogue.turntaking.dataset import load_benchmark

    bench = load_benchmark(tiny_friends(tmp_path / "friends"))
    # The paper's four (SA, silent although addressed, joins S2 for balanced batches).
    counts = Counter(p.gold.category.four_way.value for p in bench.points("train"))
    assert set(counts) == {"I1", "I2", "S1", "S2"}
    assert bench.points("validation")
