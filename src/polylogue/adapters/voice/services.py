"""Pipecat services around the offline voices and recognizers.

* :class:`RecognizerSTTService` is a Pipecat ``SegmentedSTTService`` over any
  :class:`~polylogue.adapters.voice.recognition.Recognizer`: audio between a VAD's start and
  stop frames is decoded and one ``TranscriptionFrame`` comes out, with the participant's
  ``user_id`` and, in ``metadata``, the segment's times and the recognition time (and, from a
  recognizer that gives word confidences, the words it was unsure of: ``unsure``).
* :class:`VoiceTTSService` is a Pipecat ``TTSService`` speaking through any
  :class:`~polylogue.adapters.voice.synthesis.Voice` (espeak-ng or piper).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

try:
    from pipecat.frames.frames import (
        ErrorFrame,
        Frame,
        InputAudioRawFrame,
        TranscriptionFrame,
        TTSAudioRawFrame,
        TTSStoppedFrame,
        VADUserStartedSpeakingFrame,
        VADUserStoppedSpeakingFrame,
    )
    from pipecat.processors.frame_processor import FrameDirection
    from pipecat.services.settings import STTSettings, TTSSettings
    from pipecat.services.stt_service import SegmentedSTTService
    from pipecat.services.tts_service import TTSService
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError(
        "polylogue.adapters.voice's Pipecat services need Pipecat: pip install 'polylogue[voice]'"
    ) from e

from polylogue.adapters.voice.audio import SAMPLE_RATE, VoiceError
from polylogue.adapters.voice.recognition import Recognizer
from polylogue.adapters.voice.synthesis import Voice


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
    #: the words the recognizer was unsure of (None: it gave no word confidences)
    unsure: tuple[str, ...] | None = None


class RecognizerSTTService(SegmentedSTTService):
    """Pipecat STT for one participant's track: each VAD segment → one ``TranscriptionFrame``
    with ``user_id`` and ``metadata["time"]`` (the segment's end in track seconds, when the
    audio frames carry ``metadata["time"]``) and ``metadata["segment"]`` (a :class:`Segment`).
    Empty recognitions push nothing. ``segments`` lists every segment, empty ones too."""

    def __init__(self, recognizer: Recognizer, user_id: str, **kwargs: Any) -> None:
        kwargs.setdefault("ttfs_p99_latency", 2.0)
        super().__init__(
            sample_rate=SAMPLE_RATE,
            audio_passthrough=False,
            settings=STTSettings(model=recognizer.name, language=None),
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
        return False  # the recognizers read raw 16-bit PCM

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
            yield ErrorFrame(f"the recognizer failed on a segment of {self.user_id}: {e}")
            return
        if seg is None:
            seg = Segment(self.user_id, 0.0, self._audio_end, 0.0, time.perf_counter())
        seg.recognition_s, seg.text = r.seconds, r.text
        seg.unsure = r.unsure() if r.words else None
        self.segments.append(seg)
        if r.text:
            from polylogue.adapters.pipecat import iso_time

            end = seg.vad_stop - seg.stop_secs
            frame = TranscriptionFrame(r.text, self.user_id, iso_time(end))
            frame.metadata["time"] = end
            frame.metadata["segment"] = seg
            if seg.unsure is not None:  # the words it was unsure of, for the address verdict
                frame.metadata["unsure"] = seg.unsure
            seg.pushed_wall = time.perf_counter()
            yield frame  # pushed on before the generator resumes
        if self._queued:
            self._queued.popleft()  # after the push: `pending` covers the frame in flight


class VoiceTTSService(TTSService):
    """Pipecat TTS through a :class:`~polylogue.adapters.voice.synthesis.Voice` (16 kHz by
    default). A text the voice fails on is an ``ErrorFrame`` and is kept in ``failures``."""

    def __init__(
        self,
        voice: Voice,
        *,
        stop_frame_timeout_s: float = 30.0,
        **kwargs: Any,
    ) -> None:
        # Pipecat ends a context that gets no audio within ``stop_frame_timeout_s`` (and drops
        # the audio that comes later): a neural voice on a busy CPU takes seconds for a long
        # line, so the wait is long, and the stop frame is pushed right after the audio.
        super().__init__(
            push_start_frame=True,
            push_stop_frames=False,
            stop_frame_timeout_s=stop_frame_timeout_s,
            settings=TTSSettings(model=None, voice=voice.name, language=None),
            **kwargs,
        )
        self.voice = voice
        #: ``(text, error)`` of each text the voice failed on (the meeting checks it).
        self.failures: list[tuple[str, VoiceError]] = []

    def can_generate_metrics(self) -> bool:
        return True

    async def run_tts(self, text: str, context_id: str):
        try:
            samples = await asyncio.to_thread(self.voice.speak, text, self.sample_rate)
        except VoiceError as e:
            self.failures.append((text, e))
            yield ErrorFrame(f"the agent's voice failed: {e}")
            yield TTSStoppedFrame(context_id=context_id)  # the output stage stops waiting
            return
        yield TTSAudioRawFrame(
            audio=samples.tobytes(),
            sample_rate=self.sample_rate,
            num_channels=1,
            context_id=context_id,
        )
        yield TTSStoppedFrame(context_id=context_id)


__all__ = ["RecognizerSTTService", "Segment", "VoiceTTSService"]
