"""The shipped turn-taking model's files: boosted trees, turn-yield weights, calibration.

A model folder holds::

    model.json         format, feature names, calibration map, default threshold, metrics
    trees.npz          the boosted trees as flat numpy arrays (see polylogue.engine.trees)
    yield_weights.npy  float32 hashed-vocabulary weights of the turn-yield logistic model
    relation_weights.npy  float32 weights of the relation-conditioned word model

Nothing is pickled; every file is JSON or plain numeric arrays, and loading needs only numpy
(LightGBM is used to train, not to predict).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.engine.features import FEATURE_NAMES
from polylogue.engine.text import HASH_SIZE
from polylogue.engine.trees import TreeEnsemble
from polylogue.errors import PolylogueInputError

MODEL_FORMAT = "polylogue.turntaking.gbdt/1"
DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "weights"


class ModelFilesError(PolylogueInputError):
    """A model folder is missing files or does not match this version of the features."""


@dataclass(frozen=True)
class Calibration:
    """Monotone map from raw booster probability to calibrated P(SPEAK) (isotonic)."""

    x: tuple[float, ...]
    y: tuple[float, ...]

    def __call__(self, p: np.ndarray) -> np.ndarray:
        if not self.x:
            return p
        return np.interp(p, np.asarray(self.x), np.asarray(self.y))

    def to_dict(self) -> dict[str, Any]:
        return {"method": "isotonic", "x": list(self.x), "y": list(self.y)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        return cls(tuple(float(v) for v in d["x"]), tuple(float(v) for v in d["y"]))


@dataclass
class HashedLogistic:
    """A logistic model over hashed vocabulary ids (the "bias" key carries the intercept).

    Two ship with the model: turn-yield (will the current speaker hand over the floor?) and
    relation (this utterance's words crossed with the target's relation to it -> P(SPEAK)).
    """

    weights: np.ndarray  # float32, HASH_SIZE

    def __call__(self, hashed: tuple[int, ...]) -> float:
        return float(self.weights[list(hashed)].sum()) if hashed else 0.0

    @classmethod
    def zeros(cls) -> HashedLogistic:
        return cls(np.zeros(HASH_SIZE, dtype=np.float32))


@dataclass
class TurnTakingModel:
    """Booster, turn-yield weights, calibration and the decision threshold on P(SPEAK)."""

    trees: TreeEnsemble
    yield_model: HashedLogistic
    relation_model: HashedLogistic
    calibration: Calibration
    threshold: float
    metadata: dict[str, Any] = field(default_factory=dict)

    def raw_proba(self, x: np.ndarray) -> np.ndarray:
        return self.trees.predict(x)

    def proba(self, x: np.ndarray) -> np.ndarray:
        """Calibrated P(SPEAK) for each feature row."""
        return np.clip(self.calibration(self.raw_proba(x)), 0.0, 1.0)

    def contributions(self, row: np.ndarray) -> np.ndarray:
        """Per-feature contributions of one row to the raw log-odds (last entry: the bias)."""
        return self.trees.contributions(row)

    def save(self, folder: str | Path) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.trees.save(folder / "trees.npz")
        np.save(folder / "yield_weights.npy", self.yield_model.weights.astype(np.float32))
        np.save(folder / "relation_weights.npy", self.relation_model.weights.astype(np.float32))
        meta = {
            **self.metadata,
            "format": MODEL_FORMAT,
            "features": list(FEATURE_NAMES),
            "calibration": self.calibration.to_dict(),
            "threshold": self.threshold,
        }
        (folder / "model.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return folder


def load_model(folder: str | Path | None = None) -> TurnTakingModel:
    """Load a model folder (the shipped one by default); offline, no network, no pickle."""
    folder = Path(folder) if folder is not None else DEFAULT_MODEL_DIR
    names = ("model.json", "trees.npz", "yield_weights.npy", "relation_weights.npy")
    paths = {n: folder / n for n in names}
    missing = [n for n, p in paths.items() if not p.is_file()]
    if missing:
        raise ModelFilesError(
            f"{folder}: not a polylogue model folder (missing {', '.join(missing)})"
        )
    meta = json.loads(paths["model.json"].read_text(encoding="utf-8"))
    if meta.get("format") != MODEL_FORMAT:
        raise ModelFilesError(
            f"{paths['model.json']}: format {meta.get('format')!r}, want {MODEL_FORMAT!r}"
        )
    if meta.get("features") != list(FEATURE_NAMES):
        raise ModelFilesError(
            f"{paths['model.json']}: trained on a different feature set than this polylogue version"
        )
    weights = {}
    for name in ("yield_weights.npy", "relation_weights.npy"):
        w = np.load(paths[name], allow_pickle=False)
        if w.shape != (HASH_SIZE,):
            raise ModelFilesError(f"{paths[name]}: shape {w.shape}, want ({HASH_SIZE},)")
        weights[name] = w.astype(np.float32)
    trees = TreeEnsemble.load(paths["trees.npz"])
    if trees.feature.max(initial=-1) >= len(FEATURE_NAMES):
        raise ModelFilesError(f"{paths['trees.npz']}: splits on features this version lacks")
    return TurnTakingModel(
        trees=trees,
        yield_model=HashedLogistic(weights["yield_weights.npy"]),
        relation_model=HashedLogistic(weights["relation_weights.npy"]),
        calibration=Calibration.from_dict(meta["calibration"]),
        threshold=float(meta["threshold"]),
        metadata=meta,
    )
