"""The recognizer rendering (``polylogue.rendering``) on real corpus lines."""

from __future__ import annotations

import itertools
import re

import pytest

from polylogue.corpora import load_corpus
from polylogue.rendering import RENDERINGS, recognizer_text, render_conversation, render_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Dave, can you check the logs?", "dave can you check the logs"),
        ("Can we ship it, Dave?", "can we ship it dave"),
        ("Thanks, Anna. Dave -- any update?", "thanks anna dave any update"),
        ("I don't know... Rachel's idea?", "i don't know rachel's idea"),
        ("(to Ross) You told him?!", "(to Ross) you told him"),
        ("Revenue grew 3.5% to $1,200 million.", "revenue grew 3.5 to 1,200 million"),
        ("Uh-huh.", "uh huh"),
        ("", ""),
    ],
)
def test_recognizer_text(text: str, expected: str) -> None:
    assert recognizer_text(text) == expected
    # A recognizer rendering is a fixed point: rendering it again changes nothing.
    assert recognizer_text(expected) == expected


def test_unknown_rendering_names_the_choices() -> None:
    with pytest.raises(ValueError, match="original, recognizer"):
        render_text("hi", "asr")
    assert RENDERINGS == ("original", "recognizer")


@pytest.mark.parametrize("corpus", ["friends", "ami"])
def test_rendering_of_real_conversations(corpus: str) -> None:
    conv = next(iter(load_corpus(corpus)))
    rendered = render_conversation(conv, "recognizer")
    assert render_conversation(conv, "original") is conv
    assert len(rendered.utterances) == len(conv.utterances)
    outside_brackets = re.compile(r"\([^)]*\)?|\[[^\]]*\]?|\{[^}]*\}?")
    for before, after in itertools.islice(
        zip(conv.utterances, rendered.utterances, strict=True), 400
    ):
        assert (after.speaker, after.start, after.end, after.note) == (
            before.speaker,
            before.start,
            before.end,
            before.note,
        )
        plain = outside_brackets.sub(" ", after.text)
        assert plain == plain.lower()
        # No punctuation but apostrophes inside words and separators inside numbers.
        assert not re.search(r"[?!;:\".]|,(?!\d)", re.sub(r"\d[.,]\d", "0", plain))
        # Stage directions survive verbatim.
        for direction in outside_brackets.findall(before.text):
            assert direction in after.text
