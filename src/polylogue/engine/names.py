"""Name matching for a growing roster: one incrementally updated index, O(words) per utterance.

The batch builder compiles every participant's mention/vocative patterns once per conversation
(:func:`polylogue.turntaking.cues.build_matchers`). A live stream learns its roster one speaker
at a time, and rebuilding every matcher at each new speaker costs O(speakers) regex compiles
per speaker and thrashes Python's regex cache past a few hundred people. :class:`NameIndex`
instead finds the few participants an utterance can mention through a word index (a name can
only match where its first word appears as a whole word of the text) and compiles a
participant's patterns only when their name first occurs, so neither a new speaker nor an
utterance costs work proportional to the roster. A matcher is exactly the one
``build_matchers`` builds for the same roster; it is recompiled when its name becomes shared.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

from polylogue.conversation import Participant
from polylogue.turntaking.cues import _Matcher as Matcher
from polylogue.turntaking.cues import participant_matcher, participant_terms

_TOKEN = re.compile(r"\w+")


def _first_token(term: str) -> str | None:
    m = _TOKEN.search(term.lower())
    return m.group(0) if m else None


class NameIndex:
    """Per-participant matchers plus a first-word index, updated one participant at a time."""

    def __init__(self, cased: bool = False) -> None:
        self.cased = cased
        #: compiled so far (compiled lazily: see :meth:`matcher`)
        self._compiled: dict[str, Matcher] = {}
        self._terms: dict[str, tuple[list[str], list[str]]] = {}
        #: lower-cased term -> participants who bear it (a shared name has several)
        self._owners: dict[str, set[str]] = {}
        #: first word of a term -> participants with a term starting with that word
        self._by_word: dict[str, set[str]] = {}
        #: participants with a term that has no word characters (always checked)
        self._unindexed: set[str] = set()
        #: bumped whenever any matcher changes (callers cache cues per version)
        self.version = 0

    def __contains__(self, pid: str) -> bool:
        return pid in self._terms

    def __deepcopy__(self, memo: dict[int, Any]) -> NameIndex:
        # Matchers and term lists are replaced, never changed in place: share them; the
        # owner sets change in place: copy them.
        new = copy.copy(self)
        new._compiled = dict(self._compiled)
        new._terms = dict(self._terms)
        new._owners = {k: set(v) for k, v in self._owners.items()}
        new._by_word = {k: set(v) for k, v in self._by_word.items()}
        new._unindexed = set(self._unindexed)
        return new

    def add(self, people: Iterable[Participant]) -> None:
        """Register new participants; compiles only them and those whose name became shared."""
        dirty: set[str] = set()
        for p in people:
            if p.id in self._terms:
                continue
            names, roles = participant_terms(p)
            self._terms[p.id] = (names, roles)
            dirty.add(p.id)
            for t in (*names, *roles):
                owners = self._owners.setdefault(t.lower(), set())
                if len(owners) == 1:
                    dirty |= owners  # their term turns from own to shared
                owners.add(p.id)
                word = _first_token(t)
                if word is None:
                    self._unindexed.add(p.id)
                else:
                    self._by_word.setdefault(word, set()).add(p.id)
        self._invalidate(dirty)

    def remove(self, pid: str) -> None:
        """Forget a participant (a provisional name later resolved to a real speaker)."""
        terms = self._terms.pop(pid, None)
        if terms is None:
            return
        self._compiled.pop(pid, None)
        self._unindexed.discard(pid)
        dirty: set[str] = set()
        for t in (*terms[0], *terms[1]):
            owners = self._owners.get(t.lower(), set())
            owners.discard(pid)
            if len(owners) == 1:
                dirty |= owners  # their term is their own again
            if not owners:
                self._owners.pop(t.lower(), None)
            word = _first_token(t)
            if word is not None and word in self._by_word:
                self._by_word[word].discard(pid)
                if not self._by_word[word]:
                    del self._by_word[word]
        self._invalidate(dirty)
        self.version += 1

    def set_cased(self, cased: bool) -> None:
        """Switch to case-sensitive names (once a transcript shows capitals): recompile all."""
        if cased != self.cased:
            self.cased = cased
            self._invalidate(set(self._compiled))

    def candidates(self, text: str) -> set[str]:
        """Participants whose name or role can occur in ``text`` (a superset of the matches)."""
        found = set(self._unindexed)
        for word in set(_TOKEN.findall(text.lower())):
            hit = self._by_word.get(word)
            if hit:
                found |= hit
        return found

    def matcher(self, pid: str) -> Matcher | None:
        """The participant's matcher, compiled on first use; None for an unknown id."""
        m = self._compiled.get(pid)
        if m is None and pid in self._terms:
            names, roles = self._terms[pid]
            m = participant_matcher(pid, names, roles, self._owners, self.cased)
            self._compiled[pid] = m
        return m

    def _invalidate(self, pids: set[str]) -> None:
        """Matchers of ``pids`` are stale (roster or casing changed); cached cues too."""
        for pid in pids:
            self._compiled.pop(pid, None)
        self.version += 1
