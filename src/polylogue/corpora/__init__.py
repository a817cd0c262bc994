"""Corpus readers: each turns one on-disk format into :class:`polylogue.Conversation` objects.

Readers know conversations and nothing downstream. Use :func:`load_corpus` for the shared
corpora by name and :func:`polylogue.corpora.transcripts.read_transcript` for users' own files.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from polylogue.conversation import Conversation, ConversationFormatError

# name -> (module:function, folder under the data root)
READERS: dict[str, tuple[str, str]] = {
    "ami": ("polylogue.corpora.ami:read_ami", "ami"),
    "friends": ("polylogue.corpora.friends:read_friends", "friends"),
    "earnings21": ("polylogue.corpora.earnings:read_earnings21", "earnings21"),
    "icsi": ("polylogue.corpora.icsi:read_icsi", "icsi-qmsum"),
    "irc": ("polylogue.corpora.irc:read_irc", "ubuntu-irc-disentanglement"),
    "molweni": ("polylogue.corpora.molweni:read_molweni", "molweni"),
}


def reader(name: str) -> Callable[..., Iterator[Conversation]]:
    try:
        target, _ = READERS[name]
    except KeyError:
        raise KeyError(f"unknown corpus {name!r}; known: {', '.join(sorted(READERS))}") from None
    mod, fn = target.split(":")
    fn_obj: Callable[..., Iterator[Conversation]] = getattr(importlib.import_module(mod), fn)
    return fn_obj


def load_corpus(
    name: str, root: str | Path | None = None, **options: Any
) -> Iterator[Conversation]:
    """Yield the conversations of a shared corpus (``ami``, ``friends``, ``earnings21``, ``icsi``,
    ``irc``, ``molweni``).

    ``root`` is the corpus folder; by default it is found under the shared data root.
    """
    from polylogue.paths import corpus_dir

    folder = (
        Path(root)
        if root is not None
        else corpus_dir(READERS[name][1])
        if name in READERS
        else None
    )
    if folder is None:
        reader(name)  # raises the helpful KeyError
        raise AssertionError("unreachable")
    return reader(name)(folder, **options)


__all__ = ["READERS", "ConversationFormatError", "load_corpus", "reader"]
