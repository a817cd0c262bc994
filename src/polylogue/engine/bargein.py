"""Barge-in: while the agent speaks and a human starts, yield (stop talking) or continue?

The model is learnt from real overlaps in the AMI meetings
(:func:`polylogue.training.engine_models.bargein.meeting_overlaps`): a
speaker is talking, another starts a dialogue act inside that talk, and the label says whether
the first speaker stopped within ``window_s`` seconds (their run of words, with pauses under
0.5 s, ended). What the live agent knows at that moment is what the ASR has of the
interjection so far, so the features are the interjection's words in its first ``window_s``
seconds plus how long the agent had been speaking. The shipped weights (``bargein.json``) are
a logistic regression over those features; ``benchmarks/bargein_ami.py`` rebuilds them and
reports held-out accuracy against "yield on any speech" and a lexical backchannel list.

This module is what runs at decision time (features, the model, its file); the overlap
reader and the trainer are :mod:`polylogue.training.engine_models.bargein`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from polylogue.errors import PolylogueInputError
from polylogue.turntaking.cues import is_lexical_backchannel

BARGE_IN_MODEL_PATH = Path(__file__).resolve().parent / "bargein.json"
_WORD = re.compile(r"[\w'-]+")


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
    """The lexical baseline: an acknowledgement by the benchmark's one rule
    (:func:`polylogue.turntaking.cues.is_lexical_backchannel`)."""
    return is_lexical_backchannel(" ".join(words))


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
