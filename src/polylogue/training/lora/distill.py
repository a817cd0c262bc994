"""Reasoning distillation: a label-conditioned teacher justifies each training decision.

The teacher is any evaluation backend (``hf:...``, ``openai:MODEL@URL``; see
:func:`polylogue.models.base.load_predictor`) run in the evaluation harness's *reasoning* prompt
mode, with the answer-format block replaced by a label-conditioned instruction: "the right
decision here is X; write one sentence starting with 'Reasoning:' explaining why, then
'Decision: X'". So the teacher sees exactly the student's prompt plus the label, and its reply is
parsed by the harness's own parser.

A reply becomes a training target only if it parses, restates the *given* decision, and its
reasoning is one clean sentence (see :func:`clean_reasoning`). Everything else is a failure: it
is retried (``attempts`` per session, with back-off) and then reported in ``failures.jsonl``,
never written as a target. The reference code wrote "No reasoning provided." for failures and
never retried them (notes D.6, D.10.9).

Output folder::

    manifest.json      teacher identity, prompt fingerprints, data hashes, counts
    reasoning.jsonl    one line per *successful* point: point_id, label, category, reasoning
    attempts.jsonl     audit log: one line per teacher answer or error
    failures.jsonl     points still without reasoning after this session, with the last error

Resumable: successes are appended and flushed one by one; a rerun skips points already in
``reasoning.jsonl`` (a line cut by a kill is discarded), so nothing is duplicated, and retries
the failures. Rate limiting spaces teacher calls to ``requests_per_second`` on average.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polylogue.errors import PolylogueInputError
from polylogue.jsonio import load_json_object
from polylogue.models.base import Prediction, PredictionError, Predictor
from polylogue.prompts.builder import PromptOptions, build_messages, prompt_fingerprint
from polylogue.runs import (
    JsonlAppender,
    canonical_json,
    install_independent,
    lock_run_folder,
    new_manifest,
    read_records,
    resume_manifest,
    write_json_atomic,
)
from polylogue.training.lora.teacher_prompts import teacher_prompt
from polylogue.turntaking.types import Decision, DecisionPoint

REASONING_FILE = "reasoning.jsonl"
ATTEMPTS_FILE = "attempts.jsonl"
FAILURES_FILE = "failures.jsonl"
MANIFEST_FILE = "manifest.json"
MAX_REASONING_CHARS = 500
MIN_REASONING_CHARS = 30
#: Phrases showing the teacher talked about the given label instead of the conversation.
_LEAK = re.compile(
    r"ground[- ]truth|correct (decision|answer|label)|(was|been|is) (given|told)|the label|"
    r"already known|decision (was|is) given",
    re.IGNORECASE,
)
#: A sentence ends at . ! ? before a capital, but not after a title ("Mr. Douglas").
_SENTENCE_END = re.compile(
    r"(?<!\bMr\.)(?<!\bMrs\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bSt\.)(?<=[.!?])\s+(?=[A-Z\"'(])"
)


class DistillError(PolylogueInputError):
    """The distillation folder or teacher cannot be used as configured."""


@dataclass(frozen=True)
class DistillConfig:
    teacher: str
    data: tuple[str, ...]
    out_dir: str
    split: str = "train"
    #: Only a subset of the split (None = all of it), drawn as ``polylogue train`` draws its
    #: training subset (``subset``: natural category shares or four-way balanced).
    max_points: int | None = None
    subset: str = "natural"
    #: Teacher answers per point per session before it is reported as a failure.
    attempts: int = 3
    retry_delay_s: float = 2.0
    #: Average teacher calls per second (None = unlimited).
    requests_per_second: float | None = None
    #: Points per teacher call (backends parallelise inside a call).
    chunk_size: int = 8
    max_prompt_tokens: int = 2048
    system_repeats: int = 1
    #: System prompt file replacing the packaged one (the user prompt stays the evaluation's).
    system_template: str | None = None
    seed: int = 42
    #: Backend options (temperature, concurrency, max_tokens, batch_size, ...).
    teacher_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise DistillError("attempts must be >= 1")
        if self.chunk_size < 1:
            raise DistillError("chunk_size must be >= 1")
        if self.requests_per_second is not None and self.requests_per_second <= 0:
            raise DistillError("requests_per_second must be > 0")


@dataclass
class DistillReport:
    out_dir: Path
    n_points: int
    n_done_before: int
    n_new: int
    failures: dict[str, str]
    teacher_calls: int

    @property
    def n_done(self) -> int:
        return self.n_done_before + self.n_new


# ----------------------------------------------------------------------------- prompts


def clean_reasoning(text: str | None, prompt_text: str = "") -> tuple[str | None, str | None]:
    """(reasoning sentence, None) or (None, why it is unusable).

    ``prompt_text`` is what the teacher was shown: a sentence copied from it is not reasoning.
    """
    if not text:
        return None, "no reasoning sentence"
    one = " ".join(text.replace("\n", " ").split()).strip(" \"'*`")
    one = _SENTENCE_END.split(one, maxsplit=1)[0].strip()
    if len(one) < MIN_REASONING_CHARS:
        return None, f"reasoning too short ({len(one)} characters)"
    if len(one) > MAX_REASONING_CHARS:
        return None, f"reasoning longer than {MAX_REASONING_CHARS} characters"
    if _LEAK.search(one):
        return None, "reasoning refers to the given label instead of the conversation"
    if prompt_text and one.rstrip(".!?") in " ".join(prompt_text.split()):
        return None, "reasoning copies the prompt"
    if one[-1] not in ".!?":
        one += "."
    return one, None


def _reasoning_from_output(pred: Prediction) -> str | None:
    if pred.reasoning:
        return pred.reasoning
    # A teacher may omit the "Reasoning:" prefix: take the text before its decision line.
    head = re.split(r"(?im)^\s*\**\s*decision\s*[:=]", pred.raw_output, maxsplit=1)
    return head[0].strip() if len(head) == 2 and head[0].strip() else None


def judge(
    pred: Prediction, label: Decision, prompt_text: str = ""
) -> tuple[str | None, str | None]:
    """(reasoning, None) when the answer is a usable target, else (None, reason)."""
    if pred.extra.get("error"):
        return None, f"backend error: {pred.extra['error']}"
    if pred.decision is None:
        return None, "no parseable decision in the teacher's answer"
    if pred.decision is not label:
        return None, f"teacher wrote {pred.decision.value}, not the given {label.value}"
    return clean_reasoning(_reasoning_from_output(pred), prompt_text)


# ----------------------------------------------------------------------------- files


def load_reasoning(folders: Iterable[str | Path]) -> dict[str, str]:
    """point_id -> reasoning from distillation folders (successes only; first wins)."""
    out: dict[str, str] = {}
    for folder in folders:
        path = Path(folder) / REASONING_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{folder} has no {REASONING_FILE}: run `polylogue distill`")
        for rec in read_records(path, key=None):
            if rec.get("status") == "ok" and rec.get("reasoning"):
                out.setdefault(str(rec["point_id"]), str(rec["reasoning"]))
    return out


# ----------------------------------------------------------------------------- rate limit


class RateLimiter:
    """Spaces calls so that ``n`` requests take at least ``n / rate`` seconds on average."""

    def __init__(
        self,
        requests_per_second: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = requests_per_second
        self._clock = clock
        self._sleep = sleep
        self._next = clock()

    def acquire(self, n: int = 1) -> float:
        """Block until ``n`` requests may start; returns the seconds waited."""
        if self.rate is None:
            return 0.0
        now = self._clock()
        wait = max(0.0, self._next - now)
        if wait:
            self._sleep(wait)
        self._next = max(now, self._next) + n / self.rate
        return wait


# ----------------------------------------------------------------------------- run


def _identity(predictor: Predictor) -> dict[str, Any]:
    # The prompt is recorded separately (per label); the rest identifies the teacher (paths
    # inside the installation relative to it, so a folder resumes in another checkout).
    described = predictor.describe().items()
    return install_independent({k: v for k, v in described if k not in ("prompt", "prompt_mode")})


def _set_prompt(predictor: Predictor, options: PromptOptions) -> None:
    """Point a loaded backend at another prompt (both labels share one loaded teacher model).

    Every harness backend keeps its prompt options in a ``prompt`` attribute; reloading a model
    per label would double load time and memory.
    """
    if not hasattr(predictor, "prompt"):
        raise DistillError(f"teacher backend {predictor.name} has no prompt options to set")
    predictor.prompt = options


def _check_manifest(path: Path, manifest: dict[str, Any]) -> None:
    if not path.exists():
        return
    old = load_json_object(path, "a distillation manifest object")
    for key in ("teacher", "prompts", "split"):
        if old.get(key) != manifest.get(key):
            raise DistillError(
                f"{path.parent} holds justifications made with a different {key} "
                f"({old.get(key)!r} vs {manifest.get(key)!r}); use a new output folder"
            )


def _distill_manifest(
    config: DistillConfig,
    predictor: Predictor,
    prompts: Mapping[Decision, PromptOptions],
    data_hashes: Mapping[str, str] | None,
    path: Path,
) -> dict[str, Any]:
    """The run manifest; refuses a folder made with another teacher, prompt or split."""
    manifest = {
        # The manifest kind names the format, not the module: unchanged by the move to lora/.
        **new_manifest("polylogue.training.lora.distill", "", ("torch", "transformers", "httpx")),
        "teacher": _identity(predictor),
        "teacher_spec": config.teacher,
        "prompts": {label.value: prompt_fingerprint(p) for label, p in prompts.items()},
        "split": config.split,
        "data": list(config.data),
        "data_hashes": dict(data_hashes or {}),
    }
    # The key: what makes a justification reusable (teacher, prompts, split).
    manifest["run_key"] = hashlib.sha256(
        canonical_json([manifest[k] for k in ("teacher", "prompts", "split")]).encode()
    ).hexdigest()
    _check_manifest(path, manifest)
    earlier = resume_manifest(path, manifest["run_key"])
    if earlier is not None:  # same run: keep its creation time, note this session
        manifest.update(created=earlier.get("created"), resumed_at=earlier["resumed_at"])
    return manifest


def _judge_chunk(
    predictor: Predictor,
    chunk: Sequence[DecisionPoint],
    label: Decision,
    unbudgeted: PromptOptions,
) -> list[tuple[DecisionPoint, Prediction | None, str | None, str | None]]:
    """(point, teacher answer, accepted reasoning or None, why not) for each point of a chunk."""
    error = None
    try:
        preds = predictor.predict([p.input for p in chunk])
    except PredictionError as exc:
        preds, error = exc.completed, f"{type(exc).__name__}: {exc}"
    by_id = {pred.point_id: pred for pred in preds}
    out: list[tuple[DecisionPoint, Prediction | None, str | None, str | None]] = []
    for point in chunk:
        pred = by_id.get(point.point_id)
        reasoning: str | None
        why: str | None
        if pred is None:
            reasoning, why = None, error or "the teacher returned no answer"
        else:
            # The whole history: a superset of what any budget let through.
            shown = build_messages(point.input, unbudgeted)
            text = "\n".join(m["content"] for m in shown)
            reasoning, why = judge(pred, label, text)
        out.append((point, pred, reasoning, why))
    return out


def distill(
    config: DistillConfig,
    points: Sequence[DecisionPoint],
    predictor: Predictor,
    *,
    data_hashes: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    on_chunk: Callable[[int, int], None] | None = None,
) -> DistillReport:
    """Write reasoning for every point not yet done; returns what happened this session."""
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with lock_run_folder(out):  # a second distillation into the same folder stops here
        return _distill_locked(
            config, points, predictor, out, data_hashes=data_hashes, sleep=sleep, on_chunk=on_chunk
        )


def _teacher_prompts(config: DistillConfig) -> dict[Decision, PromptOptions]:
    """The teacher's prompt per gold label (each asks it to justify that label)."""
    return {
        label: teacher_prompt(
            label, config.max_prompt_tokens, config.system_repeats, config.system_template
        )
        for label in (Decision.SPEAK, Decision.SILENT)
    }


def _distill_locked(
    config: DistillConfig,
    points: Sequence[DecisionPoint],
    predictor: Predictor,
    out: Path,
    *,
    data_hashes: Mapping[str, str] | None,
    sleep: Callable[[float], None],
    on_chunk: Callable[[int, int], None] | None,
) -> DistillReport:
    prompts = _teacher_prompts(config)
    # The judge reads the reasoning against the whole history (no token budget).
    unbudgeted = {k: dataclasses.replace(p, max_prompt_tokens=None) for k, p in prompts.items()}
    manifest_path = out / MANIFEST_FILE
    manifest = _distill_manifest(config, predictor, prompts, data_hashes, manifest_path)

    ids = [p.point_id for p in points]
    if len(set(ids)) != len(ids):
        raise DistillError("duplicate point ids in the points to distill")
    done = {str(r["point_id"]) for r in read_records(out / REASONING_FILE, None, repair=True)}
    read_records(out / ATTEMPTS_FILE, None, repair=True)
    pending = [p for p in points if p.point_id not in done]
    n_done_before = len(points) - len(pending)
    failures: dict[str, str] = {}
    limiter = RateLimiter(config.requests_per_second, sleep=sleep)
    calls = 0
    n_new = 0
    # Sorts by start time; the process id separates two sessions started in the same second.
    session = f"{dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}/{os.getpid()}"

    def save_state() -> None:
        rows = [{"point_id": pid, "error": err} for pid, err in failures.items()]
        with open(out / (FAILURES_FILE + ".tmp"), "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(out / (FAILURES_FILE + ".tmp"), out / FAILURES_FILE)
        write_json_atomic(
            manifest_path,
            {
                **manifest,
                "updated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "n_points": len(points),
                "n_done": n_done_before + n_new,
                "n_failed": len(failures),
            },
        )

    save_state()
    with (
        JsonlAppender(out / REASONING_FILE) as ok_file,
        JsonlAppender(out / ATTEMPTS_FILE) as log_file,
    ):
        for attempt in range(1, config.attempts + 1):
            if not pending:
                break
            if attempt > 1:
                sleep(config.retry_delay_s * (attempt - 1))
            still: list[DecisionPoint] = []
            for label in (Decision.SPEAK, Decision.SILENT):
                group = [p for p in pending if p.gold.label is label]
                if not group:
                    continue
                _set_prompt(predictor, prompts[label])
                for start in range(0, len(group), config.chunk_size):
                    chunk = group[start : start + config.chunk_size]
                    limiter.acquire(len(chunk))
                    calls += len(chunk)
                    judged = _judge_chunk(predictor, chunk, label, unbudgeted[label])
                    files = (ok_file, log_file)
                    n_new += _record_judged(judged, files, label, attempt, session, failures, still)
                    ok_file.sync()
                    save_state()
                    if on_chunk is not None:
                        on_chunk(n_done_before + n_new, len(points))
            pending = still
    save_state()
    return DistillReport(out, len(points), n_done_before, n_new, failures, calls)


def _record_judged(
    judged: Sequence[tuple[DecisionPoint, Prediction | None, str | None, str | None]],
    files: tuple[JsonlAppender, JsonlAppender],
    label: Decision,
    attempt: int,
    session: str,
    failures: dict[str, str],
    still: list[DecisionPoint],
) -> int:
    """Log every judged point's attempt, keep the accepted reasoning; the number accepted.

    A point that failed goes into ``failures`` and ``still`` (retried); one accepted leaves
    ``failures``.
    """
    ok_file, log_file = files
    n_ok = 0
    for point, pred, reasoning, why in judged:
        log_file.append(
            {
                "point_id": point.point_id,
                "session": session,
                "attempt": attempt,
                "status": "ok" if reasoning else "failed",
                "error": why,
                "raw_output": None if pred is None else pred.raw_output,
            },
        )
        if reasoning:
            ok_file.append(
                {
                    "point_id": point.point_id,
                    "status": "ok",
                    "label": label.value,
                    "category": point.gold.category.value,
                    "reasoning": reasoning,
                    "attempt": attempt,
                },
            )
            n_ok += 1
            failures.pop(point.point_id, None)
        else:
            failures[point.point_id] = why or "unknown"
            still.append(point)
    return n_ok


def distill_from_benchmarks(
    config: DistillConfig,
    predictor_factory: Callable[..., Predictor] | None = None,
    on_chunk: Callable[[int, int], None] | None = None,
) -> DistillReport:
    """Load the split's points and a teacher from ``config`` and run :func:`distill`."""
    from polylogue.models.base import load_predictor
    from polylogue.training.lora.cue_teacher import TEACHER_SPEC, load_cue_teacher
    from polylogue.training.lora.data import load_subset
    from polylogue.turntaking.dataset import load_benchmark

    points = load_subset(config.data, config.split, config.max_points, config.seed, config.subset)
    hashes = {str(folder): load_benchmark(folder).data_hash for folder in config.data}
    first = teacher_prompt(
        Decision.SPEAK, config.max_prompt_tokens, config.system_repeats, config.system_template
    )
    options = dict(config.teacher_options)
    if config.teacher == TEACHER_SPEC:  # rule-written cue sentences, no model to cache
        predictor: Predictor = load_cue_teacher(prompt=first)
        return distill(config, points, predictor, data_hashes=hashes, on_chunk=on_chunk)
    factory = predictor_factory or load_predictor
    # Deterministic teacher answers are cached beside the output (``cache_path=`` disables it).
    options.setdefault("cache_path", str(Path(config.out_dir) / "_cache" / "responses.sqlite"))
    predictor = factory(config.teacher, prompt=first, **options)
    return distill(config, points, predictor, data_hashes=hashes, on_chunk=on_chunk)


def config_summary(config: DistillConfig) -> dict[str, Any]:
    d = dataclasses.asdict(config)
    d["teacher_options"] = dict(config.teacher_options)
    return d
