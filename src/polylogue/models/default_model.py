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
from polylogue.engine.engine import address_readers, addressed_at, describe_cues
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.features import N_FEATURES
from polylogue.models.base import Prediction
from polylogue.turntaking.address import AddressVerdict
from polylogue.turntaking.types import Decision, DecisionInput


class DefaultPredictor:
    """Batch predictions for decision inputs; conversation state is reused across calls.

    ``decision`` is the floor decision (SPEAK only when the deployment's rule says SPEAK); the
    three-way action (SPEAK / BACKCHANNEL / SILENT) is in ``extra["action"]``, with
    ``p_backchannel``, so ``eval`` scores both views.
    """

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.model = deployment.model
        self._extractor = FeatureExtractor.for_model(self.model)
        self._readers = address_readers(self._extractor.blocks)

    @property
    def name(self) -> str:
        return "default"

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
            "threshold": self.threshold,
            "deployment": self.deployment.to_dict(),
        }
        if self.model.feature_blocks:
            out["feature_blocks"] = list(self.model.feature_blocks)
        return out

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        # Features stream through the conversation once; the trees then score the whole batch
        # at once, so each prediction's latency is its share of the batch.
        start = time.perf_counter()
        verdicts: list[AddressVerdict] = []
        x = self._extractor.features(inputs, verdicts=verdicts)
        outcomes = self.model.outcomes(x) if len(inputs) else None
        latency = (time.perf_counter() - start) / max(len(inputs), 1)
        if outcomes is None:
            return []
        out: list[Prediction] = []
        dep = self.deployment
        for inp, row, verdict, p_take, p_back in zip(
            inputs,
            x,
            verdicts,
            outcomes.take_floor.tolist(),
            outcomes.backchannel.tolist(),
            strict=True,
        ):
            target = inp.target.id
            action = dep.choose(p_take, p_back, addressed_at(verdict, target, row, self._readers))
            decision = Decision.SPEAK if action is Action.SPEAK else Decision.SILENT
            out.append(
                Prediction(
                    point_id=inp.point_id,
                    decision=decision,
                    p_speak=p_take,
                    reasoning=None,
                    raw_output=f"{action.value} p={p_take:.3f} p_back={p_back:.3f}",
                    latency_s=latency,
                    cues=describe_cues(row[:N_FEATURES], verdict, target),
                    extra={"action": action.value, "p_backchannel": round(p_back, 6)},
                )
            )
        return out


def load_default_predictor(
    threshold: float | None = None,
    model_dir: str | Path | None = None,
    domain: str | None = None,
    operating_point: str | None = None,
) -> DefaultPredictor:
    """The shipped model (or a model folder written by ``polylogue train-default``).

    Options: ``model_dir``, ``domain`` (meeting, tv, earnings, chat: that domain's shipped
    model, ``chat`` has its own), ``operating_point`` (balanced, matched, polite,
    addressed-only; default ``matched``) and a raw ``threshold`` on calibrated P(SPEAK) that
    overrides the point's floor threshold; resolved by
    :class:`~polylogue.engine.deployment.Deployment`, as in every other front end.
    """
    return DefaultPredictor(
        Deployment.resolve(
            model_dir=model_dir, domain=domain, operating_point=operating_point, threshold=threshold
        )
    )
