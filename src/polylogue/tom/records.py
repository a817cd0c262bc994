"""MeetingToM benchmark records: typed loading of the release files and anomaly validation.

The release holds three task files (``state.jsonl``, ``you.jsonl``, ``consensus.jsonl``) and one
media-reconstruction file (``reconstruction.jsonl``) with one spec per evaluation record.

Model-visible fields and gold answers are kept apart: :class:`ToMItem` is what a prompt may use
(questions, session, window, layout), :class:`ToMGold` holds the adjudicated answers, and
:class:`ToMRecord` pairs them for scoring. Question texts are parsed once here (target letter,
"you" speaker and time, attitude subject) so downstream code never re-parses prose.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from polylogue.conversation import ConversationFormatError
from polylogue.jsonio import JsonInputError, loads_json


class ToMTask(StrEnum):
    STATE = "state"
    YOU = "you"
    CONSENSUS = "consensus"


STATE_LABELS: tuple[str, ...] = (
    "DISENGAGED_WITHDRAWAL",
    "HESITATION",
    "CONFUSED_BEWILDERMENT",
    "COGNITIVE_CONFLICT",
    "SUPPORTIVE_ENDORSEMENT",
    "FOCUSED_LISTENING",
    "ACTIVE_ENGAGEMENT",
)
YOU_Q1_LABELS: tuple[str, ...] = ("A", "B", "C", "D", "MULTIPLE", "UNKNOWN")
YOU_Q2_LABELS: tuple[str, ...] = ("SUPPORT", "OPPOSE", "NEUTRAL", "UNCERTAIN")
CONS_Q1_LABELS: tuple[str, ...] = (
    "TRUE_CONSENSUS",
    "PSEUDO_CONSENSUS",
    "NO_CONSENSUS",
    "UNCERTAIN",
)
CONS_Q2_LABELS: tuple[str, ...] = ("A", "B", "C", "D", "NONE")
PARTICIPANT_LETTERS: tuple[str, ...] = ("A", "B", "C", "D")
CLOSEUP_VIEWS: tuple[str, ...] = ("Closeup1", "Closeup2", "Closeup3", "Closeup4")

#: The fixed label set of every (task, question) pair.
LABELS: dict[tuple[ToMTask, str], tuple[str, ...]] = {
    (ToMTask.STATE, "Q1"): STATE_LABELS,
    (ToMTask.YOU, "Q1"): YOU_Q1_LABELS,
    (ToMTask.YOU, "Q2"): YOU_Q2_LABELS,
    (ToMTask.CONSENSUS, "Q1"): CONS_Q1_LABELS,
    (ToMTask.CONSENSUS, "Q2"): CONS_Q2_LABELS,
}
TASK_QUESTIONS: dict[ToMTask, tuple[str, ...]] = {
    ToMTask.STATE: ("Q1",),
    ToMTask.YOU: ("Q1", "Q2"),
    ToMTask.CONSENSUS: ("Q1", "Q2"),
}
TASK_FILES: dict[ToMTask, str] = {t: f"{t.value}.jsonl" for t in ToMTask}
RECONSTRUCTION_FILE = "reconstruction.jsonl"

_STATE_Q = re.compile(r"participant (?P<target>\S+?)'s state")
_YOU_Q1 = re.compile(r"when (?P<speaker>\S+) says 'you' around (?P<time>-?[\d.]+)s")
_YOU_Q2 = re.compile(r"What is (?P<subject>\S+?)'s attitude toward (?P<speaker>\S+?)'s statement")


@dataclass(frozen=True, slots=True)
class ToMQuestion:
    text: str
    options: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SourceWindow:
    """A span of the AMI session in seconds from the session start (``start`` may be negative)."""

    start: float
    end: float
    duration: float

    @property
    def clamped_start(self) -> float:
        return max(0.0, self.start)


@dataclass(frozen=True, slots=True)
class Mosaic:
    """The 2x2 close-up mosaic: which camera view sits in which tile."""

    top_left: str
    top_right: str
    bottom_left: str
    bottom_right: str
    tile_width: int | None = None
    tile_height: int | None = None
    output_width: int | None = None
    output_height: int | None = None

    @property
    def tiles(self) -> tuple[tuple[str, str], ...]:
        """(position name, view) in reading order TL, TR, BL, BR."""
        return (
            ("top-left", self.top_left),
            ("top-right", self.top_right),
            ("bottom-left", self.bottom_left),
            ("bottom-right", self.bottom_right),
        )


@dataclass(frozen=True, slots=True)
class Reconstruction:
    """One media-reconstruction spec (``reconstruction.jsonl`` line); never holds gold."""

    id: str
    task: ToMTask
    bundle_name: str
    session_id: str
    source_window: SourceWindow
    required_views: tuple[str, ...]
    source_bundle_name: str | None = None
    window_index: int | None = None
    target_agent: str | None = None
    target_view: str | None = None
    mosaic: Mosaic | None = None
    closeup_to_agent: dict[str, str] = field(default_factory=dict)

    def agent_of_view(self, view: str) -> str | None:
        if self.target_view == view and self.target_agent:
            return self.target_agent
        return self.closeup_to_agent.get(view)


@dataclass(frozen=True, slots=True)
class ToMItem:
    """Everything a model may be shown for one evaluation record (no gold)."""

    id: str
    task: ToMTask
    bundle_name: str
    session_id: str
    questions: dict[str, ToMQuestion]
    reconstruction: Reconstruction
    source_bundle_name: str | None = None
    window_index: int | None = None
    #: STATE: the participant whose state is asked.
    target: str | None = None
    #: YOU: who says "you", and when (seconds from the clip start, as written in the question).
    speaker: str | None = None
    you_time: float | None = None
    #: YOU Q2: whose attitude is asked (a letter, ``MULTIPLE`` or, once, ``E``).
    attitude_subject: str | None = None

    @property
    def window(self) -> SourceWindow:
        return self.reconstruction.source_window

    @property
    def scoring_bundle(self) -> str:
        """The bundle key the official evaluator uses (STATE: the *source* bundle)."""
        if self.task is ToMTask.STATE and self.source_bundle_name:
            return self.source_bundle_name
        return self.bundle_name


@dataclass(frozen=True, slots=True)
class ToMGold:
    id: str
    answers: dict[str, str]


@dataclass(frozen=True, slots=True)
class ToMRecord:
    item: ToMItem
    gold: ToMGold

    @property
    def id(self) -> str:
        return self.item.id

    @property
    def task(self) -> ToMTask:
        return self.item.task


@dataclass(frozen=True, slots=True)
class ToMBenchmark:
    """All records of a MeetingToM release folder, in file order per task."""

    folder: Path
    records: dict[ToMTask, tuple[ToMRecord, ...]]
    #: Reconstruction ids that have no evaluation record (normally none).
    orphan_reconstructions: tuple[str, ...] = ()

    def task_records(self, task: ToMTask | str) -> tuple[ToMRecord, ...]:
        return self.records.get(ToMTask(task), ())

    def all_records(self) -> Iterator[ToMRecord]:
        for task in ToMTask:
            yield from self.records.get(task, ())

    def by_id(self) -> dict[str, ToMRecord]:
        return {r.id: r for r in self.all_records()}

    def select(
        self,
        tasks: Iterable[ToMTask | str] | None = None,
        ids: Iterable[str] | None = None,
        sessions: Iterable[str] | None = None,
        limit_per_task: int | None = None,
    ) -> list[ToMRecord]:
        """Records filtered by task, id and session, keeping file order; ``limit`` per task."""
        wanted_tasks = [ToMTask(t) for t in tasks] if tasks is not None else list(ToMTask)
        id_set = set(ids) if ids is not None else None
        sess_set = set(sessions) if sessions is not None else None
        out: list[ToMRecord] = []
        for task in wanted_tasks:
            kept = [
                r
                for r in self.records.get(task, ())
                if (id_set is None or r.id in id_set)
                and (sess_set is None or r.item.session_id in sess_set)
            ]
            out.extend(kept[:limit_per_task] if limit_per_task is not None else kept)
        return out


# ----------------------------------------------------------------------------- loading


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = loads_json(line, path, f"line {lineno}")
            except JsonInputError as exc:
                raise ConversationFormatError(exc.path, exc.where, exc.message) from None
            if not isinstance(obj, dict):
                raise ConversationFormatError(path, f"line {lineno}", "expected a JSON object")
            yield lineno, obj


def _parse_reconstruction(d: dict[str, Any]) -> Reconstruction:
    sw = d["source_window"]
    mosaic = None
    if d.get("mosaic"):
        m = d["mosaic"]
        mosaic = Mosaic(
            top_left=m["top_left"],
            top_right=m["top_right"],
            bottom_left=m["bottom_left"],
            bottom_right=m["bottom_right"],
            tile_width=m.get("tile_width"),
            tile_height=m.get("tile_height"),
            output_width=m.get("output_width"),
            output_height=m.get("output_height"),
        )
    return Reconstruction(
        id=str(d["id"]),
        task=ToMTask(d["task"]),
        bundle_name=str(d["bundle_name"]),
        session_id=str(d["session_id"]),
        source_window=SourceWindow(float(sw["start"]), float(sw["end"]), float(sw["duration"])),
        required_views=tuple(d.get("required_views") or ()),
        source_bundle_name=d.get("source_bundle_name"),
        window_index=None if d.get("window_index") is None else int(d["window_index"]),
        target_agent=d.get("target_agent"),
        target_view=d.get("target_view"),
        mosaic=mosaic,
        closeup_to_agent={str(k): str(v) for k, v in (d.get("closeup_to_agent") or {}).items()},
    )


def load_reconstructions(path: str | Path) -> dict[str, Reconstruction]:
    """``reconstruction.jsonl`` keyed by evaluation id."""
    path = Path(path)
    out: dict[str, Reconstruction] = {}
    for lineno, d in _read_jsonl(path):
        try:
            rec = _parse_reconstruction(d)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConversationFormatError(path, f"line {lineno}", f"bad record: {exc!r}") from exc
        if rec.id in out:
            raise ConversationFormatError(path, f"line {lineno}", f"duplicate id {rec.id!r}")
        out[rec.id] = rec
    return out


def _parse_item(d: dict[str, Any], task: ToMTask, recon: Reconstruction) -> tuple[ToMItem, ToMGold]:
    questions = {
        str(k): ToMQuestion(text=str(v["text"]), options=tuple(str(o) for o in v["options"]))
        for k, v in d["questions"].items()
    }
    target = speaker = subject = None
    you_time = None
    if task is ToMTask.STATE:
        m = _STATE_Q.search(questions["Q1"].text)
        target = m.group("target") if m else recon.target_agent
    elif task is ToMTask.YOU:
        m1 = _YOU_Q1.search(questions["Q1"].text)
        if m1:
            speaker, you_time = m1.group("speaker"), float(m1.group("time"))
        m2 = _YOU_Q2.search(questions["Q2"].text)
        if m2:
            subject = m2.group("subject")
    item = ToMItem(
        id=str(d["id"]),
        task=task,
        bundle_name=str(d["bundle_name"]),
        session_id=str(d["session_id"]),
        questions=questions,
        reconstruction=recon,
        source_bundle_name=d.get("source_bundle_name"),
        window_index=None if d.get("window_index") is None else int(d["window_index"]),
        target=target,
        speaker=speaker,
        you_time=you_time,
        attitude_subject=subject,
    )
    gold = ToMGold(id=item.id, answers={str(k): str(v) for k, v in d["answers"].items()})
    return item, gold


def load_tom_benchmark(
    folder: str | Path | None = None, tasks: Sequence[ToMTask | str] | None = None
) -> ToMBenchmark:
    """Load a MeetingToM folder (default: ``meetingtom`` under the shared data root).

    Every evaluation record must have a reconstruction spec with the same id; a missing one is a
    format error naming the file and line.
    """
    if folder is None:
        from polylogue.paths import corpus_dir

        folder = corpus_dir("meetingtom")
    folder = Path(folder)
    recons = load_reconstructions(folder / RECONSTRUCTION_FILE)
    wanted = [ToMTask(t) for t in tasks] if tasks is not None else list(ToMTask)
    records: dict[ToMTask, tuple[ToMRecord, ...]] = {}
    used: set[str] = set()
    for task in wanted:
        path = folder / TASK_FILES[task]
        rows: list[ToMRecord] = []
        for lineno, d in _read_jsonl(path):
            rid = str(d.get("id"))
            if rid not in recons:
                raise ConversationFormatError(
                    path, f"line {lineno}", f"id {rid!r} has no line in {RECONSTRUCTION_FILE}"
                )
            if ToMTask(d.get("task", task.value)) is not task:
                raise ConversationFormatError(path, f"line {lineno}", f"task {d.get('task')!r}")
            try:
                item, gold = _parse_item(d, task, recons[rid])
            except (KeyError, TypeError, ValueError) as exc:
                raise ConversationFormatError(
                    path, f"line {lineno}", f"bad record: {exc!r}"
                ) from exc
            rows.append(ToMRecord(item, gold))
            used.add(rid)
        records[task] = tuple(rows)
    orphans = tuple(rid for rid, r in recons.items() if r.task in wanted and rid not in used)
    return ToMBenchmark(folder=folder, records=records, orphan_reconstructions=orphans)


# ----------------------------------------------------------------------------- validation


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One finding of :func:`validate`. ``kind`` is a stable machine-readable name."""

    kind: str
    record_id: str
    detail: str


#: Kinds that describe the released data as documented (expected, not errors of this tool).
KNOWN_ANOMALY_KINDS: dict[str, str] = {
    "negative_start": "source window starts before the session start (clamped to 0 when cutting)",
    "unknown_speaker": "YOU question names the speaker '?'",
    "unknown_participant": "a question names a participant outside A-D",
    "self_address": "YOU gold addressee is the speaker themself",
    "q2_names_q1_gold": "YOU Q2 asks about the Q1 gold addressee (joint prompting leaks Q1)",
    "q2_subject_differs": "YOU Q2 asks about someone other than the Q1 gold addressee",
    "nonstandard_duration": "YOU/CONSENSUS window is not 50 s",
    "consensus_order": "consensus.jsonl is not sorted by bundle at this line",
}


def _gold_and_window_anomalies(rec: ToMRecord) -> list[Anomaly]:
    """Gold labels outside the fixed sets, nonstandard options, inconsistent source windows."""
    item, gold, sw = rec.item, rec.gold, rec.item.reconstruction.source_window
    rid = item.id
    out: list[Anomaly] = []
    for q in TASK_QUESTIONS[item.task]:
        value = gold.answers.get(q)
        if value is None:
            out.append(Anomaly("missing_gold", rid, f"no answers.{q}"))
        elif value not in LABELS[(item.task, q)]:
            out.append(Anomaly("invalid_gold", rid, f"answers.{q}={value!r}"))
        question = item.questions.get(q)
        if question is not None and tuple(question.options) != LABELS[(item.task, q)]:
            out.append(Anomaly("nonstandard_options", rid, f"{q} options {question.options}"))
    if sw.start < 0:
        out.append(Anomaly("negative_start", rid, f"source_window.start={sw.start}"))
    if abs(sw.end - sw.start - sw.duration) > 1e-6:
        out.append(Anomaly("window_inconsistent", rid, f"end-start != duration ({sw})"))
    return out


def _you_anomalies(rec: ToMRecord) -> list[Anomaly]:
    """YOU: unknown speakers or Q2 subjects, self-address, and how Q2's subject relates to Q1."""
    item, rid = rec.item, rec.item.id
    out: list[Anomaly] = []
    letters = set(PARTICIPANT_LETTERS)
    if item.speaker == "?":
        out.append(Anomaly("unknown_speaker", rid, "speaker '?'"))
    elif item.speaker not in letters:
        out.append(Anomaly("unknown_participant", rid, f"speaker {item.speaker!r}"))
    subj = item.attitude_subject
    if subj is not None and subj not in letters and subj != "MULTIPLE":
        out.append(Anomaly("unknown_participant", rid, f"Q2 subject {subj!r}"))
    q1 = rec.gold.answers.get("Q1")
    if item.speaker in letters and q1 == item.speaker:
        out.append(Anomaly("self_address", rid, f"speaker {q1} addresses {q1}"))
    if subj is not None and q1 is not None:
        if subj == q1:
            out.append(Anomaly("q2_names_q1_gold", rid, f"Q2 subject {subj} = Q1 gold"))
        else:
            out.append(Anomaly("q2_subject_differs", rid, f"Q2 subject {subj}, Q1 gold {q1}"))
    return out


def _consensus_order_anomalies(bench: ToMBenchmark) -> list[Anomaly]:
    cons = bench.task_records(ToMTask.CONSENSUS)
    return [
        Anomaly(
            "consensus_order", cur.id, f"{cur.item.bundle_name} follows {prev.item.bundle_name}"
        )
        for prev, cur in itertools.pairwise(cons)
        if cur.item.bundle_name < prev.item.bundle_name
    ]


def validate(bench: ToMBenchmark) -> list[Anomaly]:
    """Check a loaded benchmark and report documented anomalies and real inconsistencies.

    Inconsistency kinds (not expected in the release) include label values outside the fixed
    sets, reconstruction/question mismatches, close-up mappings that change within a session,
    and CONSENSUS Q2 letters without PSEUDO_CONSENSUS.
    """
    out: list[Anomaly] = []
    session_maps: dict[str, dict[str, str]] = {}

    def note_mapping(rid: str, session: str, view: str, agent: str) -> None:
        known = session_maps.setdefault(session, {})
        if known.get(view, agent) != agent:
            out.append(
                Anomaly(
                    "closeup_mapping_conflict",
                    rid,
                    f"{session} {view} is {agent} here but {known[view]} elsewhere",
                )
            )
        known.setdefault(view, agent)

    for rid in bench.orphan_reconstructions:
        out.append(Anomaly("orphan_reconstruction", rid, "no evaluation record has this id"))

    for rec in bench.all_records():
        item, gold, recon = rec.item, rec.gold, rec.item.reconstruction
        rid = item.id
        out.extend(_gold_and_window_anomalies(rec))
        for view, agent in recon.closeup_to_agent.items():
            note_mapping(rid, item.session_id, view, agent)
        if item.task is ToMTask.STATE:
            if recon.target_view and recon.target_agent:
                note_mapping(rid, item.session_id, recon.target_view, recon.target_agent)
            if item.target != recon.target_agent:
                detail = f"question names {item.target}, metadata {recon.target_agent}"
                out.append(Anomaly("target_mismatch", rid, detail))
        elif recon.source_window.duration != 50.0:
            detail = f"duration={recon.source_window.duration}"
            out.append(Anomaly("nonstandard_duration", rid, detail))
        if item.task is ToMTask.YOU:
            out.extend(_you_anomalies(rec))
        if item.task is ToMTask.CONSENSUS:
            q1, q2 = gold.answers.get("Q1"), gold.answers.get("Q2")
            if (q1 == "PSEUDO_CONSENSUS") != (q2 not in (None, "NONE")):
                out.append(Anomaly("consensus_q2_inconsistent", rid, f"Q1={q1} but Q2={q2}"))
    out.extend(_consensus_order_anomalies(bench))
    return out


def anomaly_counts(anomalies: Iterable[Anomaly]) -> dict[str, int]:
    return dict(sorted(Counter(a.kind for a in anomalies).items()))
