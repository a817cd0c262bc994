"""The learned half of the address verdict: is a name in the words a vocative?

The rules of :mod:`polylogue.turntaking.address` are kept where they are exact (a possessive,
an introduction, a name after a greeting, a name alone, a name set off by written commas).
Everywhere else (a name followed by a verb, a name inside a long line, a name at the end of a
verbless question, a roster name that is also an everyday word) this model decides, from the
words around the name as a recognizer writes them.

**What it sees.** One *candidate*: a span of the recognizer rendering's words that a roster
name matched (by spelling or by sound, :mod:`polylogue.turntaking.sounds`). Every roster name
in the words is replaced by a placeholder (``<t>`` for the candidate, ``<name>`` for the
others), so the model learns constructions, not names; only a name that is also an everyday
word ("will", "mark", "hope") keeps its identity, because "i will check" and "will can you
check" differ in nothing else. Features: the two words on each side and their bigrams, the
word classes of the rulebook's lexicon (auxiliaries, wh-words, "you", openers, object-taking
words, ...), where the name stands (first after openers, last, alone), the utterance's length,
suffixes of the next word (a third-person "-s", a past "-ed"), a "you" after the name, whether
the candidate spoke the turn before and whether two people talk. It cannot see prosody, the
speaker's gaze, or anything beyond the previous turn.

**What it learned from** (``python -m polylogue.training.engine_models.address_model``): the
names in the train splits of the written corpora (Friends, Earnings-21) labelled by their
written punctuation (a name set off by commas or a sentence edge on both sides is a vocative),
the ``nick:`` prefixes of the Ubuntu IRC train files, and the same sentences with roster names
replaced by everyday-word names and with fillers inserted (see the training module).

**Weights**: ``address_model.npz`` in this package (feature strings and float32 weights; no
pickle), a few hundred microseconds of Python per name on one core.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

#: The package file holding the shipped weights.
MODEL_FILE = "address_model.npz"
#: Placeholder for the candidate name and for any other roster name.
TARGET, OTHER = "<t>", "<name>"
_BOS, _EOS = "<s>", "</s>"


def _bucket(n: int) -> str:
    for limit, name in ((1, "1"), (2, "2"), (3, "3"), (5, "4-5"), (8, "6-8"), (12, "9-12")):
        if n <= limit:
            return name
    return "13+"


@dataclass(frozen=True, slots=True)
class Candidate:
    """One name in the words, and what the model may know about its place in the talk."""

    words: tuple[str, ...]
    start: int
    end: int
    #: Word positions of the other roster names in ``words``.
    other_names: frozenset[int] = frozenset()
    #: The name is also an everyday word ("will", "mark"): its identity is a feature.
    common: bool = False
    #: Matched by sound, not by spelling.
    by_sound: bool = False
    #: The named participant held the turn before the speaker's.
    spoke_before: bool = False
    #: Only the speaker and one other person are present.
    two_person: bool = False
    #: The rulebook's reading of the name (a vocative kind, "mention" or "skip").
    rule: str = ""


def candidate_features(c: Candidate, classes: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The feature strings of one candidate (see the module docstring); ``classes`` maps a
    word to its lexicon classes (:data:`polylogue.turntaking.address.WORD_CLASSES`)."""
    w = c.words
    n = len(w)
    name_word = " ".join(w[c.start : c.end])

    def tok(i: int) -> str:
        if i < 0:
            return _BOS
        if i >= n:
            return _EOS
        if c.start <= i < c.end:
            return TARGET
        return OTHER if i in c.other_names else w[i]

    p1, p2, p3 = tok(c.start - 1), tok(c.start - 2), tok(c.start - 3)
    n1, n2, n3 = tok(c.end), tok(c.end + 1), tok(c.end + 2)
    lead = 0
    while lead < c.start and "opener" in classes.get(w[lead], ()):
        lead += 1
    first_after_openers = lead == c.start
    alone = c.end - c.start == n
    pos = "alone" if alone else "first" if first_after_openers else "inside"
    f = [
        f"p1={p1}",
        f"p2={p2}_{p1}",
        f"p3={p3}",
        f"n1={n1}",
        f"n2={n1}_{n2}",
        f"n3={n3}",
        f"p1n1={p1}_{n1}",
        f"len={_bucket(n)}",
        f"pos={pos}",
        f"end={c.end == n}",
        f"start0={c.start == 0}",
        f"openers={min(lead, 2)}" if first_after_openers else "openers=-",
    ]
    for k, word in (("p1", p1), ("p2", p2), ("n1", n1), ("n2", n2)):
        for cls in classes.get(word, ()):
            f.append(f"{k}c={cls}")
    if n1 not in (_EOS, OTHER, TARGET) and len(n1) > 3:
        f.append(f"n1sfx={n1[-2:]}")
        if n1.endswith("s") and not n1.endswith("ss"):
            f.append("n1=-s")
        if n1.endswith("ed"):
            f.append("n1=-ed")
        if n1.endswith("ing"):
            f.append("n1=-ing")
    after = w[c.end : c.end + 4]
    before = w[max(0, c.start - 4) : c.start]
    you_after = any("you" in classes.get(x, ()) for x in after)
    you_before = any("you" in classes.get(x, ()) for x in before)
    f.append(f"you_after={you_after}")
    f.append(f"you_before={you_before}")
    head = w[lead] if lead < n and lead != c.start else tok(lead)
    f.append(f"head={head}")
    for cls in classes.get(head, ()):
        f.append(f"headc={cls}")
    f.append(f"last={tok(n - 1)}")
    if c.common:
        f += ["common", f"cw={name_word}", f"cw={name_word}_n1={n1}", f"cw={name_word}_p1={p1}"]
    if c.by_sound:
        f.append("by_sound")
    if c.spoke_before:
        f += ["spoke_before", f"spoke_before_pos={pos}"]
    if c.two_person:
        f.append("two_person")
    if c.rule:
        f += [f"rule={c.rule}", f"rule={c.rule}_pos={pos}"]
    return f


@dataclass(frozen=True)
class AddressModel:
    """P(vocative) for a :class:`Candidate`: a logistic model over feature strings."""

    weights: Mapping[str, float]
    bias: float
    #: Below this probability a name the rulebook reads as a vocative is a mention.
    threshold: float = 0.5
    #: At or above this probability a name the rulebook reads as a mention is a vocative.
    override: float = 0.9
    #: Words the corpora write in lower case (never matched to a roster name by sound).
    everyday: frozenset[str] = frozenset()
    about: Mapping[str, object] = field(default_factory=dict)

    def probability(self, features: Sequence[str]) -> float:
        z = self.bias + sum(self.weights.get(x, 0.0) for x in features)
        return float(1.0 / (1.0 + np.exp(-z)))

    def save(self, path: Path) -> None:
        names = sorted(self.weights)
        np.savez_compressed(
            path,
            features=np.array(names, dtype=np.str_),
            weights=np.array([self.weights[x] for x in names], dtype=np.float32),
            bias=np.array([self.bias], dtype=np.float64),
            threshold=np.array([self.threshold], dtype=np.float64),
            override=np.array([self.override], dtype=np.float64),
            everyday=np.array(sorted(self.everyday), dtype=np.str_),
            about=np.array([json.dumps(self.about, sort_keys=True)], dtype=np.str_),
        )

    @classmethod
    def load(cls, path: Path) -> AddressModel:
        try:
            with np.load(path, allow_pickle=False) as z:
                feats = [str(x) for x in z["features"]]
                weights = dict(zip(feats, (float(x) for x in z["weights"]), strict=True))
                return cls(
                    weights=weights,
                    bias=float(z["bias"][0]),
                    threshold=float(z["threshold"][0]),
                    override=float(z["override"][0]) if "override" in z else 1.01,
                    everyday=frozenset(str(x) for x in z["everyday"]),
                    about=json.loads(str(z["about"][0])),
                )
        except (OSError, KeyError, ValueError) as e:
            raise ValueError(f"{path}: not an address model file ({e})") from e


@cache
def load_address_model() -> AddressModel | None:
    """The shipped model, or None in a checkout where it has not been trained yet."""
    ref = resources.files(__package__).joinpath(MODEL_FILE)
    if not ref.is_file():
        return None
    with resources.as_file(ref) as path:
        return AddressModel.load(path)
