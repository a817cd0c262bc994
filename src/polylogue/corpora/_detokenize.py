"""Turn the space-separated tokens of speech transcripts back into readable text.

AMI words files and the QMSum release of ICSI both store punctuation and English clitics as
separate tokens (``okay , so we 're``). Models and people read ``okay, so we're`` better, and
vocative / reference detection should not see stray spaces. This is deliberately conservative:
it only moves spaces, never changes or drops words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Clitics written as their own token; a bare apostrophe is a plural possessive ("speakers '").
_CLITICS = frozenset({"'s", "'re", "'m", "'ll", "'ve", "'d", "n't", "'"})
# Tokens that attach to the previous word.
_CLOSING = re.compile(r"^[.,?!;:%)\]}…]+$")
# Tokens that attach to the next word.
_OPENING = frozenset({"(", "[", "{"})


def is_punctuation(token: str) -> bool:
    """True for a token made only of sentence punctuation (``.``, ``,``, ``?``, ``...``)."""
    return bool(_CLOSING.match(token))


def has_word(token: str) -> bool:
    """True if the token contains a letter or digit (i.e. it is speech, not punctuation)."""
    return any(ch.isalnum() for ch in token)


def detokenize(tokens: Sequence[str], punct: Sequence[bool] | None = None) -> str:
    """Join tokens with spaces, re-attaching punctuation, clitics, quotes and hyphens.

    ``punct[i]`` marks tokens the corpus itself flags as punctuation (AMI ``punc="true"``);
    tokens that look like punctuation are re-attached either way. Punctuation with nothing
    before it (a dialogue act that starts with ``,``) is dropped, since it has nothing to close.
    A ``-`` between two word tokens joins them (``time - marks`` -> ``time-marks``).
    Paired ``"`` quotes hug their contents.
    """
    if punct is not None and len(punct) != len(tokens):
        raise ValueError(f"{len(tokens)} tokens but {len(punct)} punctuation flags")
    out: list[str] = []
    glue_next = False  # the previous token opened a bracket, quote or hyphenation
    quote_open = False
    for i, tok in enumerate(tokens):
        if not tok:
            continue
        if tok == '"':
            if quote_open:
                if out:
                    out.append(tok)
                quote_open = False
                glue_next = False
            else:
                out.append(f" {tok}" if out and not glue_next else tok)
                quote_open = True
                glue_next = True
            continue
        if tok == "-" and out and out[-1][-1:].isalnum() and _next_starts_word(tokens, i):
            out.append(tok)
            glue_next = True
            continue
        flagged = punct is not None and punct[i]
        clitic = tok.lower() in _CLITICS
        attach_left = flagged or clitic or is_punctuation(tok)
        if attach_left and not out and not clitic:
            continue
        if out and (attach_left or glue_next):
            out.append(tok)
        else:
            out.append(f" {tok}" if out else tok)
        glue_next = tok in _OPENING
    return "".join(out)


def _next_starts_word(tokens: Sequence[str], i: int) -> bool:
    for nxt in tokens[i + 1 :]:
        if nxt:
            return nxt[0].isalnum()
    return False
