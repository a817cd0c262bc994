"""Read a SPEAK/SILENT decision out of free model text.

Rules, in order (the last explicit marker wins, because reasoning text may quote a word
before the final answer):

1. Drop ``<think>…</think>`` blocks; an unclosed ``<think>`` means the model never answered.
2. The last ``<decision>X</decision>`` tag.
3. The last ``Decision:`` / ``Answer:`` / ``Final answer:`` line.
4. The whole answer is one of the two words (any case, surrounding punctuation ignored).
5. Exactly one of the two words appears in upper case anywhere (``"I think SILENT."``).

Anything else (both words without a marker, neither word, empty) is unparseable: ``None``.
Unlike the reference parser (notes D.5/D.10.6) SPEAK is never preferred when both occur.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from polylogue.turntaking.types import Decision

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_REASONING_LINE = re.compile(r"^\s*reasoning\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_REASONING_TAG = re.compile(r"<reasoning>(.*?)</reasoning>", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    decision: Decision | None
    reasoning: str | None
    #: Character offset in the *original* text where the decision word starts (None if none).
    decision_offset: int | None
    #: Which rule matched: "tag", "marker", "bare", "single-word" or "none".
    rule: str


def _word_patterns(speak: str, silent: str) -> tuple[re.Pattern[str], dict[str, Decision]]:
    alternatives = "|".join(re.escape(w) for w in sorted((speak, silent), key=len, reverse=True))
    table = {speak.upper(): Decision.SPEAK, silent.upper(): Decision.SILENT}
    return re.compile(rf"(?<![A-Za-z])({alternatives})(?![A-Za-z])", re.IGNORECASE), table


def _visible_text(text: str) -> str:
    """Text with think blocks blanked by spaces, so offsets still index the original."""
    out = list(text)
    for m in _THINK_BLOCK.finditer(text):
        out[m.start() : m.end()] = " " * (m.end() - m.start())
    visible = "".join(out)
    open_think = visible.lower().rfind("<think>")
    if open_think >= 0:  # unclosed: everything after it is still thinking
        visible = visible[:open_think] + " " * (len(visible) - open_think)
    return visible


def parse_decision(
    text: str, speak_word: str = "SPEAK", silent_word: str = "SILENT"
) -> ParsedAnswer:
    visible = _visible_text(text)
    words, table = _word_patterns(speak_word, silent_word)
    reasoning = _extract_reasoning(visible)

    tag = re.compile(r"<decision>\s*(.*?)\s*</decision>", re.DOTALL | re.IGNORECASE)
    tags = list(tag.finditer(visible))
    if tags:
        m = tags[-1]
        inner = words.fullmatch(m.group(1).strip(" .!*\"'"))
        if inner:
            off = m.start(1) + m.group(1).upper().find(inner.group(1).upper())
            return ParsedAnswer(table[inner.group(1).upper()], reasoning, off, "tag")

    marker = re.compile(
        r"(?:final\s+answer|decision|answer)\s*[:=]\s*\**\s*(" + words.pattern + r")",
        re.IGNORECASE,
    )
    markers = list(marker.finditer(visible))
    if markers:
        m = markers[-1]
        return ParsedAnswer(table[m.group(2).upper()], reasoning, m.start(2), "marker")

    stripped = visible.strip().strip(" .!*\"'`")
    bare = words.fullmatch(stripped)
    if bare:
        off = visible.upper().find(bare.group(1).upper())
        return ParsedAnswer(table[bare.group(1).upper()], reasoning, off, "bare")

    upper_hits = [m for m in words.finditer(visible) if m.group(1).isupper()]
    found = {table[m.group(1).upper()] for m in upper_hits}
    if len(found) == 1:
        m = upper_hits[-1]
        return ParsedAnswer(found.pop(), reasoning, m.start(1), "single-word")
    return ParsedAnswer(None, reasoning, None, "none")


def _extract_reasoning(visible: str) -> str | None:
    m = _REASONING_TAG.search(visible)
    if m:
        return m.group(1).strip() or None
    lines = _REASONING_LINE.findall(visible)
    return lines[-1] if lines else None
