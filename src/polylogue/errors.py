"""Errors that mean "your input is wrong" rather than "polylogue has a bug".

The CLI prints these as one line naming the file/record and exits with status 2.
"""

from __future__ import annotations

from polylogue.conversation import ConversationFormatError
from polylogue.paths import DataRootNotFound


class PolylogueInputError(ValueError):
    """Base class for other modules' input errors (bad run folder, bad model output file, ...)."""


def _user_errors() -> tuple[type[BaseException], ...]:
    from polylogue.turntaking.dataset import BenchmarkFormatError

    return (
        ConversationFormatError,
        DataRootNotFound,
        BenchmarkFormatError,
        PolylogueInputError,
        FileNotFoundError,
        IsADirectoryError,
    )


USER_ERRORS: tuple[type[BaseException], ...] = _user_errors()
