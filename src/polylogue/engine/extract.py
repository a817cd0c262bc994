"""Feature matrices for batches of :class:`DecisionInput` (training and offline evaluation).

Benchmark points of one conversation share growing prefixes of the same context, so the
extractor keeps a streaming :class:`ConversationState` (and the state of each further feature
block) per conversation and only feeds them the utterances they have not seen yet: a whole
benchmark costs one pass over its utterances.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Literal, cast

import numpy as np

from polylogue.engine.blocks import BlockState, FeatureBlock
from polylogue.engine.features import ConversationState, HashedScorer
from polylogue.engine.model import TurnTakingModel, blocks_of
from polylogue.turntaking.address import AddressVerdict
from polylogue.turntaking.address_model import AddressModel
from polylogue.turntaking.types import DecisionInput


class FeatureExtractor:
    """Turns decision inputs into feature rows, reusing conversation state across calls.

    Each row is the base features followed by those of ``blocks`` (names of feature blocks,
    :mod:`polylogue.engine.blocks`; ``("chat",)`` for the chat model), as the models trained
    with them expect (:meth:`for_model` decides). Each conversation keeps one state per block.
    """

    def __init__(
        self,
        yield_scorer: HashedScorer,
        relation_scorer: HashedScorer,
        max_states: int = 16,
        blocks: Sequence[str] = (),
    ) -> None:
        self.yield_scorer = yield_scorer
        self.relation_scorer = relation_scorer
        self.max_states = max_states
        self.blocks: tuple[FeatureBlock[Any], ...] = blocks_of(tuple(blocks))
        self.width = sum(b.width for b in self.blocks)
        self._states: OrderedDict[str, list[BlockState]] = OrderedDict()
        #: What judges the names the address rules leave open (see ConversationState).
        self.address_model: AddressModel | Literal["shipped"] | None = "shipped"

    @classmethod
    def for_model(cls, model: TurnTakingModel, max_states: int = 16) -> FeatureExtractor:
        """The extractor whose rows ``model`` reads (its word models and feature blocks)."""
        return cls(model.yield_model, model.relation_model, max_states, model.feature_blocks)

    def _states_for(self, inp: DecisionInput) -> list[BlockState]:
        """Every block's state advanced to exactly ``inp.context`` (base first)."""
        ctx = inp.context
        states = self._states.get(inp.conversation_id)
        base = None if states is None else cast(ConversationState, states[0])
        seen = 0 if base is None else base.n_utterances
        # Reuse only when the stored prefix is a prefix of this context (same utterances).
        if (
            states is None
            or base is None
            or seen > len(ctx)
            or (
                seen and ctx[seen - 1] is not base.last.source and ctx[seen - 1] != base.last.source
            )
        ):
            states = [b.new_state(self.yield_scorer, self.relation_scorer, ()) for b in self.blocks]
            base_state = cast(ConversationState, states[0])
            base_state.address_model = self.address_model
            base_state.roster_known = True  # a decision input lists who is present
            seen = 0
        people = (*inp.present, inp.target)
        for s in states:
            s.register(people)
        for i in range(seen, len(ctx)):
            for s in states:
                s.observe(ctx[i])
        self._states[inp.conversation_id] = states
        self._states.move_to_end(inp.conversation_id)
        while len(self._states) > self.max_states:
            self._states.popitem(last=False)
        return states

    def state_for(self, inp: DecisionInput) -> ConversationState:
        """The base conversation state advanced to exactly ``inp.context``."""
        return cast(ConversationState, self._states_for(inp)[0])

    def features(
        self,
        inputs: Sequence[DecisionInput],
        relation_keys: list[tuple[int, ...]] | None = None,
        verdicts: list[AddressVerdict] | None = None,
    ) -> np.ndarray:
        """One feature row per input; ``relation_keys`` collects each row's relation vocabulary,
        ``verdicts`` the address verdict of each row's last utterance (in input order)."""
        x = np.empty((len(inputs), self.width), dtype=np.float32)
        # Rows are computed in conversation order (each conversation's points by context length)
        # so one streaming state serves a conversation's points whatever order they come in; a
        # shuffled or per-sample split would otherwise replay the history for every point.
        first_seen: dict[str, int] = {}
        for inp in inputs:
            first_seen.setdefault(inp.conversation_id, len(first_seen))
        order = sorted(
            range(len(inputs)),
            key=lambda r: (first_seen[inputs[r].conversation_id], len(inputs[r].context)),
        )
        # The base state appends a row's relation keys to ``sink``; they move to the row's place.
        sink: list[tuple[int, ...]] | None = [] if relation_keys is not None else None
        row_keys: list[tuple[int, ...]] = [()] * len(inputs)
        row_verdicts: list[AddressVerdict | None] = [None] * len(inputs)
        for row in order:
            inp = inputs[row]
            states = self._states_for(inp)
            present = [p.id for p in inp.present]
            at = 0
            for block, state in zip(self.blocks, states, strict=True):
                x[row, at : at + block.width] = block.row(state, inp.target.id, present, sink)
                at += block.width
            if sink is not None:
                row_keys[row] = sink.pop()
            if verdicts is not None:
                row_verdicts[row] = cast(ConversationState, states[0]).verdict()
        if relation_keys is not None:
            relation_keys.extend(row_keys)
        if verdicts is not None:
            verdicts.extend(v for v in row_verdicts if v is not None)
        return x
