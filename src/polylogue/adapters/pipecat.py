"""Pipecat: a frame processor that lets the LLM answer only when polylogue says SPEAK.

Put :class:`PolylogueGate` between speech-to-text and the user context aggregator::

    pipeline = Pipeline([transport.input(), stt, PolylogueGate(agent_name="Dave"),
                         context_aggregator.user(), llm, tts, transport.output(),
                         context_aggregator.assistant()])

Each final ``TranscriptionFrame`` (speaker = its ``user_id``) is decided on. When the agent
should speak the transcription goes on unchanged and the LLM answers as usual; otherwise it
is replaced by an ``LLMMessagesAppendFrame(run_llm=False)`` carrying ``"speaker: text"``, so
the words still enter the LLM context but no reply is generated. Interim transcriptions pass
through untouched and never change polylogue's state; while the bot speaks they produce a
barge-in decision (yield / continue). ``BotStartedSpeakingFrame``/``BotStoppedSpeakingFrame``
keep track of the agent's own speech; to let polylogue hear the agent's words too, put
``gate.agent_speech_tap()`` after the TTS service (it collects ``TTSTextFrame`` text and hands
it over when the bot stops speaking). Decisions are reported through the ``on_decision`` and
``on_barge_in`` event handlers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InterimTranscriptionFrame,
    LLMMessagesAppendFrame,
    TranscriptionFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from polylogue.adapters import start_live
from polylogue.conversation import Participant, Utterance
from polylogue.engine.deployment import Deployment
from polylogue.engine.live import Action, Policy
from polylogue.engine.model import TurnTakingModel


class PolylogueGate(FrameProcessor):
    """Gates the LLM response on polylogue's multi-party turn-taking decision."""

    def __init__(
        self,
        agent_name: str = "assistant",
        participants: Iterable[Participant] = (),
        policy: Policy | None = None,
        model: TurnTakingModel | None = None,
        deployment: Deployment | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.live, _ = start_live(agent_name, participants, policy, model, deployment)
        self.decisions: list[dict[str, Any]] = []
        self._register_event_handler("on_decision")
        self._register_event_handler("on_barge_in")

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, BotStartedSpeakingFrame):
            self.live.agent_speech(True)
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self.live.agent_speech(False)
        elif isinstance(frame, InterimTranscriptionFrame):
            barge = self.live.interim_utterance(frame.user_id or "user", frame.text)
            if barge is not None:
                await self._call_event_handler("on_barge_in", barge)
        elif isinstance(frame, TranscriptionFrame) and direction == FrameDirection.DOWNSTREAM:
            speaker = frame.user_id or "user"
            d = self.live.utterance(Utterance(speaker, frame.text))
            self.decisions.append(d.to_dict())
            await self._call_event_handler("on_decision", d)
            if d.action is not Action.SPEAK:
                message: Any = {"role": "user", "content": f"{speaker}: {frame.text}"}
                await self.push_frame(LLMMessagesAppendFrame([message], run_llm=False), direction)
                return
        await self.push_frame(frame, direction)

    def agent_speech_tap(self) -> AgentSpeechTap:
        """A processor for after the TTS: tells the gate what the agent said."""
        return AgentSpeechTap(self)


class AgentSpeechTap(FrameProcessor):
    """Collects the agent's spoken text (``TTSTextFrame``) and observes it when the bot stops."""

    def __init__(self, gate: PolylogueGate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate
        self._words: list[str] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSTextFrame) and direction == FrameDirection.DOWNSTREAM:
            self._words.append(frame.text)
        elif isinstance(frame, BotStoppedSpeakingFrame) and self._words:
            self.gate.live.agent_speech(False, text=" ".join(self._words))
            self._words.clear()
        await self.push_frame(frame, direction)
