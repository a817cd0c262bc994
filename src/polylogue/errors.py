"""The two kinds of error the CLI reports as one line instead of a traceback.

* :class:`PolylogueInputError`: "your input is wrong" (a malformed run folder, benchmark, model
  output file, option...). Every such error in the package derives from it; the CLI prints it
  naming the file/record and exits with status 2.
* :class:`RunStopped`: a run stopped early (server gone, retries exhausted); finished work is
  kept and rerunning the same command resumes. The CLI prints it and exits with status 1.
"""

from __future__ import annotations

import errno
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path


class PolylogueInputError(ValueError):
    """Bad user input: a malformed run folder, benchmark, model output file, option..."""


class RunStopped(RuntimeError):
    """A run stopped early; its finished work is kept and the same command resumes it."""


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types the CLI reports as a one-line input error (exit status 2).

    Permission denied is one too: rerunning cannot help until the user changes the file's
    permissions (a full disk, exit 1, is a stopped run that a rerun resumes).
    """
    return (
        PolylogueInputError,
        FileNotFoundError,
        IsADirectoryError,
        NotADirectoryError,
        PermissionError,
    )


#: OSError numbers that mean "this path cannot be used as given" (input errors, exit 2):
#: a symlink loop, a name too long, not a regular file where one was expected.
PATH_ERRNOS = frozenset({errno.ELOOP, errno.ENAMETOOLONG, errno.ENXIO, errno.ENODEV})


class LocatedInputError(PolylogueInputError):
    """An input error at one place of one file: ``path:where: message``."""

    def __init__(self, path: str | Path, where: str, message: str) -> None:
        self.path = str(path)
        self.where = where
        self.message = message
        loc = f"{self.path}:{where}" if where else self.path
        super().__init__(f"{loc}: {message}")


# ----------------------------------------------------------------------------- input warnings


class InputWarning(UserWarning):
    """Input that is read, but looks wrong (times going backwards, a repeated JSON key...).

    The CLI prints it as one ``warning:`` line on stderr.
    """


@dataclass
class _Notices:
    """Notes of one file or stream: the first place of each kind, and how often it recurred."""

    immediate: bool
    first: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)


_NOTICES: ContextVar[_Notices | None] = ContextVar("polylogue_input_notices", default=None)


def _say(source: str, where: str, message: str, more: int = 0) -> None:
    loc = f"{source}:{where}" if where else source
    tail = f" ({more} more like this)" if more else ""
    warnings.warn(f"{loc}: {message}{tail}", InputWarning, stacklevel=3)


def note_input(kind: str, source: str | Path, where: str, message: str) -> None:
    """Report suspicious input once per ``kind`` and file (see :func:`input_notices`).

    Outside :func:`input_notices` every note is a warning of its own.
    """
    notes = _NOTICES.get()
    if notes is None:
        _say(str(source), where, message)
        return
    notes.counts[kind] = notes.counts.get(kind, 0) + 1
    if kind not in notes.first:
        notes.first[kind] = (str(source), where, message)
        if notes.immediate:
            _say(str(source), where, message)


@contextmanager
def input_notices(immediate: bool = False) -> Iterator[None]:
    """Collect :func:`note_input` notes: one warning per kind, at its first place.

    A file reader warns when it is done, with a count of the other places (``immediate=False``);
    a stream warns at the first occurrence of a kind, so a live user sees it at once.
    """
    notes = _Notices(immediate)
    token = _NOTICES.set(notes)
    try:
        yield
    finally:
        _NOTICES.reset(token)
    if not immediate:  # not after an error: the error is what the user needs to see
        for kind, (source, where, message) in notes.first.items():
            _say(source, where, message, notes.counts[kind] - 1)
