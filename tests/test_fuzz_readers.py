"""Fuzzing every reader and user format with damaged copies of real files (seeded, a few seconds).

For each format a seeded generator damages a real file (examples/ for the user formats, slices
of the shared corpora for the others): truncation, byte flips, other encodings, a huge line,
deep JSON nesting, non-finite and negative numbers, duplicated and deleted lines. Every damaged
input must give either

* a located error: a :class:`ConversationFormatError` naming the file (and, for line-based
  formats, the line), or
* a documented acceptance: conversations that satisfy the invariants every reader promises
  (finite non-negative times, ``end >= start``, speakers and addressees among the
  participants, non-empty text, unique utterance ids).

Anything else (a traceback of another type, or invariant-breaking output) fails with the seed
and the damage that produced it, so the case can be replayed.
"""

from __future__ import annotations

import json
import math
import random
import re
import shutil
import unicodedata
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
from corpus_copies import ami_copy, earnings_copy, friends_csv_head, friends_s10_episode, icsi_copy

from polylogue.conversation import Conversation, ConversationFormatError, read_jsonl
from polylogue.corpora.ami import read_ami
from polylogue.corpora.earnings import read_earnings21
from polylogue.corpora.friends import read_friends_csv, read_friends_s10_json
from polylogue.corpora.icsi import read_icsi
from polylogue.corpora.transcripts import parse_transcript_line, read_transcript, stream_lines
from polylogue.errors import InputWarning

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CASES_PER_FORMAT = 24
AMI_MEETING = "ES2002a"
EARNINGS_CALL = "4386541"
ICSI_MEETING = "Bro008"

# ----------------------------------------------------------------------------- damage


def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data))]


def _flip_bytes(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    specials = b"\x00\xff\xe9\"'{}[]<>,|:\n\r\\-."
    for _ in range(rng.randint(1, 8)):
        out[rng.randrange(len(out))] = rng.choice(specials + bytes([rng.randrange(256)]))
    return bytes(out)


def _reencode(data: bytes, rng: random.Random) -> bytes:
    text = data.decode("utf-8", "replace")
    return text.encode(rng.choice(["utf-16", "utf-32", "cp1252"]), "replace")


def _huge_line(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    k = rng.randrange(len(lines))
    lines[k] = lines[k] + b"x" * rng.choice([140_000, 300_000])
    return b"\n".join(lines)


def _deep_nesting(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    k = rng.randrange(len(lines))
    depth = rng.choice([2_000, 50_000])
    lines.insert(k, b'{"speaker": "A", "text": ' + b"[" * depth + b"]" * depth + b"}")
    return b"\n".join(lines)


def _bad_number(data: bytes, rng: random.Random) -> bytes:
    digits = [i for i, b in enumerate(data) if chr(b).isdigit()]
    if not digits:
        return data
    i = rng.choice(digits)
    j = i
    while j < len(data) and (chr(data[j]).isdigit() or data[j : j + 1] == b"."):
        j += 1
    word = rng.choice([b"inf", b"nan", b"1e999", b"-1", b"-0.5", b"Infinity", b"NaN", b"x1"])
    return data[:i] + word + data[j:]


def _duplicate_line(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    k = rng.randrange(len(lines))
    lines.insert(k, lines[k])
    return b"\n".join(lines)


def _delete_line(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


# Round two (issue 29): the classes of the second probe.


def _big_integer(data: bytes, rng: random.Random) -> bytes:
    """A number of a few hundred to 5,000 digits where a number was (json's limit is 4,300)."""
    digits = [i for i, b in enumerate(data) if chr(b).isdigit()]
    if not digits:
        return data
    i = rng.choice(digits)
    j = i
    while j < len(data) and chr(data[j]).isdigit():
        j += 1
    return data[:i] + b"7" * rng.choice([320, 400, 5_000]) + data[j:]


def _bom(data: bytes, rng: random.Random) -> bytes:
    return b"\xef\xbb\xbf" + data


def _unicode_line_breaks(data: bytes, rng: random.Random) -> bytes:
    """U+2028 / U+0085 / \\x1c put into words (what ensure_ascii=False writes raw)."""
    out = bytearray(data)
    spaces = [i for i, b in enumerate(out) if b == 0x20]
    for i in sorted(rng.sample(spaces, min(len(spaces), rng.randint(1, 6))), reverse=True):
        out[i : i + 1] = rng.choice(["\u2028", "\u0085", "\u2029", "\x1c"]).encode()
    return bytes(out)


def _lone_cr(data: bytes, rng: random.Random) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r")


def _missing_blank_line(data: bytes, rng: random.Random) -> bytes:
    """Blank lines between blocks removed (merged SRT/WebVTT cues, glued JSONL lines)."""
    lines = data.split(b"\n")
    blanks = [k for k, line in enumerate(lines) if not line.strip() and 0 < k < len(lines) - 1]
    for k in sorted(rng.sample(blanks, min(len(blanks), rng.randint(1, 4))), reverse=True):
        del lines[k]
    return b"\n".join(lines)


def _look_alike_names(data: bytes, rng: random.Random) -> bytes:
    """Zero-width, combining or bidi characters inside capitalised words (speaker names)."""
    text = data.decode("utf-8", "surrogateescape")
    starts = [m.start() for m in re.finditer(r"\b[A-Z][a-z]", text)]
    for i in sorted(rng.sample(starts, min(len(starts), rng.randint(1, 5))), reverse=True):
        mark = rng.choice(["\u200b", "\u0301", "\u2060", "\u202e", "\u2066", "\u00ad"])
        text = text[: i + 1] + mark + text[i + 1 :]
    return text.encode("utf-8", "surrogateescape")


#: Round three (issue 34): letters of other scripts that look Latin, and marks that show nothing.
_LOOK_ALIKE = {
    "a": "\u0430",
    "e": "\u0435",
    "o": "\u043e",
    "p": "\u0440",
    "c": "\u0441",
    "A": "\u0410",
    "B": "\u0392",
    "E": "\u0415",
    "K": "\u041a",
    "M": "\u039c",
    "T": "\u0422",
    "O": "\u041e",
    "C": "\u0421",
    "H": "\u041d",
    "P": "\u0420",
}
_INVISIBLE = [
    "\ufe0f",
    "\ufe00",
    "\u034f",
    "\u3164",
    "\u115f",
    "\u1160",
    "\uffa0",
    "\u2800",
    "\u180b",
    "\U000e0100",
]


def _look_alike_letters(data: bytes, rng: random.Random) -> bytes:
    """In one capitalised word, every use of it: a letter from another script that looks the
    same, fullwidth letters, or an invisible variation selector or filler (one person must
    stay one person)."""
    text = data.decode("utf-8", "surrogateescape")
    words = sorted(set(re.findall(r"\b[A-Z][a-z]{2,}\b", text)))
    if not words:
        return data
    word = rng.choice(words)
    how = rng.choice(["script", "fullwidth", "invisible"])
    if how == "script":
        spots = [i for i, c in enumerate(word) if c in _LOOK_ALIKE]
        if not spots:
            how = "fullwidth"
        else:
            i = rng.choice(spots)
            new = word[:i] + _LOOK_ALIKE[word[i]] + word[i + 1 :]
    if how == "fullwidth":
        new = "".join(chr(ord(c) + 0xFEE0) for c in word)
    elif how == "invisible":
        i = rng.randrange(1, len(word))
        new = word[:i] + rng.choice(_INVISIBLE) + word[i:]
    # Every other occurrence: the file mixes both spellings, as a recogniser or a paste does.
    parts = re.split(rf"\b{word}\b", text)
    out = parts[0] + "".join((new if k % 2 else word) + p for k, p in enumerate(parts[1:], 1))
    return out.encode("utf-8", "surrogateescape")


def _duplicate_key(data: bytes, rng: random.Random) -> bytes:
    """A JSON key repeated in its object (``"text": ..., "text": ...``)."""
    keys = [m for m in re.finditer(rb'"(speaker|text|start|end|id)":', data)]
    if not keys:
        return data
    m = rng.choice(keys)
    return data[: m.start()] + m.group() + b' "x", ' + data[m.start() :]


DAMAGE: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "truncate": _truncate,
    "flip bytes": _flip_bytes,
    "re-encode": _reencode,
    "huge line": _huge_line,
    "deep nesting": _deep_nesting,
    "bad number": _bad_number,
    "duplicate line": _duplicate_line,
    "delete line": _delete_line,
    "big integer": _big_integer,
    "byte-order mark": _bom,
    "unicode line breaks": _unicode_line_breaks,
    "lone CR": _lone_cr,
    "missing blank line": _missing_blank_line,
    "look-alike names": _look_alike_names,
    "duplicate key": _duplicate_key,
    "look-alike letters": _look_alike_letters,
}


def damaged_versions(data: bytes, seed: int, n: int) -> Iterable[tuple[str, bytes]]:
    """``n`` damaged copies: every kind of damage in turn, then random ones (seeded)."""
    rng = random.Random(seed)
    kinds = list(DAMAGE)
    for k in range(n):
        kind = kinds[k] if k < len(kinds) else rng.choice(kinds)
        yield kind, DAMAGE[kind](data, rng)


# ----------------------------------------------------------------------------- invariants


def check_name(name: str) -> None:
    """A participant name as every reader leaves it: NFC, no invisible format characters, no
    bidi or control characters (two spellings that print alike are one name)."""
    assert unicodedata.is_normalized("NFC", name), ascii(name)
    assert not any(unicodedata.category(c) in ("Cf", "Cc") for c in name), ascii(name)


def check_conversation(conv: Conversation, user_format: bool = True) -> None:
    """What every reader promises about what it returns (silent corruption breaks one)."""
    pids = {p.id for p in conv.participants}
    if user_format:
        for p in conv.participants:
            check_name(p.id)
    ids = [u.id for u in conv.utterances if u.id is not None]
    assert len(ids) == len(set(ids)), f"{conv.id}: duplicate utterance ids"
    for u in conv.utterances:
        assert u.speaker in pids and u.text.strip(), u
        for t in (u.start, u.end):
            assert t is None or (math.isfinite(t) and t >= 0), u
        if u.start is not None and u.end is not None:
            assert u.end >= u.start, u
        assert set(u.addressees or ()) <= pids, u


@dataclass(frozen=True)
class Format:
    """A reader, the file it reads (inside a fresh copy) and whether errors name a line."""

    name: str
    setup: Callable[[Path], Path]  # makes a pristine copy in the folder, returns the target
    read: Callable[[Path, Path], list[Conversation]]  # (folder, target) -> conversations
    line_based: bool = True
    #: its output counts the target's utterances (the stdin check returns none)
    counts: bool = True


def _example(name: str) -> Callable[[Path], Path]:
    def setup(folder: Path) -> Path:
        return Path(shutil.copy(EXAMPLES / name, folder / name))

    return setup


def _txt_example(folder: Path) -> Path:
    conv = read_transcript(EXAMPLES / "standup.jsonl")
    names = {p.id: p.display_name for p in conv.participants}
    lines = [f"[{u.start} --> {u.end}] {names[u.speaker]}: {u.text}" for u in conv.utterances]
    path = folder / "standup.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _srt_example(folder: Path) -> Path:
    """standup.vtt's cues as SubRip (numbered cues, comma decimals)."""
    conv = read_transcript(EXAMPLES / "standup.vtt")
    names = {p.id: p.display_name for p in conv.participants}

    def clock(t: float | None) -> str:
        ms = round((t or 0.0) * 1000)
        return (
            f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"
        )

    blocks = [
        f"{k}\n{clock(u.start)} --> {clock(u.end)}\n{names[u.speaker]}: {u.text}\n"
        for k, u in enumerate(conv.utterances, 1)
    ]
    path = folder / "standup.srt"
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


def _stdin_lines(folder: Path, target: Path) -> list[Conversation]:
    """What `decide -` does with each line (split as it splits stdin)."""
    with open(target, "rb") as f:
        lines = list(stream_lines(f))
    for lineno, line in enumerate(lines, 1):
        u = parse_transcript_line(line, lineno)
        if u is not None:
            assert u.text.strip() and u.speaker.strip()
            check_name(u.speaker)
            for t in (u.start, u.end):
                assert t is None or (math.isfinite(t) and t >= 0), u
    return []


def _ami_target(folder: Path) -> Path:
    release = ami_copy(folder, AMI_MEETING)
    return release / "words" / f"{AMI_MEETING}.B.words.xml"


def _ami_acts_target(folder: Path) -> Path:
    release = ami_copy(folder, AMI_MEETING)
    return release / "dialogueActs" / f"{AMI_MEETING}.B.dialog-act.xml"


def _earnings(sub: str) -> Callable[[Path], Path]:
    def setup(folder: Path) -> Path:
        root = earnings_copy(folder, EARNINGS_CALL)
        return {
            "nlp": root / "transcripts" / "nlp_references" / f"{EARNINGS_CALL}.nlp",
            "rttm": root / "rttms" / f"{EARNINGS_CALL}.rttm",
            "speakers": root / "speaker-metadata.csv",
        }[sub]

    return setup


def _icsi_target(folder: Path) -> Path:
    return icsi_copy(folder, ICSI_MEETING) / "data" / "Academic" / "all" / f"{ICSI_MEETING}.json"


def _friends_s10(folder: Path) -> Path:
    path = friends_s10_episode(folder)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["episodes"][0]["scenes"] = data["episodes"][0]["scenes"][:4]  # a few scenes suffice
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def _conversations_jsonl(folder: Path) -> Path:
    """A conversations file as the benchmark builder writes it (real Friends scenes)."""
    from polylogue.conversation import write_jsonl

    scenes = list(read_friends_csv(friends_csv_head(folder, lines=80)))
    path = folder / "conversations.jsonl"
    write_jsonl(scenes, path)
    return path


FORMATS = [
    Format("user jsonl", _example("standup.jsonl"), lambda d, p: [read_transcript(p)]),
    Format("user csv", _example("standup.csv"), lambda d, p: [read_transcript(p)]),
    Format("user vtt", _example("standup.vtt"), lambda d, p: [read_transcript(p)]),
    Format("user srt", _srt_example, lambda d, p: [read_transcript(p)]),
    Format("user txt", _txt_example, lambda d, p: [read_transcript(p)]),
    Format("stdin lines", _txt_example, _stdin_lines, counts=False),
    Format(
        "friends csv",
        lambda d: friends_csv_head(d, lines=80),
        lambda d, p: list(read_friends_csv(p)),
    ),
    Format(
        "friends s10 json",
        _friends_s10,
        lambda d, p: list(read_friends_s10_json(p)),
        line_based=False,
    ),
    Format("earnings nlp", _earnings("nlp"), lambda d, p: list(read_earnings21(d))),
    Format("earnings rttm", _earnings("rttm"), lambda d, p: list(read_earnings21(d))),
    Format("earnings speakers", _earnings("speakers"), lambda d, p: list(read_earnings21(d))),
    Format("conversations jsonl", _conversations_jsonl, lambda d, p: list(read_jsonl(p))),
    Format("icsi json", _icsi_target, lambda d, p: list(read_icsi(d)), line_based=False),
    Format("ami words xml", _ami_target, lambda d, p: list(read_ami(d)), line_based=False),
    Format("ami acts xml", _ami_acts_target, lambda d, p: list(read_ami(d)), line_based=False),
]
# Messages about the file as a whole carry no line.
_WHOLE_FILE = ("empty transcript", "no tokens", "nested too deeply", "a WebVTT file must")


#: What one damaged input gave: the two acceptable outcomes, then the three failures.
OUTCOMES = ("clear error", "correct", "silent garbage", "traceback", "hang")


#: Damage that keeps every utterance (a mark, a line end, a respelling): accepted output must
#: hold as many utterances as the pristine file (a merged cue or a lost line is garbage).
PRESERVING = frozenset(
    {
        "byte-order mark",
        "lone CR",
        "missing blank line",
        "look-alike names",
        "duplicate key",
        "look-alike letters",
    }
)
#: Damage that keeps every person: accepted output of a user format whose roster is learnt
#: must hold as many participants as the pristine file (a look-alike spelling is no newcomer).
SAME_PEOPLE = frozenset({"look-alike letters"})


@dataclass(frozen=True)
class Expected:
    """What accepted output of one damaged copy must still hold (None: not checked)."""

    utterances: int | None = None
    participants: int | None = None


def run_case(
    fmt: Format, case: Path, target: Path, label: str, expected: Expected | None = None
) -> tuple[str, str]:
    """``(outcome, detail)`` of reading one damaged copy (``target`` inside the folder ``case``).

    A clear error is a :class:`ConversationFormatError` naming the damaged file (and its line,
    for line-based formats); "correct" is output that keeps every reader invariant (and, when
    ``expected`` is given, that many utterances).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InputWarning)  # accepted with a warning is fine
            conversations = fmt.read(case, target)
    except ConversationFormatError as exc:
        if fmt.name == "stdin lines":
            ok = exc.path == "<stdin>"
        else:  # the damaged file, or one whose references it broke (AMI words <- acts)
            ok = Path(exc.path).is_relative_to(case) and (
                exc.path == str(target) or not fmt.line_based
            )
        if ok and fmt.line_based and not exc.message.startswith(_WHOLE_FILE):
            ok = "line" in exc.where
        return ("clear error" if ok else "silent garbage"), f"{label}: badly located: {exc}"
    except AssertionError as exc:  # a reader check inside fmt.read (the stdin lines)
        return "silent garbage", f"{label}: {str(exc)[:300]}"
    except Exception as exc:
        return "traceback", f"{label}: {type(exc).__name__}: {str(exc)[:300]}"
    try:
        for conv in conversations:
            check_conversation(conv, user_format=fmt.name.startswith(("user", "stdin")))
        want = expected or Expected()
        got = sum(len(c.utterances) for c in conversations)
        assert want.utterances in (None, got), f"{got} utterances, not {want.utterances}"
        people = sum(len(c.participants) for c in conversations)
        assert want.participants in (None, people), (
            f"{people} participants, not {want.participants}: "
            + ", ".join(ascii(p.id) for c in conversations for p in c.participants)
        )
    except AssertionError as exc:
        return "silent garbage", f"{label}: {str(exc)[:300]}"
    return "correct", label


def cases(
    fmt: Format, root: Path, seed: int, n: int
) -> Iterable[tuple[str, Path, Path, str, Expected]]:
    """``(kind, case folder, target, label, expected)`` per damaged copy of ``fmt``'s pristine
    input (utterances kept for :data:`PRESERVING` damage, people for :data:`SAME_PEOPLE`)."""
    pristine_dir = root / "pristine"
    pristine_dir.mkdir()
    pristine_target = fmt.setup(pristine_dir)
    pristine = pristine_target.read_bytes()
    pristine_read = fmt.read(pristine_dir, pristine_target)
    whole = sum(len(c.utterances) for c in pristine_read)
    people = sum(len(c.participants) for c in pristine_read)
    for k, (kind, data) in enumerate(damaged_versions(pristine, seed, n)):
        case = root / f"case{k}"
        shutil.copytree(pristine_dir, case)
        target = case / pristine_target.relative_to(pristine_dir)
        target.write_bytes(data)
        expected = Expected(
            whole if kind in PRESERVING and fmt.counts else None,
            people if kind in SAME_PEOPLE and fmt.name.startswith("user") else None,
        )
        yield kind, case, target, f"{fmt.name}: case {k} ({kind}, seed {seed})", expected


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_damaged_inputs_give_located_errors_or_valid_data(fmt: Format, tmp_path: Path) -> None:
    seed = sum(map(ord, fmt.name))
    n = 10 if fmt.name.startswith("ami") else CASES_PER_FORMAT  # AMI reads 4 XML files
    for _kind, case, target, label, expected in cases(fmt, tmp_path, seed, n):
        outcome, detail = run_case(fmt, case, target, label, expected)
        assert outcome in ("clear error", "correct"), detail
