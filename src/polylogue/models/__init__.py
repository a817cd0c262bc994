"""Turn-taking models behind one :class:`Predictor` interface; backends are imported lazily."""

from polylogue.models.base import (
    ModelSpec,
    ModelSpecError,
    Prediction,
    PredictionError,
    Predictor,
    load_predictor,
    parse_model_spec,
)

__all__ = [
    "ModelSpec",
    "ModelSpecError",
    "Prediction",
    "PredictionError",
    "Predictor",
    "load_predictor",
    "parse_model_spec",
]
