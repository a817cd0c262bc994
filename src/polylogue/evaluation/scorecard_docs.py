"""Tables in docs that come from a ``scorecard.json``, checked and regenerated.

A doc marks such a table with an HTML comment naming the scorecard (a path relative to the
repository root or to the doc) right above it::

    <!-- scorecard: docs/results/friends-small/scorecard.json -->
    | Data | Model | Point | BalAcc (95% CI) | Speak ratio |
    |---|---|---|---:|---:|
    | friends | default | matched | 61.2 (58.0–64.1) | 1.02 |

The columns are headers of :data:`~polylogue.evaluation.scorecard_pages.COLUMNS`; ``Data``,
``Model`` and ``Point`` name the row's entry. :func:`check_doc` lists every cell that differs
from what the scorecard gives; :func:`update_doc` rewrites the tables from it.

A comment that looks like a marker but does not parse (``scorecards:``, ``Scorecard:``, a
missing colon or path, a typo such as ``scorcard``) is an error, never a table skipped: a
skipped table is one nobody checks. :func:`update_doc` never deletes a row: a row the
scorecard has no entry for is an error naming the doc, line and row, and the doc is left as
it was. Lines inside fenced code blocks are text, not markers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polylogue.evaluation.scorecard import ScorecardError, load_scorecard
from polylogue.evaluation.scorecard_pages import COLUMNS, KEY_COLUMNS, markdown_table, table

MARKER = re.compile(r"^<!--\s*scorecard:\s*(?P<path>\S+)\s*-->\s*$")
#: The marker's syntax, for error messages.
MARKER_SYNTAX = "<!-- scorecard: PATH/scorecard.json -->"
#: Other comments of the docs that start with the word (not table markers).
OTHER_MARKERS = frozenset({"scorecardcommand"})
_FENCE = re.compile(r"^\s*(```|~~~)")


def _edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def looks_like_marker(line: str) -> bool:
    """An HTML comment (or a broken one, ``<!-``) whose first word is ``scorecard`` or close
    to it (any case, a separator inside, a plural, up to two typos)."""
    s = line.strip()
    if not s.startswith(("<!", "<-")):
        return False
    head = re.match(r"<!?-*\s*([A-Za-z][A-Za-z _-]*)", s)
    if head is None:
        return False
    word = re.sub(r"[ _-]", "", head[1]).lower()
    if word in OTHER_MARKERS:
        return False
    return word.startswith("scorecard") or _edit_distance(word[:9], "scorecard") <= 2


def marker_lines(lines: Sequence[str]) -> list[tuple[int, str]]:
    """``(index, line)`` of the lines outside fenced code blocks."""
    out: list[tuple[int, str]] = []
    fenced = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append((i, line))
    return out


def bad_markers(doc: Path) -> list[str]:
    """``doc:line: ...`` for each comment that looks like a marker but does not parse."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    return [
        f"{doc}:{i + 1}: a scorecard marker that does not parse: {line.strip()[:80]!r} "
        f"(the syntax: {MARKER_SYNTAX})"
        for i, line in marker_lines(lines)
        if not MARKER.match(line.strip()) and looks_like_marker(line)
    ]


@dataclass(frozen=True)
class DocTable:
    """One marked table of a doc: where it is, the scorecard it names, its cells."""

    doc: Path
    line: int  # 1-based line of the marker
    scorecard: Path
    header: list[str]
    rows: list[list[str]]
    #: Line span of the table (start, end exclusive), 0-based.
    span: tuple[int, int]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _resolve(doc: Path, name: str, root: Path | None) -> Path:
    """``name`` under ``root``, else under the doc's folder or the nearest folder above it
    that has it (a repository-relative path from a doc in ``docs/``)."""
    here = doc.resolve().parent
    for base in (root, here, *here.parents):
        if base is not None and (base / name).is_file():
            return base / name
    return (root or doc.parent) / name


def find_tables(doc: Path, root: Path | None = None) -> list[DocTable]:
    """The marked tables of ``doc``."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    out: list[DocTable] = []
    for i, line in marker_lines(lines):
        m = MARKER.match(line.strip())
        if not m:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        start = j
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            j += 1
        if j - start < 2:
            raise ScorecardError(f"{doc}:{i + 1}: no Markdown table under the scorecard marker")
        header = _cells(lines[start])
        unknown = [h for h in header if h not in COLUMNS]
        if unknown:
            raise ScorecardError(
                f"{doc}:{start + 1}: unknown scorecard column(s) {', '.join(unknown)}; "
                f"known: {', '.join(COLUMNS)}"
            )
        rows = [_cells(x) for x in lines[start + 2 : j]]
        out.append(DocTable(doc, i + 1, _resolve(doc, m["path"], root), header, rows, (start, j)))
    return out


def _key(cells: dict[str, str]) -> tuple[str, ...]:
    return tuple(cells.get(k, "") for k in KEY_COLUMNS if k in cells)


def check_table(t: DocTable, card: dict[str, Any]) -> list[str]:
    """Cells of ``t`` that differ from the scorecard (as ``doc:line: column: doc vs card``)."""
    keys = [k for k in KEY_COLUMNS if k in t.header]
    by_key = {tuple(COLUMNS[k](e) for k in keys): e for e in card["entries"]}
    problems: list[str] = []
    for n, row in enumerate(t.rows):
        line = t.span[0] + 3 + n
        cells = dict(zip(t.header, row, strict=False))
        entry = by_key.get(_key(cells))
        if entry is None:
            problems.append(f"{t.doc}:{line}: no entry {_key(cells)} in {t.scorecard}")
            continue
        for col in t.header:
            want = COLUMNS[col](entry)
            if cells.get(col) != want:
                problems.append(
                    f"{t.doc}:{line}: {col}: the doc says {cells.get(col)!r}, "
                    f"{t.scorecard} gives {want!r}"
                )
    return problems


def check_doc(doc: str | Path, root: str | Path | None = None) -> list[str]:
    """Every marker of ``doc`` that does not parse, and every cell of every marked table that
    differs from its scorecard."""
    problems = bad_markers(Path(doc))
    for t in find_tables(Path(doc), None if root is None else Path(root)):
        problems += check_table(t, load_scorecard(t.scorecard))
    return problems


def render_table(
    card: dict[str, Any], header: Sequence[str], keys: Sequence[tuple[str, ...]]
) -> str:
    """A marked table's body from the scorecard: the rows ``keys`` (every entry when empty)."""
    cols = [k for k in KEY_COLUMNS if k in header]
    entries = card["entries"]
    if keys:
        by_key = {tuple(COLUMNS[k](e) for k in cols): e for e in entries}
        entries = [by_key[k] for k in keys if k in by_key]
    return markdown_table(table(entries, header))


def update_doc(doc: str | Path, root: str | Path | None = None) -> int:
    """Rewrite every marked table of ``doc`` from its scorecard (same columns, same rows);
    returns the number of tables rewritten. A marker that does not parse, or a row the
    scorecard has no entry for, is a :class:`ScorecardError` naming each, and nothing is
    written."""
    path = Path(doc)
    problems = bad_markers(path)
    tables = find_tables(path, None if root is None else Path(root))
    lines = path.read_text(encoding="utf-8").splitlines()
    bodies: list[list[str]] = []
    for t in tables:
        card = load_scorecard(t.scorecard)
        cols = [k for k in KEY_COLUMNS if k in t.header]
        known = {tuple(COLUMNS[k](e) for k in cols) for e in card["entries"]}
        keys = [_key(dict(zip(t.header, r, strict=False))) for r in t.rows]
        for n, (key, row) in enumerate(zip(keys, t.rows, strict=True)):
            if key not in known:
                problems.append(
                    f"{t.doc}:{t.span[0] + 3 + n}: the row {' | '.join(row)!r} has no entry "
                    f"{key} in {t.scorecard} (a row is never deleted: fix or remove it by hand)"
                )
        bodies.append(render_table(card, t.header, keys).splitlines())
    if problems:
        raise ScorecardError(f"{path} left unchanged:\n" + "\n".join(problems))
    for t, body in reversed(list(zip(tables, bodies, strict=True))):
        lines[t.span[0] : t.span[1]] = body
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(tables)
