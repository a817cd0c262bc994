"""Feature matrices for batches of :class:`DecisionInput` (training and offline evaluation).

Benchmark points of one conversation share growing prefixes of the same context, so the
extractor keeps a streaming :class:`ConversationState` per conversation and only feeds it the
utterances it has not seen yet: a whole benchmark costs one pass over its utterances.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from polylogue.engine.chat_features import N_CHAT_FEATURES, ChatState, new_chat_state
from polylogue.engine.features import N_FEATURES, ConversationState, HashedScorer, new_state
from polylogue.turntaking.types import DecisionInput

if TYPE_CHECKING:
    from polylogue.engine.model import TurnTakingModel


class FeatureExtractor:
    """Turns decision inputs into feature rows, reusing conversation state across calls.

    ``chat=True`` appends the chat feature block (:mod:`polylogue.engine.chat_features`) to
    every row, as models trained with that block expect (:meth:`for_model` decides).
    """

    def __init__(
        self,
        yield_scorer: HashedScorer,
        relation_scorer: HashedScorer,
        max_states: int = 16,
        chat: bool = False,
    ) -> None:
        self.yield_scorer = yield_scorer
        self.relation_scorer = relation_scorer
        self.max_states = max_states
        self.chat = chat
        self._states: OrderedDict[str, ConversationState] = OrderedDict()
        self._chat_states: dict[str, ChatState] = {}

    @classmethod
    def for_model(cls, model: TurnTakingModel, max_states: int = 16) -> FeatureExtractor:
        """The extractor whose rows ``model`` reads (its word models and feature blocks)."""
        return cls(
            model.yield_model,
            model.relation_model,
            max_states,
            chat="chat" in model.feature_blocks,
        )

    def state_for(self, inp: DecisionInput) -> ConversationState:
        """The conversation state advanced to exactly ``inp.context``."""
        ctx = inp.context
        state = self._states.get(inp.conversation_id)
        seen = 0 if state is None else state.n_utterances
        # Reuse only when the stored prefix is a prefix of this context (same utterances).
        if (
            state is None
            or seen > len(ctx)
            or (
                seen
                and ctx[seen - 1] is not state.last.source
                and ctx[seen - 1] != state.last.source
            )
        ):
            state = new_state(self.yield_scorer, self.relation_scorer)
            seen = 0
            if self.chat:
                self._chat_states[inp.conversation_id] = new_chat_state()
        state.register((*inp.present, inp.target))
        chat = self._chat_states.get(inp.conversation_id) if self.chat else None
        if chat is not None:
            chat.register((*inp.present, inp.target))
        for i in range(seen, len(ctx)):
            state.observe(ctx[i])
            if chat is not None:
                chat.observe(ctx[i])
        self._states[inp.conversation_id] = state
        self._states.move_to_end(inp.conversation_id)
        while len(self._states) > self.max_states:
            gone, _ = self._states.popitem(last=False)
            self._chat_states.pop(gone, None)
        return state

    def features(
        self,
        inputs: Sequence[DecisionInput],
        relation_keys: list[tuple[int, ...]] | None = None,
    ) -> np.ndarray:
        """One feature row per input; ``relation_keys`` collects each row's relation vocabulary."""
        width = N_FEATURES + (N_CHAT_FEATURES if self.chat else 0)
        x = np.empty((len(inputs), width), dtype=np.float32)
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
        # The state appends a row's relation keys to ``sink``; they are moved to the row's place.
        sink: list[tuple[int, ...]] | None = [] if relation_keys is not None else None
        row_keys: list[tuple[int, ...]] = [()] * len(inputs)
        for row in order:
            inp = inputs[row]
            state = self.state_for(inp)
            present = [p.id for p in inp.present]
            x[row, :N_FEATURES] = state.features(inp.target.id, present, sink)
            if sink is not None:
                row_keys[row] = sink.pop()
            if self.chat:
                chat = self._chat_states[inp.conversation_id]
                x[row, N_FEATURES:] = chat.features(inp.target.id)
        if relation_keys is not None:
            relation_keys.extend(row_keys)
        return x
