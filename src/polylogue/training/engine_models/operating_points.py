"""Named operating points chosen on validation, per deployment domain (stored in model.json).

The engine gives P(take floor) and P(backchannel); :mod:`polylogue.engine.deployment` turns
them into actions with the thresholds chosen here:

* ``balanced``: the floor threshold maximising mean balanced accuracy over the domain's corpora
  (the paper's metric);
* ``matched``: the floor threshold whose SPEAK rate is closest to the real TAKE_FLOOR rate
  (log ratio averaged over the domain's corpora);
* ``polite``: the lowest floor threshold keeping the false-interruption rate at most 5% on
  every corpus of the domain, and never below ``matched``'s;
* every point shares the domain's backchannel rule (threshold and margin): the suggestion
  rate closest to the real BACKCHANNEL rate among rules with validation precision >= 0.30
  on every corpus of the domain (``choose_backchannel_rule``), or none at all.

``addressed-only`` is ``balanced`` behind the address gate and is not stored separately.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.engine.deployment import OVERALL
from polylogue.engine.model import DOMAINS, TurnTakingModel, load_model
from polylogue.errors import PolylogueInputError
from polylogue.evaluation.metrics import (
    best_mean_balanced_accuracy_threshold,
    capped_interruption_threshold,
    choose_backchannel_rule,
    rate_matched_threshold,
)

#: The false-interruption cap of the ``polite`` point.
POLITE_FIR = 0.05
#: How each named point is chosen on validation (the module docstring's rules, in words for
#: docs/reference/operating-points.md; :func:`choose_operating_points` applies them).
RULES: dict[str, str] = {
    "balanced": "the floor threshold maximising mean balanced accuracy over the domain's "
    "corpora (the paper's metric; speaks well above the real rate: paper-style tables)",
    "matched": "the floor threshold whose SPEAK rate is closest to the real TAKE_FLOOR rate "
    "(log ratio averaged over the domain's corpora; the product default)",
    "polite": "the lowest floor threshold keeping the false-interruption rate at most "
    f"{POLITE_FIR:.0%} on every corpus of the domain, never below matched's",
    "addressed-only": "balanced's thresholds behind the address gate: speaks only when the "
    "words put the turn to the agent (not stored separately)",
}


@dataclass(frozen=True)
class ScoredSplit:
    """Validation points scored by a model: gold outcomes and the two probabilities."""

    corpus: np.ndarray
    take: np.ndarray
    backchannel: np.ndarray
    p_take: np.ndarray
    p_back: np.ndarray

    def subset(self, mask: np.ndarray) -> ScoredSplit:
        return ScoredSplit(
            self.corpus[mask], self.take[mask], self.backchannel[mask],
            self.p_take[mask], self.p_back[mask],
        )  # fmt: skip


def domain_masks(corpus: np.ndarray) -> dict[str, np.ndarray]:
    """``default`` (every point) and each deployment domain with points in ``corpus``."""
    out = {OVERALL: np.ones(len(corpus), dtype=bool)}
    for domain, corpora in DOMAINS.items():
        m = np.isin(corpus, corpora)
        if m.any():
            out[domain] = m
    return out


def choose_operating_points(split: ScoredSplit) -> dict[str, dict[str, dict[str, float]]]:
    """``{point: {domain: {"take_floor", "backchannel", "backchannel_margin"}}}``."""
    points: dict[str, dict[str, dict[str, float]]] = {"balanced": {}, "matched": {}, "polite": {}}
    for domain, mask in domain_masks(split.corpus).items():
        s = split.subset(mask)
        take = {
            "balanced": best_mean_balanced_accuracy_threshold(
                s.take.astype(np.int8), s.p_take, s.corpus
            ),
            "matched": rate_matched_threshold(s.take, s.p_take, s.corpus),
        }
        # Polite is never more talkative than matched (where matched already interrupts less
        # than the cap, the cap alone would pick a lower threshold).
        take["polite"] = max(
            take["matched"],
            capped_interruption_threshold(s.take, s.p_take, s.corpus, POLITE_FIR),
        )
        back, margin = choose_backchannel_rule(s.backchannel, s.p_take, s.p_back, s.corpus)
        for name, t in take.items():
            points[name][domain] = {
                "take_floor": float(t),
                "backchannel": back,
                "backchannel_margin": margin,
            }
    return points


def score_points(model: TurnTakingModel, points: Sequence[Any]) -> ScoredSplit:
    """Score decision points (``DecisionPoint``) with ``model``."""
    from polylogue.engine.extract import FeatureExtractor
    from polylogue.turntaking.types import Decision, Outcome

    x = FeatureExtractor.for_model(model).features([p.input for p in points])
    out = model.outcomes(x)
    return ScoredSplit(
        corpus=np.asarray([p.input.corpus for p in points]),
        take=np.asarray([p.gold.label is Decision.SPEAK for p in points], dtype=bool),
        backchannel=np.asarray(
            [p.gold.floor_outcome is Outcome.BACKCHANNEL for p in points], dtype=bool
        ),
        p_take=np.asarray(out.take_floor, dtype=float),
        p_back=np.asarray(out.backchannel, dtype=float),
    )


#: Fewest points of each kind (SPEAK, SILENT) a split needs to choose thresholds from.
MIN_POINTS_PER_LABEL = 20


class NotEnoughPointsError(PolylogueInputError):
    """A split too small to choose operating points from."""


def check_enough_points(
    points: Sequence[Any], split: str, benchmarks: Sequence[str | Path]
) -> None:
    """Refuse a split with too few SPEAK or SILENT points: thresholds chosen from a handful
    (or none) of them are noise, and an empty one has no threshold at all."""
    from polylogue.turntaking.types import Decision

    speak = sum(p.gold.label is Decision.SPEAK for p in points)
    silent = len(points) - speak
    if min(speak, silent) < MIN_POINTS_PER_LABEL:
        where = ", ".join(str(b) for b in benchmarks)
        raise NotEnoughPointsError(
            f"{where}: the {split} split has {speak} SPEAK and {silent} SILENT points; choosing "
            f"operating points needs at least {MIN_POINTS_PER_LABEL} of each (build the "
            "benchmark from more conversations, or pass --split with a larger split); "
            "nothing was written"
        )


def operating_points_for_folder(
    model_dir: str | Path,
    benchmarks: Sequence[str | Path],
    split: str = "validation",
    write: bool = False,
    log: Callable[[str], None] = print,
) -> dict[str, dict[str, dict[str, float]]]:
    """Choose the points of an existing model folder on benchmark folders' ``split``; with
    ``write``, store them in its model.json (everything else in the file is kept)."""
    from polylogue.turntaking.dataset import load_benchmark

    model = load_model(model_dir)
    pts = []
    for b in benchmarks:
        bench = load_benchmark(b)
        got = bench.points(split)
        pts.extend(got)
        log(f"{b}: {split} ({len(got)} points)")
    check_enough_points(pts, split, benchmarks)
    chosen = choose_operating_points(score_points(model, pts))
    if write:
        path = Path(model_dir) / "model.json"
        import json

        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["operating_points"] = chosen
        path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        log(f"wrote operating points to {path}")
    return chosen
