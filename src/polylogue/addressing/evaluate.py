"""Precision@1 of addressing predictors, with conversation-level bootstrap intervals, and reports.

P@1 is the share of examples whose top answer is one of the gold answers. Examples whose gold
answer is not among the candidates (someone who has not written yet) count as misses for every
predictor; their share is reported as ``uncovered``. ``chance`` is the expected P@1 of a uniform
guess among the candidates.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.addressing.baselines import Baseline, baselines_for, chance
from polylogue.addressing.tasks import AddressingExample, Task, examples
from polylogue.conversation import Conversation


@dataclass(frozen=True)
class Score:
    """P@1 of one predictor on one set of examples."""

    predictor: str
    n: int
    p_at_1: float
    ci_low: float
    ci_high: float
    answered: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "predictor": self.predictor,
            "n": self.n,
            "p_at_1": round(self.p_at_1, 4),
            "ci95": [round(self.ci_low, 4), round(self.ci_high, 4)],
            "answered": self.answered,
        }


@dataclass(frozen=True)
class TaskReport:
    """All predictors on one task and data set."""

    task: Task
    dataset: str
    n_examples: int
    n_conversations: int
    uncovered: float
    mean_candidates: float
    scores: list[Score] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task.value,
            "dataset": self.dataset,
            "n_examples": self.n_examples,
            "n_conversations": self.n_conversations,
            "uncovered": round(self.uncovered, 4),
            "mean_candidates": round(self.mean_candidates, 2),
            "scores": [s.to_dict() for s in self.scores],
        }


def conversation_bootstrap_ci(
    hits: Sequence[float], groups: Sequence[str], n_boot: int = 1000, seed: int = 13
) -> tuple[float, float]:
    """95% percentile interval of the mean, resampling whole conversations."""
    if not hits:
        return (0.0, 0.0)
    by_group: dict[str, list[float]] = {}
    for h, g in zip(hits, groups, strict=True):
        by_group.setdefault(g, []).append(h)
    sums = np.array([sum(v) for v in by_group.values()])
    counts = np.array([len(v) for v in by_group.values()])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(sums), size=(n_boot, len(sums)))
    means = sums[idx].sum(axis=1) / np.maximum(counts[idx].sum(axis=1), 1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return (float(lo), float(hi))


def score_predictor(
    name: str, exs: Sequence[AddressingExample], predict: Callable[[AddressingExample], Any]
) -> Score:
    groups = [ex.conversation.group_id for ex in exs]
    if name == "chance":
        hits = [chance(ex) for ex in exs]
        answered = len(exs)
    else:
        preds = [predict(ex) for ex in exs]
        hits = [float(p is not None and p in ex.gold) for p, ex in zip(preds, exs, strict=True)]
        answered = sum(p is not None for p in preds)
    p1 = float(np.mean(hits)) if hits else 0.0
    lo, hi = conversation_bootstrap_ci(hits, groups)
    return Score(name, len(exs), p1, lo, hi, answered)


def evaluate_task(
    conversations: Iterable[Conversation],
    task: Task,
    dataset: str,
    predictors: Mapping[str, Baseline] | None = None,
) -> TaskReport:
    """Score ``predictors`` (default: the task's baselines) and chance on ``task``."""
    convs = list(conversations)
    exs = list(examples(convs, task))
    preds = dict(predictors) if predictors is not None else baselines_for(task)
    scores = [score_predictor("chance", exs, chance)]
    scores += [score_predictor(name, exs, fn) for name, fn in preds.items()]
    return TaskReport(
        task=task,
        dataset=dataset,
        n_examples=len(exs),
        n_conversations=len({ex.conversation.id for ex in exs}),
        uncovered=float(np.mean([not ex.gold_in_candidates for ex in exs])) if exs else 0.0,
        mean_candidates=float(np.mean([len(ex.candidates) for ex in exs])) if exs else 0.0,
        scores=scores,
    )


def report_markdown(reports: Sequence[TaskReport]) -> str:
    lines = [
        "P@1 = share of examples whose top answer is correct; 95% interval from a bootstrap",
        "over conversations; *uncovered* = gold answer not among the candidates (a miss for",
        "every predictor); *chance* = expected P@1 of a uniform guess among the candidates.",
        "",
    ]
    for r in reports:
        lines += [
            f"### {r.task.value} — {r.dataset}",
            "",
            f"{r.n_examples:,} examples from {r.n_conversations:,} conversations; "
            f"{r.mean_candidates:.1f} candidates on average; uncovered {100 * r.uncovered:.1f}%.",
            "",
            "| Predictor | P@1 | 95% CI | answered |",
            "|---|---:|---|---:|",
        ]
        for s in r.scores:
            lines.append(
                f"| {s.predictor} | {s.p_at_1:.3f} | {s.ci_low:.3f}–{s.ci_high:.3f} | "
                f"{s.answered:,} |"
            )
        lines.append("")
    return "\n".join(lines)


def write_reports(reports: Sequence[TaskReport], out: str | Path) -> Path:
    """``report.md`` and ``report.json`` in ``out``; returns the folder."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.md").write_text(report_markdown(reports), encoding="utf-8")
    (folder / "report.json").write_text(
        json.dumps([r.to_dict() for r in reports], indent=2) + "\n", encoding="utf-8"
    )
    return folder


__all__ = [
    "Score",
    "TaskReport",
    "conversation_bootstrap_ci",
    "evaluate_task",
    "report_markdown",
    "score_predictor",
    "write_reports",
]
