"""Run a generator over MeetingToM records into a resumable, hash-keyed run folder.

Conventions shared with :mod:`polylogue.evaluation.runner`:

* ``<out>/<model>__<variant>__<key12>/`` where the key hashes the generator description, the
  prompt options, the record selection and the benchmark data hash; the same configuration
  always lands in the same folder and resumes there;
* ``predictions.jsonl``: one row per record, appended and fsynced as soon as it is known; a
  killed write leaves a truncated last line, which resume cuts off;
* ``manifest.json`` written atomically at start and at the end (status, counts, versions).

The runner keeps no response cache: a model backend built with ``cache_path``
(:mod:`polylogue.tom.backends`) wraps its LLM client in one, and a row says whether its reply
came from there (``cached``).

Prediction rows are in a shape the official evaluator also reads: the raw reply is in
``response_text``; identity is in ``bundle_name`` (YOU/CONSENSUS), ``metadata.bundle_name`` +
``metadata.window_index`` (STATE: the *source* bundle) and a ``custom_id``
``<task>::<bundle>::<questions>::<window or variant>``. :func:`export_official` writes them as
``<model>_<task>_<tag>.jsonl`` files for the official evaluator's file-name parsing.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polylogue.errors import PolylogueInputError
from polylogue.jsonio import load_json_object
from polylogue.runs import (
    JsonlAppender,
    canonical_json,
    install_independent,
    lock_run_folder,
    new_manifest,
    read_records,
    resume_manifest,
    run_chunks,
    write_json_atomic,
)
from polylogue.tom.backends import (
    GenerationError,
    GenerationRequest,
    ToMGenerator,
)
from polylogue.tom.parts import generate as generate_parts
from polylogue.tom.prompts import ToMPromptOptions, build_prompt
from polylogue.tom.records import RECONSTRUCTION_FILE, TASK_FILES, ToMBenchmark, ToMRecord, ToMTask
from polylogue.tom.transcript import AmiSessions, transcript_window

PREDICTIONS = "predictions.jsonl"
MANIFEST = "manifest.json"


class ToMRunError(PolylogueInputError):
    pass


def data_hash(folder: Path) -> str:
    """SHA-256 over the release files (task files + reconstruction), first 16 hex digits."""
    h = hashlib.sha256()
    for name in [*TASK_FILES.values(), RECONSTRUCTION_FILE]:
        h.update(name.encode())
        h.update((folder / name).read_bytes())
    return h.hexdigest()[:16]


def slug(text: str) -> str:
    """File-name-safe and free of ``_`` so the official file-name parser splits correctly."""
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", text).strip("-")[:60] or "model"


@dataclass(frozen=True, slots=True)
class RunSpec:
    generator: dict[str, Any]
    generator_name: str
    options: ToMPromptOptions
    record_ids: tuple[str, ...]
    data_hash: str

    @property
    def key(self) -> str:
        payload = {
            "generator": install_independent(self.generator),
            "options": self.options.to_dict(),
            "records": hashlib.sha256("\n".join(self.record_ids).encode()).hexdigest(),
            "data": self.data_hash,
        }
        return hashlib.sha256(canonical_json(payload).encode()).hexdigest()

    @property
    def folder_name(self) -> str:
        return f"{slug(self.generator_name)}__{slug(self.options.name)}__{self.key[:12]}"


def custom_id(record: ToMRecord, options: ToMPromptOptions, questions: Sequence[str]) -> str:
    item = record.item
    last = str(item.window_index) if item.task is ToMTask.STATE else options.official_tag
    return f"{item.task.value}::{item.scoring_bundle}::{''.join(questions)}::{last}"


def prediction_row(
    record: ToMRecord,
    options: ToMPromptOptions,
    questions: Sequence[str],
    text: str | None,
    *,
    model: str,
    error: str | None = None,
    latency_s: float = 0.0,
    usage: dict[str, Any] | None = None,
    cached: bool = False,
    prompt_digest: str | None = None,
) -> dict[str, Any]:
    """One predictions.jsonl row (no gold; readable by the official evaluator)."""
    item = record.item
    row: dict[str, Any] = {
        "point_id": item.id,
        "id": item.id,
        "task": item.task.value,
        "custom_id": custom_id(record, options, questions),
        "bundle_name": item.bundle_name,
        "metadata": {
            "bundle_name": item.scoring_bundle,
            "window_index": item.window_index,
            "record_id": item.id,
            "session_id": item.session_id,
            "variant": options.name,
        },
        "asked": list(questions),
        "model_name": model,
        "latency_s": round(latency_s, 4),
        "cached": cached,
        "prompt_digest": prompt_digest,
    }
    if text is not None:
        row["response_text"] = text
    if error is not None:
        row["error"] = error
    if usage:
        row["usage"] = usage
    return row


MediaProvider = Callable[[ToMRecord, ToMPromptOptions], Any]


@dataclass
class ToMRunResult:
    folder: Path
    rows: list[dict[str, Any]]
    generated: int
    reused: int
    errors: int


def run_tom(
    bench: ToMBenchmark,
    records: Sequence[ToMRecord],
    generator: ToMGenerator,
    options: ToMPromptOptions,
    out_root: str | Path,
    ami_folder: str | Path | None = None,
    media: MediaProvider | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ToMRunResult:
    """Generate a reply per record (skipping those already in the run folder) and record it.

    ``ami_folder`` (AMI manual annotations) is needed for utterances and priors; ``media`` builds
    :class:`~polylogue.tom.media.PromptMedia` for a record when the variant shows video.
    """
    spec = RunSpec(
        generator=generator.describe(),
        generator_name=generator.name,
        options=options,
        record_ids=tuple(r.id for r in records),
        data_hash=data_hash(bench.folder),
    )
    folder = Path(out_root) / spec.folder_name
    folder.mkdir(parents=True, exist_ok=True)
    with lock_run_folder(folder):  # a second identical run stops here
        return _run_locked(
            bench,
            records,
            generator,
            options,
            spec,
            folder,
            ami_folder,
            media,
            progress,
        )


def _run_locked(
    bench: ToMBenchmark,
    records: Sequence[ToMRecord],
    generator: ToMGenerator,
    options: ToMPromptOptions,
    spec: RunSpec,
    folder: Path,
    ami_folder: str | Path | None,
    media: MediaProvider | None,
    progress: Callable[[int, int], None] | None,
) -> ToMRunResult:
    pred_path = folder / PREDICTIONS
    done = {r["point_id"] for r in read_records(pred_path, repair=True)}
    manifest = _manifest(folder / MANIFEST, spec, bench, records)
    write_json_atomic(folder / MANIFEST, manifest)
    needs_ami = (
        options.uses_transcript
        or bool(options.priors)
        or generator.describe()["kind"] == "heuristic"
    )
    sessions = AmiSessions(ami_folder) if ami_folder is not None else None
    if needs_ami and sessions is None:
        raise ToMRunError(f"variant {options.name} with {generator.name} needs the AMI annotations")
    reply = _Replier(generator, options, sessions if needs_ami else None, media)
    with JsonlAppender(pred_path) as out:
        loop = run_chunks(
            records, done, lambda r: r.id, reply.rows, out, chunk_size=1, on_chunk=progress
        )
    rows = read_records(pred_path)
    manifest.update(
        status="complete" if len(rows) >= len(records) else "partial",
        finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        n_predictions=len(rows),
        n_errors=sum(1 for r in rows if r.get("error")),
    )
    write_json_atomic(folder / MANIFEST, manifest)
    return ToMRunResult(
        folder=folder,
        rows=rows,
        generated=loop.n_new,
        reused=len(records) - len(loop.todo),
        errors=reply.errors,
    )


def _manifest(
    path: Path, spec: RunSpec, bench: ToMBenchmark, records: Sequence[ToMRecord]
) -> dict[str, Any]:
    manifest = resume_manifest(path, spec.key) or new_manifest(
        "meetingtom", spec.key, ("torch", "transformers", "imageio-ffmpeg")
    )
    manifest.update(
        {
            "generator": spec.generator,
            "generator_name": spec.generator_name,
            "variant": spec.options.name,
            "official_tag": spec.options.official_tag,
            "options": spec.options.to_dict(),
            "data_folder": str(bench.folder),
            "data_hash": spec.data_hash,
            "n_records": len(records),
            "tasks": sorted({r.task.value for r in records}),
            "record_ids_sha256": hashlib.sha256("\n".join(spec.record_ids).encode()).hexdigest(),
            "status": "running",
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
    )
    return manifest


@dataclass
class _Replier:
    """Prompt -> generator reply -> predictions row, one record at a time."""

    generator: ToMGenerator
    options: ToMPromptOptions
    sessions: AmiSessions | None
    media: MediaProvider | None
    errors: int = 0

    def rows(self, chunk: Sequence[ToMRecord]) -> list[dict[str, Any]]:
        return [self.row(rec) for rec in chunk]

    def row(self, rec: ToMRecord) -> dict[str, Any]:
        options = self.options
        window = (
            transcript_window(
                self.sessions, rec.item.session_id, rec.item.window, options.transcript_options()
            )
            if self.sessions is not None
            else None
        )
        prompt_media = (
            self.media(rec, options) if (self.media is not None and options.uses_video) else None
        )
        prompt = build_prompt(rec.item, options, window, prompt_media)
        digest = prompt.digest()
        name = self.generator.name
        try:
            gen = generate_parts(self.generator, GenerationRequest(prompt, rec.item, window))
        except GenerationError as exc:
            self.errors += 1
            return prediction_row(
                rec,
                options,
                prompt.questions,
                None,
                model=name,
                error=str(exc),
                prompt_digest=digest,
            )
        return prediction_row(
            rec,
            options,
            prompt.questions,
            gen.text,
            model=name,
            latency_s=gen.latency_s,
            usage=dict(gen.usage),
            cached=gen.cached,
            prompt_digest=digest,
        )


def load_tom_run(folder: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    folder = Path(folder)
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise ToMRunError(f"{folder} is not a MeetingToM run folder (no {MANIFEST})")
    manifest = load_json_object(manifest_path, "a run manifest object")
    return manifest, read_records(folder / PREDICTIONS)


def export_official(
    run_folder: str | Path, out_dir: str | Path, model: str | None = None
) -> list[Path]:
    """Write ``<model>_<task>_<tag>.jsonl`` per task for the official evaluator.

    Variant settings other than the reasoning tag (modality, priors...) go into the model part of
    the name, so runs of different ablations never overwrite each other's summary cells.
    """
    manifest, rows = load_tom_run(run_folder)
    options = ToMPromptOptions.from_dict(manifest["options"])
    extra = options.name.split("+")[1:]
    base = slug(model or manifest["generator_name"])
    model_part = "-".join([base, *extra]) if extra else base
    clash = [w for w in ("state", "you", "consensus") if w in model_part.lower()]
    if clash:  # the official evaluator routes files by these words in the name
        raise ToMRunError(f"model name {model_part!r} contains {clash}; pass another --name")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    by_task: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_task.setdefault(row["task"], []).append(row)
    for task, task_rows in sorted(by_task.items()):
        path = out_dir / f"{model_part}_{task}_{options.official_tag}.jsonl"
        with open(path, "w", encoding="utf-8") as f:
            for row in task_rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        written.append(path)
    return written
