"""The shipped turn-taking model's files: boosted trees, turn-yield weights, calibration.

A model folder holds::

    model.json         format, feature names, calibration map, default threshold, metrics
    trees.npz          the boosted trees as flat numpy arrays (see polylogue.engine.trees)
    yield_weights.npy  float32 hashed-vocabulary weights of the turn-yield logistic model
    relation_weights.npy  float32 weights of the relation-conditioned word model
    backchannel_trees.npz  trees for P(BACKCHANNEL) (format 2; absent in format 1)

Three outcomes per listener at a pause (benchmark v2): P(take the floor) from ``trees.npz``,
P(backchannel) from ``backchannel_trees.npz`` (each calibrated on validation), and
P(silent) = 1 - the two. The floor decision (binary SPEAK/SILENT) thresholds P(take floor),
with one threshold per deployment domain chosen on validation.

Nothing is pickled; every file is JSON or plain numeric arrays, and loading needs only numpy
(LightGBM is used to train, not to predict).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.conversation import check_domain_name
from polylogue.engine.blocks import FeatureBlock
from polylogue.engine.chat_features import CHAT_BLOCK
from polylogue.engine.features import BASE_BLOCK
from polylogue.engine.text import HASH_SIZE
from polylogue.engine.trees import TreeEnsemble
from polylogue.errors import PolylogueInputError
from polylogue.jsonio import JsonInputError, load_json_object

MODEL_FORMAT = "polylogue.turntaking.gbdt/2"
#: Format 1 folders (floor trees only) still load; they predict P(backchannel) = 0.
_READABLE_FORMATS = ("polylogue.turntaking.gbdt/1", MODEL_FORMAT)
DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "weights"
#: Domain models shipped next to the default one (``weights/<domain>/``), chosen by
#: ``load_model(domain=...)``; other domains use the default model with their own threshold.
DOMAIN_MODEL_DIRS: dict[str, Path] = {"chat": DEFAULT_MODEL_DIR / "chat"}

#: Every feature block this version has (:mod:`polylogue.engine.blocks`): ``base`` starts
#: every row; a model trained with more blocks appends theirs after it, in its own order. A new
#: block is one entry here (names unique across blocks: a recorded feature list that has no
#: ``blocks`` record is split by them).
FEATURE_BLOCKS: dict[str, FeatureBlock[Any]] = {b.name: b for b in (BASE_BLOCK, CHAT_BLOCK)}
BASE = BASE_BLOCK.name


def blocks_of(extra: tuple[str, ...] | list[str] = ()) -> tuple[FeatureBlock[Any], ...]:
    """The blocks of a row: ``base``, then the ``extra`` ones in order."""
    unknown = [b for b in extra if b not in FEATURE_BLOCKS or b == BASE]
    if unknown:
        known = [b for b in FEATURE_BLOCKS if b != BASE]
        raise ValueError(f"unknown feature block(s) {unknown}; known: {known}")
    return (BASE_BLOCK, *(FEATURE_BLOCKS[b] for b in extra))


def feature_names(blocks: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """Names of a feature row: the base features, then each extra block's in order."""
    return tuple(n for b in blocks_of(blocks) for n in b.names)


#: The domains (``conversation.DOMAIN_NAMES``, each with its own floor threshold) and the
#: corpora each is tuned on.
DOMAINS: dict[str, tuple[str, ...]] = {
    "meeting": ("ami", "icsi"),
    "tv": ("friends",),
    "earnings": ("earnings21",),
    "chat": ("irc", "molweni"),
}


def domain_of_corpus(corpus: str) -> str | None:
    """The deployment domain a benchmark corpus stands for (None: not one of ours)."""
    return next((d for d, corpora in DOMAINS.items() if corpus in corpora), None)


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
        xs, ys = self._arrays
        return np.interp(p, xs, ys)

    @cached_property
    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        # Converted once: at a pause the tuples' conversion cost more than the interpolation.
        return np.asarray(self.x), np.asarray(self.y)

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


@dataclass(frozen=True)
class Outcomes:
    """Calibrated probabilities of the three outcomes for each feature row (each sums to 1)."""

    take_floor: np.ndarray
    backchannel: np.ndarray
    silent: np.ndarray


@dataclass
class TurnTakingModel:
    """Floor and backchannel boosters, word models, calibrations and decision thresholds."""

    trees: TreeEnsemble
    yield_model: HashedLogistic
    relation_model: HashedLogistic
    calibration: Calibration
    threshold: float
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Trees for P(BACKCHANNEL) and their calibration (None: a format-1 floor-only model).
    backchannel_trees: TreeEnsemble | None = None
    backchannel_calibration: Calibration = field(default_factory=lambda: Calibration((), ()))
    #: Suggest a backchannel when P(backchannel) reaches this (chosen on validation).
    backchannel_threshold: float = 1.0
    #: Floor threshold per deployment domain (see ``DOMAINS``), chosen on validation.
    domain_thresholds: dict[str, float] = field(default_factory=dict)
    #: Feature blocks after the base one (``("chat",)`` for the chat model).
    feature_blocks: tuple[str, ...] = ()
    #: Named operating points chosen on validation: ``{point: {domain or "default":
    #: {"take_floor": t, "backchannel": b, "backchannel_margin": m}}}`` (read by
    #: :mod:`polylogue.engine.deployment`, the one place thresholds are resolved).
    operating_points: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    #: Both ensembles in one node table for single-row scoring, with the two it was built from
    #: (rebuilt if either is swapped).
    _stacked: tuple[TreeEnsemble, TreeEnsemble, TreeEnsemble] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def feature_names(self) -> tuple[str, ...]:
        return feature_names(self.feature_blocks)

    @property
    def blocks(self) -> tuple[FeatureBlock[Any], ...]:
        """The blocks of this model's feature row, base first."""
        return blocks_of(self.feature_blocks)

    def raw_proba(self, x: np.ndarray) -> np.ndarray:
        return self.trees.predict(x)

    def proba(self, x: np.ndarray) -> np.ndarray:
        """Calibrated P(SPEAK) = P(take the floor) for each feature row."""
        return np.clip(self.calibration(self.raw_proba(x)), 0.0, 1.0)

    def outcomes(self, x: np.ndarray) -> Outcomes:
        """P(take floor), P(backchannel), P(silent) for each feature row.

        The two boosters are calibrated separately; where their sum would pass 1 the
        backchannel share is cut so that the floor probability (the binary decision) is intact.
        """
        if self.backchannel_trees is None:
            floor = self.proba(x)
            back = np.zeros_like(floor)
            return Outcomes(floor, back, 1.0 - floor)
        if len(x) == 1:  # the live path: one walk over both ensembles
            leaves = self._live_trees().leaf_values(x[0])
            n = self.trees.num_trees
            raw = np.asarray([leaves[:n].sum(), leaves[n:].sum()])
            raw = 1.0 / (1.0 + np.exp(-raw))
            raw_floor, raw_back = raw[:1], raw[1:]
        else:
            raw_floor, raw_back = self.trees.predict(x), self.backchannel_trees.predict(x)
        floor = np.clip(self.calibration(raw_floor), 0.0, 1.0)
        back = np.clip(self.backchannel_calibration(raw_back), 0.0, 1.0)
        back = np.minimum(back, 1.0 - floor)
        return Outcomes(floor, back, 1.0 - floor - back)

    def _live_trees(self) -> TreeEnsemble:
        """The node table a single-row decision walks: both ensembles stacked (format 2)."""
        if self.backchannel_trees is None:
            return self.trees
        built = self._stacked
        if built is None or built[0] is not self.trees or built[1] is not self.backchannel_trees:
            stacked = self.trees.stacked(self.backchannel_trees)
            built = self._stacked = (self.trees, self.backchannel_trees, stacked)
        return built[2]

    def prepare_live(self) -> None:
        """Build the single-row scoring table now (tens of ms), not at the first pause."""
        self._live_trees().prepare_row_scoring()

    def contributions(self, row: np.ndarray) -> np.ndarray:
        """Per-feature contributions of one row to the raw log-odds (last entry: the bias).

        The floor trees' paths, walked in the live (stacked) table: no second table to build.
        """
        return self._live_trees().contributions(row, trees=self.trees.num_trees)

    def save(self, folder: str | Path) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.trees.save(folder / "trees.npz")
        np.save(folder / "yield_weights.npy", self.yield_model.weights.astype(np.float32))
        np.save(folder / "relation_weights.npy", self.relation_model.weights.astype(np.float32))
        if self.backchannel_trees is not None:
            self.backchannel_trees.save(folder / "backchannel_trees.npz")
        # The blocks record replaces the older chat-only list (one fact, one key).
        meta = {k: v for k, v in self.metadata.items() if k != _LEGACY_BLOCKS}
        meta |= {
            "format": MODEL_FORMAT if self.backchannel_trees is not None else _READABLE_FORMATS[0],
            "features": list(self.feature_names),
            "blocks": [{"name": b.name, "n_features": b.width} for b in self.blocks],
            "calibration": self.calibration.to_dict(),
            "threshold": self.threshold,
            "domain_thresholds": self.domain_thresholds,
            "backchannel_calibration": self.backchannel_calibration.to_dict(),
            "backchannel_threshold": self.backchannel_threshold,
        }
        if self.operating_points:
            meta["operating_points"] = self.operating_points
        (folder / "model.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return folder


def model_dir_for(domain: str | None) -> Path:
    """The shipped model folder for a deployment domain (the default one unless it has its own)."""
    check_domain_name(domain)
    own = DOMAIN_MODEL_DIRS.get(domain or "")
    return own if own is not None and (own / "model.json").is_file() else DEFAULT_MODEL_DIR


def load_model(folder: str | Path | None = None, domain: str | None = None) -> TurnTakingModel:
    """Load a model folder; offline, no network, no pickle.

    Without a folder: the shipped model of ``domain`` (``chat`` has its own,
    ``weights/chat/``; the other domains share the default model).
    """
    folder = Path(folder) if folder is not None else model_dir_for(domain)
    names = ("model.json", "trees.npz", "yield_weights.npy", "relation_weights.npy")
    paths = {n: folder / n for n in names}
    missing = [n for n, p in paths.items() if not p.is_file()]
    if missing:
        raise ModelFilesError(
            f"{folder}: not a polylogue model folder (missing {', '.join(missing)})"
        )
    try:
        meta = load_json_object(paths["model.json"], "a model description object")
    except JsonInputError as exc:
        raise ModelFilesError(str(exc)) from None
    if meta.get("format") not in _READABLE_FORMATS:
        raise ModelFilesError(
            f"{paths['model.json']}: format {meta.get('format')!r}, want {MODEL_FORMAT!r}"
        )
    blocks = model_blocks(meta, paths["model.json"])
    n_features = len(feature_names(blocks))
    weights = {}
    for name in ("yield_weights.npy", "relation_weights.npy"):
        w = np.load(paths[name], allow_pickle=False)
        if w.shape != (HASH_SIZE,):
            raise ModelFilesError(f"{paths[name]}: shape {w.shape}, want ({HASH_SIZE},)")
        weights[name] = w.astype(np.float32)
    trees = TreeEnsemble.load(paths["trees.npz"])
    if trees.feature.max(initial=-1) >= n_features:
        raise ModelFilesError(f"{paths['trees.npz']}: splits on features this version lacks")
    backchannel: TreeEnsemble | None = None
    if meta["format"] == MODEL_FORMAT:
        bpath = folder / "backchannel_trees.npz"
        if not bpath.is_file():
            raise ModelFilesError(f"{folder}: format 2 model without backchannel_trees.npz")
        backchannel = TreeEnsemble.load(bpath)
        if backchannel.feature.max(initial=-1) >= n_features:
            raise ModelFilesError(f"{bpath}: splits on features this version lacks")
    model = TurnTakingModel(
        trees=trees,
        yield_model=HashedLogistic(weights["yield_weights.npy"]),
        relation_model=HashedLogistic(weights["relation_weights.npy"]),
        calibration=Calibration.from_dict(meta["calibration"]),
        threshold=float(meta["threshold"]),
        metadata=meta,
        backchannel_trees=backchannel,
        backchannel_calibration=Calibration.from_dict(
            meta.get("backchannel_calibration", {"x": [], "y": []})
        ),
        backchannel_threshold=float(meta.get("backchannel_threshold", 1.0)),
        domain_thresholds={str(k): float(v) for k, v in meta.get("domain_thresholds", {}).items()},
        feature_blocks=blocks,
        operating_points=_operating_points(meta, paths["model.json"]),
    )
    model.prepare_live()
    return model


def load_shared_model(folder: str | Path) -> TurnTakingModel:
    """``load_model(folder)``, loaded once per process while the folder's files are unchanged.

    Deployments only read their model, so the sessions, rooms and ``decide`` calls of one
    process share one copy (its load, tens of milliseconds, and its memory); code that changes
    a model (training) loads its own with :func:`load_model`.
    """
    path = Path(folder).resolve()
    if not path.is_dir():
        return load_model(folder)  # its error names the folder
    stamp = tuple(
        (p.name, st.st_mtime_ns, st.st_size)
        for p in sorted(path.iterdir())
        if p.is_file() and (st := p.stat())
    )
    return _load_once(path, stamp)


@functools.lru_cache(maxsize=8)
def _load_once(path: Path, stamp: tuple[tuple[str, int, int], ...]) -> TurnTakingModel:
    return load_model(path)


def _operating_points(meta: dict[str, Any], path: Path) -> dict[str, dict[str, dict[str, float]]]:
    """``operating_points`` of a model.json, checked (older folders have none: ``{}``)."""
    raw = meta.get("operating_points", {})
    out: dict[str, dict[str, dict[str, float]]] = {}
    try:
        for point, per_domain in raw.items():
            out[str(point)] = {
                str(domain): {str(k): float(v) for k, v in values.items()}
                for domain, values in per_domain.items()
            }
    except (AttributeError, TypeError, ValueError):
        raise ModelFilesError(
            f"{path}: operating_points is not {{point: {{domain: {{...}}}}}}"
        ) from None
    return out


#: The key older model folders list their non-base blocks under (read, no longer written).
_LEGACY_BLOCKS = "feature_blocks"


def model_blocks(meta: dict[str, Any], path: Path) -> tuple[str, ...]:
    """The blocks after ``base`` that a model.json's ``features`` are made of, each checked.

    The ``blocks`` record (``[{"name", "n_features"}]``, written since the block seam) cuts the
    feature list; a folder without it (written before, the shipped ones included) is cut where
    the names pass from one block of this version to another (a name no block has stays with
    the block before it). Each block's features must be this version's: a block a model does
    not read is never checked, so adding one leaves every other model loadable.
    """
    recorded = meta.get("features")
    if not isinstance(recorded, list) or not all(isinstance(n, str) for n in recorded):
        raise ModelFilesError(f"{path}: 'features' is not a list of feature names")
    parts = _recorded_parts(meta, recorded, path)
    if parts[0][0] != BASE:
        raise ModelFilesError(
            f"{path}: the feature row starts with block {parts[0][0]!r}, not {BASE!r}"
        )
    problems = []
    for name, names in parts:
        block = FEATURE_BLOCKS.get(name)
        if block is None:
            known = ", ".join(FEATURE_BLOCKS)
            problems.append(f"block {name!r} is not in this version (known: {known})")
        elif tuple(names) != block.names:
            problems.append(f"block {name!r} {_difference(names, block.names)}")
    seen = [name for name, _ in parts]
    if len(set(seen)) != len(seen):
        problems.append(f"blocks repeat ({', '.join(seen)})")
    if problems:
        raise ModelFilesError(
            f"{path}: trained on features this polylogue version does not compute: "
            + "; ".join(problems)
        )
    extra = tuple(seen[1:])
    legacy = meta.get(_LEGACY_BLOCKS)
    if "blocks" not in meta and legacy is not None and list(legacy) != list(extra):
        raise ModelFilesError(
            f"{path}: {_LEGACY_BLOCKS} {legacy!r} but the features are those of {list(extra)}"
        )
    return extra


def _recorded_parts(
    meta: dict[str, Any], recorded: list[str], path: Path
) -> list[tuple[str, list[str]]]:
    """(block, its recorded feature names) in row order, from the record or the names."""
    record = meta.get("blocks")
    if record is not None:
        try:
            widths = [(str(b["name"]), int(b["n_features"])) for b in record]
        except (KeyError, TypeError, ValueError):
            raise ModelFilesError(f"{path}: 'blocks' is not [{{name, n_features}}, ...]") from None
        if (
            not widths
            or sum(w for _, w in widths) != len(recorded)
            or min(w for _, w in widths) < 0
        ):
            raise ModelFilesError(
                f"{path}: 'blocks' covers {sum(w for _, w in widths)} features, "
                f"'features' lists {len(recorded)}"
            )
        out, start = [], 0
        for name, width in widths:
            out.append((name, recorded[start : start + width]))
            start += width
        return out
    owner = {n: b.name for b in FEATURE_BLOCKS.values() for n in b.names}
    parts: list[tuple[str, list[str]]] = []
    for n in recorded:
        name = owner.get(n) or (parts[-1][0] if parts else BASE)
        if parts and parts[-1][0] == name:
            parts[-1][1].append(n)
        else:
            parts.append((name, [n]))
    return parts or [(BASE, [])]


def _difference(recorded: list[str], current: tuple[str, ...]) -> str:
    """How a block's recorded features differ from this version's, named."""
    lacks = [n for n in current if n not in recorded]
    extra = [n for n in recorded if n not in current]
    said = []
    if extra:
        said.append(f"has {', '.join(extra)} that this version lacks")
    if lacks:
        said.append(f"lacks {', '.join(lacks)}")
    return " and ".join(said) or "has this version's features in another order"
