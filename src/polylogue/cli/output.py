"""Small text helpers shared by the CLI modules (plain Markdown tables, progress counters, the
console and the help layout).

Not a command module: it has no ``register``. Everything here writes plain text that reads the
same in a terminal, a pipe or a log file.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import typer.core
from rich.console import Console

#: Line width on a pipe or file: wide enough that rich never wraps (tables keep their natural
#: width), as `grep` and `cut` expect one record per line.
PIPE_WIDTH = 100_000


def plain_console(*, stderr: bool = False, **options: Any) -> Console:
    """A rich console that wraps only on a terminal.

    On a pipe or a file rich would wrap at 80 columns and cut run-folder paths in two; there
    lines stay whole (``COLUMNS`` still sets the width of tables when given).
    """
    console = Console(stderr=stderr, **options)
    if not console.is_terminal:
        console.soft_wrap = True
        if not os.environ.get("COLUMNS"):
            console.width = PIPE_WIDTH
    return console


class WholeHelpGroup(typer.core.TyperGroup):
    """A command group whose help lists each command's first sentence whole, wrapped under its
    name; click cuts it at the width left beside the name ("Build a turn-taking benchmark
    (decision points,...")."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=PIPE_WIDTH)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


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
    """``progress(done, total)``: one line rewritten in place on a terminal (every ``every``-th
    item); on a pipe or log, a line ``label: done/total`` at each tenth of the total (at least
    ``every`` items apart) and at the end: about ten lines, never run together."""

    def progress(done: int, total: int) -> None:
        step = every if console.is_terminal else max(every, math.ceil(total / 10))
        if done % step and done != total:
            return
        if console.is_terminal:
            console.print(f"\r{label}: {done}/{total}", end="" if done != total else "\n")
        else:
            console.print(f"{label}: {done}/{total}", markup=False, highlight=False)

    return progress


def check_output_folder(path: os.PathLike[str] | str, flag: str, writable: bool = True) -> None:
    """Refuse, before any work runs, an output folder that cannot be made or written: the
    path is a file, a file stands where a parent folder should be, or (``writable``) the
    nearest existing folder is not writable. A long run must not end in a traceback over its
    output. ``writable=False`` for commands that may only read an existing folder (``eval``
    re-scoring a complete run in a read-only folder)."""
    import errno
    from pathlib import Path

    p = Path(path)
    if p.exists() and not p.is_dir():
        raise typer.BadParameter(f"{p} is a file, not a folder (nothing was run)", param_hint=flag)
    existing = next((q for q in (p, *p.parents) if q.exists()), Path("."))
    if not existing.is_dir():
        raise typer.BadParameter(
            f"{p}: {existing} is a file, so the folder cannot be made (nothing was run)",
            param_hint=flag,
        )
    if writable and not os.access(existing, os.W_OK | os.X_OK):
        reason = os.strerror(errno.EACCES)
        raise typer.BadParameter(
            f"{p}: {existing} is not writable ({reason}; nothing was run)", param_hint=flag
        )
