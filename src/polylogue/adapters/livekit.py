"""LiveKit Agents: a multi-party turn detector and a reply gate backed by polylogue.

LiveKit's turn detectors answer "has the user finished?". In a room with several people the
agent also needs "is it my turn?". :class:`PolylogueTurnDetector` implements LiveKit's turn
detector interface (``predict_end_of_turn(chat_ctx)``, ``unlikely_threshold(language)``,
``supports_language(language)``) and returns polylogue's P(the agent should speak now), so
LiveKit waits longer when the floor belongs to someone else. :func:`gate_reply` is for the
agent's ``on_user_turn_completed`` hook: it raises LiveKit's ``StopResponse`` when polylogue
says the agent should stay silent, so the turn is kept in context but not answered.

Who said what is read from the chat context: user messages carry the speaker in
``message.extra`` (``"speaker"``, ``"speaker_id"`` or ``"participant_identity"``) or as a
``"Name: text"`` prefix; assistant messages are the agent's own speech.

    detector = PolylogueTurnDetector(agent_name="Dave", participants=roster)
    session = AgentSession(turn_detection=detector, ...)

    class Assistant(Agent):
        async def on_user_turn_completed(self, turn_ctx, new_message):
            await gate_reply(detector, turn_ctx, new_message)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from livekit.agents import StopResponse, llm

from polylogue.adapters import start_live
from polylogue.conversation import Participant, Utterance
from polylogue.engine.deployment import Deployment
from polylogue.engine.live import Action, LiveDecision, Policy
from polylogue.engine.model import TurnTakingModel

SPEAKER_KEYS = ("speaker", "speaker_id", "participant_identity")
_PREFIX = re.compile(r"^\s*([^:\n]{1,60}):\s+(.*)$", re.DOTALL)
#: LiveKit's languages polylogue's English model is meant for.
_ENGLISH = {"en", "en-us", "en-gb", "en-au", "en-ca", "en-in", "english"}


def message_speaker(msg: llm.ChatMessage, default: str = "user") -> tuple[str, str]:
    """(speaker, text) of a user message: ``extra`` keys first, then a "Name: " prefix."""
    text = msg.text_content or ""
    for key in SPEAKER_KEYS:
        value = msg.extra.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip(), text
    m = _PREFIX.match(text)
    if m:
        return m.group(1).strip(), m.group(2)
    return default, text


class PolylogueTurnDetector:
    """LiveKit turn detector: the end-of-turn probability is P(the agent should speak now)."""

    def __init__(
        self,
        agent_name: str = "assistant",
        participants: Iterable[Participant] = (),
        policy: Policy | None = None,
        model: TurnTakingModel | None = None,
        deployment: Deployment | None = None,
    ) -> None:
        self.live, self._model = start_live(agent_name, participants, policy, model, deployment)
        self._seen: set[str] = set()
        #: the decision behind the latest prediction (read by :func:`gate_reply`)
        self.last_decision: LiveDecision | None = None

    @property
    def model(self) -> str:
        return "polylogue-multiparty"

    @property
    def provider(self) -> str:
        return "polylogue"

    async def unlikely_threshold(self, language: Any = None) -> float | None:
        """Below this P(speak) LiveKit waits its longest endpointing delay."""
        return self.live.deployment.take_floor_threshold

    async def supports_language(self, language: Any = None) -> bool:
        return language is None or str(language).lower() in _ENGLISH

    def sync(self, chat_ctx: llm.ChatContext, pending: llm.ChatMessage | None = None) -> None:
        """Observe every message of ``chat_ctx`` not seen before (except ``pending``)."""
        for item in chat_ctx.items:
            if not isinstance(item, llm.ChatMessage) or item.id in self._seen:
                continue
            if pending is not None and item.id == pending.id:
                continue
            self._seen.add(item.id)
            self._observe(item)

    def _observe(self, msg: llm.ChatMessage) -> LiveDecision | None:
        if msg.role == "assistant":
            self.live.agent_speech(False, text=msg.text_content or "")
            return None
        if msg.role != "user":
            return None
        speaker, text = message_speaker(msg)
        return self.live.utterance(Utterance(speaker, text))

    def decide(self, chat_ctx: llm.ChatContext, message: llm.ChatMessage) -> LiveDecision:
        """The decision after ``message`` (committed: it becomes part of the conversation)."""
        self.sync(chat_ctx, pending=message)
        self._seen.add(message.id)
        d = self._observe(message)
        if d is None:
            raise ValueError("only a user message can be decided on")
        self.last_decision = d
        return d

    async def predict_end_of_turn(
        self, chat_ctx: llm.ChatContext, *, timeout: float | None = None
    ) -> float:
        """P(speak) after the last user message, without committing it.

        LiveKit calls this repeatedly while the user's transcript grows; the last message is
        decided on a copy of the conversation so partial transcripts never enter the state.
        """
        msgs = [i for i in chat_ctx.items if isinstance(i, llm.ChatMessage)]
        last = msgs[-1] if msgs and msgs[-1].role == "user" else None
        self.sync(chat_ctx, pending=last)
        if last is None:
            return 1.0
        probe = self.live.fork()
        speaker, text = message_speaker(last)
        d = probe.utterance(Utterance(speaker, text))
        self.last_decision = d
        return 0.0 if d.p_speak is None or d.action is None else float(d.p_speak)


async def gate_reply(
    detector: PolylogueTurnDetector, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage
) -> LiveDecision:
    """For ``Agent.on_user_turn_completed``: raise ``StopResponse`` unless polylogue says SPEAK.

    The message stays in the chat context either way (the agent heard it); only the reply is
    skipped. Returns the decision when the agent should answer.
    """
    d = detector.decide(turn_ctx, new_message)
    if d.action is not Action.SPEAK:
        raise StopResponse()
    return d
