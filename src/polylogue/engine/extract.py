"""Feature matrices for batches of :class:`DecisionInput` (training and offline evaluation).

Benchmark points of one conversation share growing prefixes of the same context, so the
extractor keeps a streaming :class:`ConversationState` per conversation and only feeds it the
utterances it has not seen yet: a whole benchmark costs one pass over its utterances.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from polylogue.engine.features import N_FEATURES, ConversationState, HashedScorer, new_state
from polylogue.turntaking.types import DecisionInput


class FeatureExtractor:
    """Turns decision inputs into feature rows, reusing conversation state across calls."""

    def __init__(
        self, yield_scorer: HashedScorer, relation_scorer: HashedScorer, max_states: int = 16
    ) -> None:
        self.yield_scorer = yield_scorer
        self.relation_scorer = relation_scorer
        self.max_states = max_states
        self._states: OrderedDict[str, ConversationState] = OrderedDict()

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
        state.register((*inp.present, inp.target))
        for i in range(seen, len(ctx)):
            state.observe(ctx[i])
        self._states[inp.conversation_id] = state
        self._states.move_to_end(inp.conversation_id)
        while len(self._states) > self.max_states:
            self._states.popitem(last=False)
        return state

    def features(
        self,
        inputs: Sequence[DecisionInput],
        relation_keys: list[tuple[int, ...]] | None = None,
    ) -> np.ndarray:
        """One feature row per input; ``relation_keys`` collects each row's relation vocabulary."""
        x = np.empty((len(inputs), N_FEATURES), dtype=np.float32)
        for row, inp in enumerate(inputs):
            state = self.state_for(inp)
            x[row] = state.features(inp.target.id, [p.id for p in inp.present], relation_keys)
        return x
