"""Users' own transcripts: JSONL, CSV, WebVTT and plain "Speaker: text" lines.

Every format becomes one :class:`Conversation` (``corpus="user"``). Malformed input raises
:class:`ConversationFormatError` naming the file and the line (or cue) at fault.

JSONL (``.jsonl``, ``.ndjson``)
    One utterance per line::

        {"speaker": "Alice", "text": "Dave, can you take that?", "start": 12.5, "end": 14.0,
         "addressee": "Dave", "id": "u7"}

    ``start``/``end``/``addressee``/``id`` are optional; ``addressee`` is a name or a list
    (``[]`` means "annotated: nobody in particular"; leaving it out means "not annotated").
    The first line may instead be a header::

        {"participants": [{"id": "alice", "name": "Alice", "role": "pm"}, ...],
         "id": "standup-2024-05-02", "domain": "meeting"}

    With a header the roster is known (``roster_known=True``) and speakers/addressees may be
    written as a participant's id, name or alias. Without one, participants are the speakers
    in order of first appearance and an addressee must be someone who speaks in the file.
CSV (``.csv``)
    A header row with ``speaker`` and ``text`` and optionally ``start``, ``end``,
    ``addressee`` (several separated by ``;``) and ``id``.
WebVTT (``.vtt``)
    Cue times become ``start``/``end``. The speaker comes from a voice span
    ``<v Alice>...</v>``; a cue with several voice spans gives one utterance per span, all with
    the cue's times. A cue without a voice span may start with ``Alice: `` (the Zoom style);
    otherwise it is an error naming the cue, since guessing the previous speaker would silently
    mislabel overlapping talk.
SubRip (``.srt``)
    Numbered cues (``1`` / ``00:00:01,000 --> 00:00:02,500`` / text); the speaker as in WebVTT
    (``Alice: text`` or a voice span).
Text (``.txt``)
    One ``Speaker: text`` line or JSONL object per line, optionally prefixed with a time
    ``[00:01:02.5]`` or span ``[12.0 --> 14.5]``; the same parser as
    :func:`parse_transcript_line`, which ``polylogue decide`` uses for streaming stdin.

Times are seconds (``12.5``) or clock times ``HH:MM:SS(.mmm)`` / ``MM:SS(.mmm)``.

Conversation / scene breaks
    One file may hold several conversations (a day of meetings, a chat export with quiet
    hours, TV scenes). A break before an utterance is marked by ``"break": true`` on its JSONL
    record (or a line ``{"break": true}`` on its own), a true ``break`` column in CSV
    (``1``/``true``/``yes``/``x``), a ``NOTE break`` block in WebVTT (also ``NOTE scene break``,
    ``NOTE conversation break``, ``NOTE new conversation``) and a ``---`` line in text files.
    :func:`read_transcript` keeps one conversation and lists the break positions in
    ``metadata["breaks"]``; :func:`polylogue.corpora.segments.read_transcript_parts` cuts
    there (and optionally after long silences).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from polylogue.conversation import (
    MAX_UTTERANCE_CHARS,
    BadNameError,
    Conversation,
    ConversationFormatError,
    Participant,
    Utterance,
    check_domain_name,
    clean_name,
    clean_role,
    name_key,
    upgrade_domain_name,
)
from polylogue.corpora._text import csv_records, decode_line, loads_json, read_text, split_lines
from polylogue.errors import input_notices, note_input

CORPUS = "user"

#: format name -> file suffixes it is inferred from
TRANSCRIPT_FORMATS: dict[str, tuple[str, ...]] = {
    "jsonl": (".jsonl", ".ndjson"),
    "csv": (".csv",),
    "vtt": (".vtt",),
    "srt": (".srt",),
    "txt": (".txt",),
}

_CLOCK = re.compile(r"^(?:(?P<h>\d+):)?(?P<m>\d{1,2}):(?P<s>\d{1,2}(?:[.,]\d+)?)$")
_VTT_TIMING = re.compile(r"^(?P<start>\S+)\s+-->\s+(?P<end>\S+)")
# A line that starts a cue: a time (digits, ':', '.', ',') then '-->'. Inside a cue it starts
# the next one (a blank line was left out); '[12.0 --> 14.5] Alice: hi' is a text-line span.
_CUE_TIMING = re.compile(r"^\d[\d:.,]*\s+-->\s+\S")
# SubRip/ASS override tags such as {\an8} (position) or {\i1}: formatting, not words.
_ASS_TAG = re.compile(r"\{\\[^{}]*\}")

# A cue tag (<v Alice>, <b>, <c.loud>, <00:01.000>) cannot contain '<' or '>', so a scan for
# one stops at the next '<': an unclosed '<' costs only the text up to the next one. (Allowing
# '<' inside made every unclosed '<v a' rescan to the end of the cue: quadratic time.)
_TAG = re.compile(r"<[^<>]*>")
_SPEAKER_LINE = re.compile(r"^(?P<speaker>[^:{}\[\]<>]{1,80}?)\s*:\s+(?P<text>\S.*)$")
_TIME_PREFIX = re.compile(r"^\[(?P<start>[^\]\s-]+)(?:\s*(?:-->|-)\s*(?P<end>[^\]\s]+))?\]\s*")


@dataclass(frozen=True, slots=True)
class _RawUtterance:
    """An utterance as written, before names are resolved to participant ids."""

    where: str
    speaker: str
    text: str
    start: float | None
    end: float | None
    addressees: tuple[str, ...] | None
    id: str | None
    #: A new conversation/scene starts with this utterance (see "Conversation / scene breaks").
    scene_break: bool = False


# ----------------------------------------------------------------------------- public API


def infer_format(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    for fmt, suffixes in TRANSCRIPT_FORMATS.items():
        if suffix in suffixes:
            return fmt
    known = ", ".join(s for ss in TRANSCRIPT_FORMATS.values() for s in ss)
    raise ConversationFormatError(
        path,
        "",
        f"cannot infer the transcript format from suffix {suffix!r} (known: {known}); "
        f"give it with --format {'|'.join(TRANSCRIPT_FORMATS)}",
    )


def read_transcript(
    path: str | Path,
    format: str | None = None,
    conversation_id: str | None = None,
    domain: str | None = None,
) -> Conversation:
    """Read a user transcript (format from the suffix unless given) into a Conversation.

    ``domain`` (``meeting``, ``chat``, ...) overrides a JSONL header's ``domain``; without
    either it is ``meeting``. It matters for chat exports: a chat message is a decision moment
    whatever its timestamps say (minute-resolution chat times would otherwise read as speech
    with no pause between messages, see :func:`polylogue.turntaking.points.timing_mode`).
    """
    path = Path(path)
    fmt = format or infer_format(path)
    if fmt not in TRANSCRIPT_FORMATS:
        raise ValueError(
            f"unknown transcript format {fmt!r}; known: {', '.join(TRANSCRIPT_FORMATS)}"
        )
    with input_notices():
        return _read_transcript(path, fmt, conversation_id, domain)


def _read_transcript(
    path: Path, fmt: str, conversation_id: str | None, domain: str | None
) -> Conversation:
    content = read_text(path)
    header: dict[str, Any] | None = None
    if fmt == "jsonl":
        header, raw = _parse_jsonl(content, path)
    elif fmt == "csv":
        raw = _parse_csv(content, path)
    elif fmt == "vtt":
        raw = _parse_vtt(content, path)
    elif fmt == "srt":
        raw = _parse_srt(content, path)
    else:
        header, raw = _parse_txt(content, path)
    participants = _header_participants(header, path) if header else None
    if not raw:
        raise ConversationFormatError(path, "", "empty transcript: no utterances")
    conv_id = conversation_id or (header or {}).get("id") or path.stem
    declared = domain is not None or bool((header or {}).get("domain"))
    if domain is None:  # a header's domain may be an older polylogue's name
        domain = upgrade_domain_name(str((header or {}).get("domain") or "meeting"), path)
    check_domain_name(domain, path)
    conv = _build(raw, participants, str(conv_id), domain, path, fmt)
    # Whether the input said what kind of conversation it is (decide uses it when --domain
    # does not; otherwise the deployment's default applies).
    conv.metadata[DOMAIN_DECLARED] = declared
    return conv


#: ``Conversation.metadata`` key: the transcript (or the caller) declared its domain.
DOMAIN_DECLARED = "domain_declared"


def declared_domain(conv: Conversation) -> str | None:
    """The domain a transcript declares (its header's ``domain``), or None when it says none."""
    return conv.domain if conv.metadata.get(DOMAIN_DECLARED) else None


#: The role (or speaker label) that marks an earnings call: the conference operator who
#: opens the call and hands questions to the analysts (Earnings-21's reader gives it).
OPERATOR = "operator"


def inferred_domain(
    participants: Iterable[Participant], speakers: Iterable[str] = ()
) -> str | None:
    """The domain a transcript that declares none shows through its people: ``earnings``
    where a participant's role, id or name, or a speaker's label, is ``Operator`` (a meeting
    has no conference operator); None when nothing shows one."""
    labels = [x for p in participants for x in (p.role, p.id, p.name) if x]
    if any(x.strip().casefold() == OPERATOR for x in [*labels, *speakers]):
        return "earnings"
    return None


def transcript_domain(conv: Conversation) -> tuple[str | None, str]:
    """``(domain, source)`` for a deployment: what ``conv`` declares (``declared``), else what
    it shows (``inferred``: the domain a polylogue corpus reader gave it, or
    :func:`inferred_domain`), else ``(None, "default")``."""
    declared = declared_domain(conv)
    if declared is not None:
        return declared, "declared"
    if conv.corpus != CORPUS:  # a reader's conversation: its corpus's domain
        return conv.domain, "inferred"
    shown = inferred_domain(conv.participants, dict.fromkeys(u.speaker for u in conv.utterances))
    return (shown, "inferred") if shown is not None else (None, "default")


def header_domain(line: str, source: str | Path = "<stdin>", lineno: int = 1) -> str | None:
    """The ``domain`` a ``{"participants": [...], "domain": ...}`` header line declares, or
    None (no header, or no domain in it); an unknown domain is an error naming it."""
    s = decode_line(line, source, lineno).lstrip("\ufeff").strip()
    if not s.startswith("{"):
        return None
    try:
        obj = loads_json(s, source, f"line {lineno}")
    except ConversationFormatError:
        return None
    if not isinstance(obj, dict) or "participants" not in obj or not obj.get("domain"):
        return None
    domain = upgrade_domain_name(str(obj["domain"]), source)
    check_domain_name(domain, f"{source} line {lineno}")
    return domain


def parse_transcript_line(
    line: str, lineno: int, source: str | Path = "<stdin>"
) -> Utterance | None:
    """One streamed line -> an Utterance, or ``None`` for a blank/``#`` comment line.

    Accepts ``Speaker: text`` (optionally ``[start]`` / ``[start --> end]`` first) and JSONL
    utterance objects. Addressee names are kept as written (there is no roster to resolve them
    against); a participants header line is an error here, see :func:`parse_header_line`.
    """
    raw = _parse_line(decode_line(line, source, lineno), lineno, source)
    if raw is None or isinstance(raw, dict):
        if isinstance(raw, dict):
            raise ConversationFormatError(
                source,
                f"line {lineno}",
                "a participants header is not an utterance (use parse_header_line)",
            )
        return None
    return _utterance(raw)


def parse_header_line(
    line: str, source: str | Path = "<stdin>", lineno: int = 1
) -> tuple[Participant, ...] | None:
    """Participants from a ``{"participants": [...]}`` header line, else ``None``."""
    s = decode_line(line, source, lineno).lstrip("\ufeff").strip()
    if not s.startswith("{"):
        return None
    try:
        obj = loads_json(s, source, f"line {lineno}")
    except ConversationFormatError:
        return None  # not a header: parse_transcript_line reports the line
    if not isinstance(obj, dict) or "participants" not in obj:
        return None
    return _header_participants(obj, source)


def parse_time(value: Any, path: str | Path, where: str, field_name: str) -> float | None:
    """Seconds from a number, a numeric string or ``[HH:]MM:SS(.mmm)``; ``None`` if empty."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ConversationFormatError(path, where, f"{field_name} must be a time, not {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        s = str(value).strip()
        m = _CLOCK.match(s)
        try:
            if m:
                secs = float(m["s"].replace(",", "."))
                if secs >= 60 or (m["h"] is not None and int(m["m"]) >= 60):
                    note_input(
                        "clock over 59",
                        path,
                        where,
                        f"{field_name} {s!r} has a minutes or seconds field over 59 "
                        "(read as that many minutes or seconds)",
                    )
                seconds = int(m["h"] or 0) * 3600 + int(m["m"]) * 60 + secs
            else:
                seconds = float(s)
        except ValueError:
            raise ConversationFormatError(
                path, where, f"{field_name} {value!r} is not seconds or HH:MM:SS(.mmm)"
            ) from None
    if not math.isfinite(seconds) or seconds < 0:  # inf, 1e999, NaN pass float()
        raise ConversationFormatError(
            path, where, f"{field_name} {value!r} must be a finite non-negative time"
        )
    return seconds


# ----------------------------------------------------------------------------- formats


def _parse_jsonl(content: str, path: Path) -> tuple[dict[str, Any] | None, list[_RawUtterance]]:
    header: dict[str, Any] | None = None
    out: list[_RawUtterance] = []
    seen_content = False
    pending_break = False
    for lineno, line in enumerate(split_lines(content), 1):
        if not line.strip():
            continue
        where = f"line {lineno}"
        obj = loads_json(line, path, where)
        if not isinstance(obj, dict):
            raise ConversationFormatError(path, where, "expected a JSON object")
        if "participants" in obj:
            if seen_content:
                raise ConversationFormatError(
                    path, where, "the participants header must be the first line"
                )
            header = obj
        elif _is_break_marker(obj):
            pending_break = True
        else:
            record = _from_record(obj, path, where)
            if pending_break:
                record = replace(record, scene_break=True)
                pending_break = False
            out.append(record)
        seen_content = True
    return header, out


def _parse_csv(content: str, path: Path) -> list[_RawUtterance]:
    # csv_records reads with newline="", not str.splitlines(), which also breaks at \x1c-\x1e,
    # \x85 and U+2028 inside chat messages.
    records = csv_records(path, content)
    first = next(records, None)
    fields = [f.strip().lower() for f in first[1]] if first else []
    if not fields:
        raise ConversationFormatError(path, "", "empty transcript: no header row")
    repeated = sorted({f for f in fields if f and fields.count(f) > 1})
    if repeated:
        raise ConversationFormatError(
            path, "line 1", f"CSV header repeats the column(s) {repeated}: which one to read?"
        )
    missing = {"speaker", "text"} - set(fields)
    if missing:
        raise ConversationFormatError(
            path,
            "line 1",
            f"CSV header must have speaker and text columns; missing {sorted(missing)}",
        )
    out = []
    pending_break = False
    for lineno, cells in records:
        where = f"line {lineno}"
        if len(cells) > len(fields):
            raise ConversationFormatError(
                path, where, f"more cells than header columns ({len(cells)} > {len(fields)})"
            )
        if not any(c.strip() for c in cells):
            continue
        row = dict(zip(fields, cells, strict=False))  # missing trailing cells are empty
        if "break" in row:
            flag = _csv_flag(row.pop("break"), path, where)
            if (
                flag
                and not (row.get("speaker") or "").strip()
                and not (row.get("text") or "").strip()
            ):
                pending_break = True  # a marker row between two conversations
                continue
            pending_break = pending_break or flag
        record: dict[str, Any] = dict(row)
        addr = row.get("addressee", "").strip() if "addressee" in fields else None
        if addr is not None:
            record["addressee"] = (
                [a.strip() for a in addr.split(";") if a.strip()] if addr else None
            )
        raw = _from_record(record, path, where)
        out.append(replace(raw, scene_break=True) if pending_break else raw)
        pending_break = False
    return out


def is_vtt_signature(line: str) -> bool:
    """``WEBVTT`` alone or followed by a space or tab and a title (not ``WEBVTTX``)."""
    return line == "WEBVTT" or line.startswith(("WEBVTT ", "WEBVTT\t"))


def _parse_vtt(content: str, path: Path) -> list[_RawUtterance]:
    lines = split_lines(content)
    if not lines or not is_vtt_signature(lines[0].rstrip()):
        raise ConversationFormatError(path, "line 1", "a WebVTT file must start with 'WEBVTT'")
    return _parse_cues(lines, _after_vtt_header(lines), path)


def _after_vtt_header(lines: Sequence[str]) -> int:
    """Index of the first line after the signature's header block (``Kind: captions``,
    ``Language: en`` as YouTube writes them), which ends at a blank line or a cue timing."""
    i = 1
    while i < len(lines) and lines[i].strip() and "-->" not in lines[i]:
        i += 1
    return i


def _parse_srt(content: str, path: Path) -> list[_RawUtterance]:
    """SubRip: numbered cues ``1`` / ``00:00:01,000 --> 00:00:02,500`` / ``Alice: text``."""
    return _parse_cues(split_lines(content), 0, path)


def _parse_cues(lines: list[str], first: int, path: str | Path) -> list[_RawUtterance]:
    out: list[_RawUtterance] = []
    pending_break = False
    for block_start, block in _blocks(lines, first):
        is_break, raws = _cue_block(block, block_start, path)
        pending_break = pending_break or is_break
        if raws:
            out.append(replace(raws[0], scene_break=True) if pending_break else raws[0])
            out.extend(raws[1:])
            pending_break = False
    return out


def _blocks(lines: Sequence[str], first: int) -> Iterator[tuple[int, list[str]]]:
    """``(index of its first line, lines)`` per blank-line-separated block from ``first``."""
    i = first
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        block_start = i
        block: list[str] = []
        while i < len(lines) and lines[i].strip():
            if _starts_next_cue(block, lines[i]):
                carried = _cue_number_tail(block)
                yield block_start, block[: len(block) - len(carried)]
                block_start, block = i - len(carried), carried
            block.append(lines[i])
            i += 1
        yield block_start, block


def _starts_next_cue(block: Sequence[str], line: str) -> bool:
    """A timing line after the block's own: the blank line before the next cue is missing."""
    if not _CUE_TIMING.match(line.strip()):
        return False
    return any("-->" in b for b in block[:2])


def _cue_number_tail(block: Sequence[str]) -> list[str]:
    """The next cue's number left at the end of ``block`` (``2`` before its timing line)."""
    own = next(k for k, b in enumerate(block[:2]) if "-->" in b)
    if len(block) > own + 1 and block[-1].strip().isdigit():
        return [block[-1]]
    return []


def _cue_block(
    block: Sequence[str], block_start: int, path: str | Path
) -> tuple[bool, list[_RawUtterance]]:
    """One WebVTT/SRT block (``block_start``: 0-based line index) -> (a break note?, cues)."""
    first = block[0].strip()
    if first.startswith("NOTE") and "-->" not in first:
        return _VTT_BREAK.match(" ".join(block)) is not None, []
    if first.startswith(("STYLE", "REGION")) and "-->" not in first:
        return False, []
    timing_idx = 0 if "-->" in block[0] else 1
    if timing_idx >= len(block) or "-->" not in block[timing_idx]:
        raise ConversationFormatError(
            path, f"line {block_start + 1}", "cue without a 'start --> end' line"
        )
    cue_name = block[0].strip() if timing_idx == 1 else f"at line {block_start + timing_idx + 1}"
    where = f"cue {cue_name!r} (line {block_start + timing_idx + 1})"
    m = _VTT_TIMING.match(block[timing_idx].strip())
    if m is None:
        raise ConversationFormatError(path, where, "bad cue timing line")
    start = parse_time(m["start"], path, where, "cue start")
    end = parse_time(m["end"], path, where, "cue end")
    payload = "\n".join(block[timing_idx + 1 :])
    if not _vtt_text(payload):
        return False, []  # an empty cue is valid (a caption cleared): nobody spoke
    spans = _voice_spans(payload) or _speaker_lines(block[timing_idx + 1 :], path, where)
    cue_id = block[0].strip() if timing_idx == 1 else None
    out = []
    for k, (speaker, text) in enumerate(spans):
        uid = None if cue_id is None else cue_id if len(spans) == 1 else f"{cue_id}.{k + 1}"
        record = {"speaker": speaker, "text": text, "start": start, "end": end, "id": uid}
        out.append(_from_record(record, path, where))
    return False, out


def _speaker_lines(lines: Sequence[str], path: str | Path, where: str) -> list[tuple[str, str]]:
    """``(speaker, text)`` of a cue without voice spans: ``Name: text``, or one turn per
    SubRip dialogue dash (``- Alice: ...`` / ``- Bob: ...``, each on its own line)."""
    turns: list[str] = []
    lines = [_ASS_TAG.sub("", line) for line in lines]  # {\an8}- Alice: ... is dashed too
    dashed = lines[0].lstrip().startswith("-")
    first = _SPEAKER_LINE.match(_vtt_text(lines[0]))
    for line in lines:
        stripped = line.strip()
        if dashed and stripped.startswith("-"):
            turns.append(stripped[1:])
        elif turns and not dashed and first is not None and _next_speaker(line, first):
            turns.append(line)  # "Ann: ..." then "Bo: ...": two people in one cue
        elif turns:
            turns[-1] += "\n" + line
        else:
            turns.append(line)
    out = []
    for turn in turns:
        sm = _SPEAKER_LINE.match(_vtt_text(turn))
        if sm is None:
            raise ConversationFormatError(
                path,
                where,
                "cue has no speaker: use a voice span <v Name>text</v> or 'Name: text'"
                + (" on every dialogue dash" if dashed else ""),
            )
        out.append((sm["speaker"].strip(), sm["text"]))
    return out


def _next_speaker(line: str, first: re.Match[str]) -> bool:
    """Does a later line of a cue that opened with ``Name: text`` start another speaker?

    Yes when it is written the same way: ``Label: text`` with a label of at most four words,
    capitalised like the cue's first label (a wrapped caption line rarely looks like that).
    """
    m = _SPEAKER_LINE.match(_vtt_text(line))
    if m is None:
        return False
    label = m["speaker"].strip()
    if not label or len(label.split()) > 4:
        return False
    opener = first["speaker"].strip()
    return label[:1].isupper() or not opener[:1].isupper()


def stream_cues(
    lines: Iterable[str], fmt: str, source: str | Path = "<stdin>"
) -> Iterator[tuple[int, Utterance]]:
    """``(line number, utterance)`` per cue of a streamed WebVTT (``fmt="vtt"``) or SRT file.

    A cue is answered as soon as the blank line after it arrives (or the stream ends). A WebVTT
    stream must start with ``WEBVTT``; errors name the line as :func:`read_transcript` does.
    """
    block: list[str] = []
    block_start = 0
    seen_header = fmt != "vtt"

    def flush() -> Iterator[tuple[int, Utterance]]:
        if block:
            for raw in _cue_block(block, block_start, source)[1]:
                yield block_start + 1, _utterance(raw)
            block.clear()

    in_header = False  # the signature's header block (Kind:, Language:) until a blank line
    for index, raw_line in enumerate(lines):
        line = decode_line(raw_line, source, index + 1).rstrip("\r\n")
        if index == 0:
            line = line.lstrip("\ufeff")
        if not seen_header:
            if not line.strip():
                continue
            if not is_vtt_signature(line.rstrip()):
                raise ConversationFormatError(
                    source, f"line {index + 1}", "a WebVTT stream must start with 'WEBVTT'"
                )
            seen_header = in_header = True
            continue
        if in_header and line.strip() and "-->" not in line:
            continue
        in_header = False
        if line.strip():
            if _starts_next_cue(block, line):
                carried = _cue_number_tail(block)
                del block[len(block) - len(carried) :]
                yield from flush()
                block.extend(carried)
                block_start = index - len(carried)
            if not block:
                block_start = index
            block.append(line)
        else:
            yield from flush()
    yield from flush()


_EOL_BYTES = re.compile(rb"\r\n|\r|\n")
#: The longest streamed line (bytes): a little over the longest utterance in UTF-8.
MAX_LINE_BYTES = 4 * MAX_UTTERANCE_CHARS + 4096


def stream_lines(
    stream: Any, source: str | Path = "<stdin>", max_bytes: int = MAX_LINE_BYTES
) -> Iterator[str]:
    """Lines of a binary stream as they arrive, without their line ends.

    A line ends at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (each answered at once, not at the
    end of the stream); a UTF-8 byte-order mark before the first line is dropped; bytes that are
    not UTF-8 come through as surrogate escapes, so :func:`parse_transcript_line` reports them on
    their own line. A line over ``max_bytes`` is a located error as soon as it is that long
    (it is never held whole in memory).
    """
    read = getattr(stream, "read1", None) or stream.read
    pending = bytearray()
    lineno = 1
    skip_lf = False  # the last chunk ended in \r: a \n opening the next one belongs to it

    def line() -> str:
        text = bytes(pending).decode("utf-8", "surrogateescape")
        pending.clear()
        return text.removeprefix("\ufeff") if lineno == 1 else text

    while chunk := read(65536):
        i = 1 if skip_lf and chunk[:1] == b"\n" else 0
        skip_lf = False
        for m in _EOL_BYTES.finditer(chunk, i):
            pending += chunk[i : m.start()]
            if len(pending) > max_bytes:
                break
            yield line()
            lineno += 1
            i = m.end()
            skip_lf = m.group() == b"\r" and i == len(chunk)
        pending += chunk[i:]
        if len(pending) > max_bytes:
            raise ConversationFormatError(
                source, f"line {lineno}", f"line over {max_bytes:,} bytes: not a transcript line"
            )
    if pending:
        yield line()


def sniff_stream_format(first_line: str) -> str:
    """The format of a stream from its first non-blank line: vtt, srt or txt (lines)."""
    s = first_line.lstrip("\ufeff").strip()
    if is_vtt_signature(s):
        return "vtt"
    if s.isdigit() or _CUE_TIMING.match(s):
        return "srt"
    return "txt"


def _utterance(raw: _RawUtterance) -> Utterance:
    return Utterance(
        speaker=raw.speaker,
        text=raw.text,
        start=raw.start,
        end=raw.end,
        addressees=raw.addressees,
        id=raw.id,
    )


def _voice_spans(payload: str) -> list[tuple[str, str]]:
    """``(speaker, text)`` per voice span, in one pass over the cue's tags (linear time).

    A span's text runs from its ``<v Name>`` tag to ``</v>``, the next voice tag or the end of
    the cue; text outside voice spans is ignored.
    """
    spans: list[tuple[str, str]] = []
    name: str | None = None
    text_from = 0

    def close(until: int) -> None:
        if name is not None and (text := _vtt_text(payload[text_from:until])):
            spans.append((name, text))

    for m in _TAG.finditer(payload):
        inner = m.group()[1:-1]
        voice = _voice_name(inner)
        if voice is not None:
            close(m.start())
            name, text_from = voice, m.end()
        elif inner == "/v" and name is not None:
            close(m.start())
            name = None
    close(len(payload))
    return spans


def _voice_name(tag: str) -> str | None:
    """The speaker of a voice tag's inside (``v Alice``, ``v.loud Bob``), else ``None``."""
    if not tag.startswith("v"):
        return None
    rest = tag[1:]
    if rest.startswith("."):  # classes, then the name: "v.first.loud Bob"
        parts = rest.split(None, 1)
        if len(parts) < 2:
            return None
        rest = " " + parts[1]
    if not rest[:1].isspace():
        return None
    return html.unescape(rest).strip() or None


def _vtt_text(s: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(_ASS_TAG.sub("", _TAG.sub("", s)))).strip()


def _parse_txt(content: str, path: Path) -> tuple[dict[str, Any] | None, list[_RawUtterance]]:
    header: dict[str, Any] | None = None
    out: list[_RawUtterance] = []
    pending_break = False
    for lineno, line in enumerate(split_lines(content), 1):
        if line.strip() == TXT_BREAK:
            pending_break = True
            continue
        parsed = _parse_line(line, lineno, path)
        if parsed is None:
            continue
        if isinstance(parsed, dict):
            if out or header is not None:
                raise ConversationFormatError(
                    path, f"line {lineno}", "the participants header must be the first line"
                )
            header = parsed
        else:
            out.append(replace(parsed, scene_break=True) if pending_break else parsed)
            pending_break = False
    return header, out


def _parse_line(
    line: str, lineno: int, source: str | Path
) -> _RawUtterance | dict[str, Any] | None:
    s = line.lstrip("\ufeff").strip()  # a byte-order mark opens many Windows files
    if not s or s.startswith("#"):
        return None
    where = f"line {lineno}"
    if s.startswith("{"):
        obj = loads_json(s, source, where)
        if not isinstance(obj, dict):
            raise ConversationFormatError(source, where, "expected a JSON object")
        if "participants" in obj:
            return obj
        return _from_record(obj, source, where)
    start = end = None
    tm = _TIME_PREFIX.match(s)
    if tm:
        start = parse_time(tm["start"], source, where, "start")
        end = parse_time(tm["end"], source, where, "end")
        s = s[tm.end() :]
    m = _SPEAKER_LINE.match(s)
    if m is None:
        raise ConversationFormatError(
            source, where, f"expected 'Speaker: text' or a JSON object, got {s[:60]!r}"
        )
    return _from_record(
        {"speaker": m["speaker"], "text": m["text"], "start": start, "end": end}, source, where
    )


def _from_record(obj: dict[str, Any], path: str | Path, where: str) -> _RawUtterance:
    speaker = obj.get("speaker")
    if not isinstance(speaker, str) or not speaker.strip():
        raise ConversationFormatError(path, where, "missing speaker")
    speaker = _name(speaker, path, where, "speaker")
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ConversationFormatError(path, where, "missing text")
    if len(text) > MAX_UTTERANCE_CHARS:
        raise ConversationFormatError(
            path,
            where,
            f"utterance of {len(text):,} characters (at most {MAX_UTTERANCE_CHARS:,}): "
            "a transcript line this long is a broken file, not speech",
        )
    start = parse_time(obj.get("start"), path, where, "start")
    end = parse_time(obj.get("end"), path, where, "end")
    if start is not None and end is not None and end < start:
        raise ConversationFormatError(path, where, f"end {end} is before start {start}")
    addr = obj.get("addressee", obj.get("addressees"))
    addressees: tuple[str, ...] | None
    if addr is None:
        addressees = None
    elif isinstance(addr, str):
        addressees = (_name(addr, path, where, "addressee"),) if addr.strip() else ()
    elif isinstance(addr, list) and all(isinstance(a, str) and a.strip() for a in addr):
        addressees = tuple(_name(a, path, where, "addressee") for a in addr)
    else:
        raise ConversationFormatError(
            path, where, f"addressee must be a name or a list of names, not {addr!r}"
        )
    brk = obj.get("break", False)
    if not isinstance(brk, bool):
        raise ConversationFormatError(path, where, f"break must be true or false, not {brk!r}")
    uid = obj.get("id")
    return _RawUtterance(
        where=where,
        speaker=speaker,
        text=re.sub(r"\s+", " ", text).strip(),
        start=start,
        end=end,
        addressees=addressees,
        id=None if uid is None or str(uid) == "" else str(uid),
        scene_break=brk,
    )


def _name(written: str, path: str | Path, where: str, what: str) -> str:
    """:func:`clean_name` as a located error, with a note when the spelling changed."""
    try:
        name = clean_name(written)
    except BadNameError as exc:
        raise ConversationFormatError(path, where, f"{what} {exc}") from None
    if name != written.strip():
        note_input(
            "name normalised",
            path,
            where,
            f"{what} {written.strip()!a} read as {name!a} (Unicode NFKC: fullwidth and "
            "other compatibility forms folded; zero-width, variation selectors, fillers and "
            "other invisible characters removed): both spellings are one person",
        )
    return name


# ----------------------------------------------------------------------------- breaks

#: A text-file line that separates two conversations.
TXT_BREAK = "---"
_VTT_BREAK = re.compile(
    r"^NOTE\s+(?:scene\s+break|conversation\s+break|break|new\s+(?:scene|conversation))\b",
    re.IGNORECASE,
)
_TRUE = frozenset({"1", "true", "yes", "y", "x"})
_FALSE = frozenset({"", "0", "false", "no", "n"})


def _is_break_marker(obj: dict[str, Any]) -> bool:
    """A JSONL line that only says ``{"break": true}`` (no speaker, no text)."""
    return obj.get("break") is True and "speaker" not in obj and "text" not in obj


def _csv_flag(value: str | None, path: str | Path, where: str) -> bool:
    v = (value or "").strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ConversationFormatError(
        path, where, f"break must be 1/0, true/false or yes/no, not {value!r}"
    )


def _breaks_metadata(raw: Sequence[_RawUtterance]) -> dict[str, Any]:
    """``{"breaks": [utterance indices]}`` when the file marks breaks, else nothing."""
    breaks = [i for i, r in enumerate(raw) if r.scene_break and i > 0]
    return {"breaks": breaks} if breaks else {}


# ----------------------------------------------------------------------------- resolution


def _header_participants(header: dict[str, Any], path: str | Path) -> tuple[Participant, ...]:
    entries = header.get("participants")
    if not isinstance(entries, list) or not entries:
        raise ConversationFormatError(path, "line 1", "'participants' must be a non-empty list")
    out = []
    for k, p in enumerate(entries):
        if isinstance(p, str):
            p = {"id": p, "name": p}
        if not isinstance(p, dict) or not str(p.get("id") or p.get("name") or "").strip():
            raise ConversationFormatError(
                path, "line 1", f"participant {k} needs an 'id' or 'name'"
            )
        pid = _name(str(p.get("id") or p["name"]), path, "line 1", "participant id")
        name = _name(str(p["name"]), path, "line 1", "participant") if p.get("name") else None
        aliases = p.get("aliases") or ()
        if not isinstance(aliases, list | tuple):
            raise ConversationFormatError(
                path, "line 1", f"participant {pid!r}: aliases must be a list"
            )
        out.append(
            Participant(
                id=pid,
                name=name,
                role=_role(p["role"], path, pid) if p.get("role") else None,
                aliases=tuple(_name(str(a), path, "line 1", "alias") for a in aliases)
                or _first_name_alias(name or ""),
            )
        )
    ids = [p.id for p in out]
    if len(set(ids)) != len(ids):
        raise ConversationFormatError(path, "line 1", f"duplicate participant ids {ids}")
    return tuple(out)


def _role(value: object, path: str | Path, pid: str) -> str | None:
    """A header participant's ``role``: a string, cleaned as names are (no newline, NUL or
    bidi control, not only invisible characters)."""
    if not isinstance(value, str):
        raise ConversationFormatError(
            path, "line 1", f"participant {pid!r}: role must be a string, not {value!r}"
        )
    try:
        return clean_role(value) or None
    except BadNameError as exc:
        raise ConversationFormatError(path, "line 1", f"participant {pid!r}: {exc}") from None


def _first_name_alias(name: str) -> tuple[str, ...]:
    """First name of a multi-word name: "Alice Martin" is usually called "Alice"."""
    words = name.split()
    return (words[0],) if len(words) > 1 else ()


def _lookup(participants: Sequence[Participant]) -> dict[str, str]:
    """Case-insensitive id / name / alias -> participant id; ambiguous keys are left out."""
    keys: dict[str, set[str]] = {}
    for p in participants:
        for k in (p.id, p.name, *p.aliases):
            if k:
                keys.setdefault(k.strip().lower(), set()).add(p.id)
    ids = {p.id.lower(): p.id for p in participants}
    out = {k: next(iter(v)) for k, v in keys.items() if len(v) == 1}
    out.update(ids)  # an exact id always wins
    return out


def _build(
    raw: Sequence[_RawUtterance],
    participants: tuple[Participant, ...] | None,
    conv_id: str,
    domain: str,
    path: Path,
    fmt: str,
) -> Conversation:
    roster_known = participants is not None
    spelled: dict[str, str] = {}  # a look-alike spelling -> the first spelling of that name
    if participants is None:
        order, spelled = _one_spelling_per_name(raw, path)
        participants = tuple(Participant(id=s, name=s, aliases=_first_name_alias(s)) for s in order)
    lookup = _lookup(participants)
    for other, first in spelled.items():
        lookup.setdefault(other.lower(), lookup[first.lower()])
    first_use: dict[str, str] = {}
    for r in raw:
        if r.id is not None and first_use.setdefault(r.id, r.where) != r.where:
            raise ConversationFormatError(
                path, r.where, f"duplicate utterance id {r.id!r} (first used at {first_use[r.id]})"
            )
    _note_time_order(raw, path)
    utterances = []
    for n, r in enumerate(raw):
        speaker = lookup.get(r.speaker.lower())
        if speaker is None:
            raise ConversationFormatError(
                path,
                r.where,
                f"speaker {r.speaker!a} is not in the participants header"
                + _looks_like(r.speaker, participants),
            )
        addressees = None if r.addressees is None else tuple(_resolve_addressees(r, lookup, path))
        utterances.append(
            Utterance(
                speaker=speaker,
                text=r.text,
                start=r.start,
                end=r.end,
                addressees=addressees,
                id=r.id or f"u{n + 1:04d}",
            )
        )
    return Conversation(
        id=conv_id,
        corpus=CORPUS,
        utterances=tuple(utterances),
        participants=participants,
        domain=domain,
        group=conv_id,
        roster_known=roster_known,
        source=str(path),
        metadata={"format": fmt, **_breaks_metadata(raw)},
    )


def _one_spelling_per_name(
    raw: Sequence[_RawUtterance], path: Path
) -> tuple[list[str], dict[str, str]]:
    """Speakers in order of appearance, spellings that look alike (:func:`name_key`) joined.

    Returns the speakers (each name's first spelling) and the later spellings mapped to it;
    each joined spelling is noted once, naming both.
    """
    first: dict[str, str] = {}  # name key -> first spelling
    spelled: dict[str, str] = {}
    for r in raw:
        key = name_key(r.speaker)
        kept = first.setdefault(key, r.speaker)
        if kept != r.speaker and r.speaker not in spelled and kept.lower() != r.speaker.lower():
            spelled[r.speaker] = kept
            note_input(
                "look-alike names",
                path,
                r.where,
                f"speaker {r.speaker!a} looks like {kept!a} (letters of another script, "
                "fullwidth or invisible characters): both spellings are one person",
            )
    return list(first.values()), spelled


def _looks_like(name: str, participants: Sequence[Participant]) -> str:
    """A hint for an unknown spelling that looks like a listed participant."""
    key = name_key(name)
    for p in participants:
        for n in (p.id, p.name, *p.aliases):
            if n and name_key(n) == key:
                return f" (it looks like {n!a}, but a declared roster takes only its own spellings)"
    return ""


def _note_time_order(raw: Sequence[_RawUtterance], path: Path) -> None:
    """Warn (once per file) where an utterance starts before the one written above it."""
    last: float | None = None
    for r in raw:
        if r.start is None:
            continue
        if last is not None and r.start < last:
            note_input(
                "time goes backwards",
                path,
                r.where,
                f"starts at {r.start:g} s, before the utterance above it ({last:g} s); "
                "utterances are taken in file order",
            )
        last = r.start


def _resolve_addressees(r: _RawUtterance, lookup: dict[str, str], path: Path) -> Iterable[str]:
    out: dict[str, None] = {}
    for a in r.addressees or ():
        pid = lookup.get(a.lower())
        if pid is None:
            raise ConversationFormatError(
                path,
                r.where,
                f"unknown addressee {a!r} (not a speaker in this transcript; "
                "list everyone in a participants header)",
            )
        out.setdefault(pid, None)
    return out


# ----------------------------------------------------------------------------- aliases


@dataclass(frozen=True, slots=True)
class AliasSpec:
    """Other names one participant is called by: ``Professor D=Morgan,Morgan Smith``."""

    name: str
    aliases: tuple[str, ...]


def parse_alias(spec: str, source: str | Path = "--alias", where: str = "") -> AliasSpec:
    """``NAME=ALIAS[,ALIAS...]``: NAME as the transcript labels the speaker, then what people
    call them (what vocatives and mentions are matched against)."""
    name, sep, rest = spec.partition("=")
    aliases = tuple(a for a in (x.strip() for x in rest.split(",")) if a)
    if not sep or not name.strip() or not aliases:
        raise ConversationFormatError(
            source,
            where,
            f"expected NAME=ALIAS[,ALIAS...] (e.g. 'Professor D=Morgan'), got {spec!r}",
        )
    return AliasSpec(
        _name(name, source, where, "name"),
        tuple(_name(a, source, where, "alias") for a in aliases),
    )


def read_alias_file(path: str | Path) -> list[AliasSpec]:
    """A roster file of aliases: one ``NAME = ALIAS, ALIAS`` per line, ``#`` comments."""
    out = []
    try:
        text = read_text(path)
    except OSError as e:  # one line naming the file, not the errno's repr
        raise ConversationFormatError(
            path, "", f"cannot read the alias file: {e.strerror or e}"
        ) from None
    for lineno, line in enumerate(split_lines(text), 1):
        s = line.strip()
        if s and not s.startswith("#"):
            out.append(parse_alias(s, path, f"line {lineno}"))
    return out


def with_aliases(
    participants: Sequence[Participant], specs: Sequence[AliasSpec], source: str | Path
) -> tuple[Participant, ...]:
    """``participants`` with the aliases of ``specs`` added; a NAME that matches nobody (by id,
    name or alias, any case) is an error listing who is there."""
    lookup = _lookup(participants)
    extra: dict[str, list[str]] = {}
    for spec in specs:
        pid = lookup.get(spec.name.lower())
        if pid is None:
            raise ConversationFormatError(
                source,
                "",
                f"--alias names {spec.name!r}, who is not a participant "
                f"({name_list(p.display_name for p in participants)})",
            )
        extra.setdefault(pid, []).extend(spec.aliases)
    return tuple(
        replace(p, aliases=tuple(dict.fromkeys((*p.aliases, *extra[p.id])))) if p.id in extra else p
        for p in participants
    )


def name_list(names: Iterable[str], limit: int = 12) -> str:
    """``A, B, C and 11,988 more``: a roster named in one message stays one readable line."""
    names = list(names)
    shown = ", ".join(
        repr(n) if n != n.strip() or not n.isprintable() else n for n in names[:limit]
    )
    return f"{shown} and {len(names) - limit:,} more" if len(names) > limit else shown


__all__ = [
    "TRANSCRIPT_FORMATS",
    "AliasSpec",
    "infer_format",
    "inferred_domain",
    "name_list",
    "parse_alias",
    "parse_header_line",
    "parse_time",
    "parse_transcript_line",
    "read_alias_file",
    "read_transcript",
    "split_lines",
    "transcript_domain",
    "with_aliases",
]
