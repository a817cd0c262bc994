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


class ToMRecordError(ConversationFormatError):
    """Records of a MeetingToM folder that do not fit the schema: one problem per record
    (``file:line N: field F: what is wrong``), all of them, before any record is used."""

    def __init__(self, problems: Sequence[tuple[Path, int, str]]) -> None:
        path, lineno, first = problems[0]
        super().__init__(path, f"line {lineno}", first)
        self.problems = [f"{p}:line {n}: {msg}" for p, n, msg in problems]
        shown = self.problems[:MAX_SHOWN_PROBLEMS]
        more = len(self.problems) - len(shown)
        head = f"{len(self.problems)} bad MeetingToM record(s)"
        self.args = ("\n".join([head + ":", *shown] + ([f"... and {more} more"] if more else [])),)

    def __str__(self) -> str:
        return str(self.args[0])


#: How many bad records an error lists (the count says how many there are).
MAX_SHOWN_PROBLEMS = 20
#: Bundle names, session ids and camera views become folder and file names (``tom media``,
#: frames): letters, digits, ``.``, ``_`` and ``-``, never a separator, ``..`` or a leading dot.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


class _Invalid(Exception):
    """A record's field problems (``field F: ...``), raised once per record."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class _Fields:
    """Typed reads of one JSON record that note every problem by field name."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def bad(self, name: str, what: str) -> None:
        self.problems.append(f"field {name}: {what}")

    def get(self, d: dict[str, Any], key: str, name: str, required: bool) -> Any:
        if key not in d or d[key] is None:
            if required:
                self.bad(name, "missing")
            return None
        return d[key]

    def text(self, d: dict[str, Any], key: str, prefix: str = "", *, required: bool = True,
             safe: bool = False) -> str | None:  # fmt: skip
        name = prefix + key
        v = self.get(d, key, name, required)
        return None if v is None else self.check_text(name, v, safe)

    def check_text(self, name: str, v: Any, safe: bool = False) -> str | None:
        """``v`` if it is a string (a plain name with ``safe``), else None and a problem."""
        if not isinstance(v, str):
            self.bad(name, f"expected a string, got {type(v).__name__} {_shown(v)}")
            return None
        if "\x00" in v:
            self.bad(name, f"holds a NUL character: {v!r}")
            return None
        if safe and (not SAFE_NAME.fullmatch(v) or ".." in v):
            self.bad(
                name,
                f"{v!r} is not a plain name (letters, digits, '.', '_', '-'; no path "
                "separator, no '..'): it names a folder",
            )
            return None
        return v

    def number(self, d: dict[str, Any], key: str, prefix: str = "") -> float | None:
        import math

        name = prefix + key
        v = self.get(d, key, name, True)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int | float):
            self.bad(name, f"expected a number, got {type(v).__name__} {_shown(v)}")
            return None
        if not math.isfinite(v):
            self.bad(name, f"{v} is not a finite number")
            return None
        return float(v)

    def integer(self, d: dict[str, Any], key: str, prefix: str = "") -> int | None:
        v = self.get(d, key, prefix + key, False)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            self.bad(prefix + key, f"expected a whole number >= 0, got {_shown(v)}")
            return None
        return v

    def obj(self, d: dict[str, Any], key: str, prefix: str = "", *,
            required: bool = True) -> dict[str, Any] | None:  # fmt: skip
        name = prefix + key
        v = self.get(d, key, name, required)
        if v is None:
            return None
        if not isinstance(v, dict):
            self.bad(name, f"expected an object, got {type(v).__name__} {_shown(v)}")
            return None
        return v

    def texts(self, d: dict[str, Any], key: str, prefix: str = "", *, safe: bool = False,
              required: bool = True) -> tuple[str, ...]:  # fmt: skip
        name = prefix + key
        v = self.get(d, key, name, required)
        if v is None:
            return ()
        if not isinstance(v, list):
            self.bad(name, f"expected a list of strings, got {type(v).__name__} {_shown(v)}")
            return ()
        out = [self.check_text(f"{name}[{i}]", x, safe) for i, x in enumerate(v)]
        return tuple(x for x in out if x is not None)

    def task(self, d: dict[str, Any]) -> ToMTask | None:
        v = self.text(d, "task")
        if v is None:
            return None
        if v not in {t.value for t in ToMTask}:
            self.bad("task", f"unknown task {v!r} (one of {', '.join(t.value for t in ToMTask)})")
            return None
        return ToMTask(v)

    def done(self) -> None:
        if self.problems:
            raise _Invalid(self.problems)


def _shown(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """``(line number, object)`` of each non-blank line; a line that is not a JSON object
    (bad bytes, bad JSON, another value) comes as ``(line number, problem)``."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield lineno, f"not UTF-8 text (byte {raw[e.start]:#04x} at column {e.start + 1})"
                continue
            if not line.strip():
                continue
            try:
                obj = loads_json(line, path, f"line {lineno}")
            except JsonInputError as exc:
                yield lineno, exc.message
                continue
            if not isinstance(obj, dict):
                yield lineno, f"expected a JSON object, got {type(obj).__name__}"
                continue
            yield lineno, obj


def _parse_window(f: _Fields, d: dict[str, Any]) -> SourceWindow | None:
    sw = f.obj(d, "source_window")
    if sw is None:
        return None
    start = f.number(sw, "start", "source_window.")
    end = f.number(sw, "end", "source_window.")
    duration = f.number(sw, "duration", "source_window.")
    if start is None or end is None or duration is None:
        return None
    if end <= start:
        f.bad("source_window.end", f"{end:g} is not after source_window.start {start:g}")
        return None
    if duration <= 0:
        f.bad("source_window.duration", f"{duration:g} is not a positive length")
        return None
    return SourceWindow(start, end, duration)


def _parse_reconstruction(d: dict[str, Any]) -> Reconstruction:
    f = _Fields()
    rid = f.text(d, "id")
    task = f.task(d)
    bundle = f.text(d, "bundle_name", safe=True)
    session = f.text(d, "session_id", safe=True)
    window = _parse_window(f, d)
    views = f.texts(d, "required_views", safe=True, required=False)
    source_bundle = f.text(d, "source_bundle_name", required=False, safe=True)
    window_index = f.integer(d, "window_index")
    target_agent = f.text(d, "target_agent", required=False)
    target_view = f.text(d, "target_view", required=False, safe=True)
    mosaic = None
    m = f.obj(d, "mosaic", required=False)
    if m is not None:
        tiles = [f.text(m, k, "mosaic.", safe=True) for k in
                 ("top_left", "top_right", "bottom_left", "bottom_right")]  # fmt: skip
        sizes = [f.integer(m, k, "mosaic.") for k in
                 ("tile_width", "tile_height", "output_width", "output_height")]  # fmt: skip
        tl, tr, bl, br = tiles
        if tl is not None and tr is not None and bl is not None and br is not None:
            mosaic = Mosaic(tl, tr, bl, br, *sizes)
    closeups: dict[str, str] = {}
    c = f.obj(d, "closeup_to_agent", required=False)
    for k, v in (c or {}).items():
        view = f.check_text(f"closeup_to_agent key {k!r}", k, safe=True)
        agent = f.check_text(f"closeup_to_agent.{k}", v)
        if view is not None and agent is not None:
            closeups[view] = agent
    f.done()
    assert rid is not None and task is not None and bundle is not None  # done() checked
    assert session is not None and window is not None
    return Reconstruction(
        id=rid,
        task=task,
        bundle_name=bundle,
        session_id=session,
        source_window=window,
        required_views=views,
        source_bundle_name=source_bundle,
        window_index=window_index,
        target_agent=target_agent,
        target_view=target_view,
        mosaic=mosaic,
        closeup_to_agent=closeups,
    )


def _problem(path: Path, lineno: int, rid: object, detail: str) -> tuple[Path, int, str]:
    who = f"record {rid!r}: " if isinstance(rid, str) else ""
    return path, lineno, who + detail


def load_reconstructions(path: str | Path) -> dict[str, Reconstruction]:
    """``reconstruction.jsonl`` keyed by evaluation id; every record that does not fit the
    schema (or repeats an id) is a :class:`ToMRecordError` problem."""
    path = Path(path)
    out: dict[str, Reconstruction] = {}
    problems: list[tuple[Path, int, str]] = []
    first_line: dict[str, int] = {}
    for lineno, d in _read_jsonl(path):
        if isinstance(d, str):
            problems.append((path, lineno, d))
            continue
        try:
            rec = _parse_reconstruction(d)
        except _Invalid as exc:
            problems.append(_problem(path, lineno, d.get("id"), str(exc)))
            continue
        if rec.id in out:
            problems.append(
                _problem(path, lineno, rec.id, f"field id: duplicate of line {first_line[rec.id]}")
            )
            continue
        out[rec.id] = rec
        first_line[rec.id] = lineno
    if problems:
        raise ToMRecordError(problems)
    return out


def _parse_item(d: dict[str, Any], task: ToMTask, recon: Reconstruction) -> tuple[ToMItem, ToMGold]:
    f = _Fields()
    rid = f.text(d, "id")
    declared = f.task(d) if "task" in d else task
    if declared is not None and declared is not task:
        f.bad("task", f"{declared.value!r} in the {task.value} file")
    bundle = f.text(d, "bundle_name", safe=True)
    session = f.text(d, "session_id", safe=True)
    source_bundle = f.text(d, "source_bundle_name", required=False, safe=True)
    window_index = f.integer(d, "window_index")
    questions: dict[str, ToMQuestion] = {}
    qs = f.obj(d, "questions")
    for k in TASK_QUESTIONS[task]:
        q = f.obj(qs or {}, k, "questions.") if qs is not None else None
        if q is None:
            continue
        text = f.text(q, "text", f"questions.{k}.")
        options = f.texts(q, "options", f"questions.{k}.")
        if text is not None:
            questions[k] = ToMQuestion(text=text, options=options)
    answers: dict[str, str] = {}
    a = f.obj(d, "answers")
    for k in TASK_QUESTIONS[task]:
        v = f.text(a or {}, k, "answers.", required=False) if a is not None else None
        if v is not None:
            answers[k] = v
    if bundle is not None and bundle != recon.bundle_name:
        f.bad("bundle_name", f"{bundle!r}, but {RECONSTRUCTION_FILE} says {recon.bundle_name!r}")
    if session is not None and session != recon.session_id:
        f.bad("session_id", f"{session!r}, but {RECONSTRUCTION_FILE} says {recon.session_id!r}")
    f.done()
    assert rid is not None and bundle is not None and session is not None
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
        id=rid,
        task=task,
        bundle_name=bundle,
        session_id=session,
        questions=questions,
        reconstruction=recon,
        source_bundle_name=source_bundle,
        window_index=window_index,
        target=target,
        speaker=speaker,
        you_time=you_time,
        attitude_subject=subject,
    )
    return item, ToMGold(id=item.id, answers=answers)


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
    used: dict[str, tuple[Path, int]] = {}
    problems: list[tuple[Path, int, str]] = []
    for task in wanted:
        path = folder / TASK_FILES[task]
        rows: list[ToMRecord] = []
        for lineno, d in _read_jsonl(path):
            if isinstance(d, str):
                problems.append((path, lineno, d))
                continue
            rid = d.get("id")
            if not isinstance(rid, str):
                got = "missing" if rid is None else f"expected a string, got {_shown(rid)}"
                problems.append((path, lineno, f"field id: {got}"))
                continue
            if rid not in recons:
                problems.append(
                    _problem(path, lineno, rid, f"field id: has no line in {RECONSTRUCTION_FILE}")
                )
                continue
            if rid in used:
                where, n = used[rid]
                problems.append(
                    _problem(path, lineno, rid, f"field id: duplicate of {where.name} line {n}")
                )
                continue
            try:
                item, gold = _parse_item(d, task, recons[rid])
            except _Invalid as exc:
                problems.append(_problem(path, lineno, rid, str(exc)))
                continue
            rows.append(ToMRecord(item, gold))
            used[rid] = (path, lineno)
        records[task] = tuple(rows)
    if problems:
        raise ToMRecordError(problems)
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
