"""SQLite persistence for annotation studies: items, annotators, answers, adjudications.

One database file holds any number of studies. It is opened in WAL mode with a busy timeout so
that several annotators (threads of one server, or several processes) can write at once; every
read-modify-write runs inside ``BEGIN IMMEDIATE`` (Python's implicit transactions start too
late and silently lose updates under concurrency).

Gold labels live in their own column and are only read by the analysis methods
(:meth:`AnnotationStore.items`); the annotator-facing methods never select them.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from polylogue.errors import PolylogueInputError

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS studies (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL,
    seed INTEGER NOT NULL,
    plan TEXT NOT NULL,
    source TEXT NOT NULL,
    instructions TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS items (
    study_id INTEGER NOT NULL REFERENCES studies(id),
    item_id TEXT NOT NULL,
    category TEXT NOT NULL,
    questions TEXT NOT NULL,
    payload TEXT NOT NULL,
    gold TEXT NOT NULL,
    PRIMARY KEY (study_id, item_id)
);
CREATE TABLE IF NOT EXISTS annotators (
    study_id INTEGER NOT NULL REFERENCES studies(id),
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    key_hash TEXT NOT NULL UNIQUE,
    item_order TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (study_id, name)
);
CREATE TABLE IF NOT EXISTS answers (
    study_id INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    question_id TEXT NOT NULL,
    annotator TEXT NOT NULL,
    label TEXT NOT NULL,
    seconds REAL,
    answered_at TEXT NOT NULL,
    revisions INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (study_id, item_id, question_id, annotator),
    FOREIGN KEY (study_id, item_id) REFERENCES items(study_id, item_id),
    FOREIGN KEY (study_id, annotator) REFERENCES annotators(study_id, name)
);
CREATE TABLE IF NOT EXISTS answer_log (
    id INTEGER PRIMARY KEY,
    study_id INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    question_id TEXT NOT NULL,
    annotator TEXT NOT NULL,
    label TEXT NOT NULL,
    answered_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS adjudications (
    study_id INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    question_id TEXT NOT NULL,
    label TEXT NOT NULL,
    adjudicator TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    decided_at TEXT NOT NULL,
    PRIMARY KEY (study_id, item_id, question_id),
    FOREIGN KEY (study_id, item_id) REFERENCES items(study_id, item_id)
);
"""


class StoreError(PolylogueInputError):
    """A request the store refuses (unknown study, bad label, duplicate name...)."""


class StudyKind(StrEnum):
    TURNTAKING = "turntaking"
    MEETINGTOM = "meetingtom"


class Role(StrEnum):
    ANNOTATOR = "annotator"
    ADJUDICATOR = "adjudicator"


@dataclass(frozen=True, slots=True)
class Question:
    """One question asked about an item; ``keys[i]`` is the keyboard shortcut for ``options[i]``."""

    id: str
    text: str
    options: tuple[str, ...]
    keys: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.options) != len(self.keys):
            raise ValueError(
                f"question {self.id}: {len(self.options)} options but {len(self.keys)} keys"
            )
        if len(set(self.options)) != len(self.options):
            raise ValueError(f"question {self.id}: duplicate options {self.options}")
        if len({k.lower() for k in self.keys}) != len(self.keys):
            raise ValueError(f"question {self.id}: duplicate shortcut keys {self.keys}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "options": list(self.options),
            "keys": list(self.keys),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Question:
        return cls(str(d["id"]), str(d["text"]), tuple(d["options"]), tuple(d["keys"]))


@dataclass(frozen=True, slots=True)
class StudyItem:
    """An item as stored: what annotators see (``payload``) and what they must not (``gold``).

    ``source`` is the original record (a decision point or MeetingToM record as a dict) so the
    adjudicated set can be written back in the benchmark's own format.
    """

    item_id: str
    category: str
    questions: tuple[Question, ...]
    payload: dict[str, Any]
    gold: dict[str, Any] = field(default_factory=dict)

    def question(self, qid: str) -> Question:
        for q in self.questions:
            if q.id == qid:
                return q
        raise StoreError(f"item {self.item_id} has no question {qid!r}")


@dataclass(frozen=True, slots=True)
class Study:
    id: int
    name: str
    kind: StudyKind
    created_at: str
    seed: int
    plan: dict[str, Any]
    source: dict[str, Any]
    instructions: str


@dataclass(frozen=True, slots=True)
class Annotator:
    study: Study
    name: str
    role: Role
    order: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Answer:
    item_id: str
    question_id: str
    annotator: str
    label: str
    seconds: float | None
    answered_at: str
    revisions: int


@dataclass(frozen=True, slots=True)
class Adjudication:
    item_id: str
    question_id: str
    label: str
    adjudicator: str
    note: str
    decided_at: str


@dataclass(frozen=True, slots=True)
class Progress:
    done: int
    total: int
    #: Position (0-based, in the annotator's order) of the first item with an open question.
    next_position: int | None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    return secrets.token_urlsafe(18)


class AnnotationStore:
    """A study database on disk. Cheap to construct; each call opens its own connection.

    A connection per call keeps the object safe to share between server threads (sqlite3
    connections must not be shared across threads) at a cost of well under a millisecond.
    """

    def __init__(self, path: str | Path, timeout_s: float = 15.0) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.execute("PRAGMA journal_mode=WAL")  # persistent in the file
            con.executescript(_SCHEMA)
            con.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            (version,) = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if int(version) != SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: schema version {version}, this polylogue reads {SCHEMA_VERSION}"
                )

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            con = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the study database: {exc}") from exc
        try:
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA foreign_keys=ON")
            yield con
        except sqlite3.DatabaseError as exc:
            if "file is not a database" in str(exc):
                raise StoreError(f"{self.path}: not a polylogue study database ({exc})") from exc
            raise
        finally:
            con.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")  # take the write lock before reading
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    # ------------------------------------------------------------------ studies

    def create_study(
        self,
        name: str,
        kind: StudyKind,
        items: Sequence[StudyItem],
        *,
        seed: int,
        plan: dict[str, Any],
        source: dict[str, Any],
        instructions: str = "",
    ) -> Study:
        if not name or not name.replace("-", "").replace("_", "").isalnum():
            raise StoreError(f"study name {name!r}: use letters, digits, '-' and '_' only")
        if not items:
            raise StoreError(f"study {name!r}: no items to annotate")
        ids = [it.item_id for it in items]
        if len(set(ids)) != len(ids):
            raise StoreError(f"study {name!r}: duplicate item ids")
        with self._write() as con:
            if con.execute("SELECT 1 FROM studies WHERE name=?", (name,)).fetchone():
                raise StoreError(f"study {name!r} already exists in {self.path}")
            cur = con.execute(
                "INSERT INTO studies(name, kind, created_at, seed, plan, source, instructions) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    name,
                    kind.value,
                    _now(),
                    seed,
                    json.dumps(plan),
                    json.dumps(source),
                    instructions,
                ),
            )
            study_id = int(cur.lastrowid or 0)
            con.executemany(
                "INSERT INTO items(study_id, item_id, category, questions, payload, gold) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        study_id,
                        it.item_id,
                        it.category,
                        json.dumps([q.to_dict() for q in it.questions]),
                        json.dumps(it.payload, ensure_ascii=False),
                        json.dumps(it.gold, ensure_ascii=False),
                    )
                    for it in items
                ],
            )
        return self.study(name)

    def studies(self) -> list[Study]:
        with self._connect() as con:
            rows = con.execute("SELECT * FROM studies ORDER BY id").fetchall()
        return [_study(r) for r in rows]

    def study(self, name: str) -> Study:
        with self._connect() as con:
            row = con.execute("SELECT * FROM studies WHERE name=?", (name,)).fetchone()
        if row is None:
            known = ", ".join(s.name for s in self.studies()) or "none"
            raise StoreError(f"{self.path}: no study named {name!r} (studies: {known})")
        return _study(row)

    def items(self, study: Study) -> list[StudyItem]:
        """All items with gold, in creation order. For analysis, never for annotators."""
        with self._connect() as con:
            rows = con.execute(
                "SELECT item_id, category, questions, payload, gold FROM items "
                "WHERE study_id=? ORDER BY rowid",
                (study.id,),
            ).fetchall()
        return [
            StudyItem(
                item_id=r[0],
                category=r[1],
                questions=tuple(Question.from_dict(q) for q in json.loads(r[2])),
                payload=json.loads(r[3]),
                gold=json.loads(r[4]),
            )
            for r in rows
        ]

    # ------------------------------------------------------------------ annotators

    def add_annotator(
        self, study: Study, name: str, order: Sequence[str], role: Role = Role.ANNOTATOR
    ) -> str:
        """Register an annotator (or re-issue their key); returns the new secret access key."""
        if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise StoreError(f"annotator name {name!r}: use letters, digits, '.', '-' and '_'")
        key = new_key()
        with self._write() as con:
            known = {
                r[0] for r in con.execute("SELECT item_id FROM items WHERE study_id=?", (study.id,))
            }
            if set(order) != known or len(order) != len(known):
                raise StoreError(f"annotator {name}: item order must be a permutation of the items")
            con.execute(
                "INSERT INTO annotators(study_id, name, role, key_hash, item_order, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(study_id, name) DO UPDATE SET "
                "key_hash=excluded.key_hash, role=excluded.role",
                (study.id, name, role.value, hash_key(key), json.dumps(list(order)), _now()),
            )
        return key

    def annotators(self, study: Study) -> list[Annotator]:
        with self._connect() as con:
            rows = con.execute(
                "SELECT name, role, item_order FROM annotators WHERE study_id=? "
                "ORDER BY created_at, name",
                (study.id,),
            ).fetchall()
        return [Annotator(study, r[0], Role(r[1]), tuple(json.loads(r[2]))) for r in rows]

    def annotator_by_key(self, key: str) -> Annotator | None:
        with self._connect() as con:
            row = con.execute(
                "SELECT s.*, a.name, a.role, a.item_order FROM annotators a "
                "JOIN studies s ON s.id = a.study_id WHERE a.key_hash=?",
                (hash_key(key),),
            ).fetchone()
        if row is None:
            return None
        return Annotator(_study(row[:8]), row[8], Role(row[9]), tuple(json.loads(row[10])))

    # ------------------------------------------------------------------ annotator-facing

    def item_view(self, annotator: Annotator, position: int) -> StudyItem:
        """The item at ``position`` of this annotator's order, *without* gold."""
        if not 0 <= position < len(annotator.order):
            raise StoreError(f"position {position} outside 0..{len(annotator.order) - 1}")
        item_id = annotator.order[position]
        with self._connect() as con:
            row = con.execute(
                "SELECT category, questions, payload FROM items WHERE study_id=? AND item_id=?",
                (annotator.study.id, item_id),
            ).fetchone()
        if row is None:
            raise StoreError(f"item {item_id} vanished from study {annotator.study.name}")
        return StudyItem(
            item_id=item_id,
            category="",  # the category is a gold-derived stratum: never shown
            questions=tuple(Question.from_dict(q) for q in json.loads(row[1])),
            payload=json.loads(row[2]),
        )

    def own_answers(self, annotator: Annotator, item_id: str | None = None) -> list[Answer]:
        sql = "SELECT * FROM answers WHERE study_id=? AND annotator=?"
        args: tuple[Any, ...] = (annotator.study.id, annotator.name)
        if item_id is not None:
            sql += " AND item_id=?"
            args += (item_id,)
        with self._connect() as con:
            return [_answer(r) for r in con.execute(sql, args).fetchall()]

    def save_answer(
        self,
        annotator: Annotator,
        item_id: str,
        question_id: str,
        label: str,
        seconds: float | None = None,
    ) -> Answer:
        """Insert or revise one answer; validated against the item's question options."""
        if annotator.role is not Role.ANNOTATOR:
            raise StoreError(f"{annotator.name} is an adjudicator, not an annotator")
        if item_id not in annotator.order:
            raise StoreError(f"item {item_id} is not assigned to {annotator.name}")
        now = _now()
        with self._write() as con:
            row = con.execute(
                "SELECT questions FROM items WHERE study_id=? AND item_id=?",
                (annotator.study.id, item_id),
            ).fetchone()
            questions = {q["id"]: q for q in json.loads(row[0])}
            if question_id not in questions:
                raise StoreError(f"item {item_id} has no question {question_id!r}")
            if label not in questions[question_id]["options"]:
                raise StoreError(
                    f"{label!r} is not an option of {question_id} "
                    f"({', '.join(questions[question_id]['options'])})"
                )
            con.execute(
                "INSERT INTO answers(study_id, item_id, question_id, annotator, label, seconds, "
                "answered_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(study_id, item_id, question_id, annotator) DO UPDATE SET "
                "label=excluded.label, seconds=excluded.seconds, answered_at=excluded.answered_at, "
                "revisions=revisions + (answers.label != excluded.label)",
                (annotator.study.id, item_id, question_id, annotator.name, label, seconds, now),
            )
            con.execute(
                "INSERT INTO answer_log(study_id, item_id, question_id, annotator, label, "
                "answered_at) VALUES (?, ?, ?, ?, ?, ?)",
                (annotator.study.id, item_id, question_id, annotator.name, label, now),
            )
            saved = con.execute(
                "SELECT * FROM answers "
                "WHERE study_id=? AND item_id=? AND question_id=? AND annotator=?",
                (annotator.study.id, item_id, question_id, annotator.name),
            ).fetchone()
        return _answer(saved)

    def progress(self, annotator: Annotator) -> Progress:
        with self._connect() as con:
            n_questions = dict(
                (r[0], len(json.loads(r[1])))
                for r in con.execute(
                    "SELECT item_id, questions FROM items WHERE study_id=?", (annotator.study.id,)
                )
            )
            answered: dict[str, int] = dict(
                con.execute(
                    "SELECT item_id, COUNT(*) FROM answers WHERE study_id=? AND annotator=? "
                    "GROUP BY item_id",
                    (annotator.study.id, annotator.name),
                ).fetchall()
            )
        complete = [answered.get(i, 0) >= n_questions[i] for i in annotator.order]
        next_pos = next((p for p, ok in enumerate(complete) if not ok), None)
        return Progress(done=sum(complete), total=len(complete), next_position=next_pos)

    # ------------------------------------------------------------------ analysis

    def answers(self, study: Study) -> list[Answer]:
        with self._connect() as con:
            rows = con.execute(
                "SELECT * FROM answers WHERE study_id=? ORDER BY item_id, question_id, annotator",
                (study.id,),
            ).fetchall()
        return [_answer(r) for r in rows]

    def save_adjudication(
        self,
        study: Study,
        item_id: str,
        question_id: str,
        label: str,
        adjudicator: str,
        note: str = "",
    ) -> Adjudication:
        now = _now()
        with self._write() as con:
            row = con.execute(
                "SELECT questions FROM items WHERE study_id=? AND item_id=?", (study.id, item_id)
            ).fetchone()
            if row is None:
                raise StoreError(f"study {study.name} has no item {item_id!r}")
            options = {q["id"]: q["options"] for q in json.loads(row[0])}
            if question_id not in options:
                raise StoreError(f"item {item_id} has no question {question_id!r}")
            if label not in options[question_id]:
                raise StoreError(f"{label!r} is not an option of {question_id}")
            con.execute(
                "INSERT INTO adjudications(study_id, item_id, question_id, label, adjudicator, "
                "note, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(study_id, item_id, question_id) "
                "DO UPDATE SET label=excluded.label, adjudicator=excluded.adjudicator, "
                "note=excluded.note, decided_at=excluded.decided_at",
                (study.id, item_id, question_id, label, adjudicator, note, now),
            )
        return Adjudication(item_id, question_id, label, adjudicator, note, now)

    def adjudications(self, study: Study) -> list[Adjudication]:
        with self._connect() as con:
            rows = con.execute(
                "SELECT item_id, question_id, label, adjudicator, note, decided_at "
                "FROM adjudications WHERE study_id=?",
                (study.id,),
            ).fetchall()
        return [Adjudication(*r) for r in rows]


def _study(row: Sequence[Any]) -> Study:
    return Study(
        id=int(row[0]),
        name=row[1],
        kind=StudyKind(row[2]),
        created_at=row[3],
        seed=int(row[4]),
        plan=json.loads(row[5]),
        source=json.loads(row[6]),
        instructions=row[7],
    )


def _answer(row: Sequence[Any]) -> Answer:
    # columns: study_id, item_id, question_id, annotator, label, seconds, answered_at, revisions
    return Answer(row[1], row[2], row[3], row[4], row[5], row[6], int(row[7]))


__all__ = [
    "Adjudication",
    "AnnotationStore",
    "Annotator",
    "Answer",
    "Progress",
    "Question",
    "Role",
    "StoreError",
    "Study",
    "StudyItem",
    "StudyKind",
]
