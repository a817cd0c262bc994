"""The two kinds of error the CLI reports as one line instead of a traceback.

* :class:`PolylogueInputError`: "your input is wrong" (a malformed run folder, benchmark, model
  output file, option...). Every such error in the package derives from it; the CLI prints it
  naming the file/record and exits with status 2.
* :class:`RunStopped`: a run stopped early (server gone, retries exhausted); finished work is
  kept and rerunning the same command resumes. The CLI prints it and exits with status 1.
"""

from __future__ import annotations


class PolylogueInputError(ValueError):
    """Bad user input: a malformed run folder, benchmark, model output file, option..."""


class RunStopped(RuntimeError):
    """A run stopped early; its finished work is kept and the same command resumes it."""


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types the CLI reports as a one-line input error (exit status 2)."""
    return (PolylogueInputError, FileNotFoundError, IsADirectoryError, NotADirectoryError)
