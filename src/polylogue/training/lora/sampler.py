"""Balanced batch sampling: every batch holds each group in equal share.

The paper trains with every batch split 25/25/25/25 across I1, I2, S1 and S2. The reference
code only did so when a positive ``--max-length`` was passed; by default its sampler was silently
off (notes D.6, D.10.7). Here the sampler is always used when configured, and it refuses to run
(rather than quietly falling back) when a group has no examples.

Design:

* Each group is an endless stream of its indices: shuffled, and reshuffled each time it runs out
  (so small groups are oversampled and large ones cycle through all their members over epochs).
* A batch of size ``B`` takes ``B // k`` indices from each of the ``k`` groups; when ``B`` is
  not a multiple of ``k`` the ``B % k`` extra slots rotate over the groups from batch to batch.
  The batch is shuffled internally.
* ``max_repeats`` caps how often one example is drawn per epoch: on natural-ratio builds a
  rare category (AMI S2) would otherwise be repeated ~30 times an epoch. The epoch is cut to
  the number of batches the rarest group can fill within the cap; :meth:`repeat_stats` reports
  how often examples of each group are drawn.
* Batches are generated as one global sequence from ``seed + epoch``, identical on every process.
  With ``world_size > 1`` process ``rank`` takes batches ``rank, rank + world_size, ...``. This is
  the same assignment accelerate's ``BatchSamplerShard`` makes when it shards a single-process
  batch sampler, so the sampler can be handed to ``accelerator.prepare`` unchanged (world size 1)
  or used rank-aware in a plain ``torch.distributed`` loop. Every micro-batch is balanced, hence
  so is every gradient-accumulation step on every rank and the global optimizer step.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Literal

from polylogue.errors import PolylogueInputError
from polylogue.turntaking.types import PAPER_CATEGORIES, Category

EpochSize = Literal["dataset", "largest"]
FOUR_WAY: tuple[str, ...] = tuple(c.value for c in PAPER_CATEGORIES)


class SamplerError(PolylogueInputError):
    """The data cannot be sampled as configured (e.g. an empty category)."""


def four_way_group(category: str) -> str:
    """The paper's four-way category of a benchmark category (S3 and SA count as S2)."""
    try:
        return Category(category).four_way.value
    except ValueError:
        return category  # not a benchmark category: the sampler reports it as outside


def sampler_groups(kind: str, categories: Sequence[str]) -> tuple[list[str], tuple[str, ...]]:
    """``(group of each example, group names)`` for the ``four_way`` or ``label`` sampler."""
    if kind == "four_way":
        # SA (addressed but silent) and S3 (a silent participant of the exchange) share S2's
        # pool: the paper's four-way batches (Category.four_way).
        return [four_way_group(c) for c in categories], FOUR_WAY
    # "label": SPEAK/SILENT halves
    return ["SPEAK" if c.startswith("I") else "SILENT" for c in categories], ("SPEAK", "SILENT")


class BalancedBatchSampler:
    """Batches of indices with equal shares of each group (a ``torch`` batch sampler).

    ``groups[i]`` is the group of example ``i``. ``group_names`` fixes which groups must appear
    (default: the four categories). ``epoch_size="dataset"`` gives ``len(groups) // batch_size``
    batches per epoch; ``"largest"`` gives enough batches to draw the largest group once (the
    reference's definition, which multiplies the epoch when groups are unequal).
    """

    def __init__(
        self,
        groups: Sequence[str],
        batch_size: int,
        *,
        group_names: Sequence[str] = FOUR_WAY,
        seed: int = 0,
        epoch_size: EpochSize = "dataset",
        rank: int = 0,
        world_size: int = 1,
        max_repeats: int | None = None,
    ) -> None:
        if batch_size < len(group_names):
            raise SamplerError(
                f"batch size {batch_size} is smaller than the number of groups ({len(group_names)})"
            )
        if not 0 <= rank < world_size:
            raise SamplerError(f"rank {rank} is outside world size {world_size}")
        self.group_names = tuple(group_names)
        self.pools: dict[str, list[int]] = {g: [] for g in self.group_names}
        unknown: set[str] = set()
        for i, g in enumerate(groups):
            if g in self.pools:
                self.pools[g].append(i)
            else:
                unknown.add(g)
        if unknown:
            raise SamplerError(f"examples in groups {sorted(unknown)} outside {self.group_names}")
        empty = [g for g, ix in self.pools.items() if not ix]
        if empty:
            counts = ", ".join(f"{g}={len(ix)}" for g, ix in self.pools.items())
            raise SamplerError(
                f"balanced sampling needs examples of every group, but {', '.join(empty)} "
                f"has none ({counts}); use more data or another sampler (label, shuffle)"
            )
        self.batch_size = batch_size
        self.seed = seed
        self.epoch = 0
        self.rank = rank
        self.world_size = world_size
        k = len(self.group_names)
        if epoch_size == "dataset":
            global_batches = len(groups) // batch_size
        elif epoch_size == "largest":
            global_batches = -(-max(len(ix) for ix in self.pools.values()) // (batch_size // k))
        else:
            raise SamplerError(f"unknown epoch size {epoch_size!r}")
        self.uncapped_batches = global_batches
        if max_repeats is not None:
            if max_repeats < 1:
                raise SamplerError(f"max_repeats must be >= 1, not {max_repeats}")
            per_batch = -(-batch_size // k)  # the most one batch takes of a group
            cap = min(len(ix) * max_repeats // per_batch for ix in self.pools.values())
            global_batches = min(global_batches, max(1, cap))
        self.max_repeats = max_repeats
        # Equal batch counts on every rank keep distributed processes in lockstep.
        self.num_global_batches = max(world_size, global_batches - global_batches % world_size)

    def set_epoch(self, epoch: int) -> None:
        """Called by the trainer before each epoch: a new, reproducible shuffle."""
        self.epoch = epoch

    def quotas(self, batch_index: int) -> dict[str, int]:
        """How many examples of each group batch ``batch_index`` takes."""
        k = len(self.group_names)
        base, extra = divmod(self.batch_size, k)
        out = dict.fromkeys(self.group_names, base)
        for j in range(extra):
            out[self.group_names[(batch_index * extra + j) % k]] += 1
        return out

    def global_batches(self) -> list[list[int]]:
        """This epoch's batches for all processes (the same list on every process)."""
        rng = random.Random(f"{self.seed}:{self.epoch}")
        streams = {g: _Stream(ix, rng) for g, ix in self.pools.items()}
        batches = []
        for b in range(self.num_global_batches):
            batch: list[int] = []
            for g, n in self.quotas(b).items():
                batch.extend(streams[g].take(n))
            rng.shuffle(batch)
            batches.append(batch)
        return batches

    def repeat_stats(self) -> dict[str, dict[str, float]]:
        """Per group, this epoch: examples, draws, mean and max draws of one example."""
        counts = Counter(i for batch in self.global_batches() for i in batch)
        out = {}
        for g, ix in self.pools.items():
            drawn = [counts.get(i, 0) for i in ix]
            out[g] = {
                "examples": len(ix),
                "draws": sum(drawn),
                "mean_repeats": round(sum(drawn) / len(ix), 2),
                "max_repeats": max(drawn),
            }
        return out

    def describe(self) -> str:
        """One line for the training log: batches per epoch and how often examples repeat."""
        stats = self.repeat_stats()
        capped = (
            f" (capped from {self.uncapped_batches}: at most {self.max_repeats} draws of one "
            "example per epoch)"
            if self.num_global_batches < self.uncapped_batches
            else ""
        )
        per_group = ", ".join(
            f"{g} {int(v['examples'])} examples x{v['mean_repeats']:g} "
            f"(max {int(v['max_repeats'])})"
            for g, v in stats.items()
        )
        return (
            f"balanced sampler: {self.num_global_batches} batches per epoch{capped}; "
            f"draws per example per epoch: {per_group}"
        )

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.global_batches()[self.rank :: self.world_size]

    def __len__(self) -> int:
        return self.num_global_batches // self.world_size


class _Stream:
    """Endless shuffled cycling over one group's indices."""

    def __init__(self, items: Sequence[int], rng: random.Random) -> None:
        self._items = list(items)
        self._rng = rng
        self._order: list[int] = []

    def take(self, n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n:
            if not self._order:
                self._order = self._items[:]
                self._rng.shuffle(self._order)
            out.append(self._order.pop())
        return out
