"""Per-utterance text analysis: cheap lexical facts and the hashed turn-yield vocabulary.

Everything here is a pure function of one utterance's text, so the engine computes it once,
when the utterance arrives, and reuses it at every later pause.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Any

from polylogue.turntaking.cues import FILLER_WORDS, is_filler_only, looks_incomplete

_WORD = re.compile(r"[\w'-]+")

#: Hash space of the turn-yield vocabulary (2**18 float32 weights = 1 MiB on disk).
HASH_BITS = 18
HASH_SIZE = 1 << HASH_BITS

_WH = frozenset({"what", "who", "whom", "whose", "which", "when", "where", "why", "how"})
_AUX = frozenset(
    {
        "do",
        "does",
        "did",
        "can",
        "could",
        "would",
        "will",
        "shall",
        "should",
        "is",
        "are",
        "was",
        "were",
        "have",
        "has",
        "had",
        "may",
        "might",
        "must",
        "isn't",
        "aren't",
        "don't",
        "doesn't",
        "didn't",
        "won't",
        "wouldn't",
        "can't",
        "couldn't",
        "shouldn't",
    }
)
_SECOND_PERSON = frozenset(
    {"you", "your", "yours", "yourself", "you're", "you've", "you'll", "you'd", "ya"}
)
_FIRST_PLURAL = frozenset({"we", "us", "our", "ours", "we're", "we've", "we'll", "let's"})
_THIRD_PERSON = frozenset(
    {"he", "she", "him", "her", "his", "hers", "he's", "she's", "they", "them"}
)
_GROUP_ADDRESS = frozenset(
    {"everyone", "everybody", "anyone", "anybody", "guys", "folks", "all", "somebody", "someone"}
)
#: Short answers and acknowledgements: a turn made of these usually yields the floor back.
_ACKNOWLEDGEMENTS = frozenset(
    {
        "yeah",
        "yes",
        "yep",
        "yup",
        "okay",
        "ok",
        "right",
        "sure",
        "alright",
        "no",
        "nope",
        "mm-hmm",
        "uh-huh",
        "mhm",
        "true",
        "exactly",
        "cool",
        "great",
        "fine",
        "good",
        "thanks",
        "hmm",
        "oh",
        "i",
        "see",
        "so",
        "well",
        "and",
        "um",
        "uh",
        "agreed",
        "definitely",
    }
)
_STOP = frozenset(
    {
        "that",
        "this",
        "there",
        "they",
        "them",
        "then",
        "than",
        "what",
        "when",
        "where",
        "which",
        "with",
        "would",
        "could",
        "should",
        "have",
        "been",
        "were",
        "just",
        "like",
        "know",
        "yeah",
        "okay",
        "well",
        "right",
        "think",
        "going",
        "gonna",
        "about",
        "really",
        "it's",
        "that's",
        "don't",
        "i'm",
        "your",
        "from",
        "will",
        "some",
        "something",
        "because",
        "also",
        "into",
    }
)
_TRAILING_CONTINUERS = frozenset(
    {
        "and",
        "but",
        "or",
        "so",
        "the",
        "a",
        "an",
        "to",
        "of",
        "that",
        "because",
        "if",
        "with",
        "for",
        "in",
        "is",
    }
)
_ASK_REQUEST = re.compile(
    r"\b(?:can|could|would|will|do|did|are|were|have|has)\s+(?:you|ya)\b|\bwhat\s+do\s+you\b|"
    r"\bwhat\s+about\s+you\b|\byou\s+know\s+what\b|\bhow\s+about\b|\bwhat\s+do\s+we\b|"
    r"\bany\s+(?:questions|comments|thoughts|ideas)\b|\bwhat\s+(?:do|did)\s+(?:they|he|she)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class TextFacts:
    """What one utterance's words say about the floor, independent of who listens."""

    n_words: int
    question_mark: bool
    wh_start: bool
    aux_start: bool
    ask_request: bool
    second_person: bool
    first_plural: bool
    third_person: bool
    group_address: bool
    incomplete: bool
    trailing_continuer: bool
    ends_terminal: bool
    filler_only: bool
    acknowledgement: bool
    #: Hashed vocabulary indices for the turn-yield model (sorted, unique).
    hashed: tuple[int, ...]
    #: The unhashed vocabulary keys (crossed with the target's relation at decision time).
    keys: tuple[str, ...]
    #: Content words (4+ letters, no stop words) for topic overlap between utterances.
    content: frozenset[str]

    def __deepcopy__(self, memo: dict[int, Any]) -> TextFacts:
        return self  # immutable: a live fork shares it


def words_of(text: str) -> list[str]:
    return [w.strip("-'") for w in _WORD.findall(text.lower()) if w.strip("-'")]


def _h(key: str) -> int:
    return zlib.crc32(key.encode("utf-8")) & (HASH_SIZE - 1)


def vocabulary_keys(words: list[str], text: str) -> tuple[str, ...]:
    """The words, the first/last words and bigrams, the final punctuation, the length."""
    keys = {f"w:{w}" for w in words}
    if words:
        keys.add(f"f:{words[0]}")
        keys.add(f"l:{words[-1]}")
        if len(words) > 1:
            keys.add(f"f2:{words[0]} {words[1]}")
            keys.add(f"l2:{words[-2]} {words[-1]}")
    stripped = text.rstrip()
    keys.add(f"p:{stripped[-1] if stripped and not stripped[-1].isalnum() else '_'}")
    keys.add(f"n:{min(len(words), 12)}")
    keys.add("bias")
    return tuple(sorted(keys))


def hash_keys(keys: tuple[str, ...], prefix: str = "") -> tuple[int, ...]:
    """Hash ids of vocabulary keys, optionally crossed with a prefix (e.g. a relation)."""
    return tuple(sorted({_h(prefix + k) for k in keys}))


def text_facts(text: str) -> TextFacts:
    words = words_of(text)
    wordset = set(words)
    stripped = text.rstrip()
    last = words[-1] if words else ""
    keys = vocabulary_keys(words, text)
    first = words[0] if words else ""
    return TextFacts(
        n_words=len(words),
        question_mark="?" in text,
        wh_start=first in _WH or (first in FILLER_WORDS and len(words) > 1 and words[1] in _WH),
        aux_start=first in _AUX,
        ask_request=bool(_ASK_REQUEST.search(text)),
        second_person=bool(wordset & _SECOND_PERSON),
        first_plural=bool(wordset & _FIRST_PLURAL),
        third_person=bool(wordset & _THIRD_PERSON),
        group_address=bool(wordset & _GROUP_ADDRESS),
        incomplete=looks_incomplete(text),
        trailing_continuer=last in _TRAILING_CONTINUERS or last in FILLER_WORDS,
        ends_terminal=stripped.endswith((".", "!", "?")) and not stripped.endswith("..."),
        filler_only=is_filler_only(text),
        acknowledgement=bool(words) and len(words) <= 4 and wordset <= _ACKNOWLEDGEMENTS,
        hashed=hash_keys(keys),
        keys=keys,
        content=frozenset(w for w in words if len(w) >= 4 and w not in _STOP),
    )
