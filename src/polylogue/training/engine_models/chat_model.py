"""Benchmarks for the chat-domain model (``polylogue train-default --domain chat``).

The chat model is trained with the default recipe
(:func:`~polylogue.training.engine_models.default_model.train_default_model`) on the two chat
corpora, split by the **corpora's own splits** so the chat test sets are the ones the
literature uses and nothing of them is seen in training:

* Ubuntu IRC: ``irc_train_files`` logs of the train split (spread evenly over the 133 logs by
  name) -> train; the 10 dev logs -> validation; the 10 test logs -> test. Each log is one
  channel (presence window of 20 messages, as the reader sets).
* Molweni: the dev dialogues -> train and validation (whole stretches of overlapping
  dialogues, about one in ``MOLWENI_VALIDATION_EVERY``, go to validation); the test
  dialogues -> test.
  Molweni's train file is not in the shared copy. Dev and test are built together so that
  test points repeating a dev point (the dialogues are overlapping windows of one channel)
  are removed as duplicates, as ``polylogue build`` does.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from polylogue.conversation import Conversation
from polylogue.corpora.molweni import stretch_first_dialogue_group
from polylogue.training.engine_models.default_model import TrainOptions
from polylogue.turntaking.dataset import Benchmark

#: IRC train logs used by default (of 133): ~10k decision points each; more did not help the
#: earlier chat variant and each costs ~10 s of feature extraction.
IRC_TRAIN_FILES = 24
#: Every N-th Molweni dev dialogue (by id hash) is validation, the rest train.
MOLWENI_VALIDATION_EVERY = 5

_IRC_SPLIT = {"train": "train", "dev": "validation", "test": "test"}


def irc_train_subset(names: list[str], n: int) -> list[str]:
    """``n`` train logs spread evenly over the sorted names (different months of the channel)."""
    if n >= len(names):
        return list(names)
    step = len(names) / n
    return [names[int(i * step)] for i in range(n)]


def irc_split_for(convs: list[Conversation]) -> Callable[[str], str]:
    """Benchmark split of an IRC log group: its corpus split (train, dev -> validation, test)."""
    corpus_split = {c.group_id: str(c.metadata["split"]) for c in convs}
    return lambda group: _IRC_SPLIT[corpus_split[group]]


def molweni_split_for(convs: list[Conversation]) -> Callable[[str], str]:
    """Benchmark split of a Molweni group (a stretch, ``dev-stretch-<id>`` / ``test-stretch-<id>``).

    Molweni's dialogues are overlapping windows of one channel, so the reader groups them into
    *stretches* (dialogues connected by shared messages). Whole dev stretches go to validation
    (about one in ``MOLWENI_VALIDATION_EVERY``, by a hash of the stretch's first dialogue's
    ``dev-<id>``, the key the shipped chat model's split used), so validation does not see the
    words of training dialogues; the test file's stretches are test.
    """
    every = MOLWENI_VALIDATION_EVERY
    split_of = {
        c.group_id: "validation"
        if zlib.crc32(stretch_first_dialogue_group(c.group_id).encode("utf-8")) % every == 0
        else "train"
        for c in convs
        if c.metadata.get("split") == "dev"
    }
    return lambda group: "test" if group.startswith("test-") else split_of[group]


def build_chat_benchmarks(
    data_root: Path | None,
    work_dir: Path,
    irc_train_files: int = IRC_TRAIN_FILES,
    log: Callable[[str], None] = print,
) -> list[Benchmark]:
    """Build (or reuse) ``work_dir/bench-chat-irc`` and ``work_dir/bench-chat-molweni``."""
    import functools

    from polylogue.corpora.irc import irc_files, read_irc
    from polylogue.corpora.molweni import read_molweni
    from polylogue.paths import corpus_dir
    from polylogue.turntaking.dataset import (
        BenchmarkBuild,
        BuildOptions,
        build_benchmark,
        load_or_build,
    )

    irc_root = (data_root / "ubuntu-irc-disentanglement") if data_root else None
    mol_root = (data_root / "molweni") if data_root else None
    irc_root = irc_root or corpus_dir("ubuntu-irc-disentanglement")
    mol_root = mol_root or corpus_dir("molweni")

    def irc_convs() -> Iterator[Conversation]:
        names = [p.name.removesuffix(".raw.txt") for _, p in irc_files(irc_root, ["train"])]
        yield from read_irc(irc_root, "train", files=irc_train_subset(names, irc_train_files))
        yield from read_irc(irc_root, ("dev", "test"))

    def make(name: str) -> BenchmarkBuild:
        split_for: Callable[[str], str]
        if name == "irc":
            convs = list(irc_convs())
            split_for = irc_split_for(convs)
        else:
            convs = list(read_molweni(mol_root, ("dev", "test")))
            split_for = molweni_split_for(convs)
        build = build_benchmark(convs, BuildOptions())
        # The corpora's own splits replace the builder's grouped 80/10/10 assignment.
        return replace(build, points=[replace(p, split=split_for(p.group)) for p in build.points])

    return [
        load_or_build(work_dir / f"bench-chat-{name}", functools.partial(make, name), log)
        for name in ("irc", "molweni")
    ]


def chat_train_options(**overrides: Any) -> TrainOptions:
    """The chat model's recipe: the default one plus the chat feature block, with SPEAK and
    SILENT weighted equally within each corpus (IRC speaks at 8% of points, Molweni at 31%:
    one threshold then serves both)."""
    return TrainOptions(**{"feature_blocks": ("chat",), "balance_classes": True, **overrides})
