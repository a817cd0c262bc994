"""Reference points every model must beat: constant, seeded random, explicit address and
previous speaker.

``explicit-address`` speaks exactly when the current utterance addresses the target by name or
role (a vocative such as "Ross, can you ..."), using the same lexical cues the benchmark uses to
define category I1. It therefore scores I1 and S1 well by construction and shows how much of a
model's score explicit address alone explains.

``previous-speaker`` speaks exactly when the target held the floor just before the current
speaker's turn (the reply-to-a-reply rule of two-party talk). The issue that specified the
default model gives it as the turn-sequence reference: BalAcc about 0.60 on AMI, 0.74-0.78
on Friends.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from polylogue.models.base import (
    RANDOM_BASELINE_OPTIONS,
    ModelSpec,
    ModelSpecError,
    Prediction,
    check_options,
)
from polylogue.turntaking.types import Decision, DecisionInput


class _RuleBaseline:
    """A baseline that answers each point by its own rule (``decide``), described by name."""

    label: ClassVar[str] = ""

    @property
    def name(self) -> str:
        return f"baseline:{self.label}"

    def describe(self) -> dict[str, Any]:
        return {"kind": "baseline", "name": self.name}

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        return _per_point(inputs, self.decide)

    def decide(self, inp: DecisionInput) -> _Answer:
        raise NotImplementedError


@dataclass(frozen=True)
class ConstantBaseline(_RuleBaseline):
    decision: Decision

    @property
    def name(self) -> str:
        return f"baseline:always-{self.decision.value.lower()}"

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        p = 1.0 if self.decision is Decision.SPEAK else 0.0
        return [
            Prediction(i.point_id, self.decision, p, None, self.decision.value, 0.0) for i in inputs
        ]


@dataclass(frozen=True)
class RandomBaseline(_RuleBaseline):
    """SPEAK with probability ``p_speak``, decided by a hash of (seed, point id).

    The answer for a point does not depend on batch order, so resumed runs reproduce it.
    ``delay_s`` sleeps per point; it exists to make interruption tests deterministic.
    """

    seed: int = 0
    p_speak: float = 0.5
    delay_s: float = 0.0

    label: ClassVar[str] = "random"

    def describe(self) -> dict[str, Any]:
        # delay_s changes timing only, not answers, so it stays out of run keys.
        return {"kind": "baseline", "name": self.name, "seed": self.seed, "p_speak": self.p_speak}

    def _uniform(self, point_id: str) -> float:
        digest = hashlib.sha256(f"{self.seed}:{point_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def decide(self, inp: DecisionInput) -> _Answer:
        if self.delay_s:
            time.sleep(self.delay_s)
        u = self._uniform(inp.point_id)
        # 1 - u is a score whose threshold at 1 - p_speak reproduces the decision.
        return u < self.p_speak, 1.0 - u, {}


@dataclass(frozen=True)
class ExplicitAddressBaseline(_RuleBaseline):
    label: ClassVar[str] = "explicit-address"

    def decide(self, inp: DecisionInput) -> _Answer:
        from polylogue.turntaking.cues import build_matchers, is_cased, utterance_cues

        people = {p.id: p for p in (*inp.present, inp.target)}
        matchers = build_matchers(list(people.values()), cased=is_cased(inp.context))
        cues = utterance_cues(inp.current, matchers, present=[inp.target.id])
        evidence = cues.addressed.get(inp.target.id)
        found = {"addressed": evidence, "referenced": cues.referenced.get(inp.target.id)}
        return bool(evidence), 1.0 if evidence else 0.0, found


def held_floor_before(inp: DecisionInput) -> bool:
    """True when the target is the last speaker before the current speaker's turn."""
    current = inp.current.speaker
    for u in reversed(inp.history):
        if u.speaker != current:
            return u.speaker == inp.target.id
    return False


@dataclass(frozen=True)
class PreviousSpeakerBaseline(_RuleBaseline):
    label: ClassVar[str] = "previous-speaker"

    def decide(self, inp: DecisionInput) -> _Answer:
        held = held_floor_before(inp)
        return held, 1.0 if held else 0.0, {}


#: A baseline's answer for one point: SPEAK or not, its P(SPEAK) score, the cues it used.
_Answer = tuple[bool, float, dict[str, Any]]


def _per_point(
    inputs: Sequence[DecisionInput], decide: Callable[[DecisionInput], _Answer]
) -> list[Prediction]:
    """One timed prediction per input from a per-point rule."""
    out = []
    for inp in inputs:
        start = time.perf_counter()
        speak, p_speak, cues = decide(inp)
        decision = Decision.SPEAK if speak else Decision.SILENT
        latency = time.perf_counter() - start
        out.append(
            Prediction(inp.point_id, decision, p_speak, None, decision.value, latency, cues=cues)
        )
    return out


def make_baseline(spec: ModelSpec, **options: Any) -> Any:
    """Factory for ``baseline:NAME`` specs. Options: ``seed``, ``p_speak``, ``delay_s`` (random)."""
    name = spec.target
    check_options(spec.text, options, RANDOM_BASELINE_OPTIONS if name == "random" else ())
    if name == "always-speak":
        return ConstantBaseline(Decision.SPEAK)
    if name == "always-silent":
        return ConstantBaseline(Decision.SILENT)
    if name == "random":
        return RandomBaseline(
            seed=int(options.get("seed", 0)),
            p_speak=float(options.get("p_speak", 0.5)),
            delay_s=float(options.get("delay_s", 0.0)),
        )
    if name == "explicit-address":
        return ExplicitAddressBaseline()
    if name == "previous-speaker":
        return PreviousSpeakerBaseline()
    raise ModelSpecError(f"unknown baseline {name!r}")
