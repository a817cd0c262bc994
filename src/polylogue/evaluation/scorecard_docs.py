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
    for i, line in enumerate(lines):
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
    """Every cell of every marked table of ``doc`` that differs from its scorecard."""
    problems: list[str] = []
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
    returns the number of tables rewritten."""
    path = Path(doc)
    tables = find_tables(path, None if root is None else Path(root))
    lines = path.read_text(encoding="utf-8").splitlines()
    for t in reversed(tables):
        keys = [_key(dict(zip(t.header, r, strict=False))) for r in t.rows]
        body = render_table(load_scorecard(t.scorecard), t.header, keys).splitlines()
        lines[t.span[0] : t.span[1]] = body
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(tables)
