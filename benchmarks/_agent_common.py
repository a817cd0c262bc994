"""What the agent scripts share (``agent_behaviour.py``, ``agent_contract.py``): one corpus
split scored by the model of its deployment domain, and the live rule applied to it.

Both scripts then count what a deployment does; this module is the one place that turns
benchmark points into the model's probabilities, the address flag the roles read, the gold
arrays and the previous-speaker baseline, and that applies ``Deployment.choose``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from polylogue.engine.deployment import Action, Deployment
from polylogue.engine.engine import address_readers, addressed_at
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.model import TurnTakingModel, domain_of_corpus, load_model
from polylogue.models.baselines import held_floor_before
from polylogue.rendering import render_utterance
from polylogue.turntaking.address import AddressVerdict
from polylogue.turntaking.points import Prefixes
from polylogue.turntaking.types import Category, Decision, DecisionPoint, Outcome


@dataclass(frozen=True)
class ScoredSplit:
    """One corpus split with the domain model's probabilities (arrays align with ``points``)."""

    points: Sequence[DecisionPoint]
    corpus: str
    domain: str | None  # None: a corpus of no deployment domain (overall thresholds)
    model: TurnTakingModel
    take_floor: np.ndarray  # P(take floor)
    backchannel: np.ndarray  # P(backchannel)
    addressed: np.ndarray  # the target is addressed (what `addressed_only` roles need)
    took_floor: np.ndarray  # gold: the target took the floor (SPEAK)
    backchanneled: np.ndarray  # gold: the target's outcome is BACKCHANNEL
    i1: np.ndarray  # gold: explicitly addressed and answered
    categories: list[str]
    previous_speaker: np.ndarray  # baseline: speak iff the target held the floor just before

    def actions(self, deployment: Deployment) -> list[Action]:
        """The action the live rule gives at every point (before a role silences it)."""
        return [
            deployment.choose(pt, pb, a)
            for pt, pb, a in zip(
                self.take_floor.tolist(),
                self.backchannel.tolist(),
                self.addressed.tolist(),
                strict=True,
            )
        ]


def render_points(points: Sequence[DecisionPoint], rendering: str) -> list[DecisionPoint]:
    """The points with every context utterance in ``rendering`` (``polylogue.rendering``);
    the gold stays the original's. Each conversation is rendered once: a point's context is a
    prefix of its conversation, so the longest context of a conversation holds every other."""
    if rendering == "original":
        return list(points)
    longest: dict[str, DecisionPoint] = {}
    for p in points:
        q = longest.get(p.input.conversation_id)
        if q is None or len(p.input.context) > len(q.input.context):
            longest[p.input.conversation_id] = p
    rendered = {
        cid: Prefixes([render_utterance(u, rendering) for u in p.input.context])
        for cid, p in longest.items()
    }
    return [
        replace(
            p,
            input=replace(
                p.input,
                context=rendered[p.input.conversation_id].view(len(p.input.context)),
            ),
        )
        for p in points
    ]


def score_split(
    points: Sequence[DecisionPoint], model_dir: Path | None = None, address: str = "model"
) -> ScoredSplit:
    """Score ``points`` (one corpus) with the model of the corpus's domain (or ``model_dir``);
    ``address``: the shipped address model reads the names, or the rulebook alone ("rules")."""
    if not points:
        raise ValueError("no decision points to score")
    corpus = points[0].input.corpus
    domain = domain_of_corpus(corpus)
    model = load_model(model_dir, domain)
    extractor = FeatureExtractor.for_model(model)
    extractor.address_model = "shipped" if address == "model" else None
    verdicts: list[AddressVerdict] = []
    x = extractor.features([p.input for p in points], verdicts=verdicts)
    readers = address_readers(extractor.blocks)
    out = model.outcomes(x)
    return ScoredSplit(
        points=points,
        corpus=corpus,
        domain=domain,
        model=model,
        take_floor=np.asarray(out.take_floor, dtype=float),
        backchannel=np.asarray(out.backchannel, dtype=float),
        addressed=np.asarray(
            [
                addressed_at(v, p.input.target.id, row, readers)
                for p, v, row in zip(points, verdicts, x, strict=True)
            ],
            dtype=bool,
        ),
        took_floor=np.asarray([p.gold.label is Decision.SPEAK for p in points], dtype=bool),
        backchanneled=np.asarray(
            [p.gold.floor_outcome is Outcome.BACKCHANNEL for p in points], dtype=bool
        ),
        i1=np.asarray([p.gold.category is Category.I1 for p in points], dtype=bool),
        categories=[p.gold.category.value for p in points],
        previous_speaker=np.asarray([held_floor_before(p.input) for p in points], dtype=bool),
    )
