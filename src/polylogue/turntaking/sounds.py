"""Names as a speech recognizer hears them: a roster name matched by sound as well as spelling.

A recognizer writes the name it heard in the spelling it knows best: ``shawn`` for Sean,
``katrin`` for Catherine, ``norah`` for Nora. :class:`SoundIndex` keys every one-word name of a
roster by its Metaphone code (``jellyfish``) and finds, for a word the roster does not spell,
the names whose codes are at most one edit apart; among those it keeps the one whose spelling
is closest (Jaro-Winkler), and only when no other roster name comes as close. A word is never
matched when it is

* an everyday word (``everyday``: the words the shared corpora write in lower case; "shown" is
  never Sean, "marc" may be Mark),
* shorter than four letters, or its name is (three-letter names have too many neighbours:
  "dan" ~ "den", "then"),
* closer in spelling to two roster names than the margin (the roster holds Sean and Shane and
  the word is halfway: no one is meant, rather than the wrong one).

A word the recognizer was **unsure** of (a low word confidence: the caller says which words)
is matched at a looser distance (:data:`UNSURE_EDITS`, :data:`UNSURE_SIMILARITY`), everyday
words included, and two unsure words may join into one name even when both are everyday words
("yes man" for Yasmin): a recognizer unsure of a word it wrote where a name was said often
wrote a common word that sounds like it. The looser bounds never apply to a word written with
confidence.

The index only proposes a name; whether the word is *used* as a name (and as a vocative) is
for the address model to judge, as for a name spelt right.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from dataclasses import dataclass, field

import jellyfish

#: A word and a name of the same sound (Metaphone code) this close in spelling (Jaro-Winkler)
#: may be the same name heard ("jerrick" for Girik, "illina" for Ileana).
MIN_SIMILARITY = 0.6
#: The same for a word whose sound is one edit from the name's ("darius" for Dariusz).
MIN_SIMILARITY_ONE_EDIT = 0.75
#: Two words joined into one name must spell this close to it.
PAIR_SIMILARITY = 0.8
#: The best name must be this much closer than the next to be taken.
MARGIN = 0.04
#: Shortest word and name (letters) that are matched by sound.
MIN_LETTERS = 4
#: A word the recognizer was unsure of: its sound this many edits from the name's at most,
UNSURE_EDITS = 1
#: and its spelling this close (Jaro-Winkler); an everyday word too.
UNSURE_SIMILARITY = 0.7
#: Two unsure words joined into one name (both may be everyday words).
UNSURE_PAIR_SIMILARITY = 0.7


def ascii_fold(text: str) -> str:
    """``text`` without its accents ("András" -> "Andras", "Gráinne" -> "Grainne"): the
    spelling an English recognizer writes. Letters with no ASCII base stay as they are."""
    decomposed = unicodedata.normalize("NFKD", text)
    folded = "".join(c for c in decomposed if not unicodedata.combining(c))
    # Letters NFKD does not take apart.
    return folded.translate(_UNDECOMPOSED)


_UNDECOMPOSED = str.maketrans(
    {"ı": "i", "ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ß": "ss", "æ": "ae",
     "Æ": "AE", "œ": "oe", "Œ": "OE", "þ": "th", "ð": "d"}
)  # fmt: skip


def sound_key(word: str) -> str:
    """The Metaphone code of ``word`` (letters only, accents dropped; "" when it has none)."""
    letters = "".join(c for c in ascii_fold(word.lower()) if c.isalpha() and c.isascii())
    code = jellyfish.metaphone(letters) if letters else ""
    # Metaphone keeps a first vowel as written; a recognizer hears "elisha" for Alessia.
    return "A" + code[1:] if code[:1] in _VOWELS else code


_VOWELS = frozenset("AEIOU")


def _deletions(code: str) -> set[str]:
    """``code`` and every code one deletion away (two codes within one edit share one)."""
    return {code} | {code[:i] + code[i + 1 :] for i in range(len(code))}


@dataclass
class SoundIndex:
    """One-word roster names by their sound; see the module docstring."""

    everyday: Collection[str] = frozenset()
    #: deletion variant of a code -> {name word: participant ids}
    _by_variant: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)

    def add(self, word: str, pid: str) -> None:
        """Index one name word (lower case) of participant ``pid``."""
        if len(word) < MIN_LETTERS - 1 or not word.isalpha():
            return
        code = sound_key(word)
        if len(code) < 2:
            return
        # Inner maps are replaced, never changed in place, so a copy may share them.
        for v in _deletions(code):
            names = dict(self._by_variant.get(v, {}))
            names[word] = names.get(word, frozenset()) | {pid}
            self._by_variant[v] = names

    def remove(self, pid: str) -> None:
        for v, names in list(self._by_variant.items()):
            if any(pid in owners for owners in names.values()):
                kept = {w: o - {pid} for w, o in names.items() if o - {pid}}
                if kept:
                    self._by_variant[v] = kept
                else:
                    del self._by_variant[v]

    def copy(self) -> SoundIndex:
        """A copy that later ``add``/``remove`` calls on either do not share."""
        return SoundIndex(self.everyday, dict(self._by_variant))

    def match(
        self, word: str, everyday: bool = False, unsure: bool = False
    ) -> tuple[str, float] | None:
        """The roster name word that ``word`` sounds like, and their spelling similarity;
        None when no name is close, or two people's names are about as close (see the
        module docstring). ``everyday``: an everyday word may match too (the caller then
        asks more of the context than of a name). ``unsure``: the recognizer was unsure of
        the word; the looser bounds apply."""
        if len(word) < MIN_LETTERS - 1 or not word.isalpha():
            return None
        if unsure:
            return self._closest(word, max_edits=UNSURE_EDITS, min_similarity=UNSURE_SIMILARITY)
        if word in self.everyday:
            if not (everyday and len(word) >= MIN_LETTERS):
                return None
            # An everyday word must sound exactly like the name and spell close to it
            # ("grain" for Grainne; "have" is never Dave).
            hit = self._closest(word, exact_key=True)
            return hit if hit is not None and hit[1] >= PAIR_SIMILARITY else None
        # A three-letter word has many neighbours: only the very same sound counts.
        return self._closest(word, exact_key=len(word) < MIN_LETTERS)

    def match_pair(self, first: str, second: str, unsure: bool = False) -> tuple[str, float] | None:
        """A name a recognizer split in two ("jula jana" for Julijana, "and ross" for
        András): the joined words must sound exactly like the name and spell close to it,
        and one of them must be no everyday word ("has to" is never Hesti). ``unsure``: the
        recognizer was unsure of both words; the looser bounds apply."""
        if not (first.isalpha() and second.isalpha()):
            return None
        if unsure:
            return self._closest(
                first + second, max_edits=UNSURE_EDITS, min_similarity=UNSURE_PAIR_SIMILARITY
            )
        if first in self.everyday and second in self.everyday:
            return None
        hit = self._closest(first + second, exact_key=True)
        return hit if hit is not None and hit[1] >= PAIR_SIMILARITY else None

    def _closest(
        self,
        word: str,
        exact_key: bool = False,
        max_edits: int | None = None,
        min_similarity: float | None = None,
    ) -> tuple[str, float] | None:
        """The closest name (see the module docstring). ``max_edits`` and ``min_similarity``
        loosen the usual bounds (a word the recognizer was unsure of): never tighten them."""
        if not self._by_variant:
            return None
        code = sound_key(word)
        if len(code) < 2:
            return None
        folded = ascii_fold(word)
        edits_allowed = max(max_edits or 0, 0 if exact_key else 1)
        close: dict[str, float] = {}
        for v in self._variants(code, edits_allowed):
            for name in self._by_variant.get(v, ()):
                if name == word or name in close:
                    continue
                edits = jellyfish.levenshtein_distance(code, sound_key(name))
                if edits > edits_allowed:
                    continue
                score = jellyfish.jaro_winkler_similarity(folded, ascii_fold(name))
                # The same sound asks less of the spelling than a sound one edit away.
                least = MIN_SIMILARITY if edits == 0 else MIN_SIMILARITY_ONE_EDIT
                if min_similarity is not None:
                    least = min(least, min_similarity)
                if score >= least:
                    close[name] = score
        if not close:
            return None
        ranked = sorted(close.items(), key=lambda kv: -kv[1])
        best, score = ranked[0]
        owners = self.owners(best)
        for other, other_score in ranked[1:]:
            # Another person's name about as close: no one is meant, rather than the wrong one.
            if self.owners(other) != owners and other_score > score - MARGIN:
                return None
        return best, score

    def _variants(self, code: str, edits: int) -> set[str]:
        """The index keys a name within ``edits`` of ``code`` may sit under (one deletion
        each side covers one edit; more edits: every key, the index is one roster)."""
        return _deletions(code) if edits <= 1 else set(self._by_variant)

    def owners(self, name: str) -> frozenset[str]:
        """The participants one indexed name word belongs to."""
        return self._by_variant.get(sound_key(name), {}).get(name, frozenset())
