"""Build annotation studies from benchmark decision points or MeetingToM records.

A study is a seeded, stratified sample of items (``N`` per category), each annotator gets the
same items in their own shuffled order, and every item keeps its original record so that the
adjudicated labels can be written back in the benchmark's own format.

What annotators see is assembled here, once, from model-visible fields only: a turn-taking item
is built from :class:`~polylogue.turntaking.types.DecisionInput` (labels already stripped); the
gold side (label, category, original record) goes into a separate field that the app never serves.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polylogue.annotate.store import (
    AnnotationStore,
    Question,
    Role,
    StoreError,
    Study,
    StudyItem,
    StudyKind,
)
from polylogue.conversation import Utterance
from polylogue.tom.records import ToMRecord
from polylogue.turntaking.types import DecisionPoint

#: The single turn-taking question. S = speak, K = keep silent (both on the home row).
DECISION_QUESTION_ID = "decision"
DECISION_KEYS = ("s", "k")

#: Default number of context utterances stored per turn-taking item (the full context is
#: available to models; a human reads the end of it, and more can be stored on request).
DEFAULT_CONTEXT_TURNS = 40

#: MeetingToM media produced by the reconstruction script, per task and question
#: (``<media_root>/<task>/<bundle_name>/media/<file>``).
MEETINGTOM_MEDIA: dict[str, dict[str, str]] = {
    "state": {"Q1": "clip.mp4"},
    "you": {"Q1": "Q1_corner.mp4", "Q2": "Q2_mosaic.mp4"},
    "consensus": {"Q1": "mosaic.mp4", "Q2": "mosaic.mp4"},
}

_OPTION_KEYS = "123456789"


@dataclass(frozen=True, slots=True)
class SamplingPlan:
    """How many items to draw per category, with which seed.

    ``per_category`` is one number for every category or a mapping ``category -> N``
    (categories missing from the mapping are not drawn). ``None`` takes every item.
    """

    per_category: int | Mapping[str, int] | None
    seed: int = 13

    def quota(self, category: str) -> int | None:
        if self.per_category is None:
            return None
        if isinstance(self.per_category, int):
            return self.per_category
        return self.per_category.get(category, 0)


@dataclass(frozen=True, slots=True)
class SampleReport:
    """What the plan asked for and what was available, per category."""

    requested: dict[str, int | None]
    available: dict[str, int]
    drawn: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"requested": self.requested, "available": self.available, "drawn": self.drawn}


def sample_items(
    items: Sequence[StudyItem], plan: SamplingPlan
) -> tuple[list[StudyItem], SampleReport]:
    """Seeded stratified sample. Independent of input order: each stratum is sorted by id first.

    A category with fewer items than its quota contributes all of them (the paper's human study
    had only 60 S1 items for a quota of 100); the report records the shortfall.
    """
    by_cat: dict[str, list[StudyItem]] = defaultdict(list)
    for it in items:
        by_cat[it.category].append(it)
    rng = random.Random(plan.seed)
    chosen: list[StudyItem] = []
    requested: dict[str, int | None] = {}
    drawn: dict[str, int] = {}
    for cat in sorted(by_cat):
        pool = sorted(by_cat[cat], key=lambda it: it.item_id)
        quota = plan.quota(cat)
        requested[cat] = quota
        take = pool if quota is None or quota >= len(pool) else rng.sample(pool, quota)
        take = sorted(take, key=lambda it: it.item_id)
        drawn[cat] = len(take)
        chosen.extend(take)
    if isinstance(plan.per_category, Mapping):
        for cat, quota in plan.per_category.items():
            if cat not in by_cat:
                requested[cat] = quota
                drawn[cat] = 0
    available = {cat: len(v) for cat, v in by_cat.items()}
    return chosen, SampleReport(requested, available, drawn)


def annotator_order(item_ids: Sequence[str], seed: int, annotator: str) -> list[str]:
    """A per-annotator shuffle, reproducible from (study seed, annotator name).

    ``random.Random`` seeded with a str hashes it with SHA-512, so the order does not depend on
    ``PYTHONHASHSEED`` or the platform.
    """
    order = list(item_ids)
    random.Random(f"{seed}:{annotator}").shuffle(order)
    return order


# ----------------------------------------------------------------------------- turn-taking


def decision_question(target_name: str) -> Question:
    return Question(
        id=DECISION_QUESTION_ID,
        # The floor decision of benchmark v2: a brief acknowledgement while the speaker goes on
        # ("mm-hmm") is a backchannel, which counts as staying silent.
        text=(
            f"Should {target_name} take the floor now? "
            "(A brief 'mm-hmm' while the speaker goes on counts as SILENT.)"
        ),
        options=("SPEAK", "SILENT"),
        keys=DECISION_KEYS,
    )


def turntaking_item(point: DecisionPoint, context_turns: int = DEFAULT_CONTEXT_TURNS) -> StudyItem:
    """One study item from a decision point; the payload uses model-visible fields only."""
    inp = point.input
    names = {p.id: p.display_name for p in inp.present}
    names.setdefault(inp.target.id, inp.target.display_name)
    context = list(inp.context)
    shown = context[-context_turns:] if context_turns > 0 else context
    transcript = [
        {
            "speaker": u.speaker,
            "name": names.get(u.speaker, u.speaker),
            "text": u.text,
            "start": u.start,
            "is_target": u.speaker == inp.target.id,
        }
        for u in shown
    ]
    payload = {
        "kind": StudyKind.TURNTAKING.value,
        "corpus": inp.corpus,
        "domain": inp.domain,
        "target": {"id": inp.target.id, "name": inp.target.display_name, "role": inp.target.role},
        "participants": [
            {"id": p.id, "name": p.display_name, "role": p.role, "is_target": p.id == inp.target.id}
            for p in inp.present
        ],
        "transcript": transcript,
        "omitted_turns": len(context) - len(shown),
    }
    gold = {
        "answers": {DECISION_QUESTION_ID: point.gold.label.value},
        "outcome": point.gold.floor_outcome.value,
        "record": point_to_record(point),
    }
    return StudyItem(
        item_id=point.point_id,
        category=point.gold.category.value,
        questions=(decision_question(inp.target.display_name),),
        payload=payload,
        gold=gold,
    )


def point_to_record(point: DecisionPoint) -> dict[str, Any]:
    """A decision point as one JSON-able record (input, gold and bookkeeping)."""
    return {
        "point_id": point.point_id,
        "input": point.input.to_dict(),
        "gold": point.gold.to_dict(),
        "group": point.group,
        "index": point.index,
        "split": point.split,
    }


def point_from_record(record: Mapping[str, Any]) -> DecisionPoint:
    from polylogue.turntaking.types import DecisionGold, DecisionInput

    return DecisionPoint(
        input=DecisionInput.from_dict(record["input"]),
        gold=DecisionGold.from_dict(record["gold"]),
        group=str(record["group"]),
        index=int(record["index"]),
        split=record.get("split"),
    )


def turntaking_items(
    points: Iterable[DecisionPoint], context_turns: int = DEFAULT_CONTEXT_TURNS
) -> list[StudyItem]:
    return [turntaking_item(p, context_turns) for p in points]


# ----------------------------------------------------------------------------- MeetingToM


#: record -> utterances of its source window, or None when unavailable.
TranscriptLookup = Callable[[ToMRecord], Sequence[Utterance] | None]


def meetingtom_item(
    record: ToMRecord,
    transcript: TranscriptLookup | None = None,
    media_root: str | Path | None = None,
    stratify: str = "task",
) -> StudyItem:
    """One study item from a MeetingToM record (questions, options, transcript window, media).

    ``stratify`` is ``"task"`` (category = task) or ``"label"`` (category = task + the Q1 gold
    label, for a plan that balances labels). Media are the reconstruction script's outputs
    (``<media_root>/<task>/<bundle_name>/media/*.mp4``) when the user has them.
    """
    item = record.item
    task = item.task.value
    for qid, q in item.questions.items():
        if len(q.options) > len(_OPTION_KEYS):
            raise StoreError(f"{item.id} {qid}: more than {len(_OPTION_KEYS)} options")
    questions = tuple(
        Question(id=qid, text=q.text, options=q.options, keys=tuple(_OPTION_KEYS[: len(q.options)]))
        for qid, q in sorted(item.questions.items())
    )
    utterances = transcript(record) if transcript is not None else None
    media: dict[str, str] = {}
    if media_root is not None:
        folder = Path(media_root) / task / item.bundle_name / "media"
        for qid, name in MEETINGTOM_MEDIA.get(task, {}).items():
            if (folder / name).is_file():
                media[qid] = f"{task}/{item.bundle_name}/media/{name}"
    recon = item.reconstruction
    window = recon.source_window
    payload = {
        "kind": StudyKind.MEETINGTOM.value,
        "task": task,
        "session_id": item.session_id,
        "window": {"start": window.start, "end": window.end, "duration": window.duration},
        "target_agent": item.target,
        "transcript": None
        if utterances is None
        else [
            {
                "speaker": u.speaker,
                "name": u.speaker,
                "text": u.text,
                "start": u.start,
                "is_target": item.target is not None and u.speaker == item.target,
            }
            for u in utterances
        ],
        "media": media,
    }
    if stratify == "task":
        category = task
    elif stratify == "label":
        category = f"{task}:{record.gold.answers.get('Q1', '?')}"
    else:
        raise ValueError(f"stratify must be 'task' or 'label', not {stratify!r}")
    return StudyItem(
        item_id=item.id,
        category=category,
        questions=questions,
        payload=payload,
        gold={"answers": dict(record.gold.answers), "record": tom_record_to_json(record)},
    )


def tom_record_to_json(
    record: ToMRecord, answers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A record in the release's own line format (B.2 key order), optionally with new answers."""
    item = record.item
    d: dict[str, Any] = {"id": item.id, "task": item.task.value, "bundle_name": item.bundle_name}
    if item.source_bundle_name is not None:
        d["source_bundle_name"] = item.source_bundle_name
    d["session_id"] = item.session_id
    if item.window_index is not None:
        d["window_index"] = item.window_index
    d["answers"] = dict(answers if answers is not None else record.gold.answers)
    d["questions"] = {
        qid: {"text": q.text, "options": list(q.options)} for qid, q in item.questions.items()
    }
    return d


def ami_transcripts(ami_folder: str | Path) -> TranscriptLookup:
    """Transcript windows from the AMI word files (via :mod:`polylogue.tom.transcript`).

    Times are relative to the clip start, as in the YOU questions ("says 'you' around 15.0s").
    A session this AMI copy does not hold (the reserved meetings) gets no transcript.
    """
    from polylogue.conversation import ConversationFormatError
    from polylogue.tom.transcript import AmiSessions, transcript_window

    sessions = AmiSessions(ami_folder)
    missing: set[str] = set()

    def window(record: ToMRecord) -> Sequence[Utterance] | None:
        session = record.item.session_id
        if session in missing:
            return None
        try:
            tw = transcript_window(sessions, session, record.item.window)
        except (ValueError, OSError, ConversationFormatError):
            missing.add(session)
            return None
        base = tw.requested.start
        return [
            Utterance(
                speaker=seg.speaker, text=seg.text, start=seg.start - base, end=seg.end - base
            )
            for seg in tw.segments
        ]

    return window


@dataclass(frozen=True)
class ItemSource:
    """Candidate items for a study, where they came from, and a step run on the sample only.

    ``finish`` completes the sampled items with what is too costly to build for every
    candidate (MeetingToM transcript windows read AMI word files per session).
    """

    items: list[StudyItem]
    source: dict[str, Any]
    finish: Callable[[Sequence[StudyItem]], list[StudyItem]] | None = None


def benchmark_items(
    folder: str | Path, split: str, context_turns: int = DEFAULT_CONTEXT_TURNS
) -> ItemSource:
    """Items of one split of a built benchmark folder."""
    from polylogue.turntaking.dataset import load_benchmark

    bench = load_benchmark(folder)
    if split not in bench.splits:
        raise StoreError(f"{folder}: no split {split!r} (have {', '.join(bench.splits)})")
    # Candidates carry only id and category (all sampling needs); the sampled ones are built
    # in full by `finish`, so a 20-item study never builds the whole split.
    items = [
        StudyItem(item_id=k.point_id, category=k.category, questions=(), payload={})
        for k in bench.point_index(split)
    ]
    source = {
        "benchmark": str(Path(folder).resolve()),
        "split": split,
        "data_hash": bench.data_hash,
        "context_turns": context_turns,
    }

    def finish(chosen: Sequence[StudyItem]) -> list[StudyItem]:
        points = {p.point_id: p for p in bench.points_by_id(split, [c.item_id for c in chosen])}
        return [turntaking_item(points[c.item_id], context_turns) for c in chosen]

    return ItemSource(items, source, finish)


def meetingtom_items(
    folder: str | Path | None = None,
    tasks: Sequence[str] | None = None,
    ami_folder: str | Path | None = None,
    media_root: str | Path | None = None,
    stratify: str = "task",
) -> ItemSource:
    """Items from a MeetingToM release folder; transcripts (``ami_folder``) for the sample only."""
    from polylogue.tom.records import load_tom_benchmark

    bench = load_tom_benchmark(folder, tasks=tasks)
    records = {r.id: r for r in bench.all_records()}
    items = [meetingtom_item(r, media_root=media_root, stratify=stratify) for r in records.values()]
    source = {
        "meetingtom": str(bench.folder.resolve()),
        "tasks": list(tasks) if tasks else None,
        "ami": None if ami_folder is None else str(Path(ami_folder).resolve()),
        "media_root": None if media_root is None else str(Path(media_root).resolve()),
        "stratify": stratify,
    }
    if ami_folder is None:
        return ItemSource(items, source)
    transcript = ami_transcripts(ami_folder)

    def finish(chosen: Sequence[StudyItem]) -> list[StudyItem]:
        return [
            meetingtom_item(
                records[it.item_id], transcript=transcript, media_root=media_root, stratify=stratify
            )
            for it in chosen
        ]

    return ItemSource(items, source, finish)


# ----------------------------------------------------------------------------- studies


def create_study(
    store: AnnotationStore,
    name: str,
    kind: StudyKind,
    items: Sequence[StudyItem],
    plan: SamplingPlan,
    annotators: Sequence[str],
    *,
    adjudicators: Sequence[str] = (),
    source: Mapping[str, Any] | None = None,
    instructions: str = "",
    finish: Callable[[Sequence[StudyItem]], list[StudyItem]] | None = None,
) -> tuple[Study, dict[str, str], SampleReport]:
    """Sample, store and assign a study; returns the study, ``name -> access key`` and the report.

    The keys are shown once: the store keeps only their hashes.
    """
    if not annotators:
        raise StoreError("a study needs at least one annotator")
    names = [*annotators, *adjudicators]
    if len(set(names)) != len(names):
        raise StoreError(f"annotator names must be unique: {names}")
    chosen, report = sample_items(items, plan)
    if finish is not None:
        chosen = finish(chosen)
    unfinished = [it.item_id for it in chosen if not it.questions]
    if unfinished:  # light candidates (benchmark_items) stored as they are would be empty
        raise StoreError(
            f"item {unfinished[0]} has no questions: pass finish=source.finish with the "
            "candidates of an ItemSource"
        )
    plan_dict = {
        "per_category": dict(plan.per_category)
        if isinstance(plan.per_category, Mapping)
        else plan.per_category,
        "seed": plan.seed,
        **report.to_dict(),
    }
    study = store.create_study(
        name,
        kind,
        chosen,
        seed=plan.seed,
        plan=plan_dict,
        source=dict(source or {}),
        instructions=instructions,
    )
    ids = [it.item_id for it in chosen]
    keys = {
        a: store.add_annotator(study, a, annotator_order(ids, plan.seed, a)) for a in annotators
    }
    for a in adjudicators:
        keys[a] = store.add_annotator(study, a, ids, role=Role.ADJUDICATOR)
    return study, keys, report


__all__ = [
    "DECISION_QUESTION_ID",
    "ItemSource",
    "SampleReport",
    "SamplingPlan",
    "ami_transcripts",
    "annotator_order",
    "benchmark_items",
    "create_study",
    "meetingtom_item",
    "meetingtom_items",
    "point_from_record",
    "point_to_record",
    "sample_items",
    "tom_record_to_json",
    "turntaking_item",
    "turntaking_items",
]
