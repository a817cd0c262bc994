"""Offline voice: test voices, speech recognizers, Pipecat services around them, and a voice
meeting run through a real Pipecat pipeline. One module per concept:

* :mod:`~polylogue.adapters.voice.audio`: the sample rate, the errors, the room a simulated
  meeting is heard in (noise at a given SNR, bleed, overlapping hand-offs);
* :mod:`~polylogue.adapters.voice.synthesis`: voices (:class:`PiperVoice`, :class:`EspeakVoice`);
* :mod:`~polylogue.adapters.voice.names`: roster names as recognizer hints and pronunciations;
* :mod:`~polylogue.adapters.voice.recognition`: the :class:`Recognizer` interface,
  :class:`WhisperRecognizer` and :class:`PocketsphinxRecognizer`, :func:`make_recognizer`;
* :mod:`~polylogue.adapters.voice.services`: Pipecat STT and TTS services over them;
* :mod:`~polylogue.adapters.voice.meeting`: :func:`run_voice_meeting`.

The voices, names and recognizers need no Pipecat (a ``serve`` user can call a recognizer
directly); the services and the meeting are loaded on first use and need
``pip install 'polylogue[voice]'``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from polylogue.adapters.voice.audio import (
    SAMPLE_RATE,
    Clip,
    Room,
    VoiceError,
    VoiceUnavailable,
)
from polylogue.adapters.voice.names import hint_names, hint_words, pronounce
from polylogue.adapters.voice.recognition import (
    PocketsphinxRecognizer,
    Recognition,
    Recognizer,
    WhisperRecognizer,
    bundled_whisper_model,
    make_recognizer,
)
from polylogue.adapters.voice.synthesis import (
    AGENT_VOICE,
    HUMAN_VOICES,
    EspeakVoice,
    PiperVoice,
    Voice,
    bundled_piper_model,
    default_voices,
    espeak_path,
    run_espeak,
    synthesize,
)

if TYPE_CHECKING:
    from polylogue.adapters.voice.meeting import (
        VoiceMeeting,
        VoiceRow,
        line_error,
        run_voice_meeting,
    )
    from polylogue.adapters.voice.services import RecognizerSTTService, VoiceTTSService

#: Names loaded with Pipecat on first use (module, name).
_PIPECAT = {
    "RecognizerSTTService": "services",
    "VoiceTTSService": "services",
    "VoiceMeeting": "meeting",
    "VoiceRow": "meeting",
    "line_error": "meeting",
    "run_voice_meeting": "meeting",
}


def __getattr__(name: str) -> Any:
    if name in _PIPECAT:
        return getattr(import_module(f"{__name__}.{_PIPECAT[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AGENT_VOICE",
    "HUMAN_VOICES",
    "SAMPLE_RATE",
    "Clip",
    "EspeakVoice",
    "PiperVoice",
    "PocketsphinxRecognizer",
    "Recognition",
    "Recognizer",
    "RecognizerSTTService",
    "Room",
    "Voice",
    "VoiceError",
    "VoiceMeeting",
    "VoiceRow",
    "VoiceTTSService",
    "VoiceUnavailable",
    "WhisperRecognizer",
    "bundled_piper_model",
    "bundled_whisper_model",
    "default_voices",
    "espeak_path",
    "hint_names",
    "hint_words",
    "line_error",
    "make_recognizer",
    "pronounce",
    "run_espeak",
    "run_voice_meeting",
    "synthesize",
]
