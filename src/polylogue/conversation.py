"""Conversation types: participants, utterances, conversations.

This module is the root of the data flow (corpora -> conversations -> decision points ->
predictions -> metrics -> reports) and imports nothing else from polylogue.

Conventions
-----------
* Times are seconds from the start of the recording; ``None`` when the corpus has no timing.
* ``Utterance.addressees`` is ``None`` when the corpus says nothing about addressing for that
  utterance and a (possibly empty) tuple of participant ids when it is annotated.
* ``Conversation.roster_known`` is True when attendance comes from corpus metadata (e.g. AMI
  ``meetings.xml``). Otherwise a participant only counts as present once they have spoken or
  been annotated as an addressee, so presence never leaks who will speak later.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from polylogue.errors import LocatedInputError, PolylogueInputError, note_input
from polylogue.jsonio import JsonInputError, loads_json

#: The shortest silence (s) that counts at all in timed transcripts (AMI times are in hundredths
#: of a second), so a gap of 0 means "any measurable silence", not "every touching word boundary".
#: Shared by the AMI reader's IPU split and the turn-taking timeline.
MIN_SILENCE_S = 0.005
#: Default silence (s) that makes a pause: the turn-taking timeline's decision points and the
#: AMI reader's IPU split (see docs/benchmark.md for 0/200/500 ms counts).
DEFAULT_GAP_S = 0.2


def effective_gap(gap: float) -> float:
    """The silence a gap of ``gap`` s asks for: at least :data:`MIN_SILENCE_S`, less a hair so
    that times stored in hundredths compare as written."""
    return max(gap, MIN_SILENCE_S) - 1e-9


#: First words that make a multi-word name a description ("The Teacher", "Big Bully"), whose
#: first word is not what anybody is called.
DESCRIPTOR_WORDS = frozenset(
    {
        "the", "a", "an", "another", "her", "his", "my", "our", "their", "some", "big",
        "little", "old", "older", "young", "younger", "fake", "male", "female", "drunken",
        "drunk", "other", "first", "second", "third", "new", "tall", "short", "fat", "cute",
        "stage", "security", "tour", "air", "wedding", "tattoo", "answering", "hypnosis",
        "gym", "kitchen", "sleep", "health", "party", "blackjack", "bass", "matress",
        "mattress", "pbs", "museum", "dry", "cooking", "potential", "whole", "head", "aunt",
        "uncle", "grandma", "grandpa", "cousin",
    }
)  # fmt: skip


#: The longest utterance text (characters) a user transcript or stream may hold. Longer is an
#: error, not a slow minute and gigabytes of features (a 50 MB "utterance" took 1.5 GB).
MAX_UTTERANCE_CHARS = 100_000

#: Bidirectional embedding/override/isolate controls: in a name they make two different names
#: print identically (or reorder what follows), so names holding them are refused.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class BadNameError(PolylogueInputError):
    """A name that cannot be used (bidi or control characters); the reader adds the place."""


#: Characters that show nothing but are not format characters (category Cf, removed too):
#: variation selectors, the combining grapheme joiner, Hangul and Braille fillers, Khmer
#: inherent vowels, Mongolian free variation selectors. In a name they would make a second
#: person who prints like the first.
INVISIBLE_IN_NAMES = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f\u2800\u3164\uffa0"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)


def _visible(c: str) -> bool:
    import unicodedata

    return c not in INVISIBLE_IN_NAMES and unicodedata.category(c) != "Cf"


def clean_name(name: str) -> str:
    """One spelling per name: NFKC, invisible characters removed, white space collapsed.

    ``José`` typed as ``e`` + combining accent, a fullwidth ``Ａｎｎ`` and a name with a
    zero-width space, a variation selector or a Hangul filler in it would otherwise be two
    participants that print identically (NFKC also folds compatibility forms such as
    ligatures). Raises :class:`BadNameError` for bidi controls and control characters (a
    newline in a name can forge an output line). Letters of other scripts that look like
    Latin ones are not changed here (a Cyrillic name stays Cyrillic); :func:`name_key`
    finds them. A name that is only invisible characters is refused too (it would clean to
    the empty name); a blank one cleans to "" (callers say why they need one).
    """
    return _clean(name, "name")


def clean_role(role: str) -> str:
    """A participant's ``role`` as :func:`clean_name` cleans a name, with the same refusals:
    a role is printed and logged like a name (a newline in it forges a line)."""
    return _clean(role, "role")


def _clean(name: str, what: str) -> str:
    import unicodedata

    bad = next((c for c in name if c in BIDI_CONTROLS), None)
    if bad is not None:
        raise BadNameError(f"{what} {name!r} holds the bidi control U+{ord(bad):04X}")
    bad = next((c for c in name if unicodedata.category(c) == "Cc" and c not in "\t "), None)
    if bad is not None:
        raise BadNameError(f"{what} {name!r} holds the control character U+{ord(bad):04X}")
    bad = next((c for c in name if unicodedata.category(c) == "Cs"), None)
    if bad is not None:
        raise BadNameError(f"{what} {name!a} holds the lone surrogate U+{ord(bad):04X}")
    out = " ".join("".join(c for c in unicodedata.normalize("NFKC", name) if _visible(c)).split())
    if not out and name.strip():
        # Different invisible strings would all read as one empty name, one participant.
        raise BadNameError(
            f"{what} {name!a} is only invisible characters (zero-width, format or filler "
            "characters): after Unicode normalisation it is empty"
        )
    return out


@functools.cache
def _confusable_prototypes() -> dict[str, str]:
    """Character -> one representative of its look-alike class (Unicode TR39 data).

    The classes join every single-character pair of Unicode's ``confusables.txt`` (as the
    ``confusable_homoglyphs`` package ships it); the representative is the class's ASCII
    member where it has one (a letter before a digit). Among ASCII letters and digits only
    ``l``/``I``/``1`` and ``O``/``0`` share a class.
    """
    from confusable_homoglyphs.confusables import confusables_data

    parent: dict[str, str] = {}

    def find(x: str) -> str:
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    seen: set[str] = set()
    for ch, entries in confusables_data.items():
        if len(ch) != 1:
            continue
        for e in entries:
            if len(e["c"]) == 1:
                seen.update((ch, e["c"]))
                if (a := find(ch)) != (b := find(e["c"])):
                    parent[a] = b
    members: dict[str, list[str]] = {}
    for c in seen:
        members.setdefault(find(c), []).append(c)
    out: dict[str, str] = {}
    for group in members.values():
        rep = min(group, key=lambda c: (not c.isascii(), not c.isalpha(), ord(c)))
        out.update((c, rep) for c in group)
    return out


def name_key(name: str) -> str:
    """What a name looks like: equal keys are spellings a reader cannot tell apart.

    :func:`clean_name`'s NFKC and invisible characters, case folded, then each character
    replaced by its look-alike class (the TR39 confusables skeleton, on decomposed text): a
    Latin ``Ann`` and one typed with a Cyrillic ``А`` share a key; ``Ann`` and ``Anne``, or
    ``Jose`` and ``José``, do not.
    """
    import unicodedata

    table = _confusable_prototypes()
    text = "".join(c for c in unicodedata.normalize("NFKC", name) if _visible(c))
    text = unicodedata.normalize("NFD", text)
    # A letter of another script that looks like a Latin one becomes that letter before case
    # folding (a Greek capital beta is a B, not a beta); Latin letters keep their case here,
    # so folding never joins l and i through their capitals.
    text = "".join(_latin_look(c, table) for c in text)
    text = unicodedata.normalize("NFD", " ".join(text.casefold().split()))
    return unicodedata.normalize("NFC", "".join(table.get(c, c) for c in text))


def _latin_look(c: str, table: dict[str, str]) -> str:
    if c.isascii():
        return c
    r = table.get(c, c)
    return r if r.isascii() and r.isalpha() else c


class ConversationFormatError(LocatedInputError):
    """Raised for malformed transcripts or conversation files; names the file and record."""


#: Participant role of a pseudo-speaker ("several people at once"): never a target, not a
#: person present.
GROUP_ROLE = "group"


#: What kind of conversation it is (``Conversation.domain``). A deployment is chosen by the
#: same names (its thresholds, and the chat model for ``chat``): one vocabulary, whose corpora
#: ``engine.model.DOMAINS`` maps each name to.
DOMAIN_NAMES: tuple[str, ...] = ("meeting", "tv", "earnings", "chat")
#: Domain values older versions wrote (the Earnings-21 reader's ``earnings_call``), read as
#: today's names with one warning per file.
OLD_DOMAIN_NAMES: dict[str, str] = {"earnings_call": "earnings"}


class DomainError(PolylogueInputError):
    """A domain name that is not one of :data:`DOMAIN_NAMES`."""


def check_domain_name(domain: str | None, source: object = None) -> None:
    """The one check of a domain's name (None: no domain); ``source`` says whose it is."""
    if domain is not None and domain not in DOMAIN_NAMES:
        where = f"{source}: " if source else ""
        raise DomainError(
            f"{where}unknown domain {domain!r}; choose one of {', '.join(DOMAIN_NAMES)}"
        )


def upgrade_domain_name(domain: str, source: str | Path, noted: set[str] | None = None) -> str:
    """A stored domain under today's name: an old one is mapped, with a warning naming
    ``source`` (only the first time for each name in ``noted``, when given: one file)."""
    new = OLD_DOMAIN_NAMES.get(domain)
    if new is None:
        return domain
    if noted is None or domain not in noted:
        note_input(
            "old domain name",
            source,
            "",
            f"domain {domain!r} (written by an older polylogue) read as {new!r}",
        )
    if noted is not None:
        noted.add(domain)
    return new


#: Participant role of a voice that cannot take part: a TV or radio, an answering machine, a
#: recording, an announcer or an off-stage voice (Friends "Tv Doctor", "Machine").
VOICE_ROLE = "voice"
#: Roles that are never a benchmark target and never count as present.
NON_PERSON_ROLES = frozenset({GROUP_ROLE, VOICE_ROLE})


@dataclass(frozen=True, slots=True)
class Participant:
    """A person (or agent) in a conversation.

    ``id`` is the corpus-local identifier used in ``Utterance.speaker`` (an AMI agent letter,
    a Friends character name, an Earnings-21 speaker number). ``name`` is what people call them
    (used for vocative / reference detection); ``aliases`` adds further names or nicknames.
    """

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self  # immutable all the way down: a copy may share it (live forks do)

    id: str
    name: str | None = None
    role: str | None = None
    aliases: tuple[str, ...] = ()

    @property
    def display_name(self) -> str:
        return self.name or self.id

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "role": self.role, "aliases": list(self.aliases)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Participant:
        return cls(
            id=str(d["id"]),
            name=d.get("name"),
            role=d.get("role"),
            aliases=tuple(d.get("aliases") or ()),
        )


class RosterDicts:
    """:meth:`Participant.to_dict` of a roster, rebuilt only when the roster changed.

    A live snapshot is taken after every event; with a 5,000-person roster, rebuilding every
    participant's dict each time cost more than the decision. Participants are immutable, so
    an unchanged roster is the same objects in the same order (checked by identity). The
    dicts returned are shared between calls: read them, do not change them.
    """

    __slots__ = ("_dicts", "_people")

    def __init__(self) -> None:
        self._people: tuple[Participant, ...] = ()
        self._dicts: list[dict[str, Any]] = []

    def __call__(self, participants: dict[str, Participant]) -> list[dict[str, Any]]:
        people = tuple(participants.values())
        if len(people) != len(self._people) or any(
            a is not b for a, b in zip(people, self._people, strict=True)
        ):
            self._people, self._dicts = people, [p.to_dict() for p in people]
        return list(self._dicts)


@dataclass(frozen=True, slots=True)
class Utterance:
    """One unit of talk: a dialogue act, a speaker turn, or a transcript line."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self  # immutable all the way down: a copy may share it (live forks do)

    speaker: str
    text: str
    start: float | None = None
    end: float | None = None
    addressees: tuple[str, ...] | None = None
    dialogue_act: str | None = None
    id: str | None = None
    #: Free-form annotation kept from the source (e.g. a Friends stage note "(to Ross)").
    note: str | None = None
    #: Words (lower case) a speech recognizer wrote with a low confidence: the address
    #: verdict matches one that sounds like a roster name at a looser distance. Live only
    #: (a voice front end sets it), never saved.
    unsure: tuple[str, ...] = ()

    @property
    def duration(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return max(0.0, self.end - self.start)

    def to_dict(self) -> dict[str, Any]:
        # Written out by hand: dataclasses.asdict deep-copies and dominates save time.
        return {
            "speaker": self.speaker,
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "addressees": None if self.addressees is None else list(self.addressees),
            "dialogue_act": self.dialogue_act,
            "id": self.id,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Utterance:
        addr = d.get("addressees")
        start, end = _opt_float(d.get("start")), _opt_float(d.get("end"))
        if start is not None and end is not None and end < start:
            raise ValueError(f"utterance {d.get('id')!r} ends ({end}) before it starts ({start})")
        return cls(
            speaker=str(d["speaker"]),
            text=str(d["text"]),
            start=start,
            end=end,
            addressees=None if addr is None else tuple(str(a) for a in addr),
            dialogue_act=d.get("dialogue_act"),
            id=d.get("id"),
            note=d.get("note"),
        )


@dataclass(frozen=True, slots=True)
class Conversation:
    """An ordered multi-party conversation.

    ``group`` is the unit that must never be split across train/validation/test (an AMI meeting
    series member, a Friends episode, an earnings call); it defaults to the conversation id.
    """

    id: str
    corpus: str
    utterances: tuple[Utterance, ...]
    participants: tuple[Participant, ...]
    domain: str = "meeting"
    group: str | None = None
    roster_known: bool = False
    source: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_domain_name(self.domain, f"conversation {self.id}")
        ids = [p.id for p in self.participants]
        if len(set(ids)) != len(ids):
            raise ValueError(f"conversation {self.id}: duplicate participant ids {ids}")
        known = set(ids)
        for i, u in enumerate(self.utterances):
            if u.speaker not in known:
                raise ValueError(
                    f"conversation {self.id}: utterance {i} speaker {u.speaker!r} "
                    f"is not a participant ({sorted(known)})"
                )

    @property
    def group_id(self) -> str:
        return self.group or self.id

    def participant(self, pid: str) -> Participant:
        for p in self.participants:
            if p.id == pid:
                return p
        raise KeyError(f"conversation {self.id}: unknown participant {pid!r}")

    def __len__(self) -> int:
        return len(self.utterances)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "corpus": self.corpus,
            "domain": self.domain,
            "group": self.group,
            "roster_known": self.roster_known,
            "source": self.source,
            "metadata": self.metadata,
            "participants": [p.to_dict() for p in self.participants],
            "utterances": [u.to_dict() for u in self.utterances],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Conversation:
        meta = d.get("metadata") or {}
        if isinstance(meta, str):  # Parquet stores metadata as a JSON string
            meta = loads_json(meta, "metadata")
        return cls(
            id=str(d["id"]),
            corpus=str(d["corpus"]),
            domain=str(d.get("domain") or "meeting"),
            group=d.get("group"),
            roster_known=bool(d.get("roster_known", False)),
            source=d.get("source"),
            metadata=dict(meta),
            participants=tuple(Participant.from_dict(p) for p in d["participants"]),
            utterances=tuple(Utterance.from_dict(u) for u in d["utterances"]),
        )


def _opt_float(v: Any) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if f != f:
        return None  # NaN (from Parquet/pandas) means unknown
    if math.isinf(f) or f < 0:
        raise ValueError(f"time {v!r} is not a finite time >= 0")
    return f


def participants_from_speakers(utterances: Iterable[Utterance]) -> tuple[Participant, ...]:
    """Participants in order of first appearance (for corpora without a roster)."""
    seen: dict[str, Participant] = {}
    for u in utterances:
        if u.speaker not in seen:
            seen[u.speaker] = Participant(id=u.speaker, name=u.speaker)
    return tuple(seen.values())


def merge_turns(conv: Conversation) -> Conversation:
    """Merge consecutive utterances of the same speaker into one turn.

    Addressees are united (None only when every merged part is unannotated); the dialogue-act
    label of a merged turn is the last part's label, since that is what precedes the pause.
    """
    merged: list[Utterance] = []
    for u in conv.utterances:
        if merged and merged[-1].speaker == u.speaker:
            prev = merged[-1]
            if prev.addressees is None and u.addressees is None:
                addr: tuple[str, ...] | None = None
            else:
                addr = tuple(dict.fromkeys((prev.addressees or ()) + (u.addressees or ())))
            merged[-1] = Utterance(
                speaker=u.speaker,
                text=f"{prev.text} {u.text}".strip(),
                start=prev.start if prev.start is not None else u.start,
                end=u.end if u.end is not None else prev.end,
                addressees=addr,
                dialogue_act=u.dialogue_act,
                id=prev.id,
                note=" ".join(n for n in (prev.note, u.note) if n) or None,
            )
        else:
            merged.append(u)
    return Conversation(
        id=conv.id,
        corpus=conv.corpus,
        utterances=tuple(merged),
        participants=conv.participants,
        domain=conv.domain,
        group=conv.group,
        roster_known=conv.roster_known,
        source=conv.source,
        metadata={**conv.metadata, "unit": "turn"},
    )


# ----------------------------------------------------------------------------- I/O


def write_jsonl(conversations: Iterable[Conversation], path: str | Path) -> int:
    """Write one conversation per line; returns the count."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for c in conversations:
            f.write(json.dumps(c.to_dict(), ensure_ascii=False) + "\n")
            n += 1
    return n


def read_jsonl(path: str | Path) -> Iterator[Conversation]:
    """Read conversations written by :func:`write_jsonl` (older domain names upgraded)."""
    noted: set[str] = set()
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError:
                raise ConversationFormatError(path, f"line {lineno}", "not UTF-8 text") from None
            if not line.strip():
                continue
            where = f"line {lineno}"
            try:
                d = loads_json(line, path, where)
                if isinstance(d, dict) and isinstance(d.get("domain"), str):
                    d["domain"] = upgrade_domain_name(d["domain"], path, noted)
                yield Conversation.from_dict(d)
            except JsonInputError as exc:
                raise ConversationFormatError(path, where, exc.message) from None
            except (KeyError, TypeError, ValueError, OverflowError, DomainError) as exc:
                raise ConversationFormatError(path, where, str(exc)) from exc


def write_parquet(
    conversations: Sequence[Conversation],
    path: str | Path,
    dicts: Sequence[dict[str, Any]] | None = None,
) -> int:
    """Write conversations as Parquet, one row per conversation with nested lists.

    ``dicts`` may pass precomputed ``to_dict()`` results to avoid serialising twice.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for d in dicts if dicts is not None else [c.to_dict() for c in conversations]:
        d = {**d, "metadata": json.dumps(d["metadata"], ensure_ascii=False)}
        rows.append(d)
    table = pa.Table.from_pylist(rows, schema=_parquet_schema())
    pq.write_table(table, path)
    return len(rows)


def read_parquet(
    path: str | Path, ids: Collection[str] | None = None, noted: set[str] | None = None
) -> list[Conversation]:
    """Conversations of a Parquet file; only those with an id in ``ids`` when given.

    Domain names of older versions are upgraded with one warning (per name in ``noted``, a
    set the caller may share between the reads of one folder)."""
    import pyarrow.parquet as pq

    try:
        if ids is None:
            rows = pq.read_table(path).to_pylist()
        else:
            rows = pq.read_table(path, filters=[("id", "in", sorted(ids))]).to_pylist()
    except Exception as exc:  # pyarrow raises several types for corrupt files
        detail = " ".join(str(exc).split())  # pyarrow's messages span lines
        raise ConversationFormatError(path, "", f"not a readable Parquet file: {detail}") from exc
    out = []
    noted = set() if noted is None else noted
    for i, r in enumerate(rows):
        try:
            if isinstance(r.get("domain"), str):
                r["domain"] = upgrade_domain_name(r["domain"], path, noted)
            out.append(Conversation.from_dict(r))
        except (KeyError, TypeError, ValueError, DomainError) as exc:
            raise ConversationFormatError(path, f"row {i}", str(exc)) from exc
    return out


def _parquet_schema() -> Any:
    import pyarrow as pa

    participant = pa.struct(
        [
            ("id", pa.string()),
            ("name", pa.string()),
            ("role", pa.string()),
            ("aliases", pa.list_(pa.string())),
        ]
    )
    utterance = pa.struct(
        [
            ("speaker", pa.string()),
            ("text", pa.string()),
            ("start", pa.float64()),
            ("end", pa.float64()),
            ("addressees", pa.list_(pa.string())),
            ("dialogue_act", pa.string()),
            ("id", pa.string()),
            ("note", pa.string()),
        ]
    )
    return pa.schema(
        [
            ("id", pa.string()),
            ("corpus", pa.string()),
            ("domain", pa.string()),
            ("group", pa.string()),
            ("roster_known", pa.bool_()),
            ("source", pa.string()),
            ("metadata", pa.string()),
            ("participants", pa.list_(participant)),
            ("utterances", pa.list_(utterance)),
        ]
    )
