"""Resumable evaluation runs.

A run folder is keyed by a hash of (dataset hash, split, class ratio, predictor description:
model, adapter, prompt, options), so re-running the same command finds the same folder and
continues where it stopped. Layout::

    runs/<model>__<dataset>__<split>__<key>/
        manifest.json       options, versions, dataset hash, git commit, status, progress
        predictions.jsonl   one line per finished point: prediction + gold joined by point id
        metrics.json        metrics over the finished points (``complete`` says if all are done)

Durability: every prediction line is written and flushed to the OS as soon as its chunk
returns (a killed process cannot lose it); the file is fsynced once per chunk (survives a
machine crash up to the last chunk). On resume a truncated last line (a write cut by SIGKILL)
is cut off, and points already in the file are skipped, so nothing is lost or duplicated.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polylogue.errors import RunStopped
from polylogue.models.base import Prediction, PredictionError, Predictor
from polylogue.runs import (
    ChunkFailed,
    JsonlAppender,
    RunFileError,
    canonical_json,
    install_independent,
    lock_run_folder,
    new_manifest,
    overwrite_json_in_place,
    read_records,
    resume_manifest,
    run_chunks,
    write_json_atomic,
    write_json_if_changed,
)
from polylogue.turntaking.types import DecisionPoint

RUN_KIND = "polylogue.evaluation.run"


class RunError(RunStopped):
    """A run stopped early; finished predictions are kept and the run can be resumed."""


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    name: str
    data_hash: str
    split: str
    #: "natural" (the split as built) or "balanced" (majority class subsampled).
    class_ratio: str = "natural"
    path: str | None = None
    #: The words as written ("original") or as a speech recognizer writes them ("recognizer":
    #: :func:`polylogue.rendering.recognizer_text` on every utterance the model sees).
    rendering: str = "original"


@dataclass
class RunResult:
    folder: Path
    #: Points in the split (the run is complete when all are done, whatever ``limit`` was).
    n_total: int
    n_done: int
    n_new: int
    metrics: dict[str, Any] | None
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.n_done >= self.n_total


# ----------------------------------------------------------------------------- keys & folders


def run_key(dataset: DatasetInfo, predictor_description: dict[str, Any]) -> str:
    payload = {
        "data_hash": dataset.data_hash,
        "split": dataset.split,
        "class_ratio": dataset.class_ratio,
        # Paths inside the installation (the shipped model's folder) hashed relative to it.
        "predictor": install_independent(predictor_description),
    }
    if dataset.rendering != "original":  # original-text runs keep the keys they always had
        payload["rendering"] = dataset.rendering
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def _slug(text: str, limit: int = 48) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:limit] or "model"


def run_folder_name(dataset: DatasetInfo, predictor_name: str, key: str) -> str:
    ratio = "" if dataset.class_ratio == "natural" else f"-{dataset.class_ratio}"
    if dataset.rendering != "original":
        ratio += f"-{dataset.rendering}"
    return f"{_slug(predictor_name)}__{_slug(dataset.name)}__{dataset.split}{ratio}__{key[:12]}"


# ----------------------------------------------------------------------------- predictions file


def read_predictions(path: str | Path, repair: bool = False) -> list[dict[str, Any]]:
    """Prediction records of a run, first occurrence per point id (see ``runs.read_records``).

    A record whose decision or P(SPEAK) is not what a run writes (an edited file) is an error
    naming it, before any metric is computed from it.
    """
    records = read_records(path, "point_id", repair)
    for rec in records:
        problem = _prediction_problem(rec)
        if problem is not None:
            raise RunFileError(f"{path}: record for point {rec.get('point_id')!r}: {problem}")
    return records


def _prediction_problem(rec: Any) -> str | None:
    if not isinstance(rec, dict):
        return "not a JSON object"
    p = rec.get("p_speak")
    if p is not None and (
        isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0
    ):
        return f"p_speak {p!r} is not a probability (a number from 0 to 1, or null)"
    if rec.get("decision") not in (None, "SPEAK", "SILENT"):
        return f"decision {rec.get('decision')!r} is not SPEAK, SILENT or null"
    return None


def _record(pred: Prediction, point: DecisionPoint) -> dict[str, Any]:
    rec = pred.to_dict()
    rec.update(
        {
            "gold": point.gold.label.value,
            "category": point.gold.category.value,
            "fine_category": point.gold.fine_category,
            "group": point.group,
            "corpus": point.input.corpus,
            "conversation_id": point.input.conversation_id,
            "target": point.input.target.id,
            "outcome": None if point.gold.outcome is None else point.gold.floor_outcome.value,
            "pause_time": point.gold.pause_time,
        }
    )
    return rec


# ----------------------------------------------------------------------------- metrics


def metrics_from_records(
    records: Sequence[dict[str, Any]], *, n_boot: int = 1000, seed: int = 0
) -> dict[str, Any]:
    from polylogue.evaluation.metrics import agent_metrics, compute_metrics, listener_minutes

    probs = [r.get("p_speak") for r in records]
    metrics = compute_metrics(
        [r["gold"] for r in records],
        [r.get("decision") for r in records],
        [r.get("category") for r in records],
        [r.get("group") or r["point_id"] for r in records],
        probs if any(p is not None for p in probs) else None,
        n_boot=n_boot,
        seed=seed,
    )
    # What an agent acting on these decisions would do (rate and precision beside accuracy).
    minutes = None
    if all("target" in r and r.get("pause_time") is not None for r in records):
        minutes = listener_minutes(
            [r["conversation_id"] for r in records],
            [r["target"] for r in records],
            [r["pause_time"] for r in records],
        )
    metrics["agent"] = agent_metrics(
        [r["gold"] == "SPEAK" for r in records],
        [r.get("decision") == "SPEAK" for r in records],
        [r.get("category") for r in records],
        minutes,
    )
    return metrics


# ----------------------------------------------------------------------------- the run


ProgressFactory = Callable[[int, int], "_Progress"]


class _Progress:
    def advance(self, n: int) -> None: ...

    def close(self) -> None: ...


class _RichProgress(_Progress):
    def __init__(self, total: int, done: int, description: str) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        class Throughput(ProgressColumn):
            def render(self, task: Any) -> Text:
                speed = task.finished_speed or task.speed
                return Text("– pts/s" if not speed else f"{speed:.2f} pts/s", style="cyan")

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            Throughput(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task(description, total=total, completed=done)

    def advance(self, n: int) -> None:
        self._progress.advance(self._task, n)

    def close(self) -> None:
        self._progress.stop()


def run_evaluation(
    points: Sequence[DecisionPoint],
    dataset: DatasetInfo,
    predictor: Predictor,
    out_dir: str | Path,
    *,
    spec: str | None = None,
    limit: int | None = None,
    chunk_size: int | None = None,
    n_boot: int = 1000,
    progress: bool = True,
    extra_manifest: dict[str, Any] | None = None,
) -> RunResult:
    """Predict every point not yet in the run folder, then (re)write metrics.json.

    Only ``point.input`` reaches the predictor; gold is joined back by point id afterwards.
    """
    description = predictor.describe()
    key = run_key(dataset, description)
    folder = Path(out_dir) / run_folder_name(dataset, predictor.name, key)
    folder.mkdir(parents=True, exist_ok=True)
    with lock_run_folder(folder):  # a second identical run stops here
        return _run_locked(
            points,
            dataset,
            predictor,
            folder,
            key,
            description,
            spec=spec,
            limit=limit,
            chunk_size=chunk_size,
            n_boot=n_boot,
            progress=progress,
            extra_manifest=extra_manifest,
        )


def _run_locked(
    points: Sequence[DecisionPoint],
    dataset: DatasetInfo,
    predictor: Predictor,
    folder: Path,
    key: str,
    description: dict[str, Any],
    *,
    spec: str | None,
    limit: int | None,
    chunk_size: int | None,
    n_boot: int,
    progress: bool,
    extra_manifest: dict[str, Any] | None,
) -> RunResult:
    pred_path = folder / "predictions.jsonl"
    manifest_path = folder / "manifest.json"

    ids = [p.point_id for p in points]
    if len(set(ids)) != len(ids):
        raise ValueError(f"dataset {dataset.name}/{dataset.split} has duplicate point ids")
    selected = list(points if limit is None else points[: max(0, limit)])
    done_ids = {r["point_id"] for r in read_predictions(pred_path, repair=True)}
    n_todo = sum(1 for p in selected if p.point_id not in done_ids)

    if n_todo == 0 and manifest_path.exists():
        # Nothing to predict: re-score only. The manifest is kept as it is (no "running", no
        # resumed_at) and files are rewritten only if their content changes, so a complete
        # run can be re-scored in a read-only folder.
        manifest = _manifest(manifest_path, key, dataset, predictor, description, spec, len(points))
        manifest["resumed_at"] = manifest.get("resumed_at", [None])[:-1]
        if not manifest["resumed_at"]:
            del manifest["resumed_at"]
        return _finish(folder, selected, points, dataset, predictor, manifest, 0, None, n_boot)

    manifest = _manifest(manifest_path, key, dataset, predictor, description, spec, len(points))
    manifest.update(extra_manifest or {})
    manifest["status"] = "running"
    manifest["limit"] = limit
    write_json_atomic(manifest_path, manifest)

    size = max(1, chunk_size or int(getattr(predictor, "batch_size", 0) or 16))
    bar: _Progress = (
        _RichProgress(len(selected), len(selected) - n_todo, predictor.name)
        if progress
        else _Progress()
    )
    session = _predict_remaining(
        predictor, selected, done_ids, pred_path, bar, size, manifest_path, manifest
    )
    return _finish(
        folder, selected, points, dataset, predictor, manifest, session["n_new"], session, n_boot
    )


def _predict_remaining(
    predictor: Predictor,
    selected: Sequence[DecisionPoint],
    done_ids: set[str],
    pred_path: Path,
    bar: _Progress,
    chunk_size: int,
    manifest_path: Path,
    manifest: dict[str, Any],
) -> dict[str, Any]:
    """Predict and append the points not in ``done_ids``, chunk by chunk; the session figures.

    A failure is recorded in the manifest and raised as a :class:`RunError` saying how many
    points are kept (a Ctrl-C is recorded and re-raised as it is).
    """
    shown = 0

    def on_chunk(n_new: int, _total: int) -> None:
        nonlocal shown
        bar.advance(n_new - shown)
        shown = n_new

    started = time.perf_counter()
    try:
        with JsonlAppender(pred_path) as out:
            loop = run_chunks(
                selected,
                done_ids,
                lambda p: p.point_id,
                lambda chunk: _predict_chunk(predictor, chunk),
                out,
                chunk_size=chunk_size,
                on_chunk=on_chunk,
            )
    except (Exception, KeyboardInterrupt) as exc:
        bar.close()
        note = _record_stop(manifest_path, manifest, exc, len(done_ids) + shown)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise RunError(
            f"run stopped after {len(done_ids) + shown} of {len(selected)} points "
            f"({_describe(exc)}). Finished predictions are kept in {pred_path}; "
            f"rerun the same command to resume.{note}"
        ) from exc
    bar.close()
    return {"n_new": loop.n_new, "seconds": round(time.perf_counter() - started, 3)}


def _describe(exc: BaseException) -> str:
    """An error in one line: a full or read-only disk by its plain cause and the file."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f" writing {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return f"{type(exc).__name__}: {exc}"


def _finish(
    folder: Path,
    selected: Sequence[DecisionPoint],
    points: Sequence[DecisionPoint],
    dataset: DatasetInfo,
    predictor: Predictor,
    manifest: dict[str, Any],
    n_new: int,
    session: dict[str, Any] | None,
    n_boot: int,
) -> RunResult:
    """Score the finished points of the selection; write metrics and manifest if they change."""
    wanted = {p.point_id for p in selected}
    scored = [r for r in read_predictions(folder / "predictions.jsonl") if r["point_id"] in wanted]
    metrics = _write_metrics(folder, scored, dataset, predictor.name, len(points), n_boot)
    manifest.update(
        {
            "status": "complete" if len(scored) == len(points) else "partial",
            "n_done": len(scored),
            "error": None,
        }
    )
    if session is not None:
        manifest["last_session"] = session
    write_json_if_changed(folder / "manifest.json", manifest)
    return RunResult(folder, len(points), len(scored), n_new, metrics, manifest)


def _record_stop(path: Path, manifest: dict[str, Any], exc: BaseException, n_done: int) -> str:
    """Mark a run that stopped early (Ctrl-C or an error) in its manifest.

    Returns "" or, when the manifest cannot be written either (the disk is full), a sentence
    saying so: the manifest then still says "running", and the user is told rather than left
    to find out.
    """
    manifest["status"] = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
    manifest["error"] = _describe(exc)
    manifest["n_done"] = n_done
    try:
        try:
            write_json_atomic(path, manifest)
        except OSError:  # a full disk has no room for a new file: reuse the old one's blocks
            overwrite_json_in_place(path, manifest)
    except OSError as err:
        return (
            f" {path} could not be updated ({err.strerror or err}) and still says "
            '"running"; no process is running it.'
        )
    return ""


def _write_metrics(
    folder: Path,
    scored: Sequence[dict[str, Any]],
    dataset: DatasetInfo,
    model_name: str,
    n_split: int,
    n_boot: int,
) -> dict[str, Any] | None:
    """metrics.json over the finished points of the selection (None when there are none)."""
    if not scored:
        return None
    metrics = metrics_from_records(scored, n_boot=n_boot)
    metrics.update(
        {
            "dataset": dataset.name,
            "split": dataset.split,
            "class_ratio": dataset.class_ratio,
            "rendering": dataset.rendering,
            "model": model_name,
            "complete": len(scored) == n_split,
            "n_split": n_split,
        }
    )
    write_json_if_changed(folder / "metrics.json", metrics)
    return metrics


def _predict_chunk(predictor: Predictor, chunk: Sequence[DecisionPoint]) -> list[dict[str, Any]]:
    """Records (prediction + gold) for one chunk; a partial answer raises :class:`ChunkFailed`."""
    preds: Sequence[Prediction]
    error: BaseException | None = None
    try:
        preds = predictor.predict([p.input for p in chunk])
    except PredictionError as exc:
        preds, error = exc.completed, exc
    by_id = {p.point_id: p for p in chunk}
    records = []
    for pred in preds:
        point = by_id.get(pred.point_id)
        if point is None:
            error = RunError(f"{predictor.name} answered unknown point {pred.point_id!r}")
            break
        records.append(_record(pred, point))
    if error is None and len(preds) != len(chunk):
        error = RunError(
            f"{predictor.name} returned {len(preds)} predictions for {len(chunk)} inputs"
        )
    if error is not None:
        raise ChunkFailed(records, error)
    return records


def _manifest(
    path: Path,
    key: str,
    dataset: DatasetInfo,
    predictor: Predictor,
    description: dict[str, Any],
    spec: str | None,
    n_split: int,
) -> dict[str, Any]:
    old = resume_manifest(path, key)
    if old is not None:
        return old
    key_env = getattr(predictor, "api_key_env", None)
    manifest = new_manifest(
        RUN_KIND,
        key,
        ("numpy", "scikit-learn", "torch", "transformers", "peft", "httpx"),
        secret_env=[key_env] if isinstance(key_env, str) else [],
    )
    manifest["model"] = {"name": predictor.name, "spec": spec, "description": description}
    manifest["dataset"] = {
        "name": dataset.name,
        "data_hash": dataset.data_hash,
        "split": dataset.split,
        "class_ratio": dataset.class_ratio,
        "rendering": dataset.rendering,
        "path": dataset.path,
        "n_split": n_split,
    }
    return manifest


# ----------------------------------------------------------------------------- from a folder


def stratified_order(points: Sequence[DecisionPoint], seed: int) -> list[DecisionPoint]:
    """``points`` in a seeded random order whose every prefix keeps the categories' shares.

    Each category is shuffled on its own and its j-th point gets the position key
    ``(j + 0.5) / n_category``; sorting by that key interleaves the categories in proportion, so
    ``--limit N`` on this order is a category-stratified random sample, and a larger ``N``
    extends the same sample (the run folder resumes instead of starting over).
    """
    import random

    by_cat: dict[str, list[DecisionPoint]] = {}
    for p in points:
        by_cat.setdefault(p.gold.category.value, []).append(p)
    rng = random.Random(seed)
    keyed: list[tuple[float, str, DecisionPoint]] = []
    for cat in sorted(by_cat):
        members = by_cat[cat]
        rng.shuffle(members)
        keyed.extend(((j + 0.5) / len(members), cat, p) for j, p in enumerate(members))
    keyed.sort(key=lambda k: (k[0], k[1]))
    return [p for _, _, p in keyed]


def load_points(
    data: str | Path, split: str, balanced: bool = False, rendering: str = "original"
) -> tuple[list[DecisionPoint], DatasetInfo]:
    """Decision points and dataset info from a benchmark folder built by ``polylogue build``,
    their words in ``rendering`` (:data:`polylogue.rendering.RENDERINGS`)."""
    from polylogue.turntaking.dataset import load_benchmark

    bench = load_benchmark(data)
    points = render_points(bench.points(split, balanced=balanced), rendering)
    info = DatasetInfo(
        name=bench.name,
        data_hash=bench.data_hash,
        split=split,
        class_ratio="balanced" if balanced else "natural",
        path=str(Path(data).resolve()),
        rendering=rendering,
    )
    return points, info


def render_points(points: Sequence[DecisionPoint], rendering: str) -> list[DecisionPoint]:
    """The points with every context utterance's words in ``rendering``; labels, speakers and
    times unchanged. Points of one conversation share utterances, so each is rendered once."""
    from dataclasses import replace

    from polylogue.rendering import RENDERINGS, render_utterance

    if rendering not in RENDERINGS:
        raise ValueError(f"unknown rendering {rendering!r}; choose one of {', '.join(RENDERINGS)}")
    if rendering == "original":
        return list(points)
    # By object identity; the original is kept beside its rendering so its id is never reused.
    rendered: dict[int, tuple[Any, Any]] = {}

    def words(u: Any) -> Any:
        if id(u) not in rendered:
            rendered[id(u)] = (u, render_utterance(u, rendering))
        return rendered[id(u)][1]

    return [
        replace(p, input=replace(p.input, context=tuple(words(u) for u in p.input.context)))
        for p in points
    ]
