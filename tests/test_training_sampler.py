"""Four-way balanced batch sampler: category counts per batch, per accumulation step and per
process, on the categories of a real (tiny) Friends benchmark."""

from __future__ import annotations

from collections import Counter

import pytest
from test_training_support import tiny_friends

from polylogue.training.lora.sampler import BalancedBatchSampler, SamplerError


@pytest.fixture(scope="module")
def categories(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Training-split categories of the first 40 Friends scenes (natural, very unequal ratios)."""
    from polylogue.turntaking.dataset import load_benchmark

    folder = tiny_friends(tmp_path_factory.mktemp("bench") / "friends")
    # As the trainer does: SA (silent although addressed) and S3 (silent participant of the
    # exchange) share S2's pool (Category.four_way).
    cats = [p.gold.category.four_way.value for p in load_benchmark(folder).points("train")]
    counts = Counter(cats)
    assert set(counts) == {"I1", "I2", "S1", "S2"}
    assert max(counts.values()) > 10 * min(counts.values())  # a real imbalance to correct
    return cats


def test_every_batch_is_a_quarter_of_each_category(categories: list[str]) -> None:
    sampler = BalancedBatchSampler(categories, 16, seed=1)
    batches = list(sampler)
    assert len(batches) == len(sampler) == len(categories) // 16
    for batch in batches:
        assert len(batch) == 16
        assert Counter(categories[i] for i in batch) == {"I1": 4, "I2": 4, "S1": 4, "S2": 4}
    # Natural shares would be far from 25% for the rare categories.
    natural = Counter(categories)
    assert min(natural.values()) / len(categories) < 0.05


def test_gradient_accumulation_and_processes_stay_balanced(categories: list[str]) -> None:
    """Global optimizer step = world_size x accumulation micro-batches, all balanced."""
    world, accum = 2, 2
    ranks = [
        list(BalancedBatchSampler(categories, 8, seed=3, rank=r, world_size=world))
        for r in range(world)
    ]
    assert len(ranks[0]) == len(ranks[1])  # processes stay in lockstep
    for step in range(len(ranks[0]) // accum):
        step_counts: Counter[str] = Counter()
        for r in range(world):
            for batch in ranks[r][step * accum : (step + 1) * accum]:
                assert Counter(categories[i] for i in batch) == {"I1": 2, "I2": 2, "S1": 2, "S2": 2}
                step_counts.update(categories[i] for i in batch)
        assert step_counts == {"I1": 8, "I2": 8, "S1": 8, "S2": 8}
    # Processes see different examples within a step.
    assert ranks[0][0] != ranks[1][0]


def test_rank_split_matches_accelerate_batch_sharding(categories: list[str]) -> None:
    """The trainer hands a single-process sampler to accelerate, which shards whole batches."""
    from accelerate.data_loader import BatchSamplerShard

    single = BalancedBatchSampler(categories, 8, seed=5)
    for rank in range(2):
        sharded = list(BatchSamplerShard(single, num_processes=2, process_index=rank))
        own = list(BalancedBatchSampler(categories, 8, seed=5, rank=rank, world_size=2))
        assert sharded[: len(own)] == own


def test_uneven_batch_size_rotates_the_extra_slots(categories: list[str]) -> None:
    sampler = BalancedBatchSampler(categories, 6, seed=0)
    totals: Counter[str] = Counter()
    for batch in list(sampler)[:8]:
        counts = Counter(categories[i] for i in batch)
        assert sorted(counts.values()) == [1, 1, 2, 2]
        totals.update(counts)
    assert set(totals.values()) == {12}  # 8 batches x 6 / 4 categories


def test_epochs_reshuffle_reproducibly_and_cover_the_majority(categories: list[str]) -> None:
    sampler = BalancedBatchSampler(categories, 16, seed=7)
    first = list(sampler)
    assert first == list(sampler)  # same epoch, same batches
    sampler.set_epoch(1)
    second = list(sampler)
    assert second != first
    # Rare categories are oversampled: each of their members shows up in one epoch.
    rarest = min(Counter(categories).items(), key=lambda kv: kv[1])[0]
    rare = {i for i, c in enumerate(categories) if c == rarest}
    assert rare <= {i for b in first for i in b}
    largest = BalancedBatchSampler(categories, 16, seed=7, epoch_size="largest")
    biggest_pool = max(Counter(categories).values())
    assert len(largest) * 4 >= biggest_pool  # every member of the largest category once


def test_missing_category_is_an_error_not_a_silent_fallback(categories: list[str]) -> None:
    without_s2 = [c for c in categories if c != "S2"]
    with pytest.raises(SamplerError, match="S2 has none"):
        BalancedBatchSampler(without_s2, 16)
    two_way = BalancedBatchSampler(
        ["SPEAK" if c.startswith("I") else "SILENT" for c in categories],
        16,
        group_names=("SPEAK", "SILENT"),
    )
    labels = ["SPEAK" if c.startswith("I") else "SILENT" for c in categories]
    for batch in two_way:
        assert Counter(labels[i] for i in batch) == {"SPEAK": 8, "SILENT": 8}


def test_max_repeats_caps_draws_of_the_rarest_category_and_is_reported(
    categories: list[str],
) -> None:
    free = BalancedBatchSampler(categories, 16, seed=1)
    rare = min(free.pools, key=lambda g: len(free.pools[g]))
    uncapped = free.repeat_stats()[rare]["max_repeats"]
    assert uncapped > 2  # natural ratios: the rare category repeats many times an epoch
    capped = BalancedBatchSampler(categories, 16, seed=1, max_repeats=2)
    stats = capped.repeat_stats()
    assert all(v["max_repeats"] <= 2 for v in stats.values())
    assert len(capped) < len(free)
    for batch in capped:  # still balanced
        assert Counter(categories[i] for i in batch) == {"I1": 4, "I2": 4, "S1": 4, "S2": 4}
    line = capped.describe()
    assert (
        f"capped from {len(free)}" in line and f"{rare} {len(capped.pools[rare])} examples" in line
    )
    with pytest.raises(SamplerError, match="max_repeats"):
        BalancedBatchSampler(categories, 16, max_repeats=0)
