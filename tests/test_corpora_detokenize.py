"""Detokenisation of transcript tokens (shared by the AMI and ICSI readers)."""

from __future__ import annotations

import pytest

from polylogue.corpora._detokenize import detokenize


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        ("okay , so we 're done .", "okay, so we're done."),
        ("I do n't know , do you ?", "I don't know, do you?"),
        ("they 'll , we 've , I 'd , I 'm", "they'll, we've, I'd, I'm"),
        ("the Play-Doh 's yellow", "the Play-Doh's yellow"),
        ("the speakers ' mikes", "the speakers' mikes"),
        # Words that merely start with an apostrophe stay separate.
        ("'cause it 's 'em", "'cause it's 'em"),
        ("'S pretty good", "'S pretty good"),
        # A dialogue act may start with the punctuation that closed the previous one.
        (", and then ...", "and then..."),
        ('a " time - line " tag', 'a "time-line" tag'),
        ("Mm - hmm , on - line", "Mm-hmm, on-line"),
        ("well -", "well -"),  # a trailing dash is not a hyphen
        ("( maybe ) fine", "(maybe) fine"),
    ],
)
def test_detokenize(tokens: str, expected: str) -> None:
    assert detokenize(tokens.split()) == expected


def test_corpus_punctuation_flags_attach_any_token() -> None:
    assert detokenize(["yes", "--"], [False, True]) == "yes--"
    with pytest.raises(ValueError, match="flags"):
        detokenize(["a", "b"], [True])
