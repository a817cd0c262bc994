"""The final punctuation a transcriber would have written, for text a recognizer wrote without.

The shipped model's features read the final punctuation of an utterance (a question mark, a
closed sentence, an open end) and so does its word model (the "last mark" key). A streaming
recognizer writes none (:func:`polylogue.rendering.recognizer_text`), and on such text the model
takes every utterance for an open one that the speaker goes on with. :class:`PunctuationModel`
puts the mark back from the words alone: two logistic models over the hashed words of the
utterance (the same keys as the turn-yield model, less the mark), one for "ends on a question
mark" and one for "ends a sentence" (".", "!" or "?"), trained on the train splits of AMI,
Friends, ICSI and Earnings-21 (the label is the original text's mark; the words are its
recognizer rendering). The weights ship as ``punctuation.npz``;
:mod:`polylogue.training.engine_models.punctuation` rebuilds them and prints held-out figures.

The conversation state restores marks only while a transcript has shown no punctuation at
all (:meth:`polylogue.engine.features.ConversationState.observe`), so transcribed text is read
exactly as written, and no flag is needed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from polylogue.engine.text import hash_keys, vocabulary_keys, words_of
from polylogue.errors import PolylogueInputError

PUNCTUATION_MODEL_PATH = Path(__file__).resolve().parent / "punctuation.npz"
#: Hash space of the two word models (as in :mod:`polylogue.engine.text`).
_PREFIX = "punct|"
# A sentence mark outside stage directions: the text was written with punctuation.
_DIRECTION = re.compile(r"\([^)]*\)?|\[[^\]]*\]?|\{[^}]*\}?")
_MARK = re.compile(r"[.?!,;:]")


def has_punctuation(text: str) -> bool:
    """Does the text (stage directions aside) carry any sentence punctuation?"""
    return bool(_MARK.search(_DIRECTION.sub(" ", text)))


def punctuation_keys(text: str) -> tuple[int, ...]:
    """The hashed words the two models read (the turn-yield keys without the final mark)."""
    words = words_of(_DIRECTION.sub(" ", text))
    keys = tuple(k for k in vocabulary_keys(words, "x") if not k.startswith("p:"))
    return hash_keys(keys, _PREFIX)


@dataclass(frozen=True)
class PunctuationModel:
    """P(the utterance ends on "?") and P(it ends a sentence), from its words."""

    question: np.ndarray  # float32 weights over the hash space
    terminal: np.ndarray

    def probabilities(self, text: str) -> tuple[float, float]:
        keys = list(punctuation_keys(text))
        q = float(self.question[keys].sum(dtype=np.float64)) if keys else 0.0
        t = float(self.terminal[keys].sum(dtype=np.float64)) if keys else 0.0
        return _sigmoid(q), _sigmoid(t)

    def mark(self, text: str) -> str:
        """``"?"``, ``"."`` or ``""`` (an open end) for unpunctuated ``text``."""
        p_question, p_terminal = self.probabilities(text)
        if p_question >= 0.5:
            return "?"
        return "." if p_terminal >= 0.5 else ""

    def restore(self, text: str) -> str:
        """``text`` with its final mark put back; text with any punctuation is returned as is."""
        if not text.strip() or has_punctuation(text):
            return text
        return text.rstrip() + self.mark(text)

    def save(self, path: str | Path) -> None:
        np.savez_compressed(
            path,
            question=self.question.astype(np.float16),
            terminal=self.terminal.astype(np.float16),
        )


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0)))


@lru_cache(maxsize=4)
def load_punctuation_model(path: str | Path = PUNCTUATION_MODEL_PATH) -> PunctuationModel:
    """The shipped (or a rebuilt) punctuation model; one clear error for a bad file."""
    try:
        with np.load(path) as z:
            return PunctuationModel(
                z["question"].astype(np.float32), z["terminal"].astype(np.float32)
            )
    except (OSError, KeyError, ValueError) as e:
        raise PolylogueInputError(f"{path}: not a punctuation model ({e})") from None
