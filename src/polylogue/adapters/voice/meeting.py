"""A voice meeting run through a real Pipecat pipeline.

:func:`run_voice_meeting` speaks a transcript's human lines with one voice per participant
(piper or espeak-ng), each on its own track, in a :class:`~polylogue.adapters.voice.audio.Room`
(background noise at a given SNR, the neighbours' bleed, overlapping hand-offs), through Silero
VAD → a recognizer per participant (one branch of a ``ParallelPipeline`` each) →
:class:`~polylogue.adapters.pipecat.PolylogueGate` → a scripted stand-in for the LLM → the
agent's TTS → an output stage standing in for the transport (bot-speaking frames) → the gate's
tap.
"""

from __future__ import annotations

import asyncio
import time
import wave
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:
    from pipecat.frames.frames import (
        BotStartedSpeakingFrame,
        BotStoppedSpeakingFrame,
        DataFrame,
        EndFrame,
        Frame,
        InputAudioRawFrame,
        TranscriptionFrame,
        TTSAudioRawFrame,
        TTSSpeakFrame,
        TTSStartedFrame,
        TTSStoppedFrame,
        TTSTextFrame,
        UserAudioRawFrame,
    )
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError(
        "polylogue.adapters.voice's meeting needs Pipecat: pip install 'polylogue[voice]'"
    ) from e

from polylogue.adapters.voice.audio import (
    SAMPLE_RATE,
    Clip,
    Room,
    VoiceError,
    speech_power,
    to_int16,
)
from polylogue.adapters.voice.recognition import Recognizer, make_recognizer
from polylogue.adapters.voice.services import RecognizerSTTService, Segment, VoiceTTSService
from polylogue.adapters.voice.synthesis import (
    ESPEAK_TIMEOUT_S,
    EspeakVoice,
    Voice,
    as_voice,
    default_voices,
    unspeakable,
)
from polylogue.conversation import Conversation, Participant


def line_error(e: VoiceError, index: int, speaker: str, text: str) -> VoiceError:
    """``e`` naming the transcript line it happened on: the utterance (1-based), its speaker
    and its text."""
    shown = text if len(text) <= 60 else text[:57] + "..."
    return VoiceError(f"utterance {index + 1} ({speaker}: {shown!r}): {e}")


def check_speakable(texts: Sequence[tuple[int, str, str]]) -> None:
    """Every ``(index, speaker, text)`` is in a script an English voice speaks, else a
    :class:`VoiceError` naming the first line that is not (before anything is spoken)."""
    for i, who, text in texts:
        bad = unspeakable(text)
        if bad is not None:
            raise line_error(
                VoiceError(f"{bad!r} is in a script the English voices cannot speak"),
                i,
                who,
                text,
            )


# ----------------------------------------------------------------------------- a voice meeting


class MeetingClock:
    """Meeting time in seconds: the audio fed so far, or, while the feeder waits for the
    pipeline, the time it stopped at plus the wall time since (the meeting goes on in real
    time while the machine recognises and decides)."""

    def __init__(self) -> None:
        self.fed = 0.0
        self._wait_from: tuple[float, float] | None = None

    def now(self) -> float:
        if self._wait_from is None:
            return self.fed
        audio, wall = self._wait_from
        return audio + time.perf_counter() - wall

    def wait_from(self, audio: float, wall: float) -> None:
        self._wait_from = (audio, wall)

    def feed_from(self, t: float) -> None:
        self.fed = max(self.fed, t)
        self._wait_from = None


class _TrackFilter(FrameProcessor):
    """Lets only one participant's audio into a branch."""

    def __init__(self, user_id: str) -> None:
        super().__init__()
        self.user_id = user_id

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InputAudioRawFrame) and (
            not isinstance(frame, UserAudioRawFrame) or frame.user_id != self.user_id
        ):
            return
        await self.push_frame(frame, direction)


@dataclass
class _Arrival:
    segment: Segment | None
    wall: float


class _Arrivals(FrameProcessor):
    """Before the gate: notes when each transcription arrives (for the decision time)."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: deque[_Arrival] = deque()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TranscriptionFrame) and direction == FrameDirection.DOWNSTREAM:
            seg = frame.metadata.get("segment")
            self.queue.append(
                _Arrival(seg if isinstance(seg, Segment) else None, time.perf_counter())
            )
        await self.push_frame(frame, direction)


class ScriptedReplies(FrameProcessor):
    """Stands in for the LLM: a transcription the gate lets through (SPEAK) is answered with
    ``reply()`` (None: no answer) as a ``TTSSpeakFrame``."""

    def __init__(self, reply: Callable[[], str | None]) -> None:
        super().__init__()
        self.reply = reply

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TranscriptionFrame) and direction == FrameDirection.DOWNSTREAM:
            text = self.reply()
            if text:
                await self.push_frame(TTSSpeakFrame(text), direction)
            return
        await self.push_frame(frame, direction)


class AgentOutput(FrameProcessor):
    """Stands in for the output transport: the TTS audio goes into the meeting's mix at the
    meeting clock, framed by bot-speaking frames (sent both ways, times in ``metadata``)."""

    def __init__(self, clock: MeetingClock, agent: str) -> None:
        super().__init__()
        self.clock = clock
        self.agent = agent
        self.clips: list[Clip] = []
        self.free_at = 0.0
        self._current: Clip | None = None
        self._chunks: list[bytes] = []

    @property
    def speaking(self) -> bool:
        return self._current is not None

    async def _bot(self, cls: type[Frame], t: float) -> None:
        for d in (FrameDirection.UPSTREAM, FrameDirection.DOWNSTREAM):
            f = cls()
            f.metadata["time"] = t
            await self.push_frame(f, d)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSStartedFrame):
            start = max(self.clock.now(), self.free_at)
            self._current = Clip(start, np.zeros(0, np.int16), self.agent)
            self._chunks = []
            await self._bot(BotStartedSpeakingFrame, start)
        elif isinstance(frame, TTSAudioRawFrame):
            self._chunks.append(frame.audio)
            return
        elif isinstance(frame, TTSTextFrame) and direction == FrameDirection.DOWNSTREAM:
            clip = self._current or (self.clips[-1] if self.clips else None)
            if clip is not None:
                clip.text = f"{clip.text} {frame.text}".strip()
        elif isinstance(frame, TTSStoppedFrame) and self._current is not None:
            clip = self._current
            clip.samples = np.frombuffer(b"".join(self._chunks), dtype=np.int16)
            self.clips.append(clip)
            self.free_at = clip.start + len(clip.samples) / SAMPLE_RATE
            self._current = None
            await self.push_frame(frame, direction)
            await self._bot(BotStoppedSpeakingFrame, self.free_at)
            return
        await self.push_frame(frame, direction)


class _Marker(DataFrame):
    """Queued after a turn's audio: when it reaches the end, all before it has passed."""


class _Sink(FrameProcessor):
    def __init__(self) -> None:
        super().__init__()
        self.markers: asyncio.Queue[_Marker] = asyncio.Queue()
        self.spoken: list[tuple[str, str]] = []  # (text_type, text) of the agent's TTS text

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, _Marker):
            self.markers.put_nowait(frame)
            return
        if isinstance(frame, TTSTextFrame) and direction == FrameDirection.DOWNSTREAM:
            self.spoken.append((frame.text_type or "", frame.text))
        await self.push_frame(frame, direction)


@dataclass
class VoiceRow:
    """One recognised segment and the decision on it (see ``decisions.jsonl``)."""

    speaker: str
    reference: str
    recognised: str
    action: str | None
    p_speak: float | None
    reason: str
    start: float
    end: float
    latency_ms: float
    vad_wait_ms: float
    recognition_ms: float
    decision_ms: float
    reference_index: list[int] = field(default_factory=list)
    #: the words the recognizer was unsure of, when it gave word confidences
    unsure: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        d = asdict(self)
        if self.unsure is None:
            del d["unsure"]
        for k in ("latency_ms", "vad_wait_ms", "recognition_ms", "decision_ms"):
            d[k] = round(d[k], 1)
        d["p_speak"] = None if self.p_speak is None else round(self.p_speak, 4)
        d["start"], d["end"] = round(self.start, 3), round(self.end, 3)
        return d


@dataclass
class VoiceMeeting:
    rows: list[VoiceRow]
    #: the mixed meeting (16 kHz mono int16)
    mix: np.ndarray
    #: the agent's spoken clips, in order (text, start seconds)
    agent_said: list[tuple[str, float]]
    #: (utterance index, speaker, text, start, end) of every human line as spoken
    timeline: list[tuple[int, str, str, float, float]]
    #: the gate's decision dicts, in order
    decisions: list[dict[str, Any]]
    #: the recognizer's words added to its dictionary (word → phones)
    added_words: dict[str, list[str]]
    #: (speaker, text) of every utterance the gate observed, the agent's included, in order
    observed: list[tuple[str, str]] = field(default_factory=list)
    #: the recognizer that heard the meeting (``Recognizer.name``)
    recognizer: str = ""
    #: the participants' voices (``Voice.name``)
    voices: list[str] = field(default_factory=list)
    #: a person starting while the agent spoke: the barge-in model's decision on what the
    #: recognizer heard of their first second (``barge_ins.jsonl``)
    barge_ins: list[dict[str, Any]] = field(default_factory=list)

    def write_wav(self, path: Any) -> None:
        with wave.open(str(path), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(SAMPLE_RATE)
            w.writeframes(self.mix.astype(np.int16).tobytes())


#: Silence fed on a speaker's track before and after their line (seconds).
LEAD_S = 0.3
TAIL_S = 1.0
GAP_S = 0.4
CHUNK = 512  # Silero's window at 16 kHz (32 ms)
#: How much of a person's speech the agent hears before it decides to stop or go on when they
#: start while it speaks (seconds; the recognizer's interim on that much of their speech).
BARGE_IN_LISTEN_S = 1.0
#: The VAD's end-of-speech wait: espeak-ng pauses about 0.3-0.4 s at a full stop and piper
#: 0.25 s between sentences, so a shorter wait cuts a line into its sentences (each then
#: decided on, as Pipecat would).
VAD_STOP_S = 0.5


@dataclass
class _Window:
    """A stretch of one participant's track to feed (lead silence, their line, tail)."""

    who: str
    start: float
    noise: np.ndarray
    fed: int = 0

    @property
    def n(self) -> int:
        return len(self.noise)

    def next_time(self) -> float:
        return self.start + self.fed / SAMPLE_RATE


async def run_voice_meeting(
    conversation: Conversation,
    agent: str,
    *,
    hints: bool = True,
    reply: str | None = None,
    vad_stop_secs: float = VAD_STOP_S,
    recognizer: Recognizer | str | None = None,
    voices: Sequence[Voice | str] | str | None = None,
    agent_voice: Voice | str | None = None,
    room: Room | None = None,
    ignore: Sequence[str] = (),
    only: Sequence[str] = (),
    recognition_cache: str | None = None,
    espeak_timeout_s: float = ESPEAK_TIMEOUT_S,
    on_recognizer: Callable[[Recognizer], None] | None = None,
    word_confidence: bool = False,
    **gate_kwargs: Any,
) -> VoiceMeeting:
    """Speak ``conversation``'s human lines (one voice per participant, one track each)
    through the pipeline in the module notes, as fast as it takes them. The agent's own lines
    are spoken by its TTS at their place; a SPEAK is answered with the agent's next line when
    it comes next, else with ``reply`` (None: not answered).

    ``recognizer``: a recognizer, a spec for
    :func:`~polylogue.adapters.voice.recognition.make_recognizer` (``whisper``,
    ``whisper:MODEL``, ``pocketsphinx``) or None for the best installed; ``hints``: the
    roster's names go to it. ``voices``: the participants' voices (espeak-ng voice names
    allowed), ``piper``, ``espeak`` or None for the best installed; ``agent_voice`` likewise.
    ``room``: noise, bleed and overlapping hand-offs (default: a quiet room, one at a time).
    ``ignore`` / ``only``: the gate's focus, as ``decide --ignore/--only``.
    ``recognition_cache``: a folder where recognitions are kept by audio (benchmarks rerun).
    ``word_confidence``: a recognizer made here from a spec gives word confidences (Whisper)
    and the words it was unsure of reach the address verdict (``Utterance.unsure``).
    ``espeak_timeout_s`` bounds each espeak-ng run. Every human line is spoken before the
    pipeline starts: a voice failing on one, or any line in a script the voices cannot speak,
    stops the meeting with a :class:`VoiceError` naming the line before anything is heard; the
    agent's voice failing on its line or a reply stops it when that is spoken.
    ``gate_kwargs`` go to :class:`~polylogue.adapters.pipecat.PolylogueGate` (``deployment``,
    ``audience``...). ``on_recognizer`` is told the recognizer in use."""
    from pipecat.audio.vad.silero import SileroVADAnalyzer
    from pipecat.audio.vad.vad_analyzer import VADParams
    from pipecat.pipeline.parallel_pipeline import ParallelPipeline
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.processors.audio.vad_processor import VADProcessor
    from pipecat.workers.runner import WorkerRunner

    from polylogue.adapters.pipecat import PolylogueGate

    room = room or Room()
    utts = list(conversation.utterances)
    people = list(conversation.participants) if conversation.roster_known else []
    gate = PolylogueGate(agent, people, **gate_kwargs)
    if ignore or only:
        gate.live.set_focus(ignore, only)
    agent_id = gate.room.agent_id
    is_agent = [gate.live.speaker_id(u.speaker) == agent_id for u in utts]
    humans: list[str] = []
    for u, a in zip(utts, is_agent, strict=True):
        if not a and u.speaker not in humans:
            humans.append(u.speaker)
    if not humans:
        raise ValueError(f"conversation {conversation.id}: no line of anyone but {agent} to speak")
    check_speakable([(i, u.speaker, u.text) for i, u in enumerate(utts)])
    if reply:
        check_speakable([(len(utts), f"{agent}'s reply", reply)])
    # the recognizer first: a missing or broken model stops the meeting before any speech
    roster = people or [Participant(s, s) for s in {u.speaker for u in utts}]
    if recognizer is None or isinstance(recognizer, str):
        recognizer = await asyncio.to_thread(
            make_recognizer,
            recognizer,
            roster,
            hints=hints,
            cache_dir=recognition_cache,
            word_confidence=word_confidence,
        )
    if on_recognizer is not None:
        on_recognizer(recognizer)
    # the voices: the best installed unless told
    if voices is None or isinstance(voices, str):
        human_voices, default_agent = default_voices(voices, espeak_timeout_s=espeak_timeout_s)
    else:
        human_voices = [as_voice(v, espeak_timeout_s) for v in voices]
        default_agent = None
    if agent_voice is None:  # the participants' kind of voice (espeak-ng ones: espeak-ng)
        all_espeak = all(isinstance(v, EspeakVoice) for v in human_voices)
        kind = "espeak" if all_espeak else None
        agent_voice = default_agent or default_voices(kind, espeak_timeout_s=espeak_timeout_s)[1]
    the_agent_voice = as_voice(agent_voice, espeak_timeout_s)
    voice_of = {h: human_voices[i % len(human_voices)] for i, h in enumerate(humans)}
    # every human line spoken first: a voice failing on one stops the meeting before it starts
    speech: dict[int, np.ndarray] = {}
    for i, u in enumerate(utts):
        if is_agent[i]:
            continue
        try:
            speech[i] = await asyncio.to_thread(voice_of[u.speaker].speak, u.text, SAMPLE_RATE)
        except VoiceError as e:
            raise line_error(e, i, u.speaker, u.text) from None
    level = float(np.mean([speech_power(x) for x in speech.values()]))
    stts = {h: RecognizerSTTService(recognizer, h) for h in humans}
    branches = [
        [
            _TrackFilter(h),
            VADProcessor(
                vad_analyzer=SileroVADAnalyzer(params=VADParams(stop_secs=vad_stop_secs)),
                audio_idle_timeout=0,
            ),
            stts[h],
        ]
        for h in humans
    ]
    clock = MeetingClock()
    gate.clock = clock.now
    arrivals = _Arrivals()
    state = {"next": 0}  # index of the next script line

    def scripted_reply() -> str | None:
        i = state["next"]
        if i < len(utts) and is_agent[i]:
            state["next"] = i + 1  # the agent says its own next line now
            return utts[i].text
        return reply

    output = AgentOutput(clock, agent)
    sink = _Sink()
    tts = VoiceTTSService(the_agent_voice)
    processors: list[Any] = [
        ParallelPipeline(*branches) if len(branches) > 1 else Pipeline(branches[0]),
        arrivals,
        gate,
        ScriptedReplies(scripted_reply),
        tts,
        output,
        gate.agent_speech_tap(),
        sink,
    ]
    worker = PipelineWorker(
        Pipeline(processors),
        params=PipelineParams(audio_in_sample_rate=SAMPLE_RATE, audio_out_sample_rate=SAMPLE_RATE),
    )
    ready = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _ready(_w: Any, _f: Frame) -> None:
        ready.set()

    rows: list[VoiceRow] = []
    timeline: list[tuple[int, str, str, float, float]] = []
    human_clips: list[Clip] = []

    @gate.event_handler("on_decision")
    async def _decided(_g: Any, d: Any) -> None:
        arrival = arrivals.queue.popleft() if arrivals.queue else None
        now = time.perf_counter()
        seg = arrival.segment if arrival else None
        rows.append(_row(seg, d, now, timeline))

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    run = asyncio.create_task(runner.run())
    await ready.wait()

    async def settle() -> None:
        # every cut segment recognised, then everything queued behind it through the pipeline
        while any(s.pending for s in stts.values()):
            await asyncio.sleep(0.005)
        await worker.queue_frame(_Marker())
        marker = asyncio.ensure_future(sink.markers.get())
        # A failed voice holds the marker behind its empty audio context until pipecat's stop
        # timeout (30 s): the failure is known now, and the caller's check_tts raises it.
        while not marker.done() and not tts.failures:
            await asyncio.sleep(0.005)
        if not marker.done():
            marker.cancel()
            return
        while output.speaking:
            await asyncio.sleep(0.005)

    windows: list[_Window] = []
    track_free: dict[str, float] = {}  # where each track's last window ends

    async def feed_until(t_end: float) -> None:
        """Every track's audio before ``t_end``, in time order across tracks: each chunk is
        the track's own speech, the others' bleed and the room's noise."""
        while True:
            open_ = [w for w in windows if w.fed < w.n and w.next_time() < t_end]
            if not open_:
                break
            w = min(open_, key=_Window.next_time)
            t = w.next_time()
            n = min(CHUNK, w.n - w.fed)
            chunk = room.speech(w.who, t, n, human_clips) + w.noise[w.fed : w.fed + n]
            if n < CHUNK:
                chunk = np.pad(chunk, (0, CHUNK - n))
            f = UserAudioRawFrame(
                audio=to_int16(chunk).tobytes(),
                sample_rate=SAMPLE_RATE,
                num_channels=1,
                user_id=w.who,
            )
            f.metadata["time"] = t
            await worker.queue_frame(f)
            w.fed += n
            clock.feed_from(t + n / SAMPLE_RATE)
        windows[:] = [w for w in windows if w.fed < w.n]

    def check_tts(i: int) -> None:
        """The agent's speech up to utterance ``i`` (its own lines, replies) was spoken."""
        if not tts.failures:
            return
        text, e = tts.failures[0]
        # the agent's own line (spoken at its place, or as the reply it was), else a reply
        own = next((k for k, u in enumerate(utts) if is_agent[k] and u.text == text), None)
        if own is not None:
            raise line_error(e, own, f"{agent}, spoken by the agent", text)
        raise VoiceError(f"the agent's reply after utterance {i + 1} ({text!r}): {e}")

    barge_ins: list[dict[str, Any]] = []

    async def barge_in(i: int, who: str, start: float, x: np.ndarray) -> None:
        """``who`` starts at ``start`` while the agent speaks: the recognizer's words on their
        first :data:`BARGE_IN_LISTEN_S` go to the shipped barge-in model (the gate's); on
        yield the agent's clip stops there, else it plays on. The decision is logged."""
        clip = output.clips[-1]
        heard = await asyncio.to_thread(
            recognizer.recognize, x[: int(BARGE_IN_LISTEN_S * SAMPLE_RATE)].tobytes()
        )
        if not heard.text.strip():
            return
        d = gate.room.barge_in(heard.text)
        stop = start + BARGE_IN_LISTEN_S
        if d.yield_floor and stop < clip.end:
            clip.samples = clip.samples[: max(0, int((stop - clip.start) * SAMPLE_RATE))]
            output.free_at = min(output.free_at, stop)
        barge_ins.append(
            {
                "index": i,
                "speaker": who,
                "at": round(start, 3),
                "agent_said": clip.text,
                "heard": heard.text,
                **d.to_dict(),
                "agent_stopped_at": round(clip.end, 3),
            }
        )

    async def speak_script() -> None:
        t = 0.5
        while state["next"] < len(utts):
            i = state["next"]
            state["next"] = i + 1
            u = utts[i]
            if is_agent[i]:  # the agent's own line, not given as a reply: spoken at its place
                await feed_until(float("inf"))
                clock.feed_from(t)
                await worker.queue_frame(TTSSpeakFrame(u.text))
                await settle()
                check_tts(i)
                t = max(clock.now(), output.free_at) + GAP_S
                continue
            x = speech[i]
            t = max(t, track_free.get(u.speaker, 0.0))
            start = t + LEAD_S
            if output.clips and start < output.free_at:  # the agent is still speaking
                await barge_in(i, u.speaker, start, x)
            end = start + len(x) / SAMPLE_RATE
            voiced = np.flatnonzero(np.abs(x) > 300)  # the speech ends before the voice's silence
            speech_end = start + (voiced[-1] + 1 if len(voiced) else len(x)) / SAMPLE_RATE
            timeline.append((i, u.speaker, u.text, start, speech_end))
            human_clips.append(Clip(start, x, u.speaker, u.text))
            n = int((LEAD_S + TAIL_S) * SAMPLE_RATE) + len(x)
            windows.append(_Window(u.speaker, t, room.noise(u.speaker, t, n, level)))
            track_free[u.speaker] = t + n / SAMPLE_RATE
            nxt = state["next"]
            if (
                room.overlap_s > 0
                and nxt < len(utts)
                and not is_agent[nxt]
                and utts[nxt].speaker != u.speaker
            ):
                # a hand-off: the next speaker starts before this one ends, nothing waited for
                t = speech_end - room.overlap_s - LEAD_S
                await feed_until(t)
                continue
            stt = stts[u.speaker]
            n_seg = len(stt.segments) + stt.pending
            await feed_until(float("inf"))
            # until the track's audio has passed the VAD (the stop frame follows its audio frame)
            while stt.heard_until < end + TAIL_S - 0.05:
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.02)
            if len(stt.segments) + stt.pending > n_seg:
                last = stt._queued[-1] if stt._queued else stt.segments[-1]
                clock.wait_from(last.vad_stop, last.vad_stop_wall)  # the meeting waits from there
            await settle()
            check_tts(i)  # a reply after this line
            t = max(clock.now(), output.free_at) + GAP_S
            replied = output.clips[-1] if output.clips else None
            if room.barge_in_s is not None and replied is not None and replied.start >= speech_end:
                # a reply to this line: the next person starts while it plays (in audio
                # time, however long the machine took to decide and synthesise)
                t = replied.start + room.barge_in_s - LEAD_S

    try:
        await speak_script()
    except BaseException:
        # Stop the pipeline before the error leaves (else its tasks outlive the meeting).
        await runner.cancel()
        await run
        raise
    await worker.queue_frame(EndFrame())
    await run
    gate.room.close()
    clips = human_clips + output.clips
    length = max((c.end for c in clips), default=0.0) + 0.5
    mix = np.zeros(int(length * SAMPLE_RATE) + 1, np.float64)
    for c in clips:
        at = int(c.start * SAMPLE_RATE)
        mix[at : at + len(c.samples)] += c.samples
    mix += room.noise("(room)", 0.0, len(mix), level)
    agent_said = [(c.text, c.start) for c in output.clips]
    return VoiceMeeting(
        rows,
        to_int16(mix),
        agent_said,
        timeline,
        list(gate.decisions),
        dict(getattr(recognizer, "added", {})),
        [(h.speaker, h.text) for h in gate.room.recent],
        recognizer.name,
        sorted({voice_of[h].name for h in humans}),
        barge_ins,
    )


def _row(
    seg: Segment | None, d: Any, now: float, timeline: list[tuple[int, str, str, float, float]]
) -> VoiceRow:
    if seg is None:
        return VoiceRow(
            str(d.speaker) if hasattr(d, "speaker") else "",
            "",
            "",
            d.action.value if d.action else None,
            d.p_speak,
            d.reason,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
        )
    refs = [
        x
        for x in timeline
        if x[1] == seg.user_id and x[3] < seg.vad_stop and x[4] > seg.start - 0.3
    ]
    ends = [x[4] for x in refs if x[4] <= seg.vad_stop]
    speech_end = max(ends) if ends else seg.vad_stop - seg.stop_secs
    vad_wait = max(0.0, seg.vad_stop - speech_end)
    decision = max(0.0, now - seg.pushed_wall)
    return VoiceRow(
        seg.user_id,
        " ".join(x[2] for x in refs),
        seg.text,
        d.action.value if d.action else None,
        d.p_speak,
        d.reason,
        seg.start,
        seg.vad_stop - seg.stop_secs,
        1000 * (vad_wait + seg.recognition_s + decision),
        1000 * vad_wait,
        1000 * seg.recognition_s,
        1000 * decision,
        [x[0] for x in refs],
        None if seg.unsure is None else list(seg.unsure),
    )


__all__ = [
    "VAD_STOP_S",
    "VoiceMeeting",
    "VoiceRow",
    "check_speakable",
    "line_error",
    "run_voice_meeting",
]
