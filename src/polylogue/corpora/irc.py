"""Ubuntu IRC disentanglement reader (Kummerfeld et al., ACL 2019): one channel log per file.

``folder`` is ``shared/data/ubuntu-irc-disentanglement`` (or its ``data/`` folder). Each
``data/{split}/{name}.raw.txt`` is a stretch of the #ubuntu channel and becomes one
:class:`Conversation` over the *whole channel* — what a bot in the channel sees — with the
manual reply structure of ``{name}.annotation.txt`` kept alongside.

Raw lines (numbered from 0; the annotation counts the same way):

``[HH:MM] <nick> text``
    A message: one :class:`Utterance` by ``nick``.
``[HH:MM]  * nick text``
    A ``/me`` action: an utterance by ``nick`` with text ``"/me text"`` and
    ``dialogue_act="action"``.
``=== ...`` and other ``[HH:MM] ...`` lines (notices ``-nick:#ubuntu- ...``, relays)
    System lines (joins, quits, nick changes, old-style actions): **events**, not utterances.
    They are kept in ``metadata["events"]`` as ``{"line", "after", "kind", "actor", "text"}``,
    ``after`` being the number of utterances before the event.
blank lines
    Skipped (they still count as line numbers).

Annotation lines ``parent child -`` say that line ``child`` replies to line ``parent``; a
self-link starts a new thread. From them:

* ``Utterance.addressees`` = the authors of the parents (the speaker excluded); ``()`` for a
  self-link (a new thread, addressed to nobody in particular); ``None`` for messages without
  a link (the first 1,000 lines of each file are context only).
* ``metadata["reply_to"]``: per utterance, the utterance indices it replies to (``[]`` if
  none; a parent that is a system line is left out, its actor still counts as addressee).
* ``metadata["thread"]``: per utterance, the thread id (the smallest line number of its
  connected component of reply links) or ``None`` when unannotated;
  :func:`thread_conversations` cuts a channel into its threads.

Times: ``start = end`` = seconds from the first timestamp of the file (IRC logs have minute
resolution); a clock that goes backwards is taken to have passed midnight.

Participants are the nicks in order of first message (``roster_known=False``); a nick change
is an event, not a merge (the annotation is per line, and nicks are reused). Known channel
bots (``ubotu``, ``ubottu``, ``FloodBot1``...) get ``role="bot"``. Each participant whose nick
has upper-case letters gets its lower-case form as an alias, so ``actionparsnip, how??``
counts as a mention of ``ActionParsnip`` (chat nicks are matched case-insensitively).
``group`` is the file name, ``metadata`` has ``split``, ``annotated_from`` (the first line
with a reply link), counts of lines, events and links, and ``presence_window`` (see
``docs/corpora-chat.md``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polylogue.conversation import Conversation, ConversationFormatError, Participant, Utterance

CORPUS = "irc"
DOMAIN = "chat"
SPLITS: tuple[str, ...] = ("train", "dev", "test")

#: Nicks of the channel's bots (they answer ``!commands`` and flood warnings).
BOT_NICKS = frozenset(
    {"ubotu", "ubottu", "ubot2", "ubot3", "ubot4", "ubot5", "floodbot1", "floodbot2", "floodbot3"}
)
#: A participant counts as present at a boundary when they spoke or were addressed within
#: this many utterances: a channel has hundreds of idle members, and a bot deciding for one
#: of them would otherwise face hundreds of silent targets per message.
PRESENCE_WINDOW = 20

_MESSAGE = re.compile(r"^\[(?P<h>\d{2}):(?P<m>\d{2})\] <(?P<nick>[^>]*[^>\s])\s*> ?(?P<text>.*)$")
_ACTION = re.compile(r"^\[(?P<h>\d{2}):(?P<m>\d{2})\]\s+\* (?P<nick>\S+) ?(?P<text>.*)$")
_OTHER_TIMED = re.compile(r"^\[(?P<h>\d{2}):(?P<m>\d{2})\] (?P<text>.*)$")
_SYSTEM = re.compile(r"^=== (?P<text>.*)$")
_LINK = re.compile(r"^\s*(?P<parent>\d+)\s+(?P<child>\d+)(?:\s+-)?\s*$")
_EVENT_KINDS = (
    ("join", re.compile(r" has joined |entered the room")),
    ("quit", re.compile(r" has quit | has left |left the room|was kicked")),
    ("nick", re.compile(r" is now known as ")),
)


@dataclass(frozen=True, slots=True)
class IrcEvent:
    """A system line (join, quit, nick change, notice, old-style action)."""

    line: int
    after: int  # utterances before this event
    kind: str  # join, quit, nick, notice, other
    actor: str | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "after": self.after,
            "kind": self.kind,
            "actor": self.actor,
            "text": self.text,
        }


# ----------------------------------------------------------------------------- public API


def irc_files(folder: str | Path, splits: Iterable[str] = SPLITS) -> list[tuple[str, Path]]:
    """``(split, raw file)`` pairs present in this copy, sorted by split then name."""
    base = _data_dir(folder)
    out = []
    for split in splits:
        if split not in SPLITS:
            raise ValueError(f"unknown IRC split {split!r}; known: {', '.join(SPLITS)}")
        out += [(split, p) for p in sorted((base / split).glob("*.raw.txt"))]
    return out


def read_irc(
    folder: str | Path,
    splits: Iterable[str] | str = SPLITS,
    files: Iterable[str] | None = None,
    presence_window: int | None = PRESENCE_WINDOW,
) -> Iterator[Conversation]:
    """Yield one conversation per channel log (``train``, ``dev``, ``test``; sorted by name).

    ``files`` keeps only the logs with these names (``2004-11-15_03``). ``presence_window`` is
    stored in the metadata for the decision-point builder (``None``: everyone seen so far).
    """
    splits = [splits] if isinstance(splits, str) else list(splits)
    wanted = None if files is None else {f.removesuffix(".raw.txt") for f in files}
    present = irc_files(folder, splits)
    if wanted is not None:
        missing = wanted - {raw.name.removesuffix(".raw.txt") for _, raw in present}
        if missing:
            raise ValueError(
                f"IRC log(s) not in splits {', '.join(splits)}: {', '.join(sorted(missing))}"
            )
    for split, raw in present:
        name = raw.name.removesuffix(".raw.txt")
        if wanted is not None and name not in wanted:
            continue
        ann = raw.with_name(f"{name}.annotation.txt")
        yield read_irc_file(raw, ann if ann.exists() else None, split, presence_window)


def read_irc_file(
    raw_path: str | Path,
    annotation_path: str | Path | None = None,
    split: str | None = None,
    presence_window: int | None = PRESENCE_WINDOW,
) -> Conversation:
    """One channel log (and optionally its reply-to annotation) as a conversation."""
    raw_path = Path(raw_path)
    name = raw_path.name.removesuffix(".raw.txt")
    lines = _read_lines(raw_path)
    utterances: list[Utterance] = []
    events: list[IrcEvent] = []
    line_of: list[int] = []  # utterance index -> raw line number
    index_of_line: dict[int, int] = {}
    actor_of_line: dict[int, str] = {}
    clock = _Clock(raw_path)
    for lineno, line in enumerate(lines):
        if not line.strip():
            continue
        m = _MESSAGE.match(line) or _ACTION.match(line)
        if m is not None:
            t = clock.seconds(int(m["h"]), int(m["m"]), lineno)
            is_action = m.re is _ACTION
            text = m["text"].strip()
            index_of_line[lineno] = len(utterances)
            actor_of_line[lineno] = m["nick"]
            line_of.append(lineno)
            utterances.append(
                Utterance(
                    speaker=m["nick"],
                    text=f"/me {text}".strip() if is_action else text,
                    start=t,
                    end=t,
                    dialogue_act="action" if is_action else None,
                    id=f"{name}:{lineno}",
                )
            )
            continue
        event = _event(line, lineno, len(utterances), clock, raw_path)
        if event.actor:
            actor_of_line[lineno] = event.actor
        events.append(event)

    parents: dict[int, list[int]] = {}
    n_links = 0
    if annotation_path is not None:
        parents = read_irc_links(annotation_path, len(lines))
        n_links = sum(len(v) for v in parents.values())
    utterances = _with_addressees(utterances, line_of, parents, actor_of_line)
    reply_to = [
        sorted(index_of_line[p] for p in parents.get(ln, ()) if p != ln and p in index_of_line)
        for ln in line_of
    ]
    threads = _threads(parents, line_of)
    participants = _participants(utterances)
    annotated_lines = sorted(parents)
    return Conversation(
        id=f"irc-{name}",
        corpus=CORPUS,
        utterances=tuple(utterances),
        participants=participants,
        domain=DOMAIN,
        group=name,
        roster_known=False,
        source=str(raw_path),
        metadata={
            "unit": "message",
            "split": split,
            "lines": len(lines),
            "links": n_links,
            "annotated_from": annotated_lines[0] if annotated_lines else None,
            "presence_window": presence_window,
            "events": [e.to_dict() for e in events],
            "reply_to": reply_to,
            "thread": threads,
        },
    )


def read_irc_links(path: str | Path, n_lines: int | None = None) -> dict[int, list[int]]:
    """``child line -> [parent lines]`` from an annotation file (a self-link keeps the child)."""
    path = Path(path)
    out: dict[int, list[int]] = {}
    for lineno, line in enumerate(_read_lines(path), 1):
        if not line.strip():
            continue
        m = _LINK.match(line)
        if m is None:
            raise ConversationFormatError(
                path, f"line {lineno}", f"expected 'parent child -', got {line[:60]!r}"
            )
        parent, child = int(m["parent"]), int(m["child"])
        if n_lines is not None and max(parent, child) >= n_lines:
            raise ConversationFormatError(
                path,
                f"line {lineno}",
                f"link {parent} -> {child} points past the end of the log ({n_lines} lines)",
            )
        if parent > child:
            raise ConversationFormatError(
                path, f"line {lineno}", f"parent line {parent} comes after child line {child}"
            )
        out.setdefault(child, []).append(parent)
    return out


def thread_conversations(conv: Conversation) -> list[Conversation]:
    """The channel cut into its annotated threads, one conversation each (in thread order)."""
    threads: list[int | None] = conv.metadata.get("thread") or []
    if len(threads) != len(conv.utterances):
        raise ValueError(f"conversation {conv.id} has no thread structure (not an IRC log?)")
    members: dict[int, list[int]] = {}
    for i, th in enumerate(threads):
        if th is not None:
            members.setdefault(th, []).append(i)
    out = []
    for th in sorted(members):
        utts = tuple(conv.utterances[i] for i in members[th])
        out.append(
            Conversation(
                id=f"{conv.id}#{th}",
                corpus=conv.corpus,
                utterances=utts,
                participants=_participants(utts, conv.participants),
                domain=conv.domain,
                group=conv.group_id,
                roster_known=False,
                source=conv.source,
                metadata={"unit": "message", "thread": th, "channel": conv.id},
            )
        )
    return out


# ----------------------------------------------------------------------------- helpers


class _Clock:
    """Minute timestamps -> seconds from the first one, rolling over at midnight."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.first: int | None = None
        self.days = 0
        self.last = -1

    def seconds(self, h: int, m: int, lineno: int) -> float:
        if h > 23 or m > 59:
            raise ConversationFormatError(
                self.path, f"line {lineno + 1}", f"bad time [{h:02d}:{m:02d}]"
            )
        minute = h * 60 + m
        if self.last >= 0 and minute < self.last:
            self.days += 1
        self.last = minute
        absolute = self.days * 1440 + minute
        if self.first is None:
            self.first = absolute
        return float(60 * (absolute - self.first))


def _event(line: str, lineno: int, after: int, clock: _Clock, path: Path) -> IrcEvent:
    m = _SYSTEM.match(line)
    if m is not None:
        text = m["text"].strip()
        kind = next((k for k, pat in _EVENT_KINDS if pat.search(f" {text}")), "other")
        actor = text.split()[0] if text.split() else None
        return IrcEvent(lineno, after, kind, actor, text)
    m = _OTHER_TIMED.match(line)
    if m is not None:
        clock.seconds(int(m["h"]), int(m["m"]), lineno)
        text = m["text"].strip()
        notice = re.match(r"^-(?P<nick>[^:\s]+):\S*-", text)
        return IrcEvent(lineno, after, "notice", notice["nick"] if notice else None, text)
    raise ConversationFormatError(
        path,
        f"line {lineno + 1}",
        f"not an IRC log line ('[HH:MM] <nick> text' or '=== ...'): {line[:60]!r}",
    )


def _with_addressees(
    utterances: list[Utterance],
    line_of: list[int],
    parents: dict[int, list[int]],
    actor_of_line: dict[int, str],
) -> list[Utterance]:
    out = []
    for u, ln in zip(utterances, line_of, strict=True):
        if ln not in parents:
            out.append(u)
            continue
        authors = [actor_of_line.get(p) for p in parents[ln] if p != ln]
        addressees = tuple(dict.fromkeys(a for a in authors if a and a != u.speaker))
        out.append(
            Utterance(
                speaker=u.speaker,
                text=u.text,
                start=u.start,
                end=u.end,
                addressees=addressees,
                dialogue_act=u.dialogue_act,
                id=u.id,
            )
        )
    return out


def _threads(parents: dict[int, list[int]], line_of: list[int]) -> list[int | None]:
    """Connected components of the reply links (union-find over line numbers)."""
    root: dict[int, int] = {}

    def find(x: int) -> int:
        root.setdefault(x, x)
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for child, ps in parents.items():
        for p in ps:
            a, b = find(child), find(p)
            if a != b:
                root[max(a, b)] = min(a, b)
    return [find(ln) if ln in root else None for ln in line_of]


def _participants(
    utterances: Iterable[Utterance], known: Iterable[Participant] = ()
) -> tuple[Participant, ...]:
    by_id = {p.id: p for p in known}
    seen: dict[str, Participant] = {}
    for u in utterances:
        if u.speaker not in seen:
            seen[u.speaker] = by_id.get(u.speaker) or nick_participant(u.speaker)
    return tuple(seen.values())


def nick_participant(nick: str) -> Participant:
    """A chat participant: the nick is id and name; its lower-case form an alias; bots marked."""
    lower = nick.lower()
    return Participant(
        id=nick,
        name=nick,
        role="bot" if lower in BOT_NICKS else None,
        aliases=(lower,) if lower != nick else (),
    )


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not a nick
    except UnicodeDecodeError as exc:
        raise ConversationFormatError(path, "", f"not UTF-8 text: {exc}") from exc
    except OSError as exc:
        raise ConversationFormatError(path, "", f"cannot read file: {exc}") from exc
    # Only "\n" ends a line: the annotation counts lines that way (str.splitlines would also
    # split at form feeds and Unicode separators that occur inside messages).
    lines = [ln.rstrip("\r") for ln in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def _data_dir(folder: str | Path) -> Path:
    base = Path(folder)
    for cand in (base / "data", base):
        if any((cand / s).is_dir() for s in SPLITS):
            return cand
    raise FileNotFoundError(f"{base} holds no IRC disentanglement data (expected data/dev etc.)")


__all__ = [
    "BOT_NICKS",
    "PRESENCE_WINDOW",
    "IrcEvent",
    "irc_files",
    "nick_participant",
    "read_irc",
    "read_irc_file",
    "read_irc_links",
    "thread_conversations",
]
