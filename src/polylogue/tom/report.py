"""Scores of MeetingToM runs and Markdown tables in the layouts of the paper's Tables 1-6.

Columns follow the paper: Task 1 = STATE, 2.1 = YOU Q1 (addressee), 2.2 = YOU Q2 (attitude),
3.1 = CONSENSUS Q1, 3.2 = CONSENSUS Q2 conditional on a correct Q1. Values are percentages.
Each table says which scoring mode produced it and how many items each cell covers, because
official-mode numbers drop missing predictions from the denominator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from polylogue.tom.baselines import leak_metrics
from polylogue.tom.prompts import ToMPromptOptions
from polylogue.tom.records import LABELS, TASK_FILES, ToMBenchmark, ToMRecord, ToMTask
from polylogue.tom.runner import load_tom_run
from polylogue.tom.scoring import (
    QuestionMetrics,
    load_official_gold,
    score_official_rows,
    score_strict,
    strict_from_rows,
    strict_task32,
)

#: Short metric key -> strict result key.
_PAIRS = {
    "t1": "state.Q1",
    "t21": "you.Q1",
    "t22": "you.Q2",
    "t31": "consensus.Q1",
    "t32": "consensus.Q2_cond",
    "t32pc": "consensus.Q2_goldpc",
    "t32pred": "consensus.Q2_predpc",
}

#: (key, header) of the paper's metrics, macro-F1 next to every accuracy, and the strict Task 3.2
#: subsets next to the official Task 3.2 (see :func:`polylogue.tom.scoring.strict_task32`).
METRICS: tuple[tuple[str, str], ...] = (
    ("t1_acc", "Task 1 Acc."),
    ("t1_macro", "Task 1 Macro"),
    ("t21_acc", "Task 2.1 Acc."),
    ("t21_macro", "Task 2.1 Macro"),
    ("t22_acc", "Task 2.2 Acc."),
    ("t22_macro", "Task 2.2 Macro"),
    ("t31_acc", "Task 3.1 Acc."),
    ("t31_macro", "Task 3.1 Macro"),
    ("t32_acc", "Task 3.2 Acc."),
    ("t32_macro", "Task 3.2 Macro"),
    ("t32pc_acc", "Task 3.2 strict: gold PC"),
    ("t32pred_acc", "Task 3.2 strict: predicted PC"),
)
#: What the scoring modes and the Task 3.2 columns mean, printed under every table that shows
#: them (``tom score``, ``tom report``): the official 3.2 rewards never predicting
#: PSEUDO_CONSENSUS, which a bare "Task 3.2 Acc. 100.00" does not say.
MODE_RULES: dict[str, str] = {
    "official": "missing answers are dropped from n, as in the official evaluator",
    "strict": "every gold item counts; missing/invalid answers count as wrong",
}
TASK32_NOTES: dict[str, str] = {
    "t32": "Task 3.2 (official definition): dissenter accuracy over the CONSENSUS items whose "
    "Q1 the model got right; a model that never predicts PSEUDO_CONSENSUS keeps only gold-NONE "
    "items there and scores 100%.",
    "t32pc": "Task 3.2 strict: gold PC: dissenter accuracy over the items whose gold Q1 is "
    "PSEUDO_CONSENSUS, whatever the model's Q1 (missing = wrong); a never-PC model scores 0.",
    "t32pred": "Task 3.2 strict: predicted PC: dissenter accuracy over the items where the model "
    "answered PSEUDO_CONSENSUS (right only if gold agrees); no value (n = 0) when it never does.",
}
#: Accuracy and macro-F1 of the five questions (the ablation tables).
ACC_MACRO = (
    "t1_acc",
    "t1_macro",
    "t21_acc",
    "t21_macro",
    "t22_acc",
    "t22_macro",
    "t31_acc",
    "t31_macro",
    "t32_acc",
    "t32_macro",
)
#: Table 4 leaves out Task 1 (STATE): priors are about who is addressed and agrees.
PRIORS_COLUMNS = ACC_MACRO[2:]
_HEADERS = dict(METRICS)
#: Shown where Task 2.1 comes from the joint YOU prompt, whose Q2 text leaks the Q1 answer.
LEAK_NOTE = " [joint YOU prompt: Q2 leaks Q1]"
LEAK_ROW = "copy Q2's subject (no input; joint-prompt leak)"


@dataclass(frozen=True, slots=True)
class RunScores:
    """The paper's metrics for one run (fractions; ``None`` where the run lacks the task)."""

    model: str
    options: ToMPromptOptions
    mode: str
    values: dict[str, float | None]
    #: Items behind each value and (strict) the share with a usable answer.
    n: dict[str, int] = field(default_factory=dict)
    coverage: dict[str, float] = field(default_factory=dict)
    folder: str | None = None
    #: Per-question metrics (per-label scores, confusion matrices) keyed like ``state.Q1``.
    details: dict[str, QuestionMetrics] = field(default_factory=dict)
    #: The records the run answered (for baselines computed on the same items).
    record_ids: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "variant": self.options.name,
            "options": self.options.to_dict(),
            "mode": self.mode,
            "values": self.values,
            "n": self.n,
            "coverage": self.coverage,
            "folder": self.folder,
            "details": {k: m.to_dict() for k, m in self.details.items()},
        }


@dataclass
class _Tally:
    """Metric values, counts, coverage and per-question details as scoring fills them in."""

    values: dict[str, float | None] = field(default_factory=lambda: {k: None for k, _ in METRICS})
    n: dict[str, int] = field(default_factory=dict)
    coverage: dict[str, float] = field(default_factory=dict)
    details: dict[str, QuestionMetrics] = field(default_factory=dict)


def scores_from_rows(
    bench: ToMBenchmark,
    rows: Sequence[Mapping[str, Any]],
    model: str,
    options: ToMPromptOptions,
    mode: str = "strict",
    only_windows: Sequence[int] = (0, 1),
) -> RunScores:
    """Score run rows in ``official`` or ``strict`` mode and map them to the paper's metrics."""
    if mode not in ("official", "strict"):
        raise ValueError(f"mode must be 'official' or 'strict', not {mode!r}")
    ids = {str(r.get("point_id") or r.get("id")) for r in rows}
    records = [r for r in bench.all_records() if r.id in ids]
    if mode == "strict":
        t = _tally_strict(records, rows, only_windows)
    else:
        t = _tally_official(bench, records, rows, only_windows)
    if options.you_questions == "q1_only":  # Q2 was not asked: no attitude score
        t.values["t22_acc"] = t.values["t22_macro"] = None
        t.n.pop("t22", None)
        t.coverage.pop("t22", None)
    return RunScores(
        model=model,
        options=options,
        mode=mode,
        values=t.values,
        n=t.n,
        coverage=t.coverage,
        details=t.details,
        record_ids=tuple(r.id for r in records),
    )


def _tally_strict(
    records: Sequence[ToMRecord], rows: Sequence[Mapping[str, Any]], only_windows: Sequence[int]
) -> _Tally:
    res = score_strict(records, strict_from_rows(records, rows), only_windows)
    t = _Tally(details=dict(res.metrics))
    for short, key in _PAIRS.items():
        m = res.metrics.get(key)
        if m is None:
            continue
        t.values[f"{short}_acc"] = m.accuracy if m.n else None
        if f"{short}_macro" in t.values and m.n:
            t.values[f"{short}_macro"] = m.macro_f1
        t.n[short] = m.n
        if m.n:  # an empty subset (no predicted PSEUDO_CONSENSUS) has no coverage
            t.coverage[short] = m.coverage
    return t


def _tally_official(
    bench: ToMBenchmark,
    records: Sequence[ToMRecord],
    rows: Sequence[Mapping[str, Any]],
    only_windows: Sequence[int],
) -> _Tally:
    t = _Tally()
    gold = load_official_gold([bench.folder / TASK_FILES[task] for task in ToMTask])
    # In ToMTask order: a set's order follows string hashing, which changes per process.
    tasks = [task for task in ToMTask if any(r.task is task for r in records)]
    by_task = {task: [r for r in rows if r.get("task") == task.value] for task in tasks}
    for task, task_rows in by_task.items():
        metrics, summary = score_official_rows(task_rows, task, gold[task], only_windows)
        t.details |= {f"{task.value}.{q}": m for q, m in metrics.items()}
        if task is ToMTask.STATE:
            t.values |= {"t1_acc": summary["state_acc"], "t1_macro": summary["state_macro_f1"]}
            t.n["t1"] = metrics["Q1"].n
        elif task is ToMTask.YOU:
            t.values |= {
                "t21_acc": summary["you_q1_acc"],
                "t21_macro": summary["you_q1_macro_f1"],
                "t22_acc": summary["you_q2_acc"],
                "t22_macro": summary["you_q2_macro_f1"],
            }
            t.n |= {"t21": metrics["Q1"].n, "t22": metrics["Q2"].n}
        else:
            t.values |= {
                "t31_acc": summary["cons_q1_acc"],
                "t31_macro": summary["cons_q1_macro_f1"],
                "t32_acc": summary["cons_q2_cond_acc"],
                "t32_macro": metrics["Q2_cond"].macro_f1,
            }
            t.n |= {"t31": metrics["Q1"].n, "t32": metrics["Q2_cond"].n}
            _tally_task32_subsets(t, records, task_rows)
    return t


def _tally_task32_subsets(
    t: _Tally, records: Sequence[ToMRecord], task_rows: Sequence[Mapping[str, Any]]
) -> None:
    """The strict Task 3.2 subsets, which have no official counterpart: always strict."""
    cons = [r for r in records if r.task is ToMTask.CONSENSUS]
    strict = strict_task32(cons, strict_from_rows(cons, task_rows))
    for short, key in (("t32pc", "consensus.Q2_goldpc"), ("t32pred", "consensus.Q2_predpc")):
        m = strict[key]
        t.values[f"{short}_acc"] = m.accuracy if m.n else None
        t.n[short] = m.n
        t.details[key] = m


def scores_from_run(
    bench: ToMBenchmark, folder: str | Path, mode: str = "strict", model: str | None = None
) -> RunScores:
    manifest, rows = load_tom_run(folder)
    options = ToMPromptOptions.from_dict(manifest["options"])
    scores = scores_from_rows(bench, rows, model or manifest["generator_name"], options, mode)
    return replace(scores, folder=str(folder))


def chance_values() -> dict[str, float | None]:
    """Uniform guessing; its expected macro-F1 equals its accuracy. The official Task 3.2
    (conditional on a correct Q1) is left undefined; each strict subset expects 1/5."""
    acc = {
        "t1": 1 / len(LABELS[(ToMTask.STATE, "Q1")]),
        "t21": 1 / len(LABELS[(ToMTask.YOU, "Q1")]),
        "t22": 1 / len(LABELS[(ToMTask.YOU, "Q2")]),
        "t31": 1 / len(LABELS[(ToMTask.CONSENSUS, "Q1")]),
    }
    out: dict[str, float | None] = {}
    for k, v in acc.items():
        out |= {f"{k}_acc": v, f"{k}_macro": v}
    q2 = 1 / len(LABELS[(ToMTask.CONSENSUS, "Q2")])
    return out | {"t32_acc": None, "t32_macro": None, "t32pc_acc": q2, "t32pred_acc": q2}


def leak_values(records: Sequence[ToMRecord]) -> dict[str, float | None] | None:
    """The 'copy Q2's subject' row (Task 2.1 only) over the YOU records given."""
    m = leak_metrics(records)
    if m is None:
        return None
    return {k: None for k, _ in METRICS} | {"t21_acc": m.accuracy, "t21_macro": m.macro_f1}


# ----------------------------------------------------------------------------- rendering


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.2f}"


def _delta(v: float | None, base: float | None) -> str:
    if v is None or base is None:
        return _pct(v)
    d = 100 * (v - base)
    arrow = "↑" if d > 0 else "↓" if d < 0 else "±"
    return f"{100 * v:.2f} {arrow}{abs(d):.2f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _n_note(runs: Sequence[RunScores]) -> str:
    """Which scoring mode, and how many items each cell covers (per run only when they differ)."""
    if not runs:
        return ""
    mode = runs[0].mode
    rule = MODE_RULES[mode]

    def fmt(r: RunScores) -> str:
        ns = ", ".join(f"{k}={v}" for k, v in sorted(r.n.items()))
        low = {k: v for k, v in sorted(r.coverage.items()) if v < 1.0}
        return ns + (
            "; answered " + ", ".join(f"{k}={100 * v:.1f}%" for k, v in low.items()) if low else ""
        )

    texts = {fmt(r) for r in runs}
    if len(texts) == 1:
        return f"\n\n_Scoring: {mode} ({rule}); n: {texts.pop()}._"
    per_run = "; ".join(f"{r.model} [{r.options.name}]: {fmt(r)}" for r in runs)
    return f"\n\n_Scoring: {mode} ({rule}); n: {per_run}._"


def task32_notes(runs: Sequence[RunScores], columns: Sequence[str]) -> list[str]:
    """Footnotes for the Task 3.2 columns among ``columns`` (metric keys such as ``t32_acc``),
    and a line per run that scored the official 3.2 without ever predicting PSEUDO_CONSENSUS."""
    shown = {c.rsplit("_", 1)[0] for c in columns}
    notes = [text for key, text in TASK32_NOTES.items() if key in shown]
    if "t32" in shown:
        for r in runs:
            v = r.values.get("t32_acc")
            if v is not None and r.n.get("t32pred") == 0:
                notes.append(
                    f"{r.model} [{r.options.name}] never predicted PSEUDO_CONSENSUS: its Task 3.2 "
                    f"of {_pct(v)} is over gold-NONE items only and says nothing about finding "
                    "dissenters (see gold PC)."
                )
    return list(dict.fromkeys(notes))  # one line per model and variant, whatever the modes


def _notes_block(runs: Sequence[RunScores], columns: Sequence[str]) -> str:
    notes = task32_notes(runs, columns)
    return "\n\n" + "\n".join(f"- {n}" for n in notes) if notes else ""


BASE = ToMPromptOptions()


def _same_except(opts: ToMPromptOptions, **changes: Any) -> bool:
    """Options equal to the default except the given fields (frame settings ignored)."""

    def core(o: ToMPromptOptions) -> ToMPromptOptions:
        return replace(o, frame_fps=None, frame_count=None, max_frames=0)

    return core(opts) == core(replace(BASE, **changes))


def _pick(runs: Sequence[RunScores], model: str, **changes: Any) -> RunScores | None:
    """The model's run with these settings; with the default ``separate`` YOU prompts if there
    is one, else with the joint (leaking) or Q1-only prompt."""
    for you in ("separate", "joint", "q1_only"):
        for r in runs:
            if r.model == model and _same_except(r.options, **{"you_questions": you, **changes}):
                return r
    return None


def _label(r: RunScores, text: str) -> str:
    return text + (LEAK_NOTE if r.options.you_questions == "joint" else "")


def _models(runs: Sequence[RunScores]) -> list[str]:
    return list(dict.fromkeys(r.model for r in runs))


def tom_table1(
    runs: Sequence[RunScores],
    baselines: Mapping[str, Mapping[str, float | None]] | None = None,
    leak: Mapping[str, float | None] | None = None,
) -> str:
    """Overall performance: one row per model with the default variant (both modalities)."""
    rows = [["chance-level", *(_pct(chance_values()[k]) for k, _ in METRICS)]]
    if leak is not None:
        rows.append([LEAK_ROW, *(_pct(leak.get(k)) for k, _ in METRICS)])
    for name, vals in (baselines or {}).items():
        rows.append([name, *(_pct(vals.get(k)) for k, _ in METRICS)])
    used = []
    for model in _models(runs):
        r = _pick(runs, model) or _pick(runs, model, modality="utterance")
        if r is not None:
            used.append(r)
            shown = _label(
                r, model if r.options.modality == "both" else f"{model} ({r.options.name})"
            )
            rows.append([shown, *(_pct(r.values[k]) for k, _ in METRICS)])
    return (
        "Table 1. Overall performance\n\n"
        + _table(["Model", *_HEADERS.values()], rows)
        + _n_note(used)
        + _notes_block(used, [k for k, _ in METRICS])
    )


def _ablation(
    title: str,
    runs: Sequence[RunScores],
    settings: Sequence[tuple[str, dict[str, Any]]],
    columns: Sequence[str],
    deltas: bool = False,
    first_col: str = "Setting",
    leak: Mapping[str, float | None] | None = None,
) -> str:
    rows, used = [], []
    for model in _models(runs):
        base = _pick(runs, model, **settings[0][1])
        found = [(label, _pick(runs, model, **changes)) for label, changes in settings]
        present = [(label, r) for label, r in found if r is not None]
        if len(present) < 2:  # an ablation needs at least two settings of one model
            continue
        for label, r in present:
            used.append(r)
            cells = [
                _delta(r.values[c], base.values[c])
                if deltas and base is not None and r is not base
                else _pct(r.values[c])
                for c in columns
            ]
            rows.append([model, _label(r, label), *cells])
    if not rows:
        return ""
    if leak is not None and "t21_acc" in columns:  # the floor under every Task 2.1 number
        rows.insert(0, [LEAK_ROW, "–", *(_pct(leak.get(c)) for c in columns)])
    header = ["Model", first_col, *(_HEADERS[c] for c in columns)]
    return f"{title}\n\n" + _table(header, rows) + _n_note(used) + _notes_block(used, columns)


def _modality(modality: str) -> dict[str, Any]:
    return {} if modality == "both" else {"modality": modality}


def _modalities(modality: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("Video & Utter.", {"modality": "both"}),
        ("Video", {"modality": "video"}),
        ("Utter.", {"modality": "utterance"}),
    ]


def _prompt_settings(modality: str) -> list[tuple[str, dict[str, Any]]]:
    m = _modality(modality)
    return [
        ("No Prompt", {**m}),
        ("Naive-CoT", {**m, "reasoning": "naive_cot"}),
        ("Task-CoT", {**m, "reasoning": "task_cot"}),
        ("ECoT", {**m, "reasoning": "eot"}),
    ]


def _prior_settings(modality: str) -> list[tuple[str, dict[str, Any]]]:
    m = _modality(modality)
    return [
        ("Base", {**m}),
        ("w. DA", {**m, "priors": ("dialogue_act",)}),
        ("w. phase", {**m, "priors": ("phase",)}),
        ("w. role", {**m, "priors": ("role",)}),
    ]


def _marker_settings(modality: str) -> list[tuple[str, dict[str, Any]]]:
    m = _modality(modality)
    return [("Baseline", {**m}), ("w/o discourse markers", {**m, "remove_discourse_markers": True})]


@dataclass(frozen=True, slots=True)
class AblationTable:
    """One of the paper's ablation tables: which variants of a model it compares, and how."""

    title: str
    #: (row label, variant options) per setting, the first being the reference, for a modality.
    settings: Callable[[str], list[tuple[str, dict[str, Any]]]]
    columns: Sequence[str]
    first_col: str = "Setting"
    #: Show each setting as its change from the first (arrows) instead of its value.
    deltas: bool = False


#: Tables 2-6 of the paper, in order.
ABLATION_TABLES = (
    AblationTable("Table 2. Input modalities", _modalities, ACC_MACRO, "Methods"),
    AblationTable(
        "Table 3. Prompting strategies (arrows: change from No Prompt)",
        _prompt_settings,
        [k for k, _ in METRICS],
        "Prompt",
        deltas=True,
    ),
    AblationTable(
        "Table 4. Contextual priors from AMI annotations",
        _prior_settings,
        PRIORS_COLUMNS,
        "Methods",
    ),
    AblationTable("Table 5. Discourse markers", _marker_settings, ACC_MACRO),
    AblationTable(
        "Table 6. Additional prompting results (accuracy and macro-F1; arrows: change from "
        "No Prompt)",
        _prompt_settings,
        ACC_MACRO,
        "Prompt",
        deltas=True,
    ),
)


def ablation_table(
    table: AblationTable,
    runs: Sequence[RunScores],
    modality: str = "both",
    leak: Mapping[str, float | None] | None = None,
) -> str:
    """``table`` filled from ``runs`` (empty when no model has two of its settings)."""
    return _ablation(
        table.title,
        runs,
        table.settings(modality),
        table.columns,
        deltas=table.deltas,
        first_col=table.first_col,
        leak=leak,
    )


def build_report(
    runs: Sequence[RunScores],
    baselines: Mapping[str, Mapping[str, float | None]] | None = None,
    modality: str = "both",
    leak: Mapping[str, float | None] | None = None,
) -> str:
    """All tables the given runs can fill (ablations are laid out around ``modality``).

    ``leak`` (see :func:`leak_values`) adds the 'copy Q2's subject' row to every table with a
    Task 2.1 column.
    """
    parts = [
        tom_table1(runs, baselines, leak),
        *(ablation_table(t, runs, modality, leak) for t in ABLATION_TABLES),
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


def label_tables(scores: RunScores) -> str:
    """Per-label precision/recall/F1 and a confusion matrix (gold rows, predicted columns) for
    every question of one run."""
    parts = [f"Per-label results: {scores.model} [{scores.options.name}], {scores.mode} scoring"]
    for key, m in scores.details.items():
        rows = [
            [
                s.label,
                str(s.support),
                str(s.predicted),
                _pct(s.precision),
                _pct(s.recall),
                _pct(s.f1),
            ]
            for s in m.per_label
        ]
        parts.append(
            f"{key}: n={m.n}, accuracy {_pct(m.accuracy)}, macro-F1 {_pct(m.macro_f1)}\n\n"
            + _table(["Label", "Gold", "Predicted", "Precision", "Recall", "F1"], rows)
        )
        predicted = sorted({p for row in m.confusion.values() for p in row} - set(m.labels))
        cols = [*m.labels, *predicted]
        golds = [*m.labels, *sorted(set(m.confusion) - set(m.labels))]
        matrix = [
            [g, *(str(m.confusion.get(g, {}).get(c, 0)) for c in cols)]
            for g in golds
            if g in m.confusion or g in m.labels
        ]
        parts.append(_table(["gold \\ predicted", *cols], matrix))
    return "\n\n".join(parts) + "\n"
