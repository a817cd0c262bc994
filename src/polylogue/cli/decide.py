"""``polylogue decide``, the main job: deciding where a participant should speak.

``decide`` replays a transcript (or follows one streamed on stdin) through the shipped
turn-taking engine and shows, at every pause, whether one participant should speak. Fitting the
model it runs and choosing its thresholds (``train-default``, ``operating-points``,
``tune-threshold``) is :mod:`polylogue.cli.fit`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from polylogue.conversation import DOMAIN_NAMES

if TYPE_CHECKING:
    from rich.console import Console

    from polylogue.conversation import Participant, Utterance
    from polylogue.corpora.transcripts import AliasSpec
    from polylogue.engine.deployment import Deployment
    from polylogue.engine.live import LiveConversation, LiveDecision, NameBook


#: The domain names as help text (also in the fitting commands' help, ``polylogue.cli.fit``).
DOMAIN_LIST = ", ".join(DOMAIN_NAMES[:-1]) + f" or {DOMAIN_NAMES[-1]}"


def register(app: typer.Typer) -> None:
    app.command("decide")(decide)


# ----------------------------------------------------------------------------- decide


@dataclass(frozen=True)
class _Step:
    """One utterance of the replay and, when the target was listening, the decision after it."""

    index: int
    utterance: Utterance
    speaker_name: str
    #: The live decision at this pause (None: no decision point).
    decision: LiveDecision | None
    #: Why no decision was made ("target is speaking", "backchannel or too short").
    skipped: str | None
    #: The utterance was spoken by the target (what ``--check`` compares a decision with).
    by_target: bool = False


#: The live conversation's reason for making no decision after an acknowledgement.
SKIPPED_ACKNOWLEDGEMENT = "backchannel or too short"


def _step_of(index: int, u: Utterance, live: LiveConversation, d: LiveDecision) -> _Step:
    people = live.engine.participants
    name = people[d.speaker].display_name if d.speaker in people else u.speaker
    decided = d if d.engine is not None and d.action is not None else None
    skipped = None if decided is not None else d.reason
    return _Step(index, u, name, decided, skipped, by_target=d.speaker == live.agent.pid)


def _with_next(steps: Iterator[_Step]) -> Iterator[tuple[_Step, _Step | None]]:
    """Each step with the one after it (one utterance late: what ``--check`` needs)."""
    prev: _Step | None = None
    for step in steps:
        if prev is not None:
            yield prev, step
        prev = step
    if prev is not None:
        yield prev, None


def _agreement(step: _Step, nxt: _Step | None) -> bool | None:
    """Did the decision match who spoke next? ``None`` when nothing was decided or at the end."""
    if step.decision is None or nxt is None:
        return None
    return (step.decision.action == "SPEAK") == nxt.by_target


#: How the room is known, said once in plain and rich output (the rule is the same for files,
#: stdin and ``serve``: a declared roster, or discovery as people speak).
ROOM_DECLARED = "room: {n} participants declared up front"
ROOM_DISCOVERED = (
    "room: participants join as they first speak (no roster declared; a "
    '{"participants": [...]} header declares who is there from the start)'
)


def _file_steps(
    path: Path,
    fmt: str | None,
    who: str,
    deployment: Deployment,
    aliases: Sequence[AliasSpec] = (),
    focus: _RoomFocus | None = None,
) -> tuple[str, Iterator[_Step], str, Deployment]:
    """Replay a transcript file as a stream: the same rule for who is in the room as on stdin
    (a declared roster, or discovery as people first speak). The deployment takes the domain
    the file declares unless ``--domain`` gave one."""
    from polylogue.corpora.transcripts import (
        name_list,
        read_transcript,
        transcript_domain,
        with_aliases,
    )
    from polylogue.engine.live import LiveConversation, NameBook, participant_for_label

    conv = read_transcript(path, format=fmt)
    deployment = deployment.with_declared_domain(*transcript_domain(conv))
    participants = with_aliases(conv.participants, aliases, path)
    book = NameBook()
    for p in participants:
        book.add(p)
    if not book.matches(who):
        names = name_list(p.display_name for p in participants)
        raise typer.BadParameter(
            f"{who!r} is not a participant of {path} ({names})", param_hint="--as"
        )
    focus = focus or _RoomFocus()
    check_focus_names(book, participants, who, focus, path)
    # Without a declared roster nobody is known before they speak (as on a live stream),
    # except by the names --alias gives them (known, not present: as on stdin).
    people: list[Participant] = list(
        participants
        if conv.roster_known
        else with_aliases([participant_for_label(a.name) for a in aliases], aliases, "--alias")
    )
    if not conv.roster_known:  # --ignore/--only names are known from the start, as aliases
        named = {pid for n in focus.names for pid in book.matches(n)}
        people = [*people, *(p for p in participants if p.id in named and p not in people)]
    live = LiveConversation.start(
        who, people, deployment=deployment, roster_known=conv.roster_known
    )
    live.explain = True
    focus.start(live, str(path))

    def steps() -> Iterator[_Step]:
        for i, u in enumerate(conv.utterances):
            yield _step_of(i, u, live, live.utterance(u))

    matched = next(p for p in participants if p.id in book.matches(who))
    room = ROOM_DECLARED.format(n=len(participants)) if conv.roster_known else ROOM_DISCOVERED
    return matched.display_name, steps(), room, deployment


def check_focus_names(
    book: NameBook,
    participants: Sequence[Participant],
    who: str,
    focus: _RoomFocus,
    path: Path | str,
) -> None:
    """Each ``--ignore``/``--only`` name is a participant of ``path`` other than ``who``, else
    a usage error naming the flag (shared with ``examples/voice_meeting.py``)."""
    from polylogue.corpora.transcripts import name_list

    for flag, wanted in (("--ignore", focus.ignore), ("--only", focus.only)):
        for name in wanted:
            if not book.matches(name) or book.matches(name) == book.matches(who):
                names = name_list(p.display_name for p in participants)
                what = (
                    "is the participant decided for"
                    if book.matches(name)
                    else (f"is not a participant of {path}")
                )
                raise typer.BadParameter(f"{name!r} {what} ({names})", param_hint=flag)


#: Formats ``decide -`` reads from stdin (``txt`` and ``jsonl`` share one line parser).
STDIN_FORMATS = ("txt", "jsonl", "vtt", "srt")


def _stdin_lines() -> Iterator[str]:
    """Lines of stdin as they arrive (no read-ahead that would delay answers); see
    :func:`polylogue.corpora.transcripts.stream_lines` for line ends, BOMs and bad bytes."""
    from polylogue.corpora.transcripts import stream_lines

    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text-only stdin (an embedding program replaced it)
        return iter(sys.stdin.readline, "")
    return stream_lines(buffer)


@dataclass
class _StdinStart:
    """What the first non-blank stdin line says: the format, and a participants header."""

    fmt: str
    lines: Iterator[str]  # every line, the ones already read included
    header: tuple[Participant, ...] | None
    header_line: int = 0
    #: the ``domain`` the header declares, if any
    domain: str | None = None


def _stdin_start(fmt: str | None) -> _StdinStart:
    """Read stdin up to its first non-blank line: its format (sniffed unless given) and, for
    line formats, a ``{"participants": [...]}`` header."""
    from itertools import chain

    from polylogue.corpora.transcripts import (
        header_domain,
        parse_header_line,
        sniff_stream_format,
    )

    lines = _stdin_lines()
    head: list[str] = []
    for line in lines:  # keep blank lines so line numbers stay right
        head.append(line)
        if line.strip():
            break
    if fmt is None:
        fmt = sniff_stream_format(head[-1]) if head else "txt"
    if fmt not in STDIN_FORMATS:
        raise typer.BadParameter(
            f"{fmt!r} cannot be streamed on stdin (use one of {', '.join(STDIN_FORMATS)},"
            " or give the file)",
            param_hint="--format",
        )
    header = None
    domain = None
    if fmt in ("txt", "jsonl") and head and head[-1].strip():
        header = parse_header_line(head[-1], lineno=len(head))
        if header is not None:
            domain = header_domain(head[-1], lineno=len(head))
    return _StdinStart(fmt, chain(head, lines), header, len(head) if header else 0, domain)


def _stdin_utterances(
    start: _StdinStart, live: LiveConversation, aliases: Sequence[AliasSpec]
) -> Iterator[tuple[int, Utterance]]:
    """``(line number, utterance)`` from stdin; a header (the first line, or after comments)
    makes its participants join."""
    from polylogue.corpora.transcripts import (
        parse_header_line,
        parse_transcript_line,
        stream_cues,
        with_aliases,
    )

    if start.fmt in ("vtt", "srt"):
        yield from _in_time_order(stream_cues(start.lines, start.fmt))
        return

    def utterances() -> Iterator[tuple[int, Utterance]]:
        seen = False
        for lineno, line in enumerate(start.lines, 1):
            if lineno == start.header_line:
                continue
            if not seen and not live.roster_known:
                header = parse_header_line(line, lineno=lineno)
                if header is not None:
                    live.join(with_aliases(header, aliases, "<stdin>"))
                    continue
            u = parse_transcript_line(line, lineno)
            if u is not None:
                seen = True
                yield lineno, u

    yield from _in_time_order(utterances())


def _in_time_order(
    numbered: Iterator[tuple[int, Utterance]],
) -> Iterator[tuple[int, Utterance]]:
    """The utterances unchanged; a warning (once) where one starts before the one above it."""
    from polylogue.errors import note_input

    last: float | None = None
    for lineno, u in numbered:
        if u.start is not None:
            if last is not None and u.start < last:
                note_input(
                    "time goes backwards",
                    "<stdin>",
                    f"line {lineno}",
                    f"starts at {u.start:g} s, before the utterance above it ({last:g} s); "
                    "utterances are taken in the order they arrive",
                )
            last = u.start
        yield lineno, u


def _stdin_steps(
    who: str,
    fmt: str | None,
    deployment: Deployment,
    aliases: Sequence[AliasSpec] = (),
    focus: _RoomFocus | None = None,
) -> tuple[str, Iterator[_Step], str, Deployment]:
    """Follow a transcript streamed on stdin: each utterance is answered as soon as it arrives.

    ``--as`` is resolved like in file mode (id, name, alias or first name, any case), also
    against speakers who appear later; a one-time warning goes to stderr if nobody matches.
    """
    from polylogue.conversation import ConversationFormatError
    from polylogue.corpora.transcripts import inferred_domain, with_aliases
    from polylogue.engine.live import EventError, LiveConversation, participant_for_label

    start = _stdin_start(fmt)
    deployment = deployment.with_declared_domain(start.domain)
    if start.domain is None and start.header is not None:  # a header's operator role
        deployment = deployment.with_declared_domain(inferred_domain(start.header), "inferred")
    # Aliased people are known by name before they speak (so "Morgan, ..." names them), but
    # not present until they do: registering is not joining.
    focus = focus or _RoomFocus()
    known: list[Participant] = list(
        with_aliases([participant_for_label(a.name) for a in aliases], aliases, "--alias")
        if start.header is None and aliases
        else []
    )
    if start.header is None:  # --ignore/--only names are known from the start, as aliases
        aliased = {a.name.casefold() for a in aliases}
        known += [participant_for_label(n) for n in focus.names if n.casefold() not in aliased]
    live = LiveConversation(deployment, who, strict_roster=True, explain=True, known=known)
    if start.header is not None:
        live.join(with_aliases(start.header, aliases, "<stdin>"))
    focus.start(live, "<stdin>")
    # Without a header, --only/--ignore names are only known by name: nobody may ever speak
    # by that name (a misspelling). Said at once, and an error at the end if still true.
    unseen = {n: pid for n in focus.names if (pid := _focus_pid(live, n)) is not None}
    if start.header is None:
        for flag, names in (("--ignore", focus.ignore), ("--only", focus.only)):
            for n in names:
                print(_FOCUS_NOT_YET[flag].format(name=n), file=sys.stderr, flush=True)

    def steps() -> Iterator[_Step]:
        spoke: dict[str, None] = {}
        for index, (lineno, u) in enumerate(_stdin_utterances(start, live, aliases)):
            try:
                d = live.utterance(u)
            except EventError as e:
                msg = str(e)
                if "is not a participant" in msg:
                    msg = f"speaker {u.speaker!r} is not in the participants header"
                raise ConversationFormatError("<stdin>", f"line {lineno}", msg) from None
            for w in live.warnings:
                print(w, file=sys.stderr, flush=True)
            live.warnings.clear()
            spoke.setdefault(u.speaker)
            unseen.pop(next((n for n, pid in unseen.items() if pid == d.speaker), ""), None)
            yield _step_of(index, u, live, d)
        if start.header is None and unseen:
            _never_spoke(focus, unseen, list(spoke))

    room = "room: as declared by a header line, else as people first speak"
    return who, steps(), room, deployment


#: The warning when ``--ignore``/``--only`` names someone a headerless stream has not shown.
_FOCUS_NOT_YET = {
    "--only": (
        "warning: --only {name!r} is not (yet) in the roster of <stdin> (no participants "
        "header): until someone by that name speaks, the agent answers nobody"
    ),
    "--ignore": (
        "warning: --ignore {name!r} is not (yet) in the roster of <stdin> (no participants "
        "header): until someone by that name speaks, it silences nobody's words"
    ),
}


def _focus_pid(live: LiveConversation, name: str) -> str | None:
    found = live.names.matches(name)
    return next(iter(found)) if len(found) == 1 else None


def _never_spoke(focus: _RoomFocus, unseen: dict[str, str], speakers: list[str]) -> None:
    """The end of a headerless stream where an ``--only``/``--ignore`` name never spoke: an
    error (the decisions are out; the exit status says they answered the wrong room)."""
    from polylogue.corpora.transcripts import name_list

    flags = [("--only" if n in focus.only else "--ignore", n) for n in unseen]
    effect = {
        "--only": "the agent answered nobody",
        "--ignore": "no one's words were taken as context only",
    }
    parts = [f"{flag} {n!r} named nobody who spoke ({effect[flag]})" for flag, n in flags]
    raise typer.BadParameter(
        "; ".join(parts) + f"; speakers in <stdin>: {name_list(speakers) or 'none'}"
    )


def _fmt_time(t: float | None) -> str:
    if t is None:
        return ""
    m, s = divmod(t, 60)
    return f"{int(m):02d}:{s:04.1f} "


_BAR_WIDTH = 20


def probability_bar(p: float, threshold: float, width: int = _BAR_WIDTH) -> str:
    """``████│·····``: P(speak) filled, the threshold marked by ``│`` at its position."""
    filled = round(p * width)
    cells = ["█" if i < filled else "·" for i in range(width)]
    mark = min(width, max(0, round(threshold * width)))
    return "".join(cells[:mark]) + "│" + "".join(cells[mark:])


def _check_text(agree: bool | None, nxt: _Step | None) -> str:
    if agree is None or nxt is None:
        return ""
    actual = f"{nxt.speaker_name} spoke next"
    return f"  {'✓ agrees' if agree else '✗ disagrees'} ({actual})"


def _print_step(
    console: Console, step: _Step, target_name: str, check: str = "", plain: bool = False
) -> None:
    from rich.markup import escape

    u = step.utterance
    d = step.decision
    name, text, target_name = (
        printable(step.speaker_name),
        printable(u.text),
        printable(target_name),
    )
    if plain:  # piped: one plain line per utterance, never wrapped
        line = f"{step.index + 1} {_fmt_time(u.start)}{name}: {text}"
        if d is not None and d.engine is not None:
            line += (
                f"\t| P(speak)={d.engine.p_speak:.2f} threshold={d.threshold:.2f} "
                f"P(backchannel)={d.engine.p_backchannel:.2f} {_verdict(d, target_name)}"
                f" ({printable(d.reason)}){check}"
            )
        elif step.skipped == SKIPPED_ACKNOWLEDGEMENT:
            line += f"\t| skipped: {step.skipped} (no decision after an acknowledgement)"
        console.file.write(line + "\n")
        return
    head = (
        f"[dim]{step.index + 1:>4} {_fmt_time(u.start)}[/dim]"
        f"[bold]{escape(name)}[/bold]: {escape(text)}"
    )
    console.print(head, highlight=False)
    if d is None or d.engine is None:
        return
    e = d.engine
    bar = probability_bar(e.p_speak, d.threshold or 0.0)
    style = {"SPEAK": "bold green", "BACKCHANNEL": "yellow"}.get(str(d.action), "dim")
    verdict = f"[{style}]{escape(_verdict(d, target_name))}[/{style}]"
    # The decision's reason, as --json writes it (polylogue.engine.explanation).
    console.print(
        f"       [cyan]{bar}[/cyan] P(speak)={e.p_speak:.2f} P(backchannel)={e.p_backchannel:.2f}"
        f"  {verdict}"
        f"  [dim]({escape(printable(d.reason))})[/dim]{escape(check)}",
        highlight=False,
    )


def _verdict(d: LiveDecision, target_name: str) -> str:
    if d.action == "SPEAK":
        return f"→ {target_name} should SPEAK"
    if d.action == "BACKCHANNEL":
        return f"→ {target_name} may BACKCHANNEL (mm-hmm)"
    if d.suggested is not None and d.suggested != d.action:
        return f"silent (observer; would {d.suggested.value})"
    return "stay silent"


def printable(s: str) -> str:
    """``s`` with control, line-separator and bidi characters written as ``\\x1b``-style
    escapes: a name or text from the input can neither forge an output line nor recolour or
    reorder the terminal."""
    import unicodedata

    from polylogue.conversation import BIDI_CONTROLS

    if s.isprintable() and not BIDI_CONTROLS.intersection(s):
        return s
    out = []
    for c in s:
        if c == " " or (
            c not in BIDI_CONTROLS and unicodedata.category(c) not in ("Cc", "Zl", "Zp", "Cf")
        ):
            out.append(c)
        else:
            out.append(c.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def _step_json(step: _Step, target: str) -> dict[str, Any]:
    u = step.utterance
    out: dict[str, Any] = {
        "index": step.index,
        "speaker": u.speaker,
        "speaker_name": step.speaker_name,
        "text": u.text,
        "start": u.start,
        "end": u.end,
        "target": target,
    }
    if step.decision is None or step.decision.engine is None:
        out.update({"decision": None, "p_speak": None, "skipped": step.skipped})
    else:
        d, e = step.decision, step.decision.engine
        out.update(
            {
                "decision": None if d.action is None else d.action.value,
                "suggested": None if d.suggested is None else d.suggested.value,
                "reason": d.reason,
                "reason_code": None if d.reason_code is None else d.reason_code.value,
                "p_speak": round(e.p_speak, 4),
                "p_backchannel": round(e.p_backchannel, 4),
                "p_silent": round(e.p_silent, 4),
                "threshold": d.threshold,
                "addressed": e.addressed,
                "address": e.cues.get("address"),
                "cues": e.cues,
                "contributions": [list(c) for c in e.contributions],
                "latency_ms": round(e.latency_s * 1000, 3),
            }
        )
    return out


def decide(
    transcript: Annotated[
        str,
        typer.Argument(
            help="Transcript file (.jsonl/.csv/.vtt/.srt/.txt) or - for stdin "
            "(Speaker: text or JSONL lines, WebVTT or SRT; see --format)."
        ),
    ],
    who: Annotated[
        str, typer.Option("--as", help="The participant to decide for (id, name or alias).")
    ],
    threshold: Annotated[
        float | None,
        typer.Option(help="Raw floor threshold on P(SPEAK) in [0, 1] (overrides the point's)."),
    ] = None,
    operating_point: Annotated[
        str | None,
        typer.Option(
            help="matched (default: speaks as often as people did), polite (false "
            "interruptions <= 5%), balanced (the paper's metric) or addressed-only."
        ),
    ] = None,
    role: Annotated[
        str | None,
        typer.Option(
            help="observer (never speaks, shows what it would do), assistant or facilitator."
        ),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="jsonl, csv, vtt, srt or txt, if the suffix does not say it "
            "(stdin: txt, jsonl, vtt or srt; default: from the first line).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per utterance (JSONL).")
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Compare each decision with who actually spoke next (answers one line late).",
        ),
    ] = False,
    model_dir: Annotated[
        Path | None,
        typer.Option(help="A model folder from train-default (default: the shipped one)."),
    ] = None,
    domain: Annotated[
        str | None,
        typer.Option(
            help=f"Kind of conversation: {DOMAIN_LIST} (chat has its own model); "
            "picks that domain's operating-point thresholds. Default: the transcript "
            "header's domain, else meeting."
        ),
    ] = None,
    alias: Annotated[
        list[str] | None,
        typer.Option(
            "--alias",
            help="NAME=ALIAS[,ALIAS...]: what people call the speaker labelled NAME "
            "(e.g. 'Professor D=Morgan'), so 'Morgan, ...' addresses them (repeatable).",
        ),
    ] = None,
    alias_file: Annotated[
        Path | None,
        typer.Option(
            "--alias-file", help="A roster file of aliases: one 'NAME = ALIAS, ALIAS' per line."
        ),
    ] = None,
    audience: Annotated[
        str,
        typer.Option(
            help="group (the role's rules always) or adaptive (alone with one other person, "
            "answer their turns; group rules once a second person is there)."
        ),
    ] = "group",
    ignore: Annotated[
        list[str] | None,
        typer.Option(
            "--ignore",
            help="A participant whose speech is context only (a TV, a recorded message, a "
            "note-taking bot): never answered, never addressing anyone (repeatable).",
        ),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Answer only this participant (repeatable: only these ones)."),
    ] = None,
) -> None:
    """Show, utterance by utterance, where a participant should have spoken, and why."""
    from polylogue.errors import input_notices

    # Warnings about the input (times going backwards, respelt names...) once per kind: at
    # its first occurrence on stdin, after reading for a file.
    with input_notices(immediate=transcript == "-"):
        _decide(
            transcript,
            who,
            threshold,
            fmt,
            as_json,
            check,
            model_dir,
            domain,
            alias or [],
            alias_file,
            operating_point,
            role,
            _RoomFocus(audience, tuple(ignore or ()), tuple(only or ())),
        )


@dataclass
class _RoomFocus:
    """``--audience``, ``--ignore`` and ``--only``: applied as ``serve``'s ``audience`` and
    ``focus`` events are. The named participants are known by name from the start (like
    ``--alias`` names: known, not present), so the focus holds before they first speak."""

    audience: str = "group"
    ignore: tuple[str, ...] = ()
    only: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.ignore, *self.only)

    def described(self) -> str:
        """The controls in force, for the plain output's header ("" for the defaults)."""
        parts = [f"audience {self.audience}"] if self.audience != "group" else []
        if self.ignore:
            parts.append("context only: " + ", ".join(self.ignore))
        if self.only:
            parts.append("answering only: " + ", ".join(self.only))
        return "; ".join(parts)

    def start(self, live: LiveConversation, source: str) -> None:
        from polylogue.engine.live import EventError

        try:
            live.set_audience(self.audience)
        except EventError as e:
            raise typer.BadParameter(str(e).split(": ", 1)[1], param_hint="--audience") from None
        if not self.names:
            return
        try:
            live.set_focus(self.ignore, self.only)
        except EventError as e:
            flag = "--only" if str(e).startswith("focus.only") else "--ignore"
            raise typer.BadParameter(
                f"{source}: {str(e).split(': ', 1)[1]}", param_hint=flag
            ) from None


def _decide(
    transcript: str,
    who: str,
    threshold: float | None,
    fmt: str | None,
    as_json: bool,
    check: bool,
    model_dir: Path | None,
    domain: str | None,
    alias: list[str],
    alias_file: Path | None,
    operating_point: str | None = None,
    role: str | None = None,
    focus: _RoomFocus | None = None,
) -> None:
    from rich.console import Console
    from rich.markup import escape

    from polylogue.conversation import BadNameError, clean_name
    from polylogue.corpora.transcripts import parse_alias, read_alias_file

    try:
        who = clean_name(who)
    except BadNameError as exc:
        raise typer.BadParameter(str(exc), param_hint="--as") from None
    aliases = [*(read_alias_file(alias_file) if alias_file else []), *map(parse_alias, alias)]
    deployment = resolve_deployment(model_dir, domain, operating_point, threshold, role)
    focus = focus or _RoomFocus()
    for flag, names in (("--ignore", focus.ignore), ("--only", focus.only)):
        for n in names:
            try:
                if not clean_name(n):
                    raise BadNameError("a blank name names nobody")
            except BadNameError as exc:
                raise typer.BadParameter(str(exc), param_hint=flag) from None
    for flag, names in (("--ignore", focus.ignore), ("--only", focus.only)):
        if any(n.strip().casefold() == who.casefold() for n in names):
            raise typer.BadParameter(f"{who!r} is the participant decided for", param_hint=flag)
    if transcript == "-":
        target_name, steps, room, deployment = _stdin_steps(who, fmt, deployment, aliases, focus)
    else:
        target_name, steps, room, deployment = _file_steps(
            Path(transcript), fmt, who, deployment, aliases, focus
        )
    console = Console(highlight=False)
    plain = not console.is_terminal
    paired: Iterator[tuple[_Step, _Step | None]] = (
        _with_next(steps) if check else ((s, None) for s in steps)
    )
    speak_at: list[int] = []
    backchannel_at: list[int] = []
    decided = 0
    checked = agreed = 0
    shown_threshold = False
    only_target = True  # every utterance was the target's own: nobody to answer
    for step, nxt in paired:
        agree = _agreement(step, nxt) if check else None
        only_target = only_target and step.by_target
        if not as_json and not shown_threshold:  # the header comes before any utterance
            shown_threshold = True
            console.print(_header(deployment, plain), highlight=False, soft_wrap=True, markup=False)
            console.print(room, highlight=False, soft_wrap=True, markup=False)
            if focus.described():
                console.print(focus.described(), highlight=False, soft_wrap=True, markup=False)
        if step.decision is not None:
            decided += 1
            if step.decision.action == "SPEAK":
                speak_at.append(step.index + 1)
            elif step.decision.action == "BACKCHANNEL":
                backchannel_at.append(step.index + 1)
            if agree is not None:
                checked += 1
                agreed += agree
        if as_json:
            row = _step_json(step, target_name)
            if check:
                row["next_speaker"] = None if nxt is None else nxt.speaker_name
                row["agrees"] = agree
            sys.stdout.write(json.dumps(row) + "\n")
            sys.stdout.flush()
        else:
            _print_step(console, step, target_name, _check_text(agree, nxt), plain)
            console.file.flush()
    if not as_json:
        where = ", ".join(map(str, speak_at)) if speak_at else "none"
        summary = (
            f"\n[bold]{escape(target_name)}[/bold]: {decided} pause{'' if decided == 1 else 's'} "
            f"decided, should have spoken at {len(speak_at)}: after utterance {escape(where)}."
        )
        if only_target and decided == 0:
            summary = f"\n[bold]{escape(target_name)}[/bold]: nobody else spoke: nothing to decide."
        if backchannel_at:
            summary += (
                f"\nA short acknowledgement (mm-hmm) fits after utterance "
                f"{', '.join(map(str, backchannel_at))}."
            )
        if check:
            rate = f" ({agreed / checked:.0%})" if checked else ""
            summary += (
                f"\n--check: {agreed} of {checked} decisions agree with who spoke next{rate}."
            )
        console.print(summary, highlight=False, soft_wrap=True)


def resolve_deployment(
    model_dir: Path | None,
    domain: str | None,
    operating_point: str | None,
    threshold: float | None,
    role: str | None = None,
) -> Deployment:
    """The CLI's one way to a deployment: a bad option is a usage error naming the flag."""
    from polylogue.engine.deployment import Deployment, DeploymentError

    try:
        return Deployment.resolve(model_dir, domain, operating_point, threshold, role)
    except DeploymentError as e:
        flag = {"operating point": "--operating-point"}.get(e.option, f"--{e.option}")
        raise typer.BadParameter(str(e).split(": ", 1)[1], param_hint=flag) from None


#: How the header says where the domain came from (``Deployment.domain_source``).
_DOMAIN_SOURCE = {
    "requested": "",
    "declared": " (declared by the transcript)",
    "inferred": " (inferred: the transcript has a conference operator, or its corpus says so)",
    "default": " (the default: no domain declared; --domain sets one)",
}


def _header(dep: Deployment, plain: bool) -> str:
    t = dep.thresholds
    ge = ">=" if plain else "≥"
    where = f", {dep.domain}{_DOMAIN_SOURCE.get(dep.domain_source, '')}"
    text = (
        f"operating point {dep.operating_point}{where}: P(speak) {ge} {t.take_floor:.2f} means "
        f"SPEAK" + ("" if plain else " (marked │ on the bars)")
    )
    if t.backchannel <= 1.0:
        text += (
            f"; BACKCHANNEL when P(backchannel) {ge} {t.backchannel:.2f} and "
            f"{ge} {t.backchannel_margin:g} x P(speak)"
        )
    if dep.addressed_only:
        text += "; only when addressed"
    if not dep.speaks:
        text += f"; role {dep.role}: never speaks"
    return text
