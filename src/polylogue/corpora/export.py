"""Write a conversation in the user-facing transcript formats that ``read_transcript`` reads.

Used to put corpus data through exactly the path a user's file takes (the outside-data suite in
``benchmarks/outside_data.py``), and to hand polylogue conversations to other tools:

Utterances without text are left out (a transcript line needs text).

:func:`write_transcript` writes one of three formats:

* ``jsonl``: one ``{"speaker", "text", "start", "end", "addressee"}``
  object per line (``addressee`` only where annotated), ``{"break": true}`` at breaks;
* ``csv``: ``speaker,text,start,end,addressee[,break]`` (addressees
  joined with ``;``);
* ``vtt``: WebVTT in the Zoom style (numbered cues, ``Name: text``) or the
  Teams style (cue ids, ``<v Name>text</v>``); utterances without times are left out, since a
  cue needs them.

``names`` maps participant ids to the names written (default: the display name). ``breaks``
lists utterance indices where a new conversation starts (written as the format's marker).
"""

from __future__ import annotations

import csv
import html
import io
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from polylogue.conversation import Conversation, Utterance

VttStyle = Literal["zoom", "teams"]


def _names(conv: Conversation, names: Mapping[str, str] | None) -> dict[str, str]:
    out = {p.id: p.display_name for p in conv.participants}
    out.update(names or {})
    return out


@dataclass(frozen=True, slots=True)
class _Lines:
    """What every writer starts from: the names to write and the utterances a file holds."""

    who: dict[str, str]
    #: (utterance index, utterance, whether a new conversation starts at it)
    rows: list[tuple[int, Utterance, bool]]
    #: Whether the transcript has any break (the CSV writer adds a column only then).
    has_breaks: bool

    @classmethod
    def of(
        cls,
        conv: Conversation,
        names: Mapping[str, str] | None,
        breaks: Iterable[int],
        timed: bool = False,
    ) -> _Lines:
        cuts = set(breaks)
        rows = [(i, u, i in cuts) for i, u in _written(conv, cuts, timed)]
        return cls(_names(conv, names), rows, bool(cuts))

    def addressees(self, u: Utterance) -> list[str] | None:
        return None if u.addressees is None else [self.who.get(a, a) for a in u.addressees]


ExportFormat = Literal["jsonl", "csv", "vtt"]


def write_transcript(
    conv: Conversation,
    path: str | Path,
    fmt: ExportFormat,
    *,
    style: VttStyle = "teams",
    names: Mapping[str, str] | None = None,
    breaks: Iterable[int] = (),
) -> Path:
    """Write ``conv`` to ``path`` as a ``jsonl``, ``csv`` or ``vtt`` transcript (``style``:
    the WebVTT flavour) and return the path."""
    if fmt not in _RENDERERS:
        raise ValueError(f"format must be one of {', '.join(_RENDERERS)}, not {fmt!r}")
    if style not in ("zoom", "teams"):
        raise ValueError(f"style must be 'zoom' or 'teams', not {style!r}")
    t = _Lines.of(conv, names, breaks, timed=fmt == "vtt")
    text = _RENDERERS[fmt](t, style)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return Path(path)


def _jsonl(t: _Lines, style: VttStyle) -> str:
    lines = []
    for _, u, cut in t.rows:
        if cut:
            lines.append('{"break": true}')
        rec: dict[str, Any] = {"speaker": t.who[u.speaker], "text": u.text}
        times = {"start": u.start, "end": u.end, "addressee": t.addressees(u)}
        rec.update({k: v for k, v in times.items() if v is not None})
        lines.append(json.dumps(rec, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)


def _csv(t: _Lines, style: VttStyle) -> str:
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(
        ["speaker", "text", "start", "end", "addressee", *(["break"] if t.has_breaks else [])]
    )
    for _, u, cut in t.rows:
        row = [
            t.who[u.speaker],
            u.text,
            _num(u.start),
            _num(u.end),
            ";".join(t.addressees(u) or []),
        ]
        w.writerow(row + (["1" if cut else ""] if t.has_breaks else []))
    return buf.getvalue()


def _vtt(t: _Lines, style: VttStyle) -> str:
    lines = ["WEBVTT", ""]
    for k, (i, u, cut) in enumerate(t.rows, 1):
        if cut:
            lines += ["NOTE conversation break", ""]
        start = u.start or 0.0  # never None here: untimed utterances are not written
        end = u.end if u.end is not None and u.end >= start else start
        timing = f"{_clock(start)} --> {_clock(end)}"
        # Cue text is HTML-like: "<nick>" or "&" would otherwise be read as markup.
        text = html.escape(" ".join(u.text.split()), quote=False)
        if style == "zoom":
            lines += [str(k), timing, f"{t.who[u.speaker]}: {text}", ""]
        else:
            cue_id = f"{k:08x}-0000-4000-8000-{i:012x}/{k}"  # Teams writes GUID/n cue ids
            lines += [cue_id, timing, f"<v {t.who[u.speaker]}>{text}</v>", ""]
    return "\n".join(lines)


_RENDERERS: dict[str, Callable[[_Lines, VttStyle], str]] = {
    "jsonl": _jsonl,
    "csv": _csv,
    "vtt": _vtt,
}


def _written(
    conv: Conversation, cuts: set[int], timed: bool = False
) -> Iterator[tuple[int, Utterance]]:
    """Utterances a transcript can hold (text; times for WebVTT), with their indices.

    A break on an utterance that is left out moves to the next one written (``cuts`` is
    updated in place)."""
    pending = False
    for i, u in enumerate(conv.utterances):
        pending = pending or i in cuts
        if not u.text.strip() or (timed and u.start is None):
            continue
        if pending:
            cuts.add(i)
            pending = False
        yield i, u


def _clock(t: float) -> str:
    ms = round(t * 1000)
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}.{ms:03d}"


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.3f}"


__all__ = ["ExportFormat", "VttStyle", "write_transcript"]
