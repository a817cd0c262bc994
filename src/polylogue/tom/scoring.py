"""MeetingToM scoring: an "official" mode that reproduces the released evaluator, and "strict".

Official mode follows the semantics documented for ``evaluation/evaluate.py`` (see
``docs/meetingtom.md``): answer extraction from many prediction shapes, label normalisation,
STATE identity from ``metadata``/``custom_id`` only, YOU labels left unvalidated, missing
predictions dropped from the denominator, YOU macro-F1 over the union of gold and predicted
labels, the consensus points metric, file-name routing and (model, variant) parsing, and the
``overall_summary.csv`` layout. Its quirks are reproduced on purpose so numbers compare with
published ones; :func:`score_strict` is the mode to trust for new results.

Strict mode: gold from typed records, every gold item in the denominator (missing or invalid
prediction = wrong), every question validated against its fixed label set, macro-F1 over that
fixed set, coverage always reported, per-label tables and confusion matrices.
"""

from __future__ import annotations

import ast
import csv
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polylogue.jsonio import JsonInputError, loads_json
from polylogue.tom.records import (
    LABELS,
    TASK_QUESTIONS,
    ToMRecord,
    ToMTask,
)

# ----------------------------------------------------------------------------- normalisation

_ALIASES = {"PSEUDO_CONSENSU": "PSEUDO_CONSENSUS"}
_PLACEHOLDERS = frozenset(
    {
        "<OPTION>",
        "OPTION",
        "<LABEL>",
        "LABEL",
        "<ANSWER>",
        "ANSWER",
        "YOUR_ANSWER",
        "YOUR ANSWER",
        "<YOUR_ANSWER>",
        "CONSENSUS_TYPE",
        "DISSENTER",
    }
)
_BARE_LABEL = re.compile(r"^[A-Z0-9_]{2,120}$")
_CURLY = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})

#: Top-level string fields that are text-parsed, in the official order.
TEXT_FIELDS: tuple[str, ...] = (
    "prediction",
    "pred",
    "pred_label",
    "model_pred",
    "answer",
    "label",
    "output_text",
    "response_text",
    "generated_text",
    "completion_text",
)
#: Containers walked recursively, in the official order.
CONTAINER_FIELDS: tuple[str, ...] = (
    "output",
    "result",
    "parsed",
    "completion",
    "response",
    "choices",
    "candidates",
    "body",
    "response_body",
)
_NESTED_TEXT_FIELDS = ("text", "content", "output_text", "response_text", "generated_text")
_WALK_SKIP = frozenset(
    {
        "messages",
        "message_history",
        "prompt",
        "prompts",
        "input",
        "inputs",
        "request",
        "request_body",
        "metadata",
        "window_qids",
        "schema",
        "tools",
        "system",
        "user",
        "Q1",
        "q1",
        "Q2",
        "q2",
    }
)
_MAX_DEPTH = 10


def normalise_label(value: Any, allowed: Iterable[str] | None) -> str | None:
    """Official normalisation; ``allowed=None`` accepts any label-like string (YOU)."""
    if not isinstance(value, str):
        return None
    s = value.strip().strip("`'\" \t\r\n").upper()
    s = re.sub(r"[\s\-]+", "_", s)
    s = s.strip(".,;:()[]{}")
    s = _ALIASES.get(s, s)
    if not s or s in _PLACEHOLDERS:
        return None
    if allowed is not None and s not in set(allowed):
        return None
    return s


def _last_balanced_object(text: str) -> str | None:
    """The last ``{...}`` block, found by scanning back from the last ``}``."""
    end = text.rfind("}")
    if end < 0:
        return None
    depth = 0
    for i in range(end, -1, -1):
        if text[i] == "}":
            depth += 1
        elif text[i] == "{":
            depth -= 1
            if depth == 0:
                return text[i : end + 1]
    return None


def _load_mapping(text: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        try:
            obj = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
    return obj if isinstance(obj, dict) else None


def parse_text_answer(text: str, question: str, allowed: Iterable[str] | None) -> str | None:
    """Extract one question's label from free text, the official way.

    The last balanced JSON/Python object is tried, then the whole text; key ``Q1`` is preferred
    over ``q1``. For Q1 only, a bare label (no spaces, 2-120 chars of ``[A-Z0-9_]`` after
    normalisation) is accepted, so a bare ``A`` is rejected while ``MULTIPLE`` is not.
    """
    text = text.translate(_CURLY)
    candidates = []
    block = _last_balanced_object(text)
    if block is not None:
        candidates.append(block)
    candidates.append(text)
    for cand in candidates:
        obj = _load_mapping(cand.strip())
        if obj is None:
            continue
        for key in (question, question.lower()):
            if key in obj:
                label = normalise_label(obj[key], allowed)
                if label is not None:
                    return label
    if question == "Q1":
        stripped = text.strip()
        if stripped and not re.search(r"\s", stripped):
            label = normalise_label(stripped, allowed)
            if label is not None and _BARE_LABEL.match(label):
                return label
    return None


def extract_answers(
    row: Mapping[str, Any], questions: Sequence[str], allowed: Mapping[str, Iterable[str] | None]
) -> dict[str, str | None]:
    """The official answer extraction for one prediction row (first valid value wins)."""
    found: dict[str, str | None] = {q: None for q in questions}

    def open_questions() -> list[str]:
        return [q for q in questions if found[q] is None]

    def take_direct(d: Mapping[str, Any]) -> None:
        for q in open_questions():
            for key in (q, q.lower()):
                if key in d:
                    label = normalise_label(d[key], allowed[q])
                    if label is not None:
                        found[q] = label
                        break

    def take_text(text: str) -> None:
        for q in open_questions():
            found[q] = parse_text_answer(text, q, allowed[q])

    def walk(value: Any, depth: int) -> None:
        if depth > _MAX_DEPTH or not open_questions():
            return
        if isinstance(value, str):
            take_text(value)
        elif isinstance(value, list):
            for v in value:
                walk(v, depth + 1)
                if not open_questions():
                    return
        elif isinstance(value, dict):
            take_direct(value)
            for key in _NESTED_TEXT_FIELDS:
                v = value.get(key)
                if isinstance(v, str) and open_questions():
                    take_text(v)
            for key, v in value.items():
                if not open_questions():
                    return
                if key in _WALK_SKIP or (key in _NESTED_TEXT_FIELDS and isinstance(v, str)):
                    continue
                walk(v, depth + 1)

    take_direct(row)
    for key in TEXT_FIELDS:
        v = row.get(key)
        if isinstance(v, str) and open_questions():
            take_text(v)
    for key in CONTAINER_FIELDS:
        if key in row and open_questions():
            walk(row[key], 1)
    return found


def _official_allowed(task: ToMTask) -> dict[str, Iterable[str] | None]:
    if task is ToMTask.YOU:
        return {"Q1": None, "Q2": None}  # the official evaluator does not validate YOU
    return {q: LABELS[(task, q)] for q in TASK_QUESTIONS[task]}


# ----------------------------------------------------------------------------- identity

_WINDOW_TXT = re.compile(r"window(\d+)\.txt")


def _as_int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def prediction_key(row: Mapping[str, Any], task: ToMTask) -> tuple[str, int] | str | None:
    """The official identity of a prediction row: (source bundle, window) for STATE, else bundle."""
    raw_meta = row.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    parts = str(row.get("custom_id") or "").split("::") if row.get("custom_id") else []
    if task is ToMTask.STATE:
        bundle = meta.get("bundle_name") or None
        window = _as_int(meta.get("window_index"))
        if window is None and isinstance(meta.get("transcript_txt"), str):
            m = _WINDOW_TXT.search(meta["transcript_txt"])
            window = int(m.group(1)) if m else None
        if bundle is None and len(parts) > 1 and parts[1]:
            bundle = parts[1]
        if window is None and len(parts) > 3:
            window = _as_int(parts[3])
        if bundle is None or window is None:
            return None
        return (str(bundle), window)
    if row.get("bundle_name"):
        return str(row["bundle_name"])
    if meta.get("bundle_name"):
        return str(meta["bundle_name"])
    rid = row.get("id")
    if isinstance(rid, str) and ":" in rid:
        return rid.split(":", 1)[1]
    if len(parts) > 1 and parts[1]:
        return parts[1]
    return None


# ----------------------------------------------------------------------------- metrics


@dataclass(frozen=True, slots=True)
class LabelScore:
    label: str
    support: int
    predicted: int
    precision: float
    recall: float
    f1: float


@dataclass(frozen=True, slots=True)
class QuestionMetrics:
    """Metrics for one question over aligned (gold, prediction) pairs."""

    n: int
    accuracy: float
    macro_f1: float
    labels: tuple[str, ...]
    per_label: tuple[LabelScore, ...]
    #: confusion[gold][pred] over ``labels`` plus any out-of-list values seen.
    confusion: dict[str, dict[str, int]]
    #: Gold items considered (strict: all; official: only those with a prediction).
    n_gold: int = 0
    n_missing: int = 0

    @property
    def coverage(self) -> float:
        return (self.n_gold - self.n_missing) / self.n_gold if self.n_gold else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "n_gold": self.n_gold,
            "n_missing": self.n_missing,
            "coverage": self.coverage,
            "accuracy": self.accuracy,
            "macro_f1": self.macro_f1,
            "labels": list(self.labels),
            "per_label": [
                {
                    "label": s.label,
                    "support": s.support,
                    "predicted": s.predicted,
                    "precision": s.precision,
                    "recall": s.recall,
                    "f1": s.f1,
                }
                for s in self.per_label
            ],
            "confusion": self.confusion,
        }


def _div(a: float, b: float) -> float:
    return a / b if b else 0.0


def question_metrics(
    gold: Sequence[str],
    pred: Sequence[str],
    labels: Sequence[str],
    n_gold: int | None = None,
    n_missing: int = 0,
) -> QuestionMetrics:
    """Accuracy and per-label/macro F1 the official way.

    Precision and recall for a label only count pairs whose gold *and* prediction are both in
    ``labels`` (so an out-of-list prediction is not a false negative); accuracy counts all pairs.
    Labels with neither support nor predictions contribute F1 = 0 to the macro mean.
    """
    n = len(gold)
    correct = sum(g == p for g, p in zip(gold, pred, strict=True))
    label_set = set(labels)
    confusion: dict[str, dict[str, int]] = {}
    for g, p in zip(gold, pred, strict=True):
        row = confusion.setdefault(g, {})
        row[p] = row.get(p, 0) + 1
    per: list[LabelScore] = []
    for lab in labels:
        tp = sum(1 for g, p in zip(gold, pred, strict=True) if g == lab and p == lab)
        fp = sum(
            1 for g, p in zip(gold, pred, strict=True) if p == lab and g != lab and g in label_set
        )
        fn = sum(
            1 for g, p in zip(gold, pred, strict=True) if g == lab and p != lab and p in label_set
        )
        prec, rec = _div(tp, tp + fp), _div(tp, tp + fn)
        per.append(
            LabelScore(
                label=lab,
                support=sum(1 for g in gold if g == lab),
                predicted=sum(1 for p in pred if p == lab),
                precision=prec,
                recall=rec,
                f1=_div(2 * prec * rec, prec + rec),
            )
        )
    return QuestionMetrics(
        n=n,
        accuracy=_div(correct, n),
        macro_f1=_div(sum(s.f1 for s in per), len(per)),
        labels=tuple(labels),
        per_label=tuple(per),
        confusion=confusion,
        n_gold=n if n_gold is None else n_gold,
        n_missing=n_missing,
    )


# ----------------------------------------------------------------------------- official mode


def _normalise_gold(task: ToMTask, question: str, value: Any) -> str:
    raw = str(value)
    if task is ToMTask.YOU:
        return raw  # kept raw by the official evaluator
    label = normalise_label(raw, LABELS[(task, question)])
    return label if label is not None else raw


def load_official_gold(paths: Iterable[str | Path]) -> dict[ToMTask, dict[Any, dict[str, str]]]:
    """Gold answers keyed like predictions, from any mix of task files (legacy STATE too)."""
    gold: dict[ToMTask, dict[Any, dict[str, str]]] = {t: {} for t in ToMTask}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                row = loads_json(line, path)
                if not isinstance(row, dict):
                    continue
                rid = str(row.get("id", ""))
                task_name = row.get("task") or (rid.split(":", 1)[0] if ":" in rid else "")
                try:
                    task = ToMTask(task_name)
                except ValueError:
                    continue
                bundle = row.get("bundle_name") or (rid.split(":", 1)[1] if ":" in rid else rid)
                answers = row.get("answers") or {}
                if task is ToMTask.STATE:
                    if row.get("source_bundle_name") and row.get("window_index") is not None:
                        key = (str(row["source_bundle_name"]), int(row["window_index"]))
                        if "Q1" in answers:
                            gold[task][key] = {"Q1": _normalise_gold(task, "Q1", answers["Q1"])}
                    else:  # legacy bundled format: Q1 = window 0, Q2 = window 1
                        for window, q in ((0, "Q1"), (1, "Q2")):
                            if q in answers:
                                gold[task][(str(bundle), window)] = {
                                    "Q1": _normalise_gold(task, "Q1", answers[q])
                                }
                else:
                    gold[task][str(bundle)] = {
                        q: _normalise_gold(task, q, answers[q])
                        for q in TASK_QUESTIONS[task]
                        if q in answers
                    }
    return gold


def route_file(name: str) -> list[ToMTask]:
    """Which tasks a prediction file is scored under, from its lower-cased file name."""
    low = name.lower()
    tasks: list[ToMTask] = []
    if "state" in low and "you" not in low and "consensus" not in low:
        tasks.append(ToMTask.STATE)
    if "you" in low:
        tasks.append(ToMTask.YOU)
    if "consensus" in low:
        tasks.append(ToMTask.CONSENSUS)
    return tasks


_MODEL_VARIANT = re.compile(r"^(.*)_(state|you|consensus)_(cot|eot|noprompt)\b")


def parse_model_variant(stem: str) -> tuple[str, str]:
    """(model, variant) from a prediction file stem, the official way."""
    m = _MODEL_VARIANT.match(stem)
    if m:
        return m.group(1), m.group(3)
    v = re.search(r"_(cot|eot|noprompt)", stem)
    variant = v.group(1) if v else "NA"
    model = re.sub(r"_(state|you|consensus).*$", "", stem)
    return model, variant


@dataclass
class FileCounts:
    rows: int = 0
    rows_bad_json: int = 0
    rows_missing_key_or_widx: int = 0
    duplicate_keys: int = 0
    rows_missing_label: int = 0
    missing_pred_for_gold: int = 0


@dataclass
class OfficialFileResult:
    """Metrics of one prediction file under one task, as the official evaluator computes them."""

    file: str
    task: ToMTask
    model: str
    variant: str
    metrics: dict[str, QuestionMetrics]
    summary: dict[str, float]
    counts: FileCounts = field(default_factory=FileCounts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "task": self.task.value,
            "model": self.model,
            "variant": self.variant,
            "summary": self.summary,
            "counts": self.counts.__dict__,
            "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
        }


def _read_prediction_rows(path: Path, counts: FileCounts) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            counts.rows += 1
            try:
                obj = loads_json(line, path)
            except JsonInputError:  # counted, as a model's unparseable row is
                counts.rows_bad_json += 1
                continue
            if isinstance(obj, dict):
                rows.append(obj)
            else:
                counts.rows_bad_json += 1
    return rows


def _labels_for(
    task: ToMTask,
    question: str,
    gold: Sequence[str],
    pred: Sequence[str],
    override: Sequence[str] | None,
) -> tuple[str, ...]:
    if override:
        return tuple(override)
    if task is ToMTask.YOU:
        return tuple(sorted(set(gold) | set(pred)))
    return LABELS[(task, question)]


def _official_predictions(
    rows: Sequence[Mapping[str, Any]], task: ToMTask, counts: FileCounts
) -> dict[Any, dict[str, str | None]]:
    """Key -> parsed answers, counting rows without key, with a missing label, and duplicates."""
    allowed = _official_allowed(task)
    questions = TASK_QUESTIONS[task]
    preds: dict[Any, dict[str, str | None]] = {}
    for row in rows:
        key = prediction_key(row, task)
        if key is None:
            counts.rows_missing_key_or_widx += 1
            continue
        answers = extract_answers(row, questions, allowed)
        if any(v is None for v in answers.values()):
            counts.rows_missing_label += 1
        if key in preds:
            counts.duplicate_keys += 1
        preds[key] = answers  # later rows overwrite earlier ones
    return preds


def _aligned(
    gold: Mapping[Any, Mapping[str, str]],
    preds: Mapping[Any, Mapping[str, str | None]],
    q: str,
    keys: Iterable[Any],
) -> tuple[list[str], list[str], int]:
    """(gold, prediction) pairs of question ``q`` where both exist, and how many golds there are."""
    g, p, n_gold = [], [], 0
    for k in keys:
        if q not in gold[k]:
            continue
        n_gold += 1
        pv = preds.get(k, {}).get(q)
        if pv is not None:
            g.append(gold[k][q])
            p.append(pv)
    return g, p, n_gold


def _score_per_question(
    task: ToMTask,
    gold: Mapping[Any, Mapping[str, str]],
    preds: Mapping[Any, Mapping[str, str | None]],
    gold_keys: Sequence[Any],
    labels_override: Sequence[str] | None,
) -> tuple[dict[str, QuestionMetrics], dict[str, float]]:
    """STATE and YOU: each question scored on its own."""
    metrics: dict[str, QuestionMetrics] = {}
    for q in TASK_QUESTIONS[task]:
        g, p, n_gold = _aligned(gold, preds, q, gold_keys)
        labels = _labels_for(task, q, g, p, labels_override)
        metrics[q] = question_metrics(g, p, labels, n_gold=n_gold, n_missing=n_gold - len(g))
    if task is ToMTask.STATE:
        return metrics, {
            "state_acc": metrics["Q1"].accuracy,
            "state_macro_f1": metrics["Q1"].macro_f1,
        }
    return metrics, {
        "you_q1_acc": metrics["Q1"].accuracy,
        "you_q1_macro_f1": metrics["Q1"].macro_f1,
        "you_q2_acc": metrics["Q2"].accuracy,
        "you_q2_macro_f1": metrics["Q2"].macro_f1,
    }


def _score_consensus(
    gold: Mapping[Any, Mapping[str, str]],
    preds: Mapping[Any, Mapping[str, str | None]],
    gold_keys: Sequence[Any],
    labels_override: Sequence[str] | None,
) -> tuple[dict[str, QuestionMetrics], dict[str, float]]:
    """CONSENSUS: Q1 alone, Q2 conditional on a right Q1, and the paper's points (Q1 + Q2)."""
    task = ToMTask.CONSENSUS
    metrics: dict[str, QuestionMetrics] = {}
    g1, p1, n_gold1 = _aligned(gold, preds, "Q1", gold_keys)
    metrics["Q1"] = question_metrics(
        g1,
        p1,
        _labels_for(task, "Q1", g1, p1, labels_override),
        n_gold=n_gold1,
        n_missing=n_gold1 - len(g1),
    )
    both = [
        k
        for k in gold_keys
        if "Q1" in gold[k]
        and "Q2" in gold[k]
        and preds.get(k, {}).get("Q1") is not None
        and preds.get(k, {}).get("Q2") is not None
    ]
    score = 0
    cond_keys = []
    for k in both:
        if preds[k]["Q1"] == gold[k]["Q1"]:
            score += 1
            cond_keys.append(k)
            if preds[k]["Q2"] == gold[k]["Q2"]:
                score += 1
    g2 = [gold[k]["Q2"] for k in cond_keys]
    p2 = [str(preds[k]["Q2"]) for k in cond_keys]
    metrics["Q2_cond"] = question_metrics(g2, p2, _labels_for(task, "Q2", g2, p2, labels_override))
    return metrics, {
        "cons_q1_acc": metrics["Q1"].accuracy,
        "cons_q1_macro_f1": metrics["Q1"].macro_f1,
        "cons_q2_cond_acc": metrics["Q2_cond"].accuracy,
        "cons_points_acc": _div(score, 2 * len(both)),
        "cons_points_n": float(len(both)),
    }


def score_official_rows(
    rows: Sequence[Mapping[str, Any]],
    task: ToMTask,
    gold: Mapping[Any, Mapping[str, str]],
    only_windows: Iterable[int] = (0, 1),
    labels_override: Sequence[str] | None = None,
    counts: FileCounts | None = None,
) -> tuple[dict[str, QuestionMetrics], dict[str, float]]:
    """Score one task's prediction rows against keyed gold, with the official semantics."""
    counts = counts if counts is not None else FileCounts()
    preds = _official_predictions(rows, task, counts)
    windows = set(only_windows)
    gold_keys = sorted(
        k for k in gold if task is not ToMTask.STATE or (isinstance(k, tuple) and k[1] in windows)
    )
    counts.missing_pred_for_gold = sum(1 for k in gold_keys if k not in preds)
    if task is ToMTask.CONSENSUS:
        return _score_consensus(gold, preds, gold_keys, labels_override)
    return _score_per_question(task, gold, preds, gold_keys, labels_override)


SUMMARY_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    "state_acc",
    "state_macro_f1",
    "you_q1_acc",
    "you_q1_macro_f1",
    "you_q2_acc",
    "you_q2_macro_f1",
    "cons_q1_acc",
    "cons_q2_cond_acc",
    "cons_points_acc",
)


@dataclass
class OfficialResult:
    files: list[OfficialFileResult]
    #: (model, variant) -> summary column -> value, as written to overall_summary.csv.
    table: dict[tuple[str, str], dict[str, float]]

    def summary_rows(self) -> list[dict[str, str]]:
        out = []
        for model, variant in sorted(self.table):
            cells = self.table[(model, variant)]
            row = {"model": model, "variant": variant}
            for col in SUMMARY_COLUMNS[2:]:
                row[col] = f"{cells[col]:.6f}" if col in cells else ""
            out.append(row)
        return out

    def write_summary(self, out_dir: str | Path) -> Path:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "overall_summary.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(SUMMARY_COLUMNS))
            w.writeheader()
            w.writerows(self.summary_rows())
        return path


def score_official(
    gold_paths: Iterable[str | Path],
    pred_dir: str | Path,
    ext: str = ".jsonl",
    tasks: Iterable[ToMTask | str] = tuple(ToMTask),
    only_windows: Iterable[int] = (0, 1),
    labels_override: Sequence[str] | None = None,
) -> OfficialResult:
    """Score every ``*ext`` file in ``pred_dir`` (sorted by name), one result per file and task."""
    gold = load_official_gold(gold_paths)
    wanted = {ToMTask(t) for t in tasks}
    windows = tuple(only_windows)
    files: list[OfficialFileResult] = []
    table: dict[tuple[str, str], dict[str, float]] = {}
    for path in sorted(Path(pred_dir).iterdir(), key=lambda p: p.name):
        if not path.is_file() or not path.name.endswith(ext):
            continue
        stem = path.name[: -len(ext)] if ext else path.name
        model, variant = parse_model_variant(stem)
        for task in route_file(path.name):
            if task not in wanted:
                continue
            counts = FileCounts()
            rows = _read_prediction_rows(path, counts)
            metrics, summary = score_official_rows(
                rows, task, gold[task], windows, labels_override, counts
            )
            files.append(
                OfficialFileResult(path.name, task, model, variant, metrics, summary, counts)
            )
            cells = table.setdefault((model, variant), {})
            cells.update({k: v for k, v in summary.items() if k in SUMMARY_COLUMNS})
    return OfficialResult(files=files, table=table)


# ----------------------------------------------------------------------------- strict mode

MISSING = "<MISSING>"


@dataclass
class StrictResult:
    """Strict metrics for one run: every gold item counts, missing/invalid = wrong."""

    metrics: dict[str, QuestionMetrics]
    summary: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
        }


def strict_answers(row: Mapping[str, Any], task: ToMTask) -> dict[str, str | None]:
    """Validated answers of one prediction row (YOU labels checked against their options)."""
    allowed = {q: LABELS[(task, q)] for q in TASK_QUESTIONS[task]}
    return extract_answers(row, TASK_QUESTIONS[task], allowed)


def score_strict(
    records: Sequence[ToMRecord],
    predictions: Mapping[str, Mapping[str, str | None]],
    only_windows: Iterable[int] = (0, 1),
) -> StrictResult:
    """Score validated predictions keyed by record id against typed gold records.

    Keys of the result: ``state.Q1``, ``you.Q1``, ``you.Q2``, ``consensus.Q1``,
    ``consensus.Q2_cond`` (over items whose Q1 is right), ``consensus.Q2_all``, and the strict
    Task 3.2 subsets ``consensus.Q2_goldpc`` / ``consensus.Q2_predpc`` (:func:`strict_task32`).
    """
    windows = set(only_windows)
    metrics: dict[str, QuestionMetrics] = {}
    summary: dict[str, float] = {}
    by_task: dict[ToMTask, list[ToMRecord]] = {}
    for r in records:
        if r.task is ToMTask.STATE and r.item.window_index not in windows:
            continue
        by_task.setdefault(r.task, []).append(r)

    def collect(recs: Sequence[ToMRecord], q: str) -> tuple[list[str], list[str], int]:
        g, p, missing = [], [], 0
        for r in recs:
            pv = predictions.get(r.id, {}).get(q)
            if pv is None:
                missing += 1
            g.append(r.gold.answers[q])
            p.append(pv if pv is not None else MISSING)
        return g, p, missing

    for task, recs in by_task.items():
        for q in TASK_QUESTIONS[task]:
            g, p, missing = collect(recs, q)
            key = (
                f"{task.value}.{q}"
                if not (task is ToMTask.CONSENSUS and q == "Q2")
                else "consensus.Q2_all"
            )
            metrics[key] = question_metrics(g, p, LABELS[(task, q)], n_missing=missing)
        if task is ToMTask.CONSENSUS:
            cond = [r for r in recs if predictions.get(r.id, {}).get("Q1") == r.gold.answers["Q1"]]
            g, p, missing = collect(cond, "Q2")
            metrics["consensus.Q2_cond"] = question_metrics(
                g, p, LABELS[(task, "Q2")], n_missing=missing
            )
            points = sum(
                1 + (predictions.get(r.id, {}).get("Q2") == r.gold.answers["Q2"]) for r in cond
            )
            summary["cons_points_acc"] = _div(points, 2 * len(recs))
            metrics |= strict_task32(recs, predictions)
    for key, m in metrics.items():
        summary[f"{key}.acc"] = m.accuracy
        summary[f"{key}.macro_f1"] = m.macro_f1
        summary[f"{key}.coverage"] = m.coverage
        summary[f"{key}.n"] = float(m.n)
    return StrictResult(metrics=metrics, summary=summary)


PSEUDO = "PSEUDO_CONSENSUS"


def strict_task32(
    records: Sequence[ToMRecord], predictions: Mapping[str, Mapping[str, str | None]]
) -> dict[str, QuestionMetrics]:
    """Task 3.2 (hidden dissenter) on the items where the question means something.

    The official Task 3.2 is Q2 accuracy over items whose Q1 the model got right; a model that
    never predicts PSEUDO_CONSENSUS only keeps items with gold NONE there and scores 100%.

    * ``consensus.Q2_goldpc``: items whose *gold* Q1 is PSEUDO_CONSENSUS (41 in the release);
      the model's Q2 must name the adjudicated dissenter, whatever its Q1 said (missing or
      invalid = wrong), so a never-PC model scores 0 here;
    * ``consensus.Q2_predpc``: items where the *model* answered PSEUDO_CONSENSUS; its dissenter
      is right only if the gold Q2 agrees (NONE unless gold is PSEUDO_CONSENSUS too). Empty
      (n = 0) for a model that never predicts it.
    """
    cons = [r for r in records if r.task is ToMTask.CONSENSUS]
    out: dict[str, QuestionMetrics] = {}
    for key, keep in (
        ("consensus.Q2_goldpc", lambda r: r.gold.answers["Q1"] == PSEUDO),
        ("consensus.Q2_predpc", lambda r: predictions.get(r.id, {}).get("Q1") == PSEUDO),
    ):
        subset = [r for r in cons if keep(r)]
        gold = [r.gold.answers["Q2"] for r in subset]
        raw = [predictions.get(r.id, {}).get("Q2") for r in subset]
        pred = [p if p is not None else MISSING for p in raw]
        out[key] = question_metrics(
            gold, pred, LABELS[(ToMTask.CONSENSUS, "Q2")], n_missing=sum(p is None for p in raw)
        )
    return out


# ----------------------------------------------------------------------------- baselines


def majority_labels(records: Sequence[ToMRecord]) -> dict[tuple[ToMTask, str], str]:
    """Most frequent gold label per question (ties broken by option order)."""
    out: dict[tuple[ToMTask, str], str] = {}
    for task in ToMTask:
        recs = [r for r in records if r.task is task]
        for q in TASK_QUESTIONS[task]:
            if not recs:
                continue
            counts: dict[str, int] = {}
            for r in recs:
                counts[r.gold.answers[q]] = counts.get(r.gold.answers[q], 0) + 1
            order = LABELS[(task, q)]
            out[(task, q)] = max(
                counts, key=lambda lab: (counts[lab], -order.index(lab) if lab in order else -99)
            )
    return out


def strict_from_rows(
    records: Sequence[ToMRecord], rows: Iterable[Mapping[str, Any]]
) -> dict[str, dict[str, str | None]]:
    """Validated answers per record id from run rows (rows keyed by ``point_id`` or ``id``)."""
    by_id = {r.id: r for r in records}
    out: dict[str, dict[str, str | None]] = {}
    for row in rows:
        rid = str(row.get("point_id") or row.get("id") or "")
        if rid in by_id:
            out[rid] = strict_answers(row, by_id[rid].task)
    return out
