"""Human baselines: score annotators, their majority and models on the same items.

Turn-taking studies are scored with the evaluation harness's own metric functions
(:mod:`polylogue.evaluation.metrics`), so a human row and a model row mean the same thing; the
table follows the paper's Table 4 (per-category accuracy for I1, I2, S1, S2, then Acc, F1avg
and BalAcc, in %), with an "Average" row (mean of the annotator rows, as in the paper), a
"Majority" row (strict majority of annotators; ties count as no answer) and, when the study has
adjudications, an "Adjudicated" row. An item an annotator left open counts as wrong, exactly as
an unparseable model answer does.

MeetingToM questions have more than two labels; each question gets the same layout with the
study's categories, accuracy and macro-F1 over the gold labels present.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from polylogue.annotate.analysis import LabelSource, annotator_names, resolve
from polylogue.annotate.store import (
    AnnotationStore,
    Answer,
    StoreError,
    Study,
    StudyItem,
    StudyKind,
)
from polylogue.turntaking.types import CATEGORIES

#: Predictions of one rater (human or model) per item id; ``None`` = no answer.
Predictions = Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class ScoreRow:
    name: str
    #: Accuracy within each category (None when the category has no items).
    per_category: dict[str, float | None]
    accuracy: float
    f1: float
    balanced_accuracy: float | None
    n: int
    n_missing: int
    kind: str = "human"
    extra: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BaselineTable:
    question_id: str
    categories: tuple[str, ...]
    rows: tuple[ScoreRow, ...]


def _turntaking_row(
    name: str, items: Sequence[StudyItem], qid: str, pred: Predictions, kind: str
) -> ScoreRow:
    from polylogue.evaluation import metrics

    gold = [it.gold["answers"][qid] for it in items]
    guess = [pred.get(it.item_id) for it in items]
    cats = [it.category for it in items]
    return ScoreRow(
        name=name,
        per_category=metrics.per_category_accuracy(gold, guess, cats),
        accuracy=metrics.accuracy(gold, guess),
        f1=metrics.f1_avg(gold, guess),
        balanced_accuracy=metrics.balanced_accuracy(gold, guess),
        n=len(items),
        n_missing=sum(g is None for g in guess),
        kind=kind,
    )


def _multiclass_row(
    name: str,
    items: Sequence[StudyItem],
    qid: str,
    pred: Predictions,
    categories: Sequence[str],
    kind: str,
) -> ScoreRow:
    from sklearn.metrics import f1_score, recall_score

    gold = [it.gold["answers"][qid] for it in items]
    # A missing answer is a label no gold item has, so it is wrong everywhere.
    guess = [pred.get(it.item_id) or "<none>" for it in items]
    present = sorted(set(gold))
    per_cat: dict[str, float | None] = {}
    for cat in categories:
        idx = [i for i, it in enumerate(items) if it.category == cat]
        per_cat[cat] = sum(gold[i] == guess[i] for i in idx) / len(idx) if idx else None
    return ScoreRow(
        name=name,
        per_category=per_cat,
        accuracy=sum(g == p for g, p in zip(gold, guess, strict=True)) / len(items),
        f1=float(f1_score(gold, guess, labels=present, average="macro", zero_division=0)),
        balanced_accuracy=float(
            recall_score(gold, guess, labels=present, average="macro", zero_division=0)
        ),
        n=len(items),
        n_missing=sum(g == "<none>" for g in guess),
        kind=kind,
    )


def _average(rows: Sequence[ScoreRow], categories: Sequence[str]) -> ScoreRow:
    def mean(vals: Sequence[float | None]) -> float | None:
        real = [v for v in vals if v is not None]
        return sum(real) / len(real) if real else None

    return ScoreRow(
        name="Average",
        per_category={c: mean([r.per_category.get(c) for r in rows]) for c in categories},
        accuracy=mean([r.accuracy for r in rows]) or 0.0,
        f1=mean([r.f1 for r in rows]) or 0.0,
        balanced_accuracy=mean([r.balanced_accuracy for r in rows]),
        n=rows[0].n,
        n_missing=sum(r.n_missing for r in rows),
        kind="human-average",
    )


def baseline_tables(
    store: AnnotationStore,
    study: Study,
    models: Mapping[str, Predictions] | None = None,
) -> list[BaselineTable]:
    """One Table-4 layout table per question of the study."""
    items = store.items(study)
    answers = store.answers(study)
    names = annotator_names(store, study)
    resolutions = resolve(items, answers, store.adjudications(study), names)
    tables: list[BaselineTable] = []
    question_ids = list(dict.fromkeys(q.id for it in items for q in it.questions))
    for qid in question_ids:
        asked = [
            it
            for it in items
            if any(q.id == qid for q in it.questions) and qid in it.gold.get("answers", {})
        ]
        if not asked:
            continue
        if study.kind is StudyKind.TURNTAKING:
            # The paper's four plus SA (silent although individually addressed; benchmark v2).
            categories: tuple[str, ...] = tuple(c.value for c in CATEGORIES)
        else:
            categories = tuple(sorted({it.category for it in asked}))

        def row(
            name: str,
            pred: Predictions,
            kind: str,
            asked: Sequence[StudyItem] = asked,
            qid: str = qid,
            categories: tuple[str, ...] = categories,
        ) -> ScoreRow:
            if study.kind is StudyKind.TURNTAKING:
                return _turntaking_row(name, asked, qid, pred, kind)
            return _multiclass_row(name, asked, qid, pred, categories, kind)

        human_rows = [row(a, _own(answers, a, qid), "human") for a in names]
        rows = list(human_rows)
        if len(human_rows) > 1:
            rows.append(_average(human_rows, categories))
            majority = {
                r.item_id: r.label
                for r in resolve(items, answers, [], names)
                if r.question_id == qid
            }
            rows.append(row("Majority", majority, "human-majority"))
        if any(r.source is LabelSource.ADJUDICATOR for r in resolutions if r.question_id == qid):
            adjudicated = {r.item_id: r.label for r in resolutions if r.question_id == qid}
            rows.append(row("Adjudicated", adjudicated, "human-adjudicated"))
        for name, pred in (models or {}).items():
            rows.append(row(name, pred, "model"))
        tables.append(BaselineTable(qid, categories, tuple(rows)))
    return tables


def _own(answers: Sequence[Answer], annotator: str, qid: str) -> dict[str, str | None]:
    return {
        x.item_id: x.label for x in answers if x.annotator == annotator and x.question_id == qid
    }


def format_table(table: BaselineTable) -> str:
    """Markdown in the layout of the paper's Table 4 (values in %)."""
    head = ["Rater", *table.categories, "Acc", "F1avg", "BalAcc", "missing"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in table.rows:
        cells = [r.name, *(_pct(r.per_category.get(c)) for c in table.categories)]
        cells += [_pct(r.accuracy), _pct(r.f1), _pct(r.balanced_accuracy), str(r.n_missing)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.2f}"


def read_run_decisions(path: str | Path) -> dict[str, str | None]:
    """A model's decisions from an evaluation run folder (or its ``predictions.jsonl``).

    Read with the runner's own reader; ``decision`` is null for an unparseable answer.
    """
    from polylogue.evaluation.runner import RunError
    from polylogue.evaluation.runner import read_predictions as read_run

    p = Path(path)
    file = p / "predictions.jsonl" if p.is_dir() else p
    if not file.is_file():
        raise StoreError(f"{path}: no predictions.jsonl (expected an evaluation run folder)")
    try:
        return {str(r["point_id"]): r.get("decision") for r in read_run(file)}
    except RunError as exc:
        raise StoreError(str(exc)) from exc


__all__ = [
    "BaselineTable",
    "Predictions",
    "ScoreRow",
    "baseline_tables",
    "format_table",
    "read_run_decisions",
]
