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

import numpy as np

from polylogue.engine.engine import describe_cues
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.features import N_FEATURES
from polylogue.engine.model import TurnTakingModel, load_model, model_dir_for
from polylogue.models.base import ModelSpecError, Prediction
from polylogue.turntaking.types import Decision, DecisionInput


class DefaultPredictor:
    """Batch predictions for decision inputs; conversation state is reused across calls."""

    def __init__(
        self, model: TurnTakingModel, threshold: float | None = None, model_dir: Path | None = None
    ) -> None:
        self.model = model
        self.threshold = model.threshold if threshold is None else float(threshold)
        self.model_dir = model_dir or model_dir_for(None)
        self._extractor = FeatureExtractor.for_model(model)

    @property
    def name(self) -> str:
        return "default"

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "default",
            "format": self.model.metadata.get("format"),
            "trees": self.model.metadata.get("trees"),
            "trained_on": {
                k: v.get("data_hash") for k, v in self.model.metadata.get("trained_on", {}).items()
            },
            "threshold": self.threshold,
        }
        if self.model.feature_blocks:
            out["feature_blocks"] = list(self.model.feature_blocks)
        return out

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        # Features stream through the conversation once; the trees then score the whole batch
        # at once, so each prediction's latency is its share of the batch.
        start = time.perf_counter()
        x = self._extractor.features(inputs)
        p = self.model.proba(x) if len(inputs) else np.empty(0)
        latency = (time.perf_counter() - start) / max(len(inputs), 1)
        out: list[Prediction] = []
        for inp, row, prob in zip(inputs, x, p.tolist(), strict=True):
            decision = Decision.SPEAK if prob >= self.threshold else Decision.SILENT
            out.append(
                Prediction(
                    point_id=inp.point_id,
                    decision=decision,
                    p_speak=prob,
                    reasoning=None,
                    raw_output=f"{decision.value} p={prob:.3f}",
                    latency_s=latency,
                    cues=describe_cues(row[:N_FEATURES]),
                )
            )
        return out


def load_default_predictor(
    threshold: float | None = None,
    model_dir: str | Path | None = None,
    domain: str | None = None,
    **unknown: Any,
) -> DefaultPredictor:
    """The shipped model (or a model folder written by ``polylogue train-default``).

    Options: ``threshold`` (decision threshold on calibrated P(SPEAK)), ``model_dir``,
    ``domain`` (meeting, tv, earnings, chat: that domain's shipped model, ``chat`` has its own,
    and its validation-chosen threshold unless ``threshold`` is given).
    """
    if unknown:
        raise ModelSpecError(
            f"unknown option(s) for the default model: {', '.join(sorted(unknown))} "
            "(known: threshold, model_dir, domain)"
        )
    folder = Path(model_dir) if model_dir is not None else model_dir_for(domain)
    model = load_model(folder)
    if threshold is None and domain is not None:
        threshold = model.threshold_for(domain)
    return DefaultPredictor(model, threshold=threshold, model_dir=folder)
