"""The feature-block seam: what a group of features declares so the runtime can carry it.

A model's feature row is its blocks' rows side by side: ``base`` (the 65 features of
:mod:`polylogue.engine.features`, always first) and then, for models trained with them, more
blocks (``chat``: :mod:`polylogue.engine.chat_features`). Each block declares its feature
names, its per-conversation state (made, fed every utterance, forked), its part of a feature
row, its place in a live snapshot and, optionally, whether its columns say the target is
addressed. The engine, the extractor and the live conversation loop over a model's blocks and
know none of them by name; :data:`polylogue.engine.model.FEATURE_BLOCKS` lists the blocks this
version has, and a model folder records the blocks it reads, so a new block does not touch
models that do not use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, Self, TypeVar

import numpy as np

from polylogue.conversation import Participant, Utterance

#: A hashed-vocabulary word model (the model's turn-yield and relation models).
Scorer = Callable[[tuple[int, ...]], float]
#: Who is present at a decision: a list of ids, ``features.SPOKEN`` (whoever spoke) or None
#: (everyone registered). ``Any``: ``Spoken`` lives in ``features``, which imports this module.
Present = Any


class BlockState(Protocol):
    """A block's per-conversation state: bounded, updated one utterance at a time."""

    def register(self, people: Iterable[Participant]) -> None: ...

    def observe(self, u: Utterance) -> None: ...

    def fork(self) -> Self:
        """A copy that later observations of either do not share."""
        ...


S = TypeVar("S", bound=BlockState)


@dataclass(frozen=True)
class FeatureBlock(Generic[S]):
    """One block of features and the state behind them (see the module docstring)."""

    name: str
    #: Its features, in row order.
    names: tuple[str, ...]
    #: ``new_state(yield_scorer, relation_scorer, participants)``: the model's word models.
    new_state: Callable[[Scorer, Scorer, Iterable[Participant]], S]
    #: ``row(state, target, present, relation_keys)``: the block's part of one feature row
    #: (``relation_keys``: where the base block appends the row's relation vocabulary).
    row: Callable[[S, str, Present, list[tuple[int, ...]] | None], np.ndarray]
    #: The snapshot key the state is saved under, and how it is written and read back.
    snapshot_key: str
    to_dict: Callable[[S], dict[str, object]]
    from_dict: Callable[[dict[str, object], Scorer, Scorer], S]
    #: Do this block's columns of a row (a slice of ``len(names)``) say the target is
    #: addressed? None: the block says nothing about address.
    addressed: Callable[[np.ndarray], bool] | None = None

    @property
    def width(self) -> int:
        return len(self.names)
