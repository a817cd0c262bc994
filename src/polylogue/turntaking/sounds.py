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

The index only proposes a name; whether the word is *used* as a name (and as a vocative) is
for the address model to judge, as for a name spelt right.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import jellyfish

#: A word and a name this close in spelling (Jaro-Winkler) may be the same name heard.
MIN_SIMILARITY = 0.72
#: The best name must be this much closer than the next to be taken.
MARGIN = 0.04
#: Shortest word and name (letters) that are matched by sound.
MIN_LETTERS = 4


def sound_key(word: str) -> str:
    """The Metaphone code of ``word`` (letters only; "" when it has none)."""
    letters = "".join(c for c in word.lower() if c.isalpha() and c.isascii())
    return jellyfish.metaphone(letters) if letters else ""


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
        if len(word) < MIN_LETTERS or not word.isalpha():
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

    def match(self, word: str) -> tuple[str, float] | None:
        """The roster name word that ``word`` sounds like, and their spelling similarity;
        None when no name is close, or two are about as close (see the module docstring)."""
        if len(word) < MIN_LETTERS or not word.isalpha() or word in self.everyday:
            return None
        if not self._by_variant:
            return None
        code = sound_key(word)
        if len(code) < 2:
            return None
        close: dict[str, float] = {}
        for v in _deletions(code):
            for name in self._by_variant.get(v, ()):
                if name == word or name in close:
                    continue
                if jellyfish.levenshtein_distance(code, sound_key(name)) > 1:
                    continue
                close[name] = jellyfish.jaro_winkler_similarity(word, name)
        if not close:
            return None
        ranked = sorted(close.items(), key=lambda kv: -kv[1])
        best, score = ranked[0]
        if score < MIN_SIMILARITY:
            return None
        if len(ranked) > 1 and ranked[1][1] > score - MARGIN:
            return None
        return best, score

    def owners(self, name: str) -> frozenset[str]:
        """The participants one indexed name word belongs to."""
        return self._by_variant.get(sound_key(name), {}).get(name, frozenset())
