"""The one way polylogue reads JSON from users' files, streams and folders.

``json.loads`` alone fails in more ways than :class:`json.JSONDecodeError`: an integer of over
4,300 digits is a plain ``ValueError``, one of a few hundred digits parses and then overflows
``float()`` wherever a number is expected, nesting past the recursion limit is a
``RecursionError``, and a repeated key silently keeps the last value. :func:`loads_json` turns
each into a :class:`JsonInputError` naming the file and the record (an input error: one line,
exit 2), or, for a repeated key, a warning through :func:`polylogue.errors.note_input`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from polylogue.errors import LocatedInputError, note_input

#: The most digits an integer may have: every integer up to here converts to a finite float
#: (10**308 < the largest double), so ``float(value)`` downstream can never overflow.
MAX_INT_DIGITS = 308


class JsonInputError(LocatedInputError):
    """A JSON text that cannot be read (syntax, a number out of range, runaway nesting)."""


def _parse_float(s: str) -> float:
    return float(s)  # 1e999 -> inf: readers check finiteness where they need a time


def loads_json(text: str | bytes, source: str | Path = "", where: str = "") -> Any:
    """Parse one JSON text; every failure is a :class:`JsonInputError` at ``source:where``.

    ``where`` names the record (``line 7``); without it the error names the line and column of
    the syntax error. A repeated key in an object keeps the last value, as JSON parsers do, and
    is reported once per file as an input warning.
    """
    duplicates: list[str] = []

    def parse_int(s: str) -> int:
        digits = len(s) - (s[0] == "-")
        if digits > MAX_INT_DIGITS:  # raised through json.loads as it is
            raise JsonInputError(
                source,
                where,
                f"invalid JSON: a number of {digits:,} digits is out of range "
                f"(at most {MAX_INT_DIGITS}; quote it if it is an id)",
            )
        return int(s)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) != len(items):
            seen: set[str] = set()
            for k, _ in items:
                if k in seen:
                    duplicates.append(k)
                seen.add(k)
        return out

    try:
        value = json.loads(
            text, parse_int=parse_int, parse_float=_parse_float, object_pairs_hook=pairs
        )
    except json.JSONDecodeError as exc:
        loc = where or f"line {exc.lineno} column {exc.colno}"
        raise JsonInputError(source, loc, f"invalid JSON: {exc.msg}") from None
    except JsonInputError:
        raise
    except RecursionError:
        raise JsonInputError(source, where, "invalid JSON: nested too deeply") from None
    except ValueError as exc:  # anything else json refuses (its own digit limit, ...)
        raise JsonInputError(source, where, f"invalid JSON: {exc}") from None
    if duplicates:
        keys = ", ".join(repr(k) for k in dict.fromkeys(duplicates))
        note_input(
            "duplicate JSON key", source, where, f"repeated JSON key {keys}: the last value is used"
        )
    return value


def load_json_file(path: str | Path) -> Any:
    """A whole JSON file (a UTF-8 byte-order mark is allowed); errors name the file."""
    p = Path(path)
    data = p.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise JsonInputError(
            p, f"line {line}", f"not UTF-8 text: byte 0x{data[exc.start]:02x}"
        ) from None
    return loads_json(text, p)


def load_json_object(path: str | Path, what: str = "a JSON object") -> dict[str, Any]:
    """:func:`load_json_file` that must give an object (a manifest, a config)."""
    value = load_json_file(path)
    if not isinstance(value, dict):
        raise JsonInputError(path, "", f"expected {what}, got a JSON {type(value).__name__}")
    return value


__all__ = ["MAX_INT_DIGITS", "JsonInputError", "load_json_file", "load_json_object", "loads_json"]
