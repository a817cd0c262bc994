"""From stored answers to agreement tables, adjudicated labels and exported data.

Everything here reads a finished (or running) study from the store; nothing is shown to
annotators. Adjudication rule per item and question:

1. an adjudicator's decision, when one exists, is final;
2. otherwise the strict majority of the annotators' answers (``unanimous`` when all agree);
3. otherwise (a tie, or nobody answered) the item is ``unresolved`` and appears in the
   adjudicator view.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from polylogue.annotate.agreement import AgreementSummary, majority_label, summarize
from polylogue.annotate.store import (
    Adjudication,
    AnnotationStore,
    Answer,
    Role,
    StoreError,
    Study,
    StudyItem,
    StudyKind,
)
from polylogue.turntaking.points import relabel
from polylogue.turntaking.types import Decision

ALL = "all"


@dataclass(frozen=True, slots=True)
class RatingSlice:
    """Answers to one question over a set of items, aligned by item (``None`` = no answer)."""

    question_id: str
    category: str
    item_ids: tuple[str, ...]
    ratings: dict[str, list[str | None]]


def annotator_names(store: AnnotationStore, study: Study) -> list[str]:
    return [a.name for a in store.annotators(study) if a.role is Role.ANNOTATOR]


def rating_slices(
    items: Sequence[StudyItem],
    answers: Sequence[Answer],
    annotators: Sequence[str],
    by_category: bool = True,
) -> list[RatingSlice]:
    """One slice per question over all items, plus one per (question, category)."""
    lookup = {(a.item_id, a.question_id, a.annotator): a.label for a in answers}
    question_ids = list(dict.fromkeys(q.id for it in items for q in it.questions))
    slices: list[RatingSlice] = []
    for qid in question_ids:
        asked = [it for it in items if any(q.id == qid for q in it.questions)]
        groups: list[tuple[str, list[StudyItem]]] = [(ALL, asked)]
        if by_category:
            for cat in sorted({it.category for it in asked}):
                groups.append((cat, [it for it in asked if it.category == cat]))
        for cat, members in groups:
            ids = tuple(it.item_id for it in members)
            ratings = {a: [lookup.get((i, qid, a)) for i in ids] for a in annotators}
            slices.append(RatingSlice(qid, cat, ids, ratings))
    return slices


def agreement_report(
    store: AnnotationStore, study: Study, by_category: bool = True
) -> list[AgreementSummary]:
    slices = rating_slices(
        store.items(study), store.answers(study), annotator_names(store, study), by_category
    )
    return [summarize(f"{s.question_id}/{s.category}", s.ratings) for s in slices]


def format_agreement(summaries: Sequence[AgreementSummary]) -> str:
    """A Markdown table: per slice, pairwise Cohen's κ, their mean, Fleiss' κ, α, raw agreement."""
    lines = [
        "| slice | items | pairwise Cohen's κ | mean κ | Fleiss' κ (n) | Krippendorff's α (n) "
        "| agreement |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for s in summaries:
        pairs = ", ".join(f"{p.a}–{p.b} {_f(p.kappa)} (n={p.n_items})" for p in s.pairwise) or "–"
        lines.append(
            f"| {s.slice} | {s.n_items} | {pairs} | {_f(s.mean_cohen)} | "
            f"{_f(s.fleiss)} ({s.fleiss_items}) | {_f(s.alpha)} ({s.alpha_items}) | "
            f"{_f(s.agreement)} |"
        )
    return "\n".join(lines)


def _f(x: float) -> str:
    return "n/a" if x != x else f"{x:.3f}"


# ----------------------------------------------------------------------------- adjudication


class LabelSource(StrEnum):
    UNANIMOUS = "unanimous"
    MAJORITY = "majority"
    ADJUDICATOR = "adjudicator"
    UNRESOLVED = "unresolved"


@dataclass(frozen=True, slots=True)
class Resolution:
    item_id: str
    question_id: str
    label: str | None
    source: LabelSource
    votes: dict[str, str]


def resolve(
    items: Sequence[StudyItem],
    answers: Sequence[Answer],
    adjudications: Sequence[Adjudication],
    annotators: Sequence[str],
) -> list[Resolution]:
    """The adjudicated label of every (item, question), following the module's rule."""
    members = set(annotators)
    votes: dict[tuple[str, str], dict[str, str]] = {}
    for a in answers:
        if a.annotator in members:
            votes.setdefault((a.item_id, a.question_id), {})[a.annotator] = a.label
    decided = {(d.item_id, d.question_id): d.label for d in adjudications}
    out: list[Resolution] = []
    for it in items:
        for q in it.questions:
            key = (it.item_id, q.id)
            v = dict(sorted(votes.get(key, {}).items()))
            if key in decided:
                out.append(Resolution(it.item_id, q.id, decided[key], LabelSource.ADJUDICATOR, v))
                continue
            label = majority_label(list(v.values()))
            if label is None:
                out.append(Resolution(it.item_id, q.id, None, LabelSource.UNRESOLVED, v))
            else:
                source = (
                    LabelSource.UNANIMOUS
                    if len(set(v.values())) == 1 and len(v) > 1
                    else LabelSource.MAJORITY
                )
                out.append(Resolution(it.item_id, q.id, str(label), source, v))
    return out


def study_resolutions(store: AnnotationStore, study: Study) -> list[Resolution]:
    return resolve(
        store.items(study),
        store.answers(study),
        store.adjudications(study),
        annotator_names(store, study),
    )


@dataclass(frozen=True, slots=True)
class ExportReport:
    folder: Path
    items: int
    by_source: dict[str, int]
    changed_from_gold: int
    dropped_unresolved: tuple[str, ...]


def export_adjudicated(
    store: AnnotationStore,
    study: Study,
    out_dir: str | Path,
    allow_unresolved: bool = False,
) -> ExportReport:
    """Write the adjudicated set in the benchmark's own format.

    Turn-taking studies become a benchmark folder (``load_benchmark`` reads it, the evaluation
    runner scores models on it); MeetingToM studies become task files plus the matching
    ``reconstruction.jsonl`` lines (``polylogue.tom.records.load_benchmark`` reads them).
    Unresolved items stop the export unless ``allow_unresolved``, which drops them.
    """
    items = store.items(study)
    resolutions = study_resolutions(store, study)
    by_item: dict[str, dict[str, Resolution]] = {}
    for r in resolutions:
        by_item.setdefault(r.item_id, {})[r.question_id] = r
    unresolved = tuple(
        sorted(i for i, rs in by_item.items() if any(r.label is None for r in rs.values()))
    )
    if unresolved and not allow_unresolved:
        raise StoreError(
            f"study {study.name}: {len(unresolved)} item(s) have no majority or adjudicator "
            f"decision (e.g. {', '.join(unresolved[:3])}); adjudicate them or pass "
            "allow_unresolved to drop them"
        )
    dropped = set(unresolved)
    kept = [it for it in items if it.item_id not in dropped]
    labels = {it.item_id: {q: r.label for q, r in by_item[it.item_id].items()} for it in kept}
    counts: dict[str, int] = {}
    for it in kept:
        for r in by_item[it.item_id].values():
            counts[r.source.value] = counts.get(r.source.value, 0) + 1
    changed = sum(
        any(labels[it.item_id][q] != g for q, g in it.gold["answers"].items()) for it in kept
    )
    out = Path(out_dir)
    provenance = {
        "study": study.name,
        "database": str(store.path),
        "kind": study.kind.value,
        "items": len(kept),
        "by_source": counts,
        "changed_from_gold": changed,
        "dropped_unresolved": list(unresolved),
        "annotators": annotator_names(store, study),
        "rule": "adjudicator decision, else strict majority of annotators",
    }
    job = _Adjudicated(study, kept, labels, out, provenance)
    if study.kind is StudyKind.TURNTAKING:
        _export_turntaking(job)
    else:
        _export_meetingtom(job)
    return ExportReport(out, len(kept), counts, changed, unresolved)


@dataclass(frozen=True)
class _Adjudicated:
    """What an export writes: the kept items with their adjudicated labels, and provenance."""

    study: Study
    items: Sequence[StudyItem]
    labels: Mapping[str, Mapping[str, str | None]]
    out: Path
    provenance: dict[str, Any]


def _export_turntaking(job: _Adjudicated) -> None:
    study, items, labels, out = job.study, job.items, job.labels, job.out
    from polylogue.annotate.study import DECISION_QUESTION_ID
    from polylogue.turntaking.dataset import (
        BenchmarkBuild,
        BuildOptions,
        load_benchmark,
        save_benchmark,
    )

    folder = study.source.get("benchmark")
    if not folder:
        raise StoreError(f"study {study.name} was not created from a benchmark folder")
    bench = load_benchmark(folder)
    if bench.data_hash != study.source.get("data_hash"):
        raise StoreError(
            f"{folder}: data_hash {bench.data_hash[:12]} differs from the study's "
            f"{str(study.source.get('data_hash'))[:12]}: the benchmark was rebuilt since"
        )
    points = {p.point_id: p for p in bench.points(str(study.source["split"]))}
    relabelled = []
    for it in items:
        if it.item_id not in points:
            raise StoreError(f"{folder}: point {it.item_id} is missing from the benchmark")
        p = points[it.item_id]
        label = Decision(str(labels[it.item_id][DECISION_QUESTION_ID]))
        relabelled.append(replace(p, gold=relabel(p.gold, label)))
    conv_ids = sorted({p.input.conversation_id for p in relabelled})
    source_options = bench.manifest.get("options", {})
    build = BenchmarkBuild(
        conversations=[bench.conversations[c] for c in conv_ids],
        points=relabelled,
        options=BuildOptions(context_turns=int(source_options.get("context_turns", 0))),
        counts={"conversations": len(conv_ids), "points": len(relabelled)},
    )
    save_benchmark(
        build,
        out,
        inputs={"benchmark": {"path": str(folder), "data_hash": bench.data_hash}},
    )
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    # The points were built with the source's options, not with the placeholder used to save.
    manifest["options"] = source_options
    manifest["human_labels"] = job.provenance
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def _export_meetingtom(job: _Adjudicated) -> None:
    study, items, labels, out = job.study, job.items, job.labels, job.out
    from polylogue.tom.records import RECONSTRUCTION_FILE, TASK_FILES, ToMTask

    out.mkdir(parents=True, exist_ok=True)
    by_task: dict[str, list[dict[str, Any]]] = {}
    for it in items:
        record = dict(it.gold["record"])
        record["answers"] = {q: labels[it.item_id][q] for q in record["answers"]}
        by_task.setdefault(record["task"], []).append(record)
    wanted = {it.item_id for it in items}
    recon_lines: list[str] = []
    source = study.source.get("meetingtom")
    if source and (Path(source) / RECONSTRUCTION_FILE).is_file():
        with open(Path(source) / RECONSTRUCTION_FILE, encoding="utf-8") as f:
            recon_lines = [ln for ln in f if ln.strip() and json.loads(ln).get("id") in wanted]
    for task in ToMTask:
        rows = by_task.get(task.value, [])
        with open(out / TASK_FILES[task], "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    (out / RECONSTRUCTION_FILE).write_text("".join(recon_lines), encoding="utf-8")
    (out / "human_labels.json").write_text(
        json.dumps(job.provenance, indent=2) + "\n", encoding="utf-8"
    )


# ----------------------------------------------------------------------------- raw export


ANSWER_FIELDS = (
    "study",
    "item_id",
    "category",
    "question_id",
    "annotator",
    "label",
    "gold",
    "seconds",
    "answered_at",
    "revisions",
)


def answer_rows(store: AnnotationStore, study: Study) -> list[dict[str, Any]]:
    items = {it.item_id: it for it in store.items(study)}
    return [
        {
            "study": study.name,
            "item_id": a.item_id,
            "category": items[a.item_id].category,
            "question_id": a.question_id,
            "annotator": a.annotator,
            "label": a.label,
            "gold": items[a.item_id].gold.get("answers", {}).get(a.question_id),
            "seconds": a.seconds,
            "answered_at": a.answered_at,
            "revisions": a.revisions,
        }
        for a in store.answers(study)
    ]


def export_answers(store: AnnotationStore, study: Study, path: str | Path) -> int:
    """Every stored answer, one row each, as JSONL or CSV (by the file suffix)."""
    path = Path(path)
    rows = answer_rows(store, study)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=ANSWER_FIELDS)
            w.writeheader()
            w.writerows(rows)
    elif path.suffix in (".jsonl", ".json"):
        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    else:
        raise StoreError(f"{path}: choose a .jsonl or .csv file name")
    return len(rows)


__all__ = [
    "ALL",
    "ExportReport",
    "LabelSource",
    "RatingSlice",
    "Resolution",
    "agreement_report",
    "annotator_names",
    "answer_rows",
    "export_adjudicated",
    "export_answers",
    "format_agreement",
    "rating_slices",
    "relabel",
    "resolve",
    "study_resolutions",
]
