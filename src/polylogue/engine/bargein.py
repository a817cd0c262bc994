"""Barge-in: while the agent speaks and a human starts, yield (stop talking) or continue?

The model is learnt from real overlaps in the AMI meetings (see :func:`ami_overlaps`): a
speaker is talking, another starts a dialogue act inside that talk, and the label says whether
the first speaker stopped within ``window_s`` seconds (their run of words, with pauses under
0.5 s, ended). What the live agent knows at that moment is what the ASR has of the
interjection so far, so the features are the interjection's words in its first ``window_s``
seconds plus how long the agent had been speaking. The shipped weights (``bargein.json``) are
a logistic regression over those features; ``benchmarks/bargein_ami.py`` rebuilds them and
reports held-out accuracy against "yield on any speech" and a lexical backchannel list.

Word times come from the corpus reader (:func:`polylogue.corpora.ami.read_ami_words`); the
dialogue-act files are read here for their word ranges and types.
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from polylogue.errors import PolylogueInputError
from polylogue.turntaking.cues import FILLER_WORDS

BARGE_IN_MODEL_PATH = Path(__file__).resolve().parent / "bargein.json"
_WORD = re.compile(r"[\w'-]+")

#: Words that make up a backchannel or acknowledgement ("yeah", "mm-hmm", "okay"): the
#: lexical baseline continues when an interjection is made of these only.
BACKCHANNEL_WORDS = frozenset(
    {
        *FILLER_WORDS,
        "yeah",
        "yes",
        "yep",
        "yup",
        "ok",
        "okay",
        "right",
        "sure",
        "alright",
        "uh-huh",
        "mm-hmm",
        "mhm",
        "hmm",
        "oh",
        "ah",
        "wow",
        "cool",
        "great",
        "nice",
        "good",
        "true",
        "exactly",
        "indeed",
        "really",
        "i",
        "see",
        "got",
        "it",
        "totally",
        "absolutely",
        "definitely",
    }
)


@dataclass(frozen=True)
class BargeInDecision:
    """Yield (stop talking, it is a real interruption) or continue (a backchannel)."""

    yield_floor: bool
    p_yield: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": "yield" if self.yield_floor else "continue",
            "p_yield": round(self.p_yield, 4),
            "reason": self.reason,
        }


def interjection_words(text: str) -> list[str]:
    return [w.strip("-'") for w in _WORD.findall(text.lower()) if w.strip("-'")]


def lexical_backchannel(words: Sequence[str]) -> bool:
    """The lexical baseline: every word is a backchannel/acknowledgement word."""
    return bool(words) and all(w in BACKCHANNEL_WORDS for w in words)


def barge_in_features(text: str, agent_speaking_s: float | None = None) -> dict[str, float]:
    """Sparse features of an interjection (its words so far) for the logistic model."""
    words = interjection_words(text)
    f: dict[str, float] = {"bias": 1.0}
    for w in set(words):
        f[f"w:{w}"] = 1.0
    if words:
        f[f"first:{words[0]}"] = 1.0
    f[f"n:{min(len(words), 6)}"] = 1.0
    f["backchannel_only"] = float(lexical_backchannel(words))
    f["question"] = float("?" in text)
    if agent_speaking_s is not None:
        f["log_speaking_s"] = math.log1p(max(agent_speaking_s, 0.0))
    return f


@dataclass(frozen=True)
class BargeInModel:
    """A logistic regression on :func:`barge_in_features`; yields when P(yield) >= threshold."""

    weights: dict[str, float]
    threshold: float = 0.5
    metadata: dict[str, Any] | None = None

    def p_yield(self, text: str, agent_speaking_s: float | None = None) -> float:
        f = barge_in_features(text, agent_speaking_s)
        z = sum(self.weights.get(k, 0.0) * v for k, v in f.items())
        return 1.0 / (1.0 + math.exp(-max(min(z, 30.0), -30.0)))

    def decide(self, text: str, agent_speaking_s: float | None = None) -> BargeInDecision:
        p = self.p_yield(text, agent_speaking_s)
        words = interjection_words(text)
        if p >= self.threshold:
            reason = "interruption"
        elif lexical_backchannel(words):
            reason = "backchannel"
        else:
            reason = "side remark"
        return BargeInDecision(p >= self.threshold, p, reason)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "polylogue.bargein.logistic/1",
            "threshold": self.threshold,
            "metadata": self.metadata or {},
            "weights": {k: round(v, 5) for k, v in sorted(self.weights.items())},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BargeInModel:
        if d.get("format") != "polylogue.bargein.logistic/1":
            raise PolylogueInputError(f"not a barge-in model: format {d.get('format')!r}")
        return cls(
            {str(k): float(v) for k, v in d["weights"].items()},
            float(d["threshold"]),
            d.get("metadata"),
        )


@lru_cache(maxsize=4)
def load_barge_in_model(path: str | Path | None = None) -> BargeInModel:
    """The shipped barge-in model (or one written by benchmarks/bargein_ami.py)."""
    p = Path(path) if path is not None else BARGE_IN_MODEL_PATH
    return BargeInModel.from_dict(json.loads(p.read_text(encoding="utf-8")))


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
    from polylogue.corpora.ami import read_ami_words  # training only: keep live imports light

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


def ami_meetings(root: Path) -> list[str]:
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
