"""Cut user transcripts into conversations, and find transcript files from folders and globs.

A transcript file may hold several conversations: explicit break markers (see
:mod:`polylogue.corpora.transcripts`, "Conversation / scene breaks") and, optionally, long
silences (``reset_after`` seconds between the end of one utterance and the start of the next)
start a new one. Decision points never look across a cut, so a new conversation starts with an
empty context, as a participant joining fresh would.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from polylogue.conversation import Conversation, Participant, Utterance
from polylogue.corpora.transcripts import TRANSCRIPT_FORMATS, read_transcript
from polylogue.errors import PolylogueInputError

_GLOB_CHARS = frozenset("*?[")


def cut_points(conv: Conversation, reset_after: float | None = None) -> list[int]:
    """Utterance indices where a new conversation starts (never 0), sorted."""
    if reset_after is not None and reset_after <= 0:
        raise ValueError(f"reset_after must be positive seconds, got {reset_after}")
    cuts = {int(i) for i in conv.metadata.get("breaks") or () if 0 < int(i) < len(conv)}
    if reset_after is not None:
        utts = conv.utterances
        for i in range(1, len(utts)):
            prev_end = utts[i - 1].end if utts[i - 1].end is not None else utts[i - 1].start
            start = utts[i].start
            if prev_end is not None and start is not None and start - prev_end > reset_after:
                cuts.add(i)
    return sorted(cuts)


def split_conversation(conv: Conversation, reset_after: float | None = None) -> list[Conversation]:
    """``conv`` cut at its breaks (and long gaps); ``[conv]`` unchanged when there is no cut.

    Parts are ``{id}#1``, ``{id}#2``...; they share the original's ``group`` so a benchmark
    split keeps one file together. Without a roster, a part's participants are the people who
    speak or are addressed in it.
    """
    cuts = cut_points(conv, reset_after)
    if not cuts:
        return [conv]
    bounds = [0, *cuts, len(conv.utterances)]
    parts = []
    for k, (a, b) in enumerate(itertools.pairwise(bounds), 1):
        utts = conv.utterances[a:b]
        parts.append(
            Conversation(
                id=f"{conv.id}#{k}",
                corpus=conv.corpus,
                utterances=utts,
                participants=conv.participants
                if conv.roster_known
                else _participants_of(utts, conv.participants),
                domain=conv.domain,
                group=conv.group_id,
                roster_known=conv.roster_known,
                source=conv.source,
                metadata={
                    **{k2: v for k2, v in conv.metadata.items() if k2 != "breaks"},
                    "part": k,
                    "parts": len(bounds) - 1,
                    "first_utterance": a,
                },
            )
        )
    return parts


def read_transcript_parts(
    path: str | Path,
    format: str | None = None,
    conversation_id: str | None = None,
    reset_after: float | None = None,
    domain: str | None = None,
) -> list[Conversation]:
    """:func:`read_transcript`, cut at break markers and (optionally) long silences."""
    conv = read_transcript(path, format=format, conversation_id=conversation_id, domain=domain)
    return split_conversation(conv, reset_after)


def expand_transcript_paths(specs: Iterable[str | Path], format: str | None = None) -> list[Path]:
    """Files named by ``specs``: a file, a folder (its transcript files, sorted) or a glob.

    In a folder, the files with a known transcript suffix are taken (only ``format``'s suffixes
    when it is given). A folder or glob that yields nothing is an error naming it; so is a path
    that does not exist.
    """
    out: list[Path] = []
    for spec in specs:
        text = str(spec)
        p = Path(text)
        if p.is_dir():
            found = _transcripts_in(p, format)
            if not found:
                raise PolylogueInputError(f"{p}: folder holds no transcript files ({_suffixes()})")
            out += found
        elif _GLOB_CHARS & set(text) and not p.exists():
            found = _glob_files(text)
            if not found:
                raise PolylogueInputError(f"{text}: no file matches this pattern")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"transcript {p} does not exist")
    return list(dict.fromkeys(out))


def _glob_files(pattern: str) -> list[Path]:
    """Files matching ``pattern`` (``**`` recursive), each once.

    ``**`` does not descend into symlinked folders (``glob.glob`` does, so a link to a parent
    folder read the same file 41 times before the path got too long), and two names of one
    file (through a file symlink) count once.
    """
    parts = Path(pattern).parts
    k = next(i for i, part in enumerate(parts) if _GLOB_CHARS & set(part))
    anchor = Path(*parts[:k]) if k else Path()
    out: dict[str, Path] = {}
    hidden_ok = parts[-1].startswith(".")
    for p in sorted(anchor.glob(str(Path(*parts[k:])))):
        if p.is_file() and (hidden_ok or not p.name.startswith(".")):  # as glob.glob does
            out.setdefault(os.path.realpath(p), p)
    return list(out.values())


def _transcripts_in(folder: Path, format: str | None) -> list[Path]:
    suffixes: Sequence[str] = (
        TRANSCRIPT_FORMATS.get(format, ())
        if format
        else [s for ss in TRANSCRIPT_FORMATS.values() for s in ss]
    )
    files = sorted(f for f in folder.iterdir() if f.is_file() and not f.name.startswith("."))
    return [f for f in files if f.suffix.lower() in suffixes]


def _suffixes() -> str:
    return ", ".join(s for ss in TRANSCRIPT_FORMATS.values() for s in ss)


def _participants_of(
    utts: Sequence[Utterance], everyone: Sequence[Participant]
) -> tuple[Participant, ...]:
    """Everyone who speaks or is addressed in ``utts``, in order of first appearance."""
    by_id = {p.id: p for p in everyone}
    order = dict.fromkeys(x for u in utts for x in (u.speaker, *(u.addressees or ())))
    return tuple(by_id[x] for x in order if x in by_id)


__all__ = [
    "cut_points",
    "expand_transcript_paths",
    "read_transcript_parts",
    "split_conversation",
]
