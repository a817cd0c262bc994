"""Renderings of a transcript: the text as written, and as a speech recognizer writes it.

Streaming speech-to-text often writes no commas, no question marks and no capitals. An agent
that reads a transcript through a recognizer sees that text, so everything polylogue measures
about direct address is measured on both renderings:

* ``original``: the corpus text as its transcribers wrote it;
* ``recognizer``: :func:`recognizer_text` applied to every utterance: lower case, punctuation
  removed, apostrophes inside words kept ("don't", "dave's"), stage directions in brackets
  ("(to Ross)", "[laughs]") left exactly as they are, whitespace collapsed.

    >>> recognizer_text("Dave, can you check the logs?")
    'dave can you check the logs'
    >>> recognizer_text("Thanks, Anna. Dave -- any update? (to Dave) [laughs]")
    'thanks anna dave any update (to Dave) [laughs]'
    >>> recognizer_text("It's 3.5% of Q3's budget... isn't it?")
    "it's 3.5 of q3's budget isn't it"
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import replace
from typing import Literal

from polylogue.conversation import Conversation, Utterance

#: The renderings every address figure is measured on.
RENDERINGS: tuple[str, ...] = ("original", "recognizer")
Rendering = Literal["original", "recognizer"]

# A bracketed stage direction, kept verbatim; unclosed brackets run to the end of the text.
_DIRECTION = re.compile(r"\([^)]*\)?|\[[^\]]*\]?|\{[^}]*\}?")
# Apostrophes a recognizer keeps: between letters/digits ("don't", "q3's") or a plural
# possessive ("the guys' code"). Curly apostrophes become straight ones.
_INNER_APOSTROPHE = re.compile(r"(?<=[^\W_])'(?=[^\W_])|(?<=[^\W_]s)'(?=\s|$)")
# A decimal point or a thousands separator between digits is part of the number.
_NUMBER_JOINER = re.compile(r"(?<=\d)[.,](?=\d)")
_SPACE = re.compile(r"\s+")


def _strip_punctuation(span: str) -> str:
    """Lower-case a span outside stage directions and drop its punctuation."""
    span = span.replace("\u2019", "'").replace("\u2018", "'").lower()
    keep: set[int] = set()
    for m in _INNER_APOSTROPHE.finditer(span):
        keep.add(m.start())
    for m in _NUMBER_JOINER.finditer(span):
        keep.add(m.start())
    out = []
    for i, ch in enumerate(span):
        cat = unicodedata.category(ch)
        if cat[0] in ("P", "S") and i not in keep:
            # Punctuation and symbols separate words ("well--no" is two words).
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def recognizer_text(text: str) -> str:
    """The text as a streaming recognizer would write it (see the module docstring)."""
    pieces: list[str] = []
    pos = 0
    for m in _DIRECTION.finditer(text):
        pieces.append(_strip_punctuation(text[pos : m.start()]))
        pieces.append(f" {m.group(0)} ")
        pos = m.end()
    pieces.append(_strip_punctuation(text[pos:]))
    return _SPACE.sub(" ", "".join(pieces)).strip()


def render_text(text: str, rendering: str) -> str:
    """``text`` in one of :data:`RENDERINGS`."""
    if rendering == "original":
        return text
    if rendering == "recognizer":
        return recognizer_text(text)
    raise ValueError(f"unknown rendering {rendering!r}; choose one of {', '.join(RENDERINGS)}")


def render_utterance(utterance: Utterance, rendering: str) -> Utterance:
    return replace(utterance, text=render_text(utterance.text, rendering))


def render_conversation(conversation: Conversation, rendering: str) -> Conversation:
    """The conversation with every utterance's text in ``rendering`` (speakers, times, notes and
    annotations unchanged)."""
    if rendering == "original":
        return conversation
    return replace(
        conversation,
        utterances=tuple(render_utterance(u, rendering) for u in conversation.utterances),
    )
