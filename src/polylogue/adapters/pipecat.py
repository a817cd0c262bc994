"""Pipecat: a multi-party gate that lets the LLM answer only when polylogue says SPEAK.

Put :class:`PolylogueGate` between speech-to-text and the user context aggregator, and its
tap after the output transport (where the spoken words and the bot-speaking frames pass)::

    gate = PolylogueGate(agent_name="Dave", participants=roster)
    pipeline = Pipeline([transport.input(), stt, gate, context_aggregator.user(), llm, tts,
                         transport.output(), gate.agent_speech_tap(),
                         context_aggregator.assistant()])

Speakers are keyed by ``TranscriptionFrame.user_id`` (one STT per user, or a diarising STT
that puts its speaker tag there). Each final transcription is decided on:

* SPEAK: it goes on, its text tagged ``"Name: text"``, and the LLM answers as usual;
* BACKCHANNEL: a ``TTSSpeakFrame`` with a short acknowledgement (``append_to_context=False``,
  ``text_type="polylogue-backchannel"``) goes to the TTS without the LLM, and the words enter
  the context as below;
* otherwise: an ``LLMMessagesAppendFrame(run_llm=False)`` carrying ``"Name: text"``, so the
  words enter the LLM context but no reply is generated.

A decision that cannot be made within ``decision_timeout_s`` (default 1 s) is SILENT.

Several agents in one room: one pipeline per agent, each gate given the same
:class:`~polylogue.adapters.room.SharedFloor` and its own seat
(``PolylogueGate(participants=roster, floor=floor, seat=SeatSpec("Ada", role="assistant"))``).
Each gate waits at every final transcription until every other seat has decided on it, and
acts on the arbitrated action: at most one agent answers. The other agents' voices reach a
gate as transcriptions whose ``user_id`` is the seat's id (or name).
Interim transcriptions pass untouched and never change polylogue's state; while the bot
speaks they give a barge-in decision (``on_barge_in``). :class:`BargeInTurnStartStrategy`
makes that decision the one that interrupts the bot: a "thank you" while it talks does not,
a real interruption does.

The agent's own speech is observed when it is actually spoken: ``BotStartedSpeakingFrame`` /
``BotStoppedSpeakingFrame`` (reaching the gate upstream from the output transport, and the
tap downstream) and the ``TTSTextFrame`` text the tap (or the gate) sees, in order
(:class:`polylogue.adapters.room.RoomTracker` holds words that arrive after the stop frame
until the next transcription). Times: a frame's ``metadata["time"]`` (seconds) when set, else
a transcription's ISO ``timestamp``; once a transcription has carried a time, frames without
one (the bot-speaking frames) get the clock (default: the wall clock, the STT timestamps'
base); in a stream whose transcriptions carry none, nothing is timed. An utterance starts at
its first interim.
"""

from __future__ import annotations

import copy
import time as _time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    CancelFrame,
    EndFrame,
    Frame,
    InterimTranscriptionFrame,
    LLMMessagesAppendFrame,
    TranscriptionFrame,
    TTSSpeakFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_start.base_user_turn_start_strategy import BaseUserTurnStartStrategy

from polylogue.adapters import start_live
from polylogue.adapters.room import (
    BACKCHANNEL_PHRASES,
    DECISION_TIMEOUT_S,
    Heard,
    RoomRole,
    RoomTracker,
    SharedFloor,
    log,
)
from polylogue.conversation import Participant
from polylogue.engine.deployment import Deployment
from polylogue.engine.live import Action, LiveDecision, Policy
from polylogue.engine.model import TurnTakingModel
from polylogue.engine.seats import DEFAULT_BRAKE, DEFAULT_FLOOR_POLICY, SeatSpec

#: ``text_type`` of the TTS text of a spoken backchannel (never observed as the agent's words).
BACKCHANNEL_TEXT_TYPE = "polylogue-backchannel"
_TAKEN = "polylogue_observed"


def frame_time(frame: Frame) -> float | None:
    """Seconds at which ``frame`` happened, when it says (see the module notes)."""
    t = frame.metadata.get("time") if isinstance(frame.metadata, dict) else None
    if isinstance(t, int | float) and not isinstance(t, bool):
        return float(t)
    stamp = getattr(frame, "timestamp", None)
    if isinstance(stamp, str) and stamp:
        try:
            return datetime.fromisoformat(stamp).timestamp()
        except ValueError:
            return None
    return None


class PolylogueGate(RoomRole, FrameProcessor):
    """Gates the LLM response on polylogue's multi-party turn-taking decision."""

    def __init__(
        self,
        agent_name: str = "assistant",
        participants: Iterable[Participant] = (),
        policy: Policy | None = None,
        model: TurnTakingModel | None = None,
        deployment: Deployment | None = None,
        *,
        role: str | None = None,
        audience: str | None = None,
        phrases: Sequence[str] = BACKCHANNEL_PHRASES,
        decision_timeout_s: float = DECISION_TIMEOUT_S,
        clock: Callable[[], float] = _time.time,
        roster_known: bool = True,
        floor: SharedFloor | None = None,
        seat: SeatSpec | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if floor is not None:
            # One agent of several in the room: its seat's rule, the room's floor.
            seat = seat or SeatSpec(agent_name)
            agent_name, deployment = seat.id, floor.deployment(seat)
            audience = seat.audience
        self.live, _ = start_live(
            agent_name, participants, policy, model, deployment, role, audience, roster_known
        )
        self.room = RoomTracker(self.live, phrases)
        #: the room's floor this gate's agent shares with others (None: it decides alone)
        self.floor = floor
        self.seat = None if floor is None or seat is None else floor.join(seat, self.live)
        self.decision_timeout_s = decision_timeout_s
        self.clock = clock
        self.decisions: list[dict[str, Any]] = []
        #: the same decisions as objects
        self.history: list[LiveDecision] = []
        #: first interim time per speaker since their last final (the utterance's start)
        self._started: dict[str, float] = {}
        #: a transcription carried a time: the stream is timed, untimed frames get the clock
        self._timed = False
        self._register_event_handler("on_decision")
        self._register_event_handler("on_barge_in")

    def participant_joined(self, identity: str, name: str | None = None) -> None:
        """Someone joined (the transport's participant id, the name people call them)."""
        self.room.join(identity, name)

    def participant_left(self, identity: str) -> None:
        self.room.leave(identity)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, BotStartedSpeakingFrame):
            self.bot_started(self.time_of(frame))
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self.bot_stopped(self.time_of(frame))
        elif isinstance(frame, InterimTranscriptionFrame):
            await self._interim(frame)
        elif isinstance(frame, TTSTextFrame) and direction == FrameDirection.DOWNSTREAM:
            self.tts_text(frame)  # a TTS placed before the gate: its words pass here in order
        elif isinstance(frame, TranscriptionFrame) and direction == FrameDirection.DOWNSTREAM:
            await self._final(frame, direction)
            return
        elif isinstance(frame, EndFrame | CancelFrame):
            self.room.agent_stopped(self.time_of(frame))
            self.room.flush_agent()  # the agent's last words, if nobody spoke after them
        await self.push_frame(frame, direction)

    def time_of(self, frame: Frame) -> float | None:
        """The frame's own time; else, once the stream is timed, the clock (Pipecat's
        bot-speaking frames carry none); else None (an untimed stream stays untimed)."""
        t = frame_time(frame)
        if t is not None:
            if isinstance(frame, TranscriptionFrame | InterimTranscriptionFrame):
                self._timed = True
            return t
        return self.clock() if self._timed else None

    # The bot-speaking frames reach the gate (upstream) and the tap (downstream): both report,
    # the room counts each start and stop once.
    def bot_started(self, t: float | None) -> None:
        if not self.room.agent_speaking:
            self.room.agent_started(t)

    def bot_stopped(self, t: float | None) -> None:
        self.room.agent_stopped(t)

    def tts_text(self, frame: TTSTextFrame) -> None:
        """The agent's spoken words, taken once (by the gate or the tap, whichever sees them
        first); a backchannel's text is not the agent's turn."""
        if frame.metadata.get(_TAKEN) or frame.text_type == BACKCHANNEL_TEXT_TYPE:
            return
        frame.metadata[_TAKEN] = True
        self.room.agent_words(frame.text)

    async def _interim(self, frame: InterimTranscriptionFrame) -> None:
        t = self.time_of(frame)
        speaker = frame.user_id or None
        if speaker is not None and t is not None:
            self._started.setdefault(speaker, t)
        barge = self.room.interim(speaker, frame.text, t)
        if barge is not None:
            await self._call_event_handler("on_barge_in", barge)

    async def _final(self, frame: TranscriptionFrame, direction: FrameDirection) -> None:
        end = self.time_of(frame)
        start = self._started.pop(frame.user_id, None) if frame.user_id else None
        unsure = frame.metadata.get("unsure", ()) if isinstance(frame.metadata, dict) else ()
        r = await self.room.final_within(
            frame.user_id or None, frame.text, start, end, self.decision_timeout_s, unsure
        )
        if r is None:  # dropped (no speaker): the words reach the context, unanswered
            await self._context_only(frame.text, direction)
            return
        heard, d = r
        if self.floor is not None and self.seat is not None:
            d = await self.floor.decide(self.seat, heard, d)  # waits for the other seats
        self.decisions.append(d.to_dict())
        self.history.append(d)
        log.info("decision %s after %s: %s (%s)", d.index, heard.name, d.action, d.reason)
        await self._call_event_handler("on_decision", d)
        await self._act(frame, heard, d, direction)

    async def _act(
        self, frame: TranscriptionFrame, heard: Heard, d: LiveDecision, direction: FrameDirection
    ) -> None:
        if d.action is Action.SPEAK:
            tagged = copy.copy(frame)  # the sender's frame stays as it was
            tagged.text = heard.tagged  # the LLM's context says who asked
            await self.push_frame(tagged, direction)
            return
        await self._context_only(heard.tagged, direction)
        if d.action is Action.BACKCHANNEL:
            phrase = self.room.backchannel_phrase()
            await self.push_frame(
                TTSSpeakFrame(phrase, append_to_context=False, text_type=BACKCHANNEL_TEXT_TYPE),
                direction,
            )

    async def _context_only(self, text: str, direction: FrameDirection) -> None:
        message: Any = {"role": "user", "content": text}
        await self.push_frame(LLMMessagesAppendFrame([message], run_llm=False), direction)

    def agent_speech_tap(self) -> AgentSpeechTap:
        """A processor for after the output transport: tells the gate what the agent said."""
        return AgentSpeechTap(self)


class AgentSpeechTap(FrameProcessor):
    """Hands the agent's spoken words (``TTSTextFrame``, backchannels excepted) and its
    speaking state to the gate as they pass."""

    def __init__(self, gate: PolylogueGate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, BotStartedSpeakingFrame):
            self.gate.bot_started(self.gate.time_of(frame))
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self.gate.bot_stopped(self.gate.time_of(frame))
        elif isinstance(frame, TTSTextFrame) and direction == FrameDirection.DOWNSTREAM:
            self.gate.tts_text(frame)
        await self.push_frame(frame, direction)


class BargeInTurnStartStrategy(BaseUserTurnStartStrategy):
    """A user-turn start strategy for Pipecat's user aggregator: while the bot speaks, a
    transcription starts the user's turn (and so interrupts the bot) only when polylogue's
    barge-in model says yield (the lexical rule if the model fails); while it is silent, any
    words do. Use it in place of the VAD start strategy::

        LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(
            start=[BargeInTurnStartStrategy(gate)]))
    """

    def __init__(self, gate: PolylogueGate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate
        self._bot_speaking = False
        #: (text, yielded) for every transcription heard while the bot spoke
        self.heard: list[tuple[str, bool]] = []

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        if isinstance(frame, BotStartedSpeakingFrame):
            self._bot_speaking = True
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._bot_speaking = False
        elif isinstance(frame, TranscriptionFrame | InterimTranscriptionFrame):
            if not frame.text.strip():
                return ProcessFrameResult.CONTINUE
            if self._bot_speaking:
                decision = self.gate.room.barge_in(frame.text)
                self.heard.append((frame.text, decision.yield_floor))
                if not decision.yield_floor:
                    return ProcessFrameResult.CONTINUE
            await self.trigger_user_turn_started()
            return ProcessFrameResult.STOP
        return ProcessFrameResult.CONTINUE


# ----------------------------------------------------------------------------- replay


def iso_time(t: float | None) -> str:
    """An ISO-8601 timestamp (UTC) for ``t`` seconds, as Pipecat's frames carry them."""
    from datetime import UTC

    return "" if t is None else datetime.fromtimestamp(t, UTC).isoformat()


class _Seen(FrameProcessor):
    """The end of a replay pipeline: wakes the replay when a frame it waits for arrives."""

    def __init__(self) -> None:
        super().__init__()
        import asyncio

        self.frames: asyncio.Queue[Frame] = asyncio.Queue()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM:
            self.frames.put_nowait(frame)
        await self.push_frame(frame, direction)

    async def wait_for(self, *kinds: Any) -> None:
        """Until one frame of each of ``kinds`` (classes or unions of them) has passed."""
        want = list(kinds)
        while want:
            f = await self.frames.get()
            for k in want:
                if isinstance(f, k):
                    want.remove(k)
                    break


async def replay_transcript(
    utterances: Iterable[Any],
    agent_name: str,
    participants: Iterable[Participant] = (),
    *,
    controls: Mapping[int, Callable[[PolylogueGate], Any]] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """Push a transcript through a real Pipecat pipeline (gate, tap) and return
    ``polylogue decide``-style rows. Humans' lines are an interim with the first word at the
    line's start and the final ``TranscriptionFrame`` at its end (``user_id`` = the speaker,
    ISO timestamps); the agent's lines are bot-speaking frames around their TTS text. Each
    line is queued once the previous one has passed the pipeline. ``controls`` maps a line's
    index to a run-time change made just before it (``lambda g: g.set_role("assistant")``);
    ``kwargs`` go to the gate.
    """
    import asyncio

    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineWorker
    from pipecat.workers.runner import WorkerRunner

    from polylogue.adapters.room import decision_row

    gate = PolylogueGate(agent_name, participants, **kwargs)
    seen = _Seen()
    task = PipelineWorker(Pipeline([gate, gate.agent_speech_tap(), seen]))
    ready = asyncio.Event()

    @task.event_handler("on_pipeline_started")
    async def _ready(_worker: Any, _frame: Frame) -> None:
        ready.set()

    pipeline_runner = WorkerRunner(handle_sigint=False)
    await pipeline_runner.add_workers(task)
    runner = asyncio.create_task(pipeline_runner.run())
    await ready.wait()  # processors drop frames that arrive before the StartFrame
    rows = []
    for i, u in enumerate(utterances):
        if controls and i in controls:
            controls[i](gate)
        if gate.live.speaker_id(u.speaker) == gate.room.agent_id:
            started, stopped = BotStartedSpeakingFrame(), BotStoppedSpeakingFrame()
            started.metadata["time"], stopped.metadata["time"] = u.start, u.end
            await task.queue_frames([started, TTSTextFrame(u.text, text_type="sentence")])
            await seen.wait_for(BotStartedSpeakingFrame, TTSTextFrame)
            await task.queue_frames([stopped])
            await seen.wait_for(BotStoppedSpeakingFrame)
            rows.append(decision_row(i, u.speaker, u.text, None))
            continue
        n = len(gate.history)
        first = u.text.split()[0] if u.text.split() else u.text
        await task.queue_frames(
            [
                InterimTranscriptionFrame(first, u.speaker, iso_time(u.start)),
                TranscriptionFrame(u.text, u.speaker, iso_time(u.end)),
            ]
        )
        await seen.wait_for(InterimTranscriptionFrame, TranscriptionFrame | LLMMessagesAppendFrame)
        d = gate.history[-1] if len(gate.history) > n else None
        rows.append(decision_row(i, u.speaker, u.text, d, "dropped"))
    await task.queue_frames([EndFrame()])
    await runner
    gate.room.close()
    return rows


async def replay_room(
    utterances: Iterable[Any],
    seats: Sequence[SeatSpec],
    people: Iterable[Participant] = (),
    *,
    model: TurnTakingModel | None = None,
    policy: str = DEFAULT_FLOOR_POLICY,
    brake: int = DEFAULT_BRAKE,
    timeout_s: float = 60.0,
) -> list[dict[str, Any]]:
    """Several agents in one room on Pipecat: one real pipeline (gate, tap) per agent seat,
    the gates sharing one :class:`~polylogue.adapters.room.SharedFloor`.

    Every line goes to every pipeline at once: a seat's own line as bot-speaking frames
    around its TTS text (before the others hear it), any other line (a person's, another
    agent's) as an interim and a final ``TranscriptionFrame``, as in
    :func:`replay_transcript`; each gate waits at the floor for the others and acts on the
    arbitrated action. ``timeout_s``: the floor's wait (generous: a replay's gates share one
    process). Returns one row per arbitrated line: ``{"index", "speaker", "arbitration",
    "actions"}`` (:meth:`Arbitration.to_dict`; ``actions``: what each gate did).
    """
    import asyncio

    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineWorker
    from pipecat.workers.runner import WorkerRunner

    people = list(people)
    floor = SharedFloor(people, model=model, policy=policy, brake=brake, timeout_s=timeout_s)
    everyone = [*people, *(s.participant() for s in seats)]
    gates: dict[str, tuple[PolylogueGate, _Seen, PipelineWorker]] = {}
    readies: list[asyncio.Event] = []
    pipeline_runner = WorkerRunner(handle_sigint=False)
    for spec in seats:
        gate = PolylogueGate(spec.id, everyone, floor=floor, seat=spec)
        seen = _Seen()
        task = PipelineWorker(Pipeline([gate, gate.agent_speech_tap(), seen]))
        ready = asyncio.Event()

        async def _ready(_worker: Any, _frame: Frame, ready: asyncio.Event = ready) -> None:
            ready.set()

        task.event_handler("on_pipeline_started")(_ready)
        readies.append(ready)
        await pipeline_runner.add_workers(task)
        gates[spec.id] = (gate, seen, task)
    runner = asyncio.create_task(pipeline_runner.run())
    # processors drop frames that arrive before the StartFrame
    await asyncio.gather(*(ready.wait() for ready in readies))

    async def hear(gate: PolylogueGate, seen: _Seen, task: PipelineWorker, u: Any) -> None:
        first = u.text.split()[0] if u.text.split() else u.text
        await task.queue_frames(
            [
                InterimTranscriptionFrame(first, u.speaker, iso_time(u.start)),
                TranscriptionFrame(u.text, u.speaker, iso_time(u.end)),
            ]
        )
        await seen.wait_for(InterimTranscriptionFrame, TranscriptionFrame | LLMMessagesAppendFrame)

    rows = []
    for i, u in enumerate(utterances):
        listening = []
        for _sid, (gate, seen, task) in gates.items():
            if gate.live.speaker_id(u.speaker) == gate.room.agent_id:
                started, stopped = BotStartedSpeakingFrame(), BotStoppedSpeakingFrame()
                started.metadata["time"], stopped.metadata["time"] = u.start, u.end
                await task.queue_frames([started, TTSTextFrame(u.text, text_type="sentence")])
                await seen.wait_for(BotStartedSpeakingFrame, TTSTextFrame)
                await task.queue_frames([stopped])
                await seen.wait_for(BotStoppedSpeakingFrame)
            else:
                listening.append((gate, seen, task))
        n = len(floor.decisions)
        await asyncio.gather(*(hear(g, s, t, u) for g, s, t in listening))
        if len(floor.decisions) > n:
            rd = floor.decisions[-1]
            acted = {g.seat: _value(g.history[-1].action) for g, _, _ in listening if g.history}
            rows.append(
                {
                    "index": i,
                    "speaker": u.speaker,
                    "arbitration": rd.arbitration.to_dict(),
                    "actions": acted,
                }
            )
    for _, _, task in gates.values():
        await task.queue_frames([EndFrame()])
    await runner
    for gate, _, _ in gates.values():
        gate.room.close()
    return rows


def _value(a: Action | None) -> str | None:
    return None if a is None else a.value
