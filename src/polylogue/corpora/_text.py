"""Reading corpus and transcript files so that damage becomes a located error, not a traceback.

Bad bytes, broken CSV (an unterminated quote, a field over the csv module's 128 KiB limit) and
JSON nested beyond Python's recursion limit all raise :class:`ConversationFormatError` naming
the file and the line.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from polylogue import jsonio
from polylogue.conversation import ConversationFormatError


def read_text(path: str | Path, encoding: str = "utf-8-sig") -> str:
    """The whole file decoded; a bad byte is reported with its line and column.

    A UTF-8 byte-order mark (what Windows editors write first) is dropped: kept, it became
    part of the first column name or speaker.
    """
    data = Path(path).read_bytes()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConversationFormatError(
            path,
            f"line {line}",
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column {exc.start - line_start + 1}",
        ) from None


# Any line end: \r\n, \n or a lone \r (old Mac files, some capture tools). Not what
# str.splitlines() also splits at (U+2028, U+0085, \x1c-\x1e), which occur inside JSON strings
# written with ensure_ascii=False and inside chat messages.
_LINE_END = re.compile(r"\r\n|\r|\n")


def split_lines(content: str) -> list[str]:
    """Lines of a text file: at ``\\n``, ``\\r\\n`` or a lone ``\\r``, nowhere else."""
    lines = _LINE_END.split(content)
    return lines[:-1] if lines and lines[-1] == "" else lines


def decode_line(raw: bytes | str, source: str | Path, lineno: int) -> str:
    """One line as text; undecodable bytes (or their surrogate escapes) are a located error."""
    try:
        if isinstance(raw, bytes):
            return raw.decode("utf-8")
        raw.encode("utf-8")  # lone surrogates: bytes a surrogateescape reader could not decode
        return raw
    except UnicodeError:
        raise ConversationFormatError(source, f"line {lineno}", "not UTF-8 text") from None


def csv_records(path: str | Path, text: str, **fmtparams: Any) -> Iterator[tuple[int, list[str]]]:
    """``(first line, cells)`` per CSV record, blank lines skipped.

    Strict parsing, so a quote left open at the end of the file is an error instead of a record
    that silently swallows every following line. Errors name the line the record starts on.
    """
    reader = csv.reader(io.StringIO(text, newline=""), strict=True, **fmtparams)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            what = "a quote is never closed" if "end of data" in str(exc) else str(exc)
            raise ConversationFormatError(path, f"line {start}", f"malformed CSV: {what}") from None
        if row:
            yield start, row
        start = reader.line_num + 1


def loads_json(text: str, path: str | Path, where: str = "") -> Any:
    """:func:`polylogue.jsonio.loads_json`, its errors as :class:`ConversationFormatError`."""
    try:
        return jsonio.loads_json(text, path, where)
    except jsonio.JsonInputError as exc:
        raise ConversationFormatError(exc.path, exc.where, exc.message) from None


def load_json_file(path: str | Path) -> Any:
    """A whole JSON corpus file (a UTF-8 byte-order mark allowed) as located errors."""
    return loads_json(read_text(path), path)
