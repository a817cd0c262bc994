"""Offline voice for Pipecat: a pocketsphinx speech-to-text service and an espeak-ng
text-to-speech service, and a voice meeting run through a real Pipecat pipeline.

* :class:`Recognizer` wraps one pocketsphinx decoder (its English acoustic model, dictionary
  and language model, shipped in the ``pocketsphinx`` wheel). **Roster hints**: each name or
  alias missing from the dictionary is added with a pronunciation (espeak-ng's phonemes mapped
  to the ARPAbet phones of the acoustic model; a letter-by-letter guess when espeak-ng is
  missing; pocketsphinx also gives an added word a place in its language model), and the names
  are spotted by pocketsphinx's keyphrase search on the same audio; a name spotted within
  0.6 s of the start or end of the speech replaces the language-model words it overlaps in
  time (measured: more names written, and names written that nobody said, see
  docs/agents.md). (pocketsphinx 5 cannot
  raise the probability of a word already in its binary language model from Python:
  ``NGramModel.add_word`` leaves existing words as they are, and writing the model out crashes,
  so keyphrase spotting is the biasing it offers.)
* :class:`PocketsphinxSTTService` is a Pipecat ``SegmentedSTTService``: audio between a VAD's
  start and stop frames is decoded and one ``TranscriptionFrame`` comes out, with the
  participant's ``user_id`` and, in ``metadata``, the segment's times and the recognition time.
* :class:`EspeakTTSService` is a Pipecat ``TTSService`` speaking through the ``espeak-ng``
  program (Debian ``espeak-ng``).
* :func:`run_voice_meeting` speaks a transcript's human lines with one synthetic voice per
  participant, each on its own track, through Silero VAD → pocketsphinx STT (one branch of a
  ``ParallelPipeline`` per participant) → :class:`~polylogue.adapters.pipecat.PolylogueGate` →
  a scripted stand-in for the LLM → espeak-ng TTS → an output stage standing in for the
  transport (bot-speaking frames) → the gate's tap.

Needs ``pip install 'polylogue[voice]'`` and the ``espeak-ng`` program.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import re
import shutil
import subprocess
import threading
import time
import wave
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

try:
    from pipecat.frames.frames import (
        BotStartedSpeakingFrame,
        BotStoppedSpeakingFrame,
        DataFrame,
        EndFrame,
        ErrorFrame,
        Frame,
        InputAudioRawFrame,
        TranscriptionFrame,
        TTSAudioRawFrame,
        TTSSpeakFrame,
        TTSStartedFrame,
        TTSStoppedFrame,
        TTSTextFrame,
        UserAudioRawFrame,
        VADUserStartedSpeakingFrame,
        VADUserStoppedSpeakingFrame,
    )
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.services.settings import STTSettings, TTSSettings
    from pipecat.services.stt_service import SegmentedSTTService
    from pipecat.services.tts_service import TTSService
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError(
        "polylogue.adapters.voice needs Pipecat and pocketsphinx: pip install 'polylogue[voice]'"
    ) from e

from polylogue.conversation import Conversation, Participant
from polylogue.errors import PolylogueInputError

#: The recognizer's sample rate (pocketsphinx's en-us model is 16 kHz).
SAMPLE_RATE = 16000
#: espeak-ng voices for the participants, in order of first speech: the ones pocketsphinx's
#: model recognises best of those tried (word error 37-61% on six meeting sentences at 150
#: words a minute; the male default voices were 70-90%).
HUMAN_VOICES: tuple[str, ...] = (
    "en-us+edward",
    "en-us+f2",
    "en-us+f5",
    "en-us+klatt",
    "en-us+m2",
    "en-us+klatt4",
)
#: The agent's voice (never recognised, only heard in the mix).
AGENT_VOICE = "en-us+f4"
SPEECH_RATE = 150
#: Keyphrase threshold per phone of a name: longer names get a lower threshold (pocketsphinx's
#: advice: short keyphrases need higher thresholds or they fire on anything).
KWS_THRESHOLD_PER_PHONE = 1e-2
#: A spotted name counts only this close to a segment's start or end (10 ms frames): a name
#: that addresses someone sits at the edge of what is said ("Dave, can you ...", "... Dave?"),
#: and spotting fires on other words in the middle.
KWS_EDGE_FRAMES = 60


class VoiceUnavailable(PolylogueInputError):
    """The espeak-ng program is not installed (install Debian's ``espeak-ng``)."""


def espeak_path() -> str | None:
    return shutil.which("espeak-ng")


def _espeak() -> str:
    path = espeak_path()
    if path is None:
        raise VoiceUnavailable(
            "the espeak-ng program is not installed (Debian/Ubuntu: apt-get install espeak-ng)"
        )
    return path


#: How long one espeak-ng run may take (seconds). A meeting line is spoken in well under a
#: second; a program that takes longer is stuck, and the meeting must not wait on it forever.
ESPEAK_TIMEOUT_S = 30.0


class VoiceError(PolylogueInputError):
    """espeak-ng failed, hung or wrote something that is not a WAV file."""


def run_espeak(args: Sequence[str], text: str, timeout_s: float = ESPEAK_TIMEOUT_S) -> bytes:
    """espeak-ng's standard output for ``text`` given on its standard input (``--stdin``):
    text is never on the command line, so a line starting with ``-`` is spoken, not read as
    an option. The run is bounded by ``timeout_s``; on expiry its whole process group is
    killed (a wrapper's children would otherwise keep the pipes open and the wait going).
    Failure, a non-zero exit or the timeout, is a :class:`VoiceError` (its message does not
    name the text: callers say which line)."""
    import contextlib
    import os
    import signal

    cmd = [_espeak(), *args, "--stdin"]
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as e:
        raise VoiceError(f"espeak-ng could not start ({cmd[0]}: {e.strerror})") from None
    try:
        out, err = proc.communicate(text.encode("utf-8"), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise VoiceError(f"espeak-ng ({cmd[0]}) did not finish within {timeout_s:g} s") from None
    if proc.returncode != 0:
        why = err.decode("utf-8", "replace").strip().splitlines()
        raise VoiceError(
            f"espeak-ng ({cmd[0]}) exited with status {proc.returncode}"
            + (f": {why[-1][:200]}" if why else "")
        )
    return out


def synthesize(
    text: str,
    voice: str,
    rate: int = SPEECH_RATE,
    sample_rate: int = SAMPLE_RATE,
    timeout_s: float = ESPEAK_TIMEOUT_S,
) -> np.ndarray:
    """``text`` spoken by espeak-ng as 16-bit mono samples at ``sample_rate``; a failing,
    hanging or garbage-writing espeak-ng is a :class:`VoiceError`."""
    from scipy.signal import resample_poly

    out = run_espeak(["-v", voice, "-s", str(rate), "--stdout"], text, timeout_s)
    try:
        with wave.open(io.BytesIO(out)) as w:
            if w.getsampwidth() != 2 or w.getnchannels() != 1:
                raise wave.Error(f"{w.getsampwidth() * 8}-bit, {w.getnchannels()} channel(s)")
            rate_in = w.getframerate()
            x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    except (wave.Error, EOFError, ValueError) as e:
        raise VoiceError(
            f"espeak-ng wrote {len(out)} bytes that are not 16-bit mono WAV audio ({e})"
        ) from None
    if rate_in <= 0:
        raise VoiceError(f"espeak-ng wrote a WAV file with sample rate {rate_in}")
    if rate_in != sample_rate:
        g = np.gcd(rate_in, sample_rate)
        x = resample_poly(x.astype(np.float32), sample_rate // g, rate_in // g)
    return np.clip(x, -32768, 32767).astype(np.int16)


def line_error(e: VoiceError, index: int, speaker: str, text: str) -> VoiceError:
    """``e`` naming the transcript line it happened on: the utterance (1-based), its speaker
    and its text."""
    shown = text if len(text) <= 60 else text[:57] + "..."
    return VoiceError(f"utterance {index + 1} ({speaker}: {shown!r}): {e}")


# ----------------------------------------------------------------------------- pronunciations

# espeak-ng IPA → the acoustic model's ARPAbet phones (longest symbols first).
_IPA = {
    "tʃ": "CH",
    "dʒ": "JH",
    "eɪ": "EY",
    "aɪ": "AY",
    "ɔɪ": "OY",
    "aʊ": "AW",
    "oʊ": "OW",
    "əʊ": "OW",
    "ɑː": "AA",
    "ɔː": "AO",
    "oː": "AO",
    "iː": "IY",
    "uː": "UW",
    "ɜː": "ER",
    "ɚ": "ER",
    "ɝ": "ER",
    "ɪ": "IH",
    "i": "IY",
    "e": "EH",
    "ɛ": "EH",
    "æ": "AE",
    "a": "AA",
    "ɑ": "AA",
    "ɒ": "AA",
    "ɔ": "AO",
    "o": "OW",
    "ʊ": "UH",
    "u": "UW",
    "ʌ": "AH",
    "ə": "AH",
    "ɐ": "AH",
    "ᵻ": "IH",
    "b": "B",
    "d": "D",
    "f": "F",
    "ɡ": "G",
    "g": "G",
    "h": "HH",
    "j": "Y",
    "k": "K",
    "l": "L",
    "m": "M",
    "n": "N",
    "ŋ": "NG",
    "p": "P",
    "ɹ": "R",
    "r": "R",
    "s": "S",
    "ʃ": "SH",
    "t": "T",
    "θ": "TH",
    "ð": "DH",
    "v": "V",
    "w": "W",
    "z": "Z",
    "ʒ": "ZH",
    "ɾ": "T",
    "x": "K",
}
_IPA_KEYS = sorted(_IPA, key=len, reverse=True)
# A letter-by-letter guess when espeak-ng is missing (crude, and said so in the docs).
_LETTERS = dict(
    zip(
        "abcdefghijklmnopqrstuvwxyz",
        [
            "AE",
            "B",
            "K",
            "D",
            "EH",
            "F",
            "G",
            "HH",
            "IH",
            "JH",
            "K",
            "L",
            "M",
            "N",
            "AA",
            "P",
            "K",
            "R",
            "S",
            "T",
            "AH",
            "V",
            "W",
            "K_S",
            "IY",
            "Z",
        ],
        strict=True,
    )
)


def ipa_to_arpabet(ipa: str) -> list[str]:
    phones: list[str] = []
    i = 0
    while i < len(ipa):
        for k in _IPA_KEYS:
            if ipa.startswith(k, i):
                phones.append(_IPA[k])
                i += len(k)
                break
        else:
            i += 1  # stress marks, length marks, syllable breaks
    return phones


def pronounce(word: str) -> list[str]:
    """ARPAbet phones for ``word``: espeak-ng's American English phonemes mapped, else a
    letter-by-letter guess."""
    if espeak_path() is not None:
        try:
            out = run_espeak(["-q", "--ipa", "-v", "en-us"], word)
        except VoiceError as e:
            raise VoiceError(f"the roster name {word!r}: {e}") from None
        phones = ipa_to_arpabet(out.decode("utf-8", "replace").strip())
        if phones:
            return phones
    return [ph for c in word.lower() if c in _LETTERS for ph in _LETTERS[c].split("_")]


def hint_words(participants: Iterable[Participant]) -> list[str]:
    """The roster's names and aliases as recognizer words (lower case, one word each)."""
    words: list[str] = []
    for p in participants:
        if p.id.upper() == "ALL":  # a chorus line (Friends' "ALL") names no one
            continue
        for label in (p.id, p.name, *p.aliases):
            for w in re.findall(r"[a-z']+", (label or "").lower()):
                if len(w) > 1 and w not in words:
                    words.append(w)
    return words


# ----------------------------------------------------------------------------- recognizer


@dataclass(frozen=True)
class Recognition:
    text: str
    #: roster names the keyphrase search spotted (before merging)
    spotted: tuple[str, ...] = ()
    seconds: float = 0.0


class Recognizer:
    """One pocketsphinx decoder (thread-safe: decodes one segment at a time), with the
    roster's names as hints when ``hints`` is given."""

    def __init__(self, hints: Sequence[str] = (), cache_dir: str | Path | None = None) -> None:
        try:
            from pocketsphinx import Decoder
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ImportError(
                "the pocketsphinx recognizer needs pip install 'polylogue[voice]'"
            ) from e
        self._lock = threading.Lock()
        self.decoder = Decoder(loglevel="FATAL")
        self.hints = [w for w in hints if w]
        #: recognitions kept by audio (and hints): the same segment is decoded once; a cached
        #: one keeps the decode time measured when it was made
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.added: dict[str, list[str]] = {}
        self._kws: Any = None
        if self.hints:
            for w in self.hints:
                if self.decoder.lookup_word(w) is None:
                    phones = pronounce(w)
                    if phones:
                        self.decoder.add_word(w, " ".join(phones), True)
                        self.added[w] = phones
            self._kws = self._keyphrase_decoder()

    def _keyphrase_decoder(self) -> Any:
        import tempfile

        from pocketsphinx import Decoder

        lines = []
        for w in self.hints:
            phones = self.decoder.lookup_word(w) or " ".join(self.added.get(w, []))
            n = max(1, len(phones.split()))
            lines.append(f"{w} /{KWS_THRESHOLD_PER_PHONE**n:.0e}/")
        with tempfile.NamedTemporaryFile("w", suffix=".kws", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        dec = Decoder(loglevel="FATAL", kws=f.name)
        for w, phones in self.added.items():
            dec.add_word(w, " ".join(phones), True)
        return dec

    def recognize(self, pcm: bytes) -> Recognition:
        """Decode one segment of 16 kHz 16-bit mono audio."""
        cached = self._cache_path(pcm)
        if cached is not None and cached.exists():
            d = json.loads(cached.read_text(encoding="utf-8"))
            if "words" not in d:  # a cache of no-hint recognitions kept as text
                return Recognition(d["text"], (), float(d["seconds"]))
            words = [(str(w), int(s), int(e)) for w, s, e in d["words"]]
            spotted = [(str(w), int(s), int(e)) for w, s, e in d["spotted"]]
            return self._combine(words, spotted, float(d["seconds"]))
        t0 = time.perf_counter()
        with self._lock:
            words = self._decode(self.decoder, pcm)
            spotted = self._decode(self._kws, pcm) if self._kws is not None else []
        seconds = time.perf_counter() - t0
        if cached is not None:  # the decoders' words with their frames: merging is redone
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(
                json.dumps({"words": words, "spotted": spotted, "seconds": seconds}),
                encoding="utf-8",
            )
        return self._combine(words, spotted, seconds)

    @staticmethod
    def _combine(
        words: list[tuple[str, int, int]], spotted: list[tuple[str, int, int]], seconds: float
    ) -> Recognition:
        """The language model's words with the names spotted at the edges of the speech (the
        span of those words: a segment starts and ends with silence the VAD kept)."""
        first = min((s for _, s, _ in words), default=0)
        last = max((e for _, _, e in words), default=max((e for _, _, e in spotted), default=0))
        near = KWS_EDGE_FRAMES
        edge = [x for x in spotted if x[1] < first + near or x[2] > last - near]
        merged = merge_spotted(words, edge)
        return Recognition(" ".join(w for w, _, _ in merged), tuple(w for w, _, _ in edge), seconds)

    def _cache_path(self, pcm: bytes) -> Path | None:
        if self.cache_dir is None:
            return None
        # with hints, the decoders' raw words are kept (a format of their own)
        tag = "|".join(self.hints) + ("|raw" if self.hints else "")
        key = hashlib.sha1(pcm + tag.encode()).hexdigest()
        return self.cache_dir / f"{key}.json"

    @staticmethod
    def _decode(decoder: Any, pcm: bytes) -> list[tuple[str, int, int]]:
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        out = []
        for seg in decoder.seg() or ():
            w = seg.word.strip()
            if not w or w.startswith(("<", "[")):
                continue
            out.append((re.sub(r"\(\d+\)$", "", w), seg.start_frame, seg.end_frame))
        return out


def merge_spotted(
    words: list[tuple[str, int, int]], spotted: list[tuple[str, int, int]]
) -> list[tuple[str, int, int]]:
    """The language model's words with each spotted name put in place of the words it
    overlaps (by more than half of their frames), or inserted at its time if none."""
    out = list(words)
    for name, s, e in sorted(spotted, key=lambda x: x[1]):
        if any(w == name and ws < e and we > s for w, ws, we in out):
            continue
        kept = [
            (w, ws, we) for w, ws, we in out if min(we, e) - max(ws, s) <= 0.5 * max(1, we - ws)
        ]
        kept.append((name, s, e))
        out = sorted(kept, key=lambda x: x[1])
    return out


# ----------------------------------------------------------------------------- Pipecat services


@dataclass
class Segment:
    """One VAD segment of a participant's track (times in track seconds; walls perf_counter)."""

    user_id: str
    start: float
    vad_stop: float
    stop_secs: float
    vad_stop_wall: float
    recognition_s: float = 0.0
    pushed_wall: float = 0.0
    text: str = ""


class PocketsphinxSTTService(SegmentedSTTService):
    """Pipecat STT for one participant's track: each VAD segment → one ``TranscriptionFrame``
    with ``user_id`` and ``metadata["time"]`` (the segment's end in track seconds, when the
    audio frames carry ``metadata["time"]``) and ``metadata["segment"]`` (a :class:`Segment`).
    Empty recognitions push nothing. ``segments`` lists every segment, empty ones too."""

    def __init__(self, recognizer: Recognizer, user_id: str, **kwargs: Any) -> None:
        kwargs.setdefault("ttfs_p99_latency", 2.0)
        super().__init__(
            sample_rate=SAMPLE_RATE,
            audio_passthrough=False,
            settings=STTSettings(model="pocketsphinx-en-us", language=None),
            **kwargs,
        )
        self.recognizer = recognizer
        self.user_id = user_id
        self.segments: list[Segment] = []
        self._queued: deque[Segment] = deque()
        self._audio_end = 0.0
        self._seg_start = 0.0

    @property
    def wants_wav_segments(self) -> bool:
        return False  # pocketsphinx reads raw 16-bit PCM

    @property
    def heard_until(self) -> float:
        """The end (track seconds) of the audio this service has received."""
        return self._audio_end

    @property
    def pending(self) -> int:
        """Segments cut by the VAD and not yet recognised."""
        return len(self._queued)

    def can_generate_metrics(self) -> bool:
        return True

    async def process_audio_frame(self, frame: InputAudioRawFrame, direction: FrameDirection):
        t = frame.metadata.get("time") if isinstance(frame.metadata, dict) else None
        n = len(frame.audio) / 2 / max(1, frame.sample_rate)
        self._audio_end = (float(t) if isinstance(t, int | float) else self._audio_end) + n
        await super().process_audio_frame(frame, direction)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, VADUserStartedSpeakingFrame):
            self._seg_start = self._audio_end - float(frame.start_secs or 0.0)
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._queued.append(
                Segment(
                    self.user_id,
                    self._seg_start,
                    self._audio_end,
                    float(frame.stop_secs or 0.0),
                    time.perf_counter(),
                )
            )
        await super().process_frame(frame, direction)

    async def run_stt(self, audio: bytes):
        seg = self._queued[0] if self._queued else None
        try:
            r = await asyncio.to_thread(self.recognizer.recognize, audio)
        except Exception as e:  # a failed decode is an error frame, the pipeline goes on
            if self._queued:
                self._queued.popleft()
            yield ErrorFrame(f"pocketsphinx failed on a segment of {self.user_id}: {e}")
            return
        if seg is None:
            seg = Segment(self.user_id, 0.0, self._audio_end, 0.0, time.perf_counter())
        seg.recognition_s, seg.text = r.seconds, r.text
        self.segments.append(seg)
        if r.text:
            from polylogue.adapters.pipecat import iso_time

            end = seg.vad_stop - seg.stop_secs
            frame = TranscriptionFrame(r.text, self.user_id, iso_time(end))
            frame.metadata["time"] = end
            frame.metadata["segment"] = seg
            seg.pushed_wall = time.perf_counter()
            yield frame  # pushed on before the generator resumes
        if self._queued:
            self._queued.popleft()  # after the push: `pending` covers the frame in flight


class EspeakTTSService(TTSService):
    """Pipecat TTS through the ``espeak-ng`` program (one voice; 16 kHz by default)."""

    def __init__(
        self,
        voice: str = AGENT_VOICE,
        rate: int = SPEECH_RATE,
        *,
        stop_frame_timeout_s: float = 0.5,
        timeout_s: float = ESPEAK_TIMEOUT_S,
        **kwargs: Any,
    ) -> None:
        _espeak()
        super().__init__(
            push_start_frame=True,
            push_stop_frames=True,
            stop_frame_timeout_s=stop_frame_timeout_s,
            settings=TTSSettings(model=None, voice=voice, language=None),
            **kwargs,
        )
        self.voice = voice
        self.rate = rate
        self.timeout_s = timeout_s
        #: ``(text, error)`` of each text espeak-ng failed on (the meeting checks it).
        self.failures: list[tuple[str, VoiceError]] = []

    def can_generate_metrics(self) -> bool:
        return True

    async def run_tts(self, text: str, context_id: str):
        try:
            samples = await asyncio.to_thread(
                synthesize, text, self.voice, self.rate, self.sample_rate, self.timeout_s
            )
        except VoiceError as e:
            self.failures.append((text, e))
            yield ErrorFrame(f"espeak-ng failed: {e}")
            return
        yield TTSAudioRawFrame(
            audio=samples.tobytes(),
            sample_rate=self.sample_rate,
            num_channels=1,
            context_id=context_id,
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


@dataclass
class Clip:
    start: float
    samples: np.ndarray
    who: str
    text: str = ""


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

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        d = asdict(self)
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
#: The VAD's end-of-speech wait: espeak-ng pauses about 0.3-0.4 s at a full stop, so a
#: shorter wait cuts a line into its sentences (each then decided on, as Pipecat would).
VAD_STOP_S = 0.5


async def run_voice_meeting(
    conversation: Conversation,
    agent: str,
    *,
    hints: bool = True,
    reply: str | None = None,
    vad_stop_secs: float = VAD_STOP_S,
    voices: Sequence[str] = HUMAN_VOICES,
    agent_voice: str = AGENT_VOICE,
    recognition_cache: str | Path | None = None,
    espeak_timeout_s: float = ESPEAK_TIMEOUT_S,
    **gate_kwargs: Any,
) -> VoiceMeeting:
    """Speak ``conversation``'s human lines (one espeak-ng voice per participant, one track
    each, one line at a time) through the pipeline in the module notes, as fast as it takes
    them. The agent's own lines are spoken by its TTS at their place; a SPEAK is answered with
    the agent's next line when it comes next, else with ``reply`` (None: not answered).
    ``recognition_cache``: a folder where recognitions are kept by audio (benchmarks rerun).
    ``espeak_timeout_s`` bounds each espeak-ng run; espeak-ng failing, hanging or writing no
    WAV audio on any line (a human's, the agent's, a reply) stops the meeting with a
    :class:`VoiceError` naming the line. ``gate_kwargs`` go to
    :class:`~polylogue.adapters.pipecat.PolylogueGate`."""
    from pipecat.audio.vad.silero import SileroVADAnalyzer
    from pipecat.audio.vad.vad_analyzer import VADParams
    from pipecat.pipeline.parallel_pipeline import ParallelPipeline
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.processors.audio.vad_processor import VADProcessor
    from pipecat.workers.runner import WorkerRunner

    from polylogue.adapters.pipecat import PolylogueGate

    _espeak()
    utts = list(conversation.utterances)
    people = list(conversation.participants) if conversation.roster_known else []
    gate = PolylogueGate(agent, people, **gate_kwargs)
    agent_id = gate.room.agent_id
    is_agent = [gate.live.speaker_id(u.speaker) == agent_id for u in utts]
    humans: list[str] = []
    for u, a in zip(utts, is_agent, strict=True):
        if not a and u.speaker not in humans:
            humans.append(u.speaker)
    if not humans:
        raise ValueError(f"conversation {conversation.id}: no line of anyone but {agent} to speak")
    roster = people or [Participant(s, s) for s in {u.speaker for u in utts}]
    recognizer = Recognizer(hint_words(roster) if hints else (), recognition_cache)
    stts = {h: PocketsphinxSTTService(recognizer, h) for h in humans}
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
    tts = EspeakTTSService(agent_voice, timeout_s=espeak_timeout_s)
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
        await sink.markers.get()
        while output.speaking:
            await asyncio.sleep(0.005)

    async def feed(track: str, samples: np.ndarray, t0: float) -> None:
        for k in range(0, len(samples), CHUNK):
            chunk = samples[k : k + CHUNK]
            if len(chunk) < CHUNK:
                chunk = np.pad(chunk, (0, CHUNK - len(chunk)))
            f = UserAudioRawFrame(
                audio=chunk.tobytes(), sample_rate=SAMPLE_RATE, num_channels=1, user_id=track
            )
            f.metadata["time"] = t0 + k / SAMPLE_RATE
            await worker.queue_frame(f)
        clock.feed_from(t0 + len(samples) / SAMPLE_RATE)

    voice_of = {h: voices[i % len(voices)] for i, h in enumerate(humans)}

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

    async def speak_script() -> None:
        t = 0.5
        while state["next"] < len(utts):
            i = state["next"]
            state["next"] = i + 1
            u = utts[i]
            if is_agent[i]:  # the agent's own line, not given as a reply: spoken at its place
                clock.feed_from(t)
                await worker.queue_frame(TTSSpeakFrame(u.text))
                await settle()
                check_tts(i)
                t = max(clock.now(), output.free_at) + GAP_S
                continue
            try:
                speech = await asyncio.to_thread(
                    synthesize, u.text, voice_of[u.speaker], SPEECH_RATE, SAMPLE_RATE,
                    espeak_timeout_s,
                )  # fmt: skip
            except VoiceError as e:
                raise line_error(e, i, u.speaker, u.text) from None
            lead = np.zeros(int(LEAD_S * SAMPLE_RATE), np.int16)
            tail = np.zeros(int(TAIL_S * SAMPLE_RATE), np.int16)
            start = t + LEAD_S
            end = start + len(speech) / SAMPLE_RATE
            voiced = np.flatnonzero(np.abs(speech) > 300)  # the speech ends before espeak's silence
            speech_end = start + (voiced[-1] + 1 if len(voiced) else len(speech)) / SAMPLE_RATE
            timeline.append((i, u.speaker, u.text, start, speech_end))
            human_clips.append(Clip(start, speech, u.speaker, u.text))
            stt = stts[u.speaker]
            n_seg = len(stt.segments) + stt.pending
            await feed(u.speaker, np.concatenate([lead, speech, tail]), t)
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
    length = max((c.start + len(c.samples) / SAMPLE_RATE for c in clips), default=0.0) + 0.5
    mix = np.zeros(int(length * SAMPLE_RATE) + 1, np.int32)
    for c in clips:
        at = int(c.start * SAMPLE_RATE)
        mix[at : at + len(c.samples)] += c.samples
    agent_said = [(c.text, c.start) for c in output.clips]
    return VoiceMeeting(
        rows,
        np.clip(mix, -32768, 32767).astype(np.int16),
        agent_said,
        timeline,
        list(gate.decisions),
        dict(recognizer.added),
        [(h.speaker, h.text) for h in gate.room.recent],
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
    )


__all__ = [
    "AGENT_VOICE",
    "HUMAN_VOICES",
    "EspeakTTSService",
    "PocketsphinxSTTService",
    "Recognition",
    "Recognizer",
    "VoiceError",
    "VoiceMeeting",
    "VoiceRow",
    "VoiceUnavailable",
    "espeak_path",
    "hint_words",
    "pronounce",
    "run_espeak",
    "run_voice_meeting",
    "synthesize",
]
