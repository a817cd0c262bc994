"""The shipped CPU turn-taking model as a :class:`~polylogue.models.base.Predictor`.

Gradient-boosted trees over addressing, reference, turn-sequence, text and timing features
(``polylogue.engine.features``), with isotonic calibration; see ``docs/model-card.md``.
Weights live in ``polylogue/engine/weights/`` and load offline in well under a second.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polylogue.engine.deployment import Action, Deployment
from polylogue.engine.engine import describe_cues, is_addressed
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.features import N_FEATURES
from polylogue.models.base import Prediction
from polylogue.turntaking.types import Decision, DecisionInput


class DefaultPredictor:
    """Batch predictions for decision inputs; conversation state is reused across calls.

    ``decision`` is the floor decision (SPEAK only when the deployment's rule says SPEAK); the
    three-way action (SPEAK / BACKCHANNEL / SILENT) is in ``extra["action"]``, with
    ``p_backchannel``, so ``eval`` scores both views.

    ``point_domains``: the domains the points to predict declare (``eval`` passes its
    benchmark's). Unless the deployment was given a domain, each point is then decided with
    its own domain's deployment (thresholds, and the chat model for ``chat`` points).
    """

    def __init__(self, deployment: Deployment, point_domains: Sequence[str] | None = None) -> None:
        # A requested domain decides every point; else each point's declared one.
        declared = () if deployment.request.domain is not None else point_domains or ()
        self._per_domain: dict[str, Deployment] = {
            d: deployment.with_declared_domain(d) for d in sorted(set(declared))
        }
        if len(self._per_domain) == 1:
            deployment = next(iter(self._per_domain.values()))
        self.deployment = deployment
        self.model = deployment.model
        self._extractors: dict[int, FeatureExtractor] = {}

    @property
    def name(self) -> str:
        return "default"

    @property
    def per_point(self) -> bool:
        """Points of several domains, each decided with its own domain's deployment."""
        return len(self._per_domain) > 1

    @property
    def threshold(self) -> float:
        return self.deployment.take_floor_threshold

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "default",
            "format": self.model.metadata.get("format"),
            "trees": self.model.metadata.get("trees"),
            "trained_on": {
                k: v.get("data_hash") for k, v in self.model.metadata.get("trained_on", {}).items()
            },
            "threshold": None if self.per_point else self.threshold,
            "deployment": self.deployment.to_dict(),
        }
        if self.per_point:
            # Which deployment decided the points of each domain (run manifests record it).
            out["domains"] = "per point"
            out["deployments_by_domain"] = {d: v.to_dict() for d, v in self._per_domain.items()}
        if self.model.feature_blocks:
            out["feature_blocks"] = list(self.model.feature_blocks)
        return out

    def _deployment_for(self, domain: str) -> Deployment:
        return self._per_domain.get(domain, self.deployment)

    def _extractor(self, dep: Deployment) -> FeatureExtractor:
        ex = self._extractors.get(id(dep.model))
        if ex is None:
            ex = self._extractors[id(dep.model)] = FeatureExtractor.for_model(dep.model)
        return ex

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        # Points of each domain go through their own deployment, in their order (a
        # conversation has one domain, so each extractor still streams whole conversations).
        groups: dict[str, list[int]] = {}
        for i, inp in enumerate(inputs):
            groups.setdefault(inp.domain if self._per_domain else "", []).append(i)
        out: list[Prediction | None] = [None] * len(inputs)
        for domain, idx in groups.items():
            dep = self._deployment_for(domain) if domain else self.deployment
            for i, pred in zip(idx, self._predict(dep, [inputs[i] for i in idx]), strict=True):
                out[i] = pred
        return [p for p in out if p is not None]

    def _predict(self, dep: Deployment, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        # Features stream through the conversation once; the trees then score the whole batch
        # at once, so each prediction's latency is its share of the batch.
        start = time.perf_counter()
        x = self._extractor(dep).features(inputs)
        outcomes = dep.model.outcomes(x) if len(inputs) else None
        latency = (time.perf_counter() - start) / max(len(inputs), 1)
        if outcomes is None:
            return []
        out: list[Prediction] = []
        for inp, row, p_take, p_back in zip(
            inputs, x, outcomes.take_floor.tolist(), outcomes.backchannel.tolist(), strict=True
        ):
            action = dep.choose(p_take, p_back, is_addressed(row))
            decision = Decision.SPEAK if action is Action.SPEAK else Decision.SILENT
            out.append(
                Prediction(
                    point_id=inp.point_id,
                    decision=decision,
                    p_speak=p_take,
                    reasoning=None,
                    raw_output=f"{action.value} p={p_take:.3f} p_back={p_back:.3f}",
                    latency_s=latency,
                    cues=describe_cues(row[:N_FEATURES]),
                    extra={"action": action.value, "p_backchannel": round(p_back, 6)},
                )
            )
        return out


def load_default_predictor(
    threshold: float | None = None,
    model_dir: str | Path | None = None,
    domain: str | None = None,
    operating_point: str | None = None,
    point_domains: Sequence[str] | None = None,
) -> DefaultPredictor:
    """The shipped model (or a model folder written by ``polylogue train-default``).

    Options: ``model_dir``, ``domain`` (meeting, tv, earnings, chat: that domain's shipped
    model, ``chat`` has its own), ``operating_point`` (balanced, matched, polite,
    addressed-only; default ``matched``) and a raw ``threshold`` on calibrated P(SPEAK) that
    overrides the point's floor threshold; resolved by
    :class:`~polylogue.engine.deployment.Deployment`, as in every other front end.
    ``point_domains``: the domains the points declare, each point's used when ``domain`` is not
    given (without either: the deployment's default domain).
    """
    return DefaultPredictor(
        Deployment.resolve(
            model_dir=model_dir, domain=domain, operating_point=operating_point, threshold=threshold
        ),
        point_domains,
    )
