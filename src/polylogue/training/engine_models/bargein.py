"""The barge-in model's training side: real overlaps read from the AMI meetings, and the fit.

An overlap is a dialogue act that starts while another speaker has been talking; its label is
whether that speaker stopped within ``window_s`` seconds (their run of words, with pauses
under ``max_gap`` seconds, ended). Word times come from the corpus reader
(:func:`polylogue.corpora.ami.read_ami_words`); the dialogue-act files are read here for their
word ranges and types. ``benchmarks/bargein_ami.py`` fits the shipped
``engine/bargein.json`` with :func:`fit_barge_in_model` and scores it on held-out meetings.
The runtime side (features, the model, deciding) is :mod:`polylogue.engine.bargein`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from polylogue.corpora.ami import read_ami_words
from polylogue.engine.bargein import BargeInModel, barge_in_features
from polylogue.errors import PolylogueInputError

# ----------------------------------------------------------------------------- AMI overlaps


@dataclass(frozen=True)
class Word:
    start: float
    end: float
    text: str


@dataclass(frozen=True)
class DialogueAct:
    speaker: str
    start: float
    end: float
    da_type: str
    words: tuple[Word, ...]


@dataclass(frozen=True)
class Overlap:
    """A dialogue act that starts while someone else is talking, and what happened next."""

    meeting: str
    interrupted: str
    interrupter: str
    time: float
    #: words of the interjection heard within the decision window
    text: str
    #: how long the interrupted speaker had been talking (their current run of words)
    speaking_s: float
    da_type: str
    #: did the interrupted speaker stop within the window?
    yielded: bool


_NITE = "{http://nite.sourceforge.net/}"
_CHILD = re.compile(r"id\(([^)]+)\)(?:\.\.id\(([^)]+)\))?")
_WORD_NUMBER = re.compile(r"\.words(\d+)$")


def _word_number(word_id: str) -> int:
    """Document position of an AMI word id (``ES2002a.A.words17`` -> 17).

    Every element of a words file (words, punctuation, vocal sounds, gaps) is numbered in
    document order, so a dialogue act's id range maps to a range of numbers.
    """
    m = _WORD_NUMBER.search(word_id)
    if m is None:
        raise PolylogueInputError(f"not an AMI word id: {word_id!r}")
    return int(m.group(1))


def _timed_words(root: Path, meeting: str) -> dict[str, tuple[list[int], list[Word]]]:
    """Per speaker: the timed, non-punctuation words in document order, with their numbers.

    Read by the corpus reader (:func:`polylogue.corpora.ami.read_ami_words`).
    """

    rows = sorted(
        (w.speaker, _word_number(w.word_id), Word(w.start, w.end, w.text))
        for w in read_ami_words(root, meeting)
        if not w.is_punct and w.start is not None and w.end is not None
    )
    out: dict[str, tuple[list[int], list[Word]]] = {}
    for speaker, number, word in rows:
        numbers, words = out.setdefault(speaker, ([], []))
        numbers.append(number)
        words.append(word)
    return out


@lru_cache(maxsize=1)
def _da_types(root: str) -> dict[str, str]:
    tree = ET.parse(Path(root) / "ontologies" / "da-types.xml")
    return {
        el.get(f"{_NITE}id", ""): el.get("name", "")
        for el in tree.iter()
        if el.get(f"{_NITE}id", "").startswith("ami_da_")
    }


def meeting_acts(root: Path, meeting: str) -> list[DialogueAct]:
    """Every dialogue act of one meeting with its timed words, in start-time order."""
    types = _da_types(str(root))
    acts: list[DialogueAct] = []
    for speaker, (numbers, words) in _timed_words(root, meeting).items():
        da_file = root / "dialogueActs" / f"{meeting}.{speaker}.dialog-act.xml"
        if not da_file.is_file():
            continue
        for dact in ET.parse(da_file).getroot().iter("dact"):
            child = dact.find(f"{_NITE}child")
            pointer = dact.find(f"{_NITE}pointer")
            if child is None:
                continue
            m = _CHILD.search(child.get("href", ""))
            if m is None:
                continue
            first = _word_number(m.group(1))
            last = _word_number(m.group(2) or m.group(1))
            span = tuple(words[bisect_left(numbers, first) : bisect_right(numbers, last)])
            if not span:
                continue
            href = pointer.get("href", "") if pointer is not None else ""
            tid = href.split("id(")[-1].rstrip(")") if "id(" in href else ""
            acts.append(
                DialogueAct(speaker, span[0].start, span[-1].end, types.get(tid, "none"), span)
            )
    acts.sort(key=lambda d: (d.start, d.speaker))
    return acts


def _runs(words: list[Word], max_gap: float) -> list[tuple[float, float]]:
    """Maximal stretches of talk (words closer than ``max_gap``)."""
    runs: list[tuple[float, float]] = []
    for w in words:
        if runs and w.start - runs[-1][1] < max_gap:
            runs[-1] = (runs[-1][0], max(runs[-1][1], w.end))
        else:
            runs.append((w.start, w.end))
    return runs


def meeting_overlaps(
    root: Path, meeting: str, window_s: float = 1.0, max_gap: float = 0.5, min_talk_s: float = 1.0
) -> Iterator[Overlap]:
    """Overlaps of one meeting: a DA starting while another speaker has talked ``min_talk_s``.

    The interrupted speaker "yielded" when their run of words ends within ``window_s`` of the
    interjection's start.
    """
    acts = meeting_acts(root, meeting)
    by_speaker: dict[str, list[Word]] = {}
    for d in acts:
        by_speaker.setdefault(d.speaker, []).extend(d.words)
    runs = {s: _runs(sorted(ws, key=lambda w: w.start), max_gap) for s, ws in by_speaker.items()}
    for d in acts:
        t = d.start
        for other, rs in runs.items():
            if other == d.speaker:
                continue
            run = _run_at(rs, t)
            if run is None or t - run[0] < min_talk_s or run[1] - t < 0.05:
                continue
            heard = " ".join(w.text for w in d.words if w.start < t + window_s)
            yield Overlap(
                meeting=meeting,
                interrupted=other,
                interrupter=d.speaker,
                time=t,
                text=heard,
                speaking_s=t - run[0],
                da_type=d.da_type,
                yielded=run[1] <= t + window_s,
            )


def _run_at(runs: list[tuple[float, float]], t: float) -> tuple[float, float] | None:
    lo, hi = 0, len(runs)
    while lo < hi:  # last run starting before t
        mid = (lo + hi) // 2
        if runs[mid][0] < t:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return None
    run = runs[lo - 1]
    return run if run[1] > t else None


def dialogue_act_meetings(root: Path) -> list[str]:
    """The AMI meetings with dialogue-act files (overlaps need their acts)."""
    return sorted({p.name.split(".")[0] for p in (root / "dialogueActs").glob("*.dialog-act.xml")})


def fit_barge_in_model(
    overlaps: Sequence[Overlap],
    c: float = 0.5,
    threshold: float = 0.5,
    metadata: dict[str, Any] | None = None,
) -> BargeInModel:
    """Logistic regression on the overlaps' features (words seen at least 3 times)."""
    from collections import Counter

    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    rows = [barge_in_features(o.text, o.speaking_s) for o in overlaps]
    counts = Counter(k for r in rows for k in r)
    rows = [{k: v for k, v in r.items() if counts[k] >= 3} for r in rows]
    vec = DictVectorizer()
    x = vec.fit_transform(rows)
    y = [o.yielded for o in overlaps]
    # The "bias" feature carries the intercept so the weights file is the whole model.
    clf = LogisticRegression(C=c, max_iter=2000, fit_intercept=False)
    clf.fit(x, y)
    weights = {
        name: float(w) for name, w in zip(vec.feature_names_, clf.coef_[0], strict=True) if w
    }
    return BargeInModel(weights, threshold, metadata)


def held_out_meeting(meeting: str) -> bool:
    """The fixed held-out set: whole scenario series (ES2002a-d together) by a stable hash."""
    import zlib

    return zlib.crc32(meeting[:-1].encode()) % 5 == 0
