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
``"Name: text"`` prefix naming a known participant (``"Dave, one thing: ..."`` is not a
speaker); assistant messages are the agent's own speech.

For a real room, :class:`MultiPartySession` hears every remote participant (one STT stream
per participant track, or one diarised stream through LiveKit's ``MultiSpeakerAdapter``),
tags each final transcript with the participant's identity and name, and drives the
``AgentSession``: ``generate_reply`` on SPEAK, ``say(..., add_to_chat_ctx=False)`` for a
backchannel, ``interrupt()`` on a real barge-in, the tagged words into the chat context
otherwise.

Several agents in one room: give each agent's ``MultiPartySession`` (or turn detector) the
same :class:`~polylogue.adapters.room.SharedFloor` and its own seat
(``MultiPartySession(..., floor=floor, seat=SeatSpec("Ada", role="assistant"))``); each waits
at every final transcript for the other agents' decisions and acts on the arbitrated one, so
at most one agent answers. The other agents' voices are participants whose identity is the
seat's id (or name).

    detector = PolylogueTurnDetector(agent_name="Dave", participants=roster)
    session = AgentSession(turn_detection=detector, ...)

    class Assistant(Agent):
        async def on_user_turn_completed(self, turn_ctx, new_message):
            await gate_reply(detector, turn_ctx, new_message)
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from livekit.agents import StopResponse, llm, stt

from polylogue.adapters import start_live
from polylogue.adapters.room import (
    DECISION_TIMEOUT_S,
    Heard,
    RoomRole,
    RoomTracker,
    SharedFloor,
    decision_row,
    log,
)
from polylogue.conversation import Participant, Utterance
from polylogue.engine.deployment import Deployment
from polylogue.engine.live import Action, LiveDecision, Policy
from polylogue.engine.model import TurnTakingModel
from polylogue.engine.seats import DEFAULT_BRAKE, DEFAULT_FLOOR_POLICY, SeatSpec

SPEAKER_KEYS = ("speaker", "speaker_id", "participant_identity")
#: LiveKit's languages polylogue's English model is meant for.
_ENGLISH = {"en", "en-us", "en-gb", "en-au", "en-ca", "en-in", "english"}


def message_speaker(
    msg: llm.ChatMessage, room: RoomTracker, default: str = "user"
) -> tuple[str, str]:
    """(speaker, text) of a user message: ``extra`` keys first, then a ``Name:`` prefix that
    names a known participant of ``room``; else ``default``."""
    text = msg.text_content or ""
    for key in SPEAKER_KEYS:
        value = msg.extra.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip(), text
    return room.split_prefix(text) or (default, text)


class PolylogueTurnDetector(RoomRole):
    """LiveKit turn detector: the end-of-turn probability is P(the agent should speak now)."""

    def __init__(
        self,
        agent_name: str = "assistant",
        participants: Iterable[Participant] = (),
        policy: Policy | None = None,
        model: TurnTakingModel | None = None,
        deployment: Deployment | None = None,
        role: str | None = None,
        audience: str | None = None,
        *,
        floor: SharedFloor | None = None,
        seat: SeatSpec | None = None,
    ) -> None:
        if floor is not None:
            seat = seat or SeatSpec(agent_name)
            agent_name, deployment, audience = seat.id, floor.deployment(seat), seat.audience
        self.live, self._model = start_live(
            agent_name, participants, policy, model, deployment, role, audience
        )
        self.room = RoomTracker(self.live)
        #: the room's floor this agent shares with others (None: it decides alone)
        self.floor = floor
        self.seat = None if floor is None or seat is None else floor.join(seat, self.live)
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
        speaker, text = message_speaker(msg, self.room)
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
        speaker, text = message_speaker(last, self.room)
        d = probe.utterance(Utterance(speaker, text))
        self.last_decision = d
        return 0.0 if d.p_speak is None or d.action is None else float(d.p_speak)


async def gate_reply(
    detector: PolylogueTurnDetector, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage
) -> LiveDecision:
    """For ``Agent.on_user_turn_completed``: raise ``StopResponse`` unless polylogue says SPEAK.

    The message stays in the chat context either way (the agent heard it); only the reply is
    skipped. Returns the decision when the agent should answer. A detector on a
    :class:`~polylogue.adapters.room.SharedFloor` waits here for the room's other agents and
    answers only when the floor is its own.
    """
    d = detector.decide(turn_ctx, new_message)
    if detector.floor is not None and detector.seat is not None:
        speaker, text = message_speaker(new_message, detector.room)
        pid = detector.live.speaker_id(speaker)
        heard = Heard(pid, detector.room.name_of(pid), text)
        d = await detector.floor.decide(detector.seat, heard, d)
        detector.last_decision = d
    if d.action is not Action.SPEAK:
        raise StopResponse()
    return d


# ----------------------------------------------------------------------------- a real room

DecisionHook = Callable[[Heard, LiveDecision], Any]


def speech_times(
    start_time: float, end_time: float, origin: float
) -> tuple[float | None, float | None] | str:
    """Room times of an STT event, or what is wrong with them (logged, the event dropped).

    An event without times (``end_time`` 0) is untimed. A time that is not a finite number,
    negative, or an end before its start would stop the live conversation's clock or send
    it backwards: the event is dropped instead of raising inside the STT loop.
    """
    values = (start_time, end_time, origin)
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
        return f"times start={start_time!r} end={end_time!r} origin={origin!r} not finite"
    if end_time == 0.0:
        return None, None
    if start_time < 0 or end_time < start_time:
        return f"times start={start_time!r} end={end_time!r}: negative or reversed"
    return origin + start_time, origin + end_time


class MultiPartySession(RoomRole):
    """Every remote participant of a LiveKit room heard, one polylogue conversation decided.

    Start the ``AgentSession`` with its own audio input off
    (``room_options=RoomOptions(audio_input=False)``): this object listens instead, so
    LiveKit's voice-activity interruption never cuts the agent off on a "thank you"; the
    barge-in model decides (yield: ``session.interrupt()``), the lexical rule when it fails.

    ``speakers`` maps a diarising STT's speaker ids ("S1") to participant identities; an id
    it lacks is used as the identity. Every decision is logged (INFO, ``polylogue.adapters``)
    and handed to ``on_decision(heard, decision)`` when set.
    """

    def __init__(
        self,
        agent_name: str,
        participants: Iterable[Participant] = (),
        *,
        session: Any = None,
        policy: Policy | None = None,
        model: TurnTakingModel | None = None,
        deployment: Deployment | None = None,
        role: str | None = None,
        audience: str | None = None,
        speakers: Mapping[str, str] | None = None,
        decision_timeout_s: float = DECISION_TIMEOUT_S,
        on_decision: DecisionHook | None = None,
        roster_known: bool = True,
        floor: SharedFloor | None = None,
        seat: SeatSpec | None = None,
    ) -> None:
        if floor is not None:
            seat = seat or SeatSpec(agent_name)
            agent_name, deployment, audience = seat.id, floor.deployment(seat), seat.audience
        self.live, _ = start_live(
            agent_name, participants, policy, model, deployment, role, audience, roster_known
        )
        self.room = RoomTracker(self.live)
        #: the room's floor this agent shares with others (None: it decides alone)
        self.floor = floor
        self.seat = None if floor is None or seat is None else floor.join(seat, self.live)
        self.speakers = dict(speakers or {})
        self.decision_timeout_s = decision_timeout_s
        self.on_decision = on_decision
        #: What the session was asked to do, in order: ("reply" | "backchannel" |
        #: "context" | "interrupt", text).
        self.actions: list[tuple[str, str]] = []
        self.session: Any = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stt: stt.STT | None = None
        self._mixed: str | None = None
        if session is not None:
            self.attach(session)

    # ----------------------------------------------------------------- the AgentSession

    def attach(self, session: Any) -> None:
        """Follow the session's own speech: its state (speaking or not) and its words."""
        self.session = session

        @session.on("agent_state_changed")
        def _state(ev: Any) -> None:
            if ev.new_state == "speaking":
                self.room.agent_started(ev.created_at)
            elif ev.old_state == "speaking":
                self.room.agent_stopped(ev.created_at)

        @session.on("conversation_item_added")
        def _item(ev: Any) -> None:
            item = ev.item
            if isinstance(item, llm.ChatMessage) and item.role == "assistant":
                self.room.agent_words(item.text_content or "")

    # ----------------------------------------------------------------- people

    def participant_joined(self, participant: Any) -> None:
        """An ``rtc.RemoteParticipant`` (or anything with ``identity`` and ``name``)."""
        self.room.join(participant.identity, getattr(participant, "name", None) or None)

    def participant_left(self, participant: Any) -> None:
        self.room.leave(getattr(participant, "identity", participant))

    # ----------------------------------------------------------------- transcripts

    def _speaker(self, identity: str | None, data: stt.SpeechData | None) -> str | None:
        if identity:
            return identity
        sid = None if data is None else data.speaker_id
        return None if not sid else self.speakers.get(sid, sid)

    async def on_speech_event(
        self, ev: stt.SpeechEvent, identity: str | None = None, origin: float = 0.0
    ) -> LiveDecision | None:
        """One STT event: ``identity`` for a participant's own stream (None: a diarised
        stream, the speaker read from ``SpeechData.speaker_id``); ``origin`` is the room time
        (seconds) at which that stream's audio started."""
        data = ev.alternatives[0] if ev.alternatives else None
        if data is None or not data.text.strip():
            return None
        speaker = self._speaker(identity, data)
        times = speech_times(data.start_time, data.end_time, origin)
        if isinstance(times, str):  # the service answers these with an error result
            log.warning("STT event from %r dropped: %s", speaker, times)
            return None
        start, end = times
        if ev.type == stt.SpeechEventType.INTERIM_TRANSCRIPT:
            barge = self.room.interim(speaker, data.text, end)
            if barge is not None and barge.yield_floor:
                await self._interrupt(data.text)
            return None
        if ev.type != stt.SpeechEventType.FINAL_TRANSCRIPT:
            return None
        r = await self.room.final_within(
            speaker, data.text, start, end, timeout_s=self.decision_timeout_s
        )
        if r is None:
            return None
        heard, d = r
        if self.floor is not None and self.seat is not None:
            d = await self.floor.decide(self.seat, heard, d)  # waits for the other seats
        if d.barge_in is not None and d.barge_in.yield_floor:
            await self._interrupt(heard.text)
        await self._act(heard, d)
        return d

    async def _interrupt(self, text: str) -> None:
        if not self.room.agent_speaking or self.room.observer:
            return
        self.actions.append(("interrupt", text))
        if self.session is not None:
            try:
                await self.session.interrupt()
            except RuntimeError as e:  # the speech playing disallows interruptions
                log.info("interrupt refused: %s", e)

    async def _act(self, heard: Heard, d: LiveDecision) -> None:
        log.info(
            "decision %s after %s: %s (p_speak=%s, %s)",
            d.index,
            heard.name,
            d.action,
            d.p_speak,
            d.reason,
        )
        if self.on_decision is not None:
            self.on_decision(heard, d)
        msg = llm.ChatMessage(
            role="user",
            content=[heard.tagged],
            extra={"speaker": heard.speaker, "speaker_name": heard.name},
        )
        if d.action is Action.SPEAK:
            self.actions.append(("reply", heard.tagged))
            if self.session is not None:
                self.session.generate_reply(user_input=msg)
            return
        self.actions.append(("context", heard.tagged))
        await self._add_to_context(msg)
        if d.action is Action.BACKCHANNEL:
            phrase = self.room.backchannel_phrase()
            self.actions.append(("backchannel", phrase))
            if self.session is not None:
                # Spoken through the TTS, no LLM call, and kept out of the chat context.
                self.session.say(phrase, add_to_chat_ctx=False)

    async def _add_to_context(self, msg: llm.ChatMessage) -> None:
        agent = None if self.session is None else self.session.current_agent
        if agent is None:
            return
        ctx = agent.chat_ctx.copy()
        ctx.insert(msg)
        await agent.update_chat_ctx(ctx)

    # ----------------------------------------------------------------- room wiring

    def start(self, room: Any, stt_engine: stt.STT, *, mixed_track_of: str | None = None) -> None:
        """Hear ``room`` (an ``rtc.Room``): follow joins and leaves and run ``stt_engine`` on
        every remote audio track. ``mixed_track_of``: the identity whose one track carries
        several voices, transcribed through a diarising STT (wrap it in
        ``MultiSpeakerAdapter(stt=..., detect_primary_speaker=False)``)."""
        from livekit import rtc

        self._stt = stt_engine
        self._mixed = mixed_track_of
        for p in room.remote_participants.values():
            if p.identity != mixed_track_of:
                self.participant_joined(p)
        room.on("participant_connected", self.participant_joined)
        room.on("participant_disconnected", self.participant_left)
        room.on("track_subscribed", self._on_track)
        for p in room.remote_participants.values():
            for pub in p.track_publications.values():
                if pub.track is not None and pub.kind == rtc.TrackKind.KIND_AUDIO:
                    self._on_track(pub.track, pub, p)

    def _on_track(self, track: Any, publication: Any, participant: Any) -> None:
        from livekit import rtc

        if track.kind != rtc.TrackKind.KIND_AUDIO:
            return
        identity = None if participant.identity == self._mixed else participant.identity
        task = asyncio.create_task(self._listen(track, identity))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _listen(self, track: Any, identity: str | None) -> None:
        from livekit import rtc

        assert self._stt is not None
        stream = self._stt.stream()
        audio = rtc.AudioStream.from_track(track=track, sample_rate=16000)
        origin = time.time()

        async def push() -> None:
            async for ev in audio:
                stream.push_frame(ev.frame)
            stream.end_input()

        pusher = asyncio.create_task(push())
        try:
            async for ev in stream:
                try:
                    await self.on_speech_event(ev, identity, origin)
                except Exception:  # one bad event never ends the agent's session
                    log.exception("polylogue: STT event for %s failed", identity)
        finally:
            pusher.cancel()
            await stream.aclose()
            await audio.aclose()


# ----------------------------------------------------------------------------- replay


class TranscriptSTT(stt.STT):
    """A diarising streaming STT that "recognises" a transcript: each flush of its stream
    emits the next line as speaker-labelled ``SpeechEvent`` s (an interim with the first
    word, then the final with the line's times). For checking a setup offline against
    ``polylogue decide``; wrap it in ``MultiSpeakerAdapter`` like a real diarising STT."""

    def __init__(self, lines: Iterable[Utterance]) -> None:
        super().__init__(
            capabilities=stt.STTCapabilities(
                streaming=True, interim_results=True, diarization=True, offline_recognize=False
            )
        )
        self.lines = list(lines)

    @property
    def model(self) -> str:
        return "transcript"

    @property
    def provider(self) -> str:
        return "polylogue"

    async def _recognize_impl(self, buffer: Any, **_: Any) -> stt.SpeechEvent:
        raise NotImplementedError("TranscriptSTT only streams")

    def stream(self, **kwargs: Any) -> stt.RecognizeStream:
        from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS

        return _TranscriptStream(self, kwargs.get("conn_options", DEFAULT_API_CONNECT_OPTIONS))


class _TranscriptStream(stt.RecognizeStream):
    def __init__(self, engine: TranscriptSTT, conn_options: Any) -> None:
        super().__init__(stt=engine, conn_options=conn_options)
        self._lines = iter(engine.lines)

    async def _run(self) -> None:
        from livekit.agents.language import LanguageCode

        en = LanguageCode("en")
        async for item in self._input_ch:
            if not isinstance(item, self._FlushSentinel):
                continue
            u = next(self._lines, None)
            if u is None:
                continue
            start = 0.0 if u.start is None else u.start
            end = 0.0 if u.end is None else u.end
            first = u.text.split()[0] if u.text.split() else u.text
            for kind, text in (
                (stt.SpeechEventType.INTERIM_TRANSCRIPT, first),
                (stt.SpeechEventType.FINAL_TRANSCRIPT, u.text),
            ):
                data = stt.SpeechData(en, text, start, end, 1.0, speaker_id=u.speaker)
                self._event_ch.send_nowait(stt.SpeechEvent(kind, alternatives=[data]))


async def replay_transcript(
    utterances: Iterable[Utterance],
    agent_name: str,
    participants: Iterable[Participant] = (),
    *,
    controls: Mapping[int, Callable[[MultiPartySession], Any]] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """Push a transcript through LiveKit's objects and return ``polylogue decide``-style rows.

    The humans' lines come out of a ``MultiSpeakerAdapter`` over :class:`TranscriptSTT` (one
    audio frame and a flush per line) into a :class:`MultiPartySession`; the agent's lines
    are its own speech, with the transcript's times. ``controls`` maps a line's index to a
    run-time change made just before it (``lambda s: s.set_role("assistant")``); ``kwargs``
    go to the session.
    """
    from livekit import rtc

    lines = list(utterances)
    mp = MultiPartySession(agent_name, participants, **kwargs)
    agent = mp.room.agent_id
    humans = [u for u in lines if mp.live.speaker_id(u.speaker) != agent]
    adapter = stt.MultiSpeakerAdapter(stt=TranscriptSTT(humans), detect_primary_speaker=False)
    stream = adapter.stream()
    silence = rtc.AudioFrame(b"\0\0" * 160, 16000, 1, 160)
    rows = []
    try:
        for i, u in enumerate(lines):
            if controls and i in controls:
                controls[i](mp)
            if mp.live.speaker_id(u.speaker) == agent:
                mp.room.agent_said(u.text, u.start, u.end)
                rows.append(decision_row(i, u.speaker, u.text, None))
                continue
            stream.push_frame(silence)
            stream.flush()
            d = None
            while True:
                ev = await stream.__anext__()
                d = await mp.on_speech_event(ev)
                if ev.type == stt.SpeechEventType.FINAL_TRANSCRIPT:
                    break
            rows.append(decision_row(i, u.speaker, u.text, d, "dropped"))
    finally:
        stream.end_input()
        await stream.aclose()
        mp.room.close()
    return rows


async def replay_room(
    utterances: Iterable[Utterance],
    seats: Sequence[SeatSpec],
    people: Iterable[Participant] = (),
    *,
    model: TurnTakingModel | None = None,
    policy: str = DEFAULT_FLOOR_POLICY,
    brake: int = DEFAULT_BRAKE,
    timeout_s: float = 60.0,
) -> list[dict[str, Any]]:
    """Several agents in one LiveKit room: one :class:`MultiPartySession` per agent seat, each
    hearing the room through its own ``MultiSpeakerAdapter`` stream (as in
    :func:`replay_transcript`), all sharing one :class:`~polylogue.adapters.room.SharedFloor`.

    A seat's own line is its own speech (observed first); every other seat hears the line at
    once and waits at the floor for the others. ``timeout_s``: the floor's wait. Returns one
    row per arbitrated line: ``{"index", "speaker", "arbitration", "actions"}``
    (:meth:`Arbitration.to_dict`; ``actions``: what each session did).
    """
    from livekit import rtc

    lines = list(utterances)
    people = list(people)
    floor = SharedFloor(people, model=model, policy=policy, brake=brake, timeout_s=timeout_s)
    everyone = [*people, *(s.participant() for s in seats)]
    silence = rtc.AudioFrame(b"\0\0" * 160, 16000, 1, 160)
    sessions: dict[str, tuple[MultiPartySession, Any]] = {}
    for spec in seats:
        mp = MultiPartySession(spec.id, everyone, floor=floor, seat=spec)
        mine = spec.participant().id
        heard = [u for u in lines if mp.live.speaker_id(u.speaker) != mine]
        adapter = stt.MultiSpeakerAdapter(stt=TranscriptSTT(heard), detect_primary_speaker=False)
        sessions[spec.id] = (mp, adapter.stream())

    async def hear(mp: MultiPartySession, stream: Any) -> LiveDecision | None:
        stream.push_frame(silence)
        stream.flush()
        while True:
            ev = await stream.__anext__()
            d = await mp.on_speech_event(ev)
            if ev.type == stt.SpeechEventType.FINAL_TRANSCRIPT:
                return d

    rows = []
    try:
        for i, u in enumerate(lines):
            listening = []
            for mp, stream in sessions.values():
                if mp.live.speaker_id(u.speaker) == mp.room.agent_id:
                    mp.room.agent_said(u.text, u.start, u.end)
                else:
                    listening.append((mp, stream))
            n = len(floor.decisions)
            got = await asyncio.gather(*(hear(mp, stream) for mp, stream in listening))
            if len(floor.decisions) > n:
                acted = {
                    mp.seat: None if d is None or d.action is None else d.action.value
                    for (mp, _), d in zip(listening, got, strict=True)
                }
                rows.append(
                    {
                        "index": i,
                        "speaker": u.speaker,
                        "arbitration": floor.decisions[-1].arbitration.to_dict(),
                        "actions": acted,
                    }
                )
    finally:
        for mp, stream in sessions.values():
            stream.end_input()
            await stream.aclose()
            mp.room.close()
    return rows
