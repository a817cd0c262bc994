"""One registry style for what is chosen by name: shared corpora, model backends.

A :class:`Registry` maps names to typed entries, in the order they were registered; an unknown
name is one :class:`UnknownName` (an input error) that lists the known ones. Entries name the
code they run as ``"module:attribute"`` (:func:`load_target`), imported only when used, so
listing the names (``polylogue --help``) never imports a reader or torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any, Generic, Protocol, TypeVar

from polylogue.errors import PolylogueInputError


class UnknownName(PolylogueInputError, KeyError):
    """A name no entry of a registry has (``KeyError`` kept for older callers)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Named(Protocol):
    @property
    def name(self) -> str: ...


E = TypeVar("E", bound=Named)


class Registry(Generic[E]):
    """Entries by name; ``kind`` names what they are in messages ("corpus", "model kind")."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, E] = {}

    def register(self, entry: E) -> E:
        if entry.name in self._entries:
            raise ValueError(f"{self.kind} {entry.name!r} is registered twice")
        self._entries[entry.name] = entry
        return entry

    def __getitem__(self, name: str) -> E:
        try:
            return self._entries[name]
        except KeyError:
            raise self.unknown(name) from None

    def unknown(self, name: str) -> UnknownName:
        """The error for a name no entry has, listing the known ones."""
        return UnknownName(
            f"unknown {self.kind} {name!r}; known: {', '.join(sorted(self._entries))}"
        )

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[E]:
        return iter(self._entries.values())

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)


def load_target(target: str) -> Any:
    """The attribute ``"module:attribute"`` names, importing its module."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
