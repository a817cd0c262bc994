"""One registry style for what is chosen by name: shared corpora, model backends.

A :class:`Registry` maps names to typed entries, in the order they were registered; an unknown
name is one :class:`UnknownName` (an input error) that lists the known ones. Entries name the
code they run as ``"module:attribute"`` (:func:`load_target`), imported only when used, so
listing the names (``polylogue --help``) never imports a reader or torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
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


#: Option names that hold secrets: refused as options, so they never reach a command line
#: that a manifest records.
_SECRET_OPTION_HINTS = ("key", "token", "secret", "password", "auth")


def unknown_options_message(
    what: str, options: Mapping[str, Any], allowed: Iterable[str]
) -> str | None:
    """The message refusing options ``what`` does not take (None: all are known)."""
    known = set(allowed)
    unknown = sorted(k for k in options if k not in known)
    if not unknown:
        return None
    secret = [k for k in unknown if any(h in k.lower() for h in _SECRET_OPTION_HINTS)]
    hint = (
        f"; {secret[0]!r} looks like a secret: put it in an environment variable and name that "
        "variable with --api-key-env (secrets are never passed as options)"
        if secret
        else ""
    )
    return (
        f"unknown option(s) for {what}: {', '.join(unknown)}; known: "
        f"{', '.join(sorted(known)) or 'none'}{hint}"
    )


def load_target(target: str) -> Any:
    """The attribute ``"module:attribute"`` names, importing its module."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
