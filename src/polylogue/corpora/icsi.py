"""ICSI Meeting Corpus reader, from the QMSum release ("Academic" domain JSON).

Each ``data/Academic/all/{meeting}.json`` holds ``meeting_transcripts``: an ordered list of
``{"speaker": "PhD A", "content": "OK , we 're on ."}`` turns without timestamps. QMSum replaced
ICSI speaker ids by role-style labels; names in the talk were anonymised, so a participant has
an id and a role but no name, and there is no roster (``roster_known=False``).

Text is cleaned minimally: QMSum's event tokens (``{disfmarker}``, ``{vocalsound}``,
``{pause}``, ``{comment}``, ``{nonvocalsound}``) and ICSI's unintelligible-speech marks (``@``)
are removed, then punctuation and clitics are re-attached (``we 're`` -> ``we're``). Turns
left without any word are dropped; the remaining utterances keep their QMSum turn index in
``id`` (``Bed002.t17``) so QMSum topic and query spans still point at them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from polylogue.conversation import Conversation, ConversationFormatError, Participant, Utterance
from polylogue.corpora._detokenize import detokenize, has_word
from polylogue.corpora._text import load_json_file

#: QMSum's official split of the ICSI meetings (its README); the test meetings are reserved
#: in the shared copy, but the split is kept so other copies are labelled correctly.
QMSUM_SPLITS: dict[str, tuple[str, ...]] = {
    "train": (
        "Bdb001",
        "Bed004",
        "Bed005",
        "Bed006",
        "Bed009",
        "Bed011",
        "Bed012",
        "Bed013",
        "Bed014",
        "Bed017",
        "Bmr003",
        "Bmr007",
        "Bmr009",
        "Bmr010",
        "Bmr011",
        "Bmr013",
        "Bmr015",
        "Bmr016",
        "Bmr018",
        "Bmr019",
        "Bmr020",
        "Bmr024",
        "Bmr025",
        "Bmr027",
        "Bro003",
        "Bro007",
        "Bro008",
        "Bro010",
        "Bro012",
        "Bro013",
        "Bro014",
        "Bro016",
        "Bro017",
        "Bro018",
        "Bro021",
        "Bro023",
        "Bro024",
        "Bro025",
        "Bro026",
        "Bro028",
        "Buw001",
    ),
    "val": (
        "Bed002",
        "Bed010",
        "Bed015",
        "Bmr005",
        "Bmr012",
        "Bmr026",
        "Bro005",
        "Bro011",
        "Bro022",
    ),
    "test": (
        "Bed003",
        "Bed008",
        "Bed016",
        "Bmr006",
        "Bmr014",
        "Bmr023",
        "Bro004",
        "Bro019",
        "Bro027",
    ),
}
_SPLIT_OF = {m: split for split, ms in QMSUM_SPLITS.items() for m in ms}

_EVENT = re.compile(r"^\{[a-z]+\}$")  # {disfmarker}, {vocalsound}, ...
_SPEAKER = re.compile(r"^(?P<role>.+?)\s+(?P<tag>[A-Z])$")  # "PhD A", "Professor C"

_TRANSCRIPTS = Path("data") / "Academic" / "all"


def icsi_meetings(folder: str | Path) -> list[str]:
    """Meetings present in this copy, sorted."""
    return sorted(p.stem for p in _transcript_dir(folder).glob("*.json"))


def clean_icsi_text(content: str) -> str:
    """Drop event tokens and unintelligible marks, then detokenize (empty if no words)."""
    tokens = [t for t in content.split() if not _EVENT.match(t) and set(t) != {"@"}]
    if not any(has_word(t) for t in tokens):
        return ""
    return detokenize(tokens)


def speaker_role(label: str) -> str | None:
    """The role word of a QMSum speaker label (``"PhD A"`` -> ``"PhD"``), else None."""
    m = _SPEAKER.match(label.strip())
    return m["role"] if m else None


def read_icsi(folder: str | Path, meetings: Iterable[str] | None = None) -> Iterator[Conversation]:
    """Yield one conversation per ICSI meeting (sorted by id), utterances in transcript order.

    ``folder`` is the corpus folder holding ``data/Academic/all``. Participants appear in order
    of first speech: ``id`` = QMSum label (``"PhD A"``), ``role`` = its role word, ``name=None``.
    ``group`` is the meeting id. ``metadata`` has the QMSum ``split`` (train/val/test), the
    research ``series`` (Bed/Bmr/Bro/...), the QMSum ``topics`` with their turn-index spans and
    counts of raw and dropped turns.

    Raises :class:`ConversationFormatError` for malformed JSON or records and ``ValueError``
    for a requested meeting that this copy does not have.
    """
    base = _transcript_dir(folder)
    present = icsi_meetings(folder)
    if isinstance(meetings, str):  # one id, not an iterable of characters
        meetings = [meetings]
    wanted = present if meetings is None else list(dict.fromkeys(meetings))
    missing = [m for m in wanted if m not in present]
    if missing:
        raise ValueError(f"ICSI meeting(s) not in {base}: {', '.join(missing)}")
    for meeting in wanted:
        yield _read_meeting(base / f"{meeting}.json", meeting)


def _read_meeting(path: Path, meeting: str) -> Conversation:
    try:
        doc = load_json_file(path)
    except OSError as exc:
        raise ConversationFormatError(path, "", f"cannot read file: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("meeting_transcripts"), list):
        raise ConversationFormatError(path, "", "expected an object with 'meeting_transcripts'")

    utterances: list[Utterance] = []
    participants: dict[str, Participant] = {}
    raw = doc["meeting_transcripts"]
    for i, turn in enumerate(raw):
        where = f"meeting_transcripts[{i}]"
        if not isinstance(turn, dict):
            raise ConversationFormatError(path, where, "turn is not an object")
        speaker, content = turn.get("speaker"), turn.get("content")
        if not isinstance(speaker, str) or not speaker.strip():
            raise ConversationFormatError(path, where, "missing or empty 'speaker'")
        if not isinstance(content, str):
            raise ConversationFormatError(path, where, "missing or non-string 'content'")
        text = clean_icsi_text(content)
        if not text:
            continue
        speaker = speaker.strip()
        if speaker not in participants:
            participants[speaker] = Participant(id=speaker, name=None, role=speaker_role(speaker))
        utterances.append(Utterance(speaker=speaker, text=text, id=f"{meeting}.t{i}"))

    return Conversation(
        id=meeting,
        corpus="icsi",
        utterances=tuple(utterances),
        participants=tuple(participants.values()),
        domain="meeting",
        group=meeting,
        roster_known=False,
        source=str(path),
        metadata={
            "unit": "turn",
            "split": _SPLIT_OF.get(meeting),
            "series": meeting[:3],  # ICSI meeting type: Bed, Bmr, Bro, Bdb, Buw
            "raw_turns": len(raw),
            "dropped_turns": len(raw) - len(utterances),
            "topics": _topics(doc.get("topic_list"), path),
        },
    )


def _topics(value: Any, path: Path) -> list[dict[str, Any]]:
    """QMSum topics as ``{"topic": str, "spans": [[first, last], ...]}`` (raw turn indices)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConversationFormatError(path, "topic_list", "expected a list")
    out = []
    for i, t in enumerate(value):
        try:
            spans = [[int(a), int(b)] for a, b in t["relevant_text_span"]]
            out.append({"topic": str(t["topic"]), "spans": spans})
        except (KeyError, TypeError, ValueError) as exc:
            raise ConversationFormatError(path, f"topic_list[{i}]", f"bad topic: {exc}") from exc
    return out


def _transcript_dir(folder: str | Path) -> Path:
    base = Path(folder)
    for cand in (base / _TRANSCRIPTS, base):
        if cand.is_dir() and any(cand.glob("*.json")):
            return cand
    raise FileNotFoundError(f"{base} holds no QMSum ICSI transcripts (expected {_TRANSCRIPTS})")


__all__ = ["QMSUM_SPLITS", "clean_icsi_text", "icsi_meetings", "read_icsi", "speaker_role"]
