"""NITE XML Toolkit (NXT) helpers shared by the NXT-format corpus readers.

NXT stores each annotation layer in its own XML file and links layers with ``nite:child`` and
``nite:pointer`` elements whose ``href`` names a file and an element id, or an inclusive range
of ids ``id(a)..id(b)``. A range means "every element from ``a`` to ``b`` in the *document
order* of the target file", so ranges are resolved by position, never by id arithmetic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lxml import etree

from polylogue.conversation import ConversationFormatError

NITE_NS = "http://nite.sourceforge.net/"
NITE_ID = f"{{{NITE_NS}}}id"
NITE_CHILD = f"{{{NITE_NS}}}child"
NITE_POINTER = f"{{{NITE_NS}}}pointer"

_HREF = re.compile(r"^(?P<file>[^#]*)#id\((?P<start>[^()]+)\)(?:\.\.id\((?P<end>[^()]+)\))?$")


@dataclass(frozen=True, slots=True)
class NiteRef:
    """A parsed NXT ``href``: a file name and one id or an inclusive id range."""

    file: str
    start: str
    end: str | None = None

    @property
    def is_range(self) -> bool:
        return self.end is not None


def parse_href(href: str) -> NiteRef:
    """Parse ``"F.xml#id(a)"`` or ``"F.xml#id(a)..id(b)"``; raises ``ValueError`` otherwise."""
    m = _HREF.match(href.strip())
    if m is None:
        raise ValueError(f"unrecognised NXT href {href!r}")
    return NiteRef(file=m["file"], start=m["start"], end=m["end"])


def _parser() -> etree.XMLParser:
    # Comments and processing instructions would otherwise show up as children; entity
    # resolution and network access are never needed for NXT files.
    return etree.XMLParser(
        remove_comments=True, remove_pis=True, resolve_entities=False, no_network=True
    )


def parse_xml(path: Path) -> Any:
    """Parse an XML file and return its root element.

    Malformed or unreadable files raise :class:`ConversationFormatError` naming the file and
    the line lxml reports.
    """
    try:
        return etree.parse(str(path), _parser()).getroot()
    except etree.XMLSyntaxError as exc:
        where = f"line {exc.lineno}" if exc.lineno else ""
        raise ConversationFormatError(path, where, f"malformed XML: {exc.msg}") from exc
    except OSError as exc:
        raise ConversationFormatError(path, "", f"cannot read file: {exc}") from exc


def element_where(el: Any) -> str:
    """Location of an element for error messages: its ``nite:id`` and source line."""
    nid = el.get(NITE_ID)
    line = el.sourceline
    parts = [f"element <{etree.QName(el).localname}>"]
    if nid:
        parts.append(f"id {nid}")
    if line:
        parts.append(f"line {line}")
    return " ".join(parts)


def child_elements(el: Any) -> list[Any]:
    """Element children only (skips any text-like nodes lxml might still expose)."""
    return [c for c in el if isinstance(c.tag, str)]


def element_refs(el: Any, path: Path, tag: str = NITE_CHILD) -> list[NiteRef]:
    """The parsed hrefs of ``el``'s direct ``tag`` children (``nite:child`` by default)."""
    refs = []
    for c in el:
        if c.tag != tag:
            continue
        href = c.get("href")
        try:
            if href is None:
                raise ValueError(f"<{etree.QName(c).localname}> without href")
            refs.append(parse_href(href))
        except ValueError as exc:
            raise ConversationFormatError(path, element_where(el), str(exc)) from exc
    return refs


def pointer_ref(el: Any, role: str, path: Path) -> NiteRef | None:
    """The href of ``el``'s ``nite:pointer`` with the given role, or None if it has none."""
    for c in el:
        if c.tag == NITE_POINTER and c.get("role") == role:
            href = c.get("href")
            try:
                if href is None:
                    raise ValueError(f"pointer {role!r} without href")
                return parse_href(href)
            except ValueError as exc:
                raise ConversationFormatError(path, element_where(el), str(exc)) from exc
    return None


def ontology_names(path: Path, name_attr: str = "name") -> dict[str, str]:
    """Map every ``nite:id`` in an NXT ontology file (a nested tree) to its ``name_attr``."""
    root = parse_xml(path)
    out: dict[str, str] = {}
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        nid, name = el.get(NITE_ID), el.get(name_attr)
        if nid is not None and name is not None:
            out[nid] = name
    return out
