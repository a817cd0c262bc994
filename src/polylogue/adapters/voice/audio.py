"""Audio in a voice meeting: the sample rate, the errors a missing or broken voice or
recognizer raises, and the room a simulated meeting is heard in (background noise at a given
signal-to-noise ratio, the other speakers' bleed into each close-talk microphone).

No Pipecat here: the synthesis and recognition modules, and a ``serve`` user calling them, need
only numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from polylogue.errors import PolylogueInputError

#: The recognizers' sample rate (pocketsphinx's en-us model and Whisper are 16 kHz).
SAMPLE_RATE = 16000


class VoiceUnavailable(PolylogueInputError):
    """A voice or recognizer this meeting needs is not installed (the message says what to
    install), or its model folder is not a usable model."""


class VoiceError(PolylogueInputError):
    """A voice failed on a text: espeak-ng failed, hung or wrote no WAV audio, or piper wrote
    no audio for it."""


def resample(x: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """``x`` (any numeric dtype) at ``rate_out`` as float32."""
    if rate_in == rate_out:
        return x.astype(np.float32)
    from scipy.signal import resample_poly

    g = int(np.gcd(rate_in, rate_out))
    return resample_poly(x.astype(np.float32), rate_out // g, rate_in // g).astype(np.float32)


def to_int16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


def speech_power(x: np.ndarray) -> float:
    """Mean power of the voiced part of ``x`` (samples above 2% of the peak): the silence a
    voice pads a line with does not lower the level noise is set against."""
    y = x.astype(np.float64)
    if not len(y):
        return 0.0
    peak = float(np.max(np.abs(y)))
    voiced = y[np.abs(y) > 0.02 * peak] if peak > 0 else y
    return float(np.mean(voiced**2)) if len(voiced) else 0.0


def pink_noise(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` samples of unit-power pink (1/f) noise: closer to a room's hum and chatter than
    white noise, which a VAD tells from speech too easily."""
    if n <= 0:
        return np.zeros(0, np.float64)
    spectrum = rng.standard_normal(n // 2 + 1) + 1j * rng.standard_normal(n // 2 + 1)
    f = np.arange(n // 2 + 1, dtype=np.float64)
    f[0] = 1.0
    y = np.fft.irfft(spectrum / np.sqrt(f), n)
    return y / (np.std(y) or 1.0)


@dataclass
class Clip:
    """One line of speech placed in the meeting (``start`` in meeting seconds)."""

    start: float
    samples: np.ndarray
    who: str
    text: str = ""

    @property
    def end(self) -> float:
        return self.start + len(self.samples) / SAMPLE_RATE


@dataclass(frozen=True)
class Room:
    """How each participant's microphone hears the meeting.

    ``snr_db``: background noise (pink) on every track at this ratio to the speech level of
    the meeting's voices (None: none). ``bleed_db``: the other people's speech in each
    close-talk microphone, this many dB below their own track (None: none; a headset hears
    its neighbours at roughly -20 to -30 dB). ``overlap_s``: a next speaker starts this long
    before the last one's speech ends (a hand-off's overlap; 0: one at a time).
    ``barge_in_s``: a person speaking after the agent's reply starts this long into it, while
    it still plays (None: they wait for it to end)."""

    snr_db: float | None = None
    bleed_db: float | None = None
    overlap_s: float = 0.0
    seed: int = 0
    barge_in_s: float | None = None

    def speech(self, who: str, start: float, n: int, clips: Sequence[Clip]) -> np.ndarray:
        """``n`` samples (float) of the speech ``who``'s microphone hears from meeting time
        ``start``: their own clips, the others' at ``bleed_db``."""
        out = np.zeros(n, np.float64)
        at = round(start * SAMPLE_RATE)
        for c in clips:
            gain = 1.0 if c.who == who else _gain(self.bleed_db)
            if gain == 0.0:
                continue
            c0 = round(c.start * SAMPLE_RATE)
            lo, hi = max(at, c0), min(at + n, c0 + len(c.samples))
            if lo < hi:
                out[lo - at : hi - at] += gain * c.samples[lo - c0 : hi - c0]
        return out

    def noise(self, who: str, start: float, n: int, speech_level: float) -> np.ndarray:
        """``n`` samples (float) of the room's noise on ``who``'s track from ``start``, at
        ``snr_db`` below ``speech_level`` (a power; zeros without noise). Seeded by the track
        and its place: the same meeting gets the same noise."""
        if self.snr_db is None or speech_level <= 0:
            return np.zeros(n, np.float64)
        key = f"{self.seed}|{who}|{round(start * SAMPLE_RATE)}".encode()
        rng = np.random.default_rng(int.from_bytes(_digest(key)[:8], "little"))
        noise_power = speech_level / 10 ** (self.snr_db / 10)
        return np.sqrt(noise_power) * pink_noise(n, rng)


def _gain(db: float | None) -> float:
    return 0.0 if db is None else float(10 ** (-abs(db) / 20))


def _digest(b: bytes) -> bytes:
    import hashlib

    return hashlib.sha1(b).digest()


__all__ = [
    "SAMPLE_RATE",
    "Clip",
    "Room",
    "VoiceError",
    "VoiceUnavailable",
    "pink_noise",
    "resample",
    "speech_power",
    "to_int16",
]
