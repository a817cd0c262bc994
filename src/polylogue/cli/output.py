"""Small text helpers shared by the CLI modules (plain Markdown tables, progress counters).

Not a command module: it has no ``register``. Everything here writes plain text that reads the
same in a terminal, a pipe or a log file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table with columns padded to their widest cell (readable as plain text)."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def counter_progress(console: Console, label: str, every: int = 10) -> Callable[[int, int], None]:
    """``progress(done, total)``: one line rewritten in place on a terminal; on a pipe or log, a
    line ``label: done/total`` at every ``every``-th item and at the end (never run together)."""

    def progress(done: int, total: int) -> None:
        if done % every and done != total:
            return
        if console.is_terminal:
            console.print(f"\r{label}: {done}/{total}", end="" if done != total else "\n")
        else:
            console.print(f"{label}: {done}/{total}", markup=False, highlight=False)

    return progress
