"""Errors that mean "your input is wrong" rather than "polylogue has a bug".

The CLI prints these as one line naming the file/record and exits with status 2.
"""

from __future__ import annotations


class PolylogueInputError(ValueError):
    """Bad user input: a malformed run folder, benchmark, model output file, option..."""


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types the CLI reports as a one-line error (imported lazily: no cycles)."""
    from polylogue.conversation import ConversationFormatError
    from polylogue.paths import DataRootNotFound

    return (
        ConversationFormatError,
        DataRootNotFound,
        PolylogueInputError,
        FileNotFoundError,
        IsADirectoryError,
        NotADirectoryError,
    )
