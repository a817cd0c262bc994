"""Corpus readers: each turns one on-disk format into :class:`polylogue.Conversation` objects.

Readers know conversations and nothing downstream. Use :func:`load_corpus` for the shared
corpora by name and :func:`polylogue.corpora.transcripts.read_transcript` for users' own files.
Each shared corpus is one :class:`CorpusReader` in :data:`CORPORA`: its name, its folder under
the data root, its reader function and the options that reader takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polylogue.conversation import Conversation, ConversationFormatError
from polylogue.registry import Registry, load_target


@dataclass(frozen=True)
class ReaderUnits:
    """A reader that can cut utterances several ways (its ``unit=`` option).

    ``pauses`` is the unit cut at every silence of the gap given as ``gap_option`` (what a
    benchmark reads, so every pause is a boundary); ``whole`` keeps the annotated utterances
    whole (the paper protocol's reading).
    """

    choices: tuple[str, ...]
    pauses: str
    whole: str
    gap_option: str

    def options(self, unit: str, gap: float) -> dict[str, Any]:
        """The reader's options for ``unit`` (the gap only where the unit is cut at pauses)."""
        return {"unit": unit, **({self.gap_option: gap} if unit == self.pauses else {})}


@dataclass(frozen=True)
class CorpusReader:
    """One shared corpus: its name, folder under the data root and reader."""

    name: str
    #: Folder under the shared data root.
    folder: str
    #: ``"module:function"`` of the reader, ``(folder, **options) -> Iterator[Conversation]``.
    target: str
    #: The utterance units the reader can cut, or None when it takes no unit option.
    units: ReaderUnits | None = None

    def reader(self) -> Callable[..., Iterator[Conversation]]:
        fn: Callable[..., Iterator[Conversation]] = load_target(self.target)
        return fn


CORPORA: Registry[CorpusReader] = Registry("corpus")
for _entry in (
    CorpusReader(
        "ami",
        "ami",
        "polylogue.corpora.ami:read_ami",
        ReaderUnits(("ipu", "da", "turn"), pauses="ipu", whole="da", gap_option="ipu_gap"),
    ),
    CorpusReader("friends", "friends", "polylogue.corpora.friends:read_friends"),
    CorpusReader("earnings21", "earnings21", "polylogue.corpora.earnings:read_earnings21"),
    CorpusReader("icsi", "icsi-qmsum", "polylogue.corpora.icsi:read_icsi"),
    CorpusReader("irc", "ubuntu-irc-disentanglement", "polylogue.corpora.irc:read_irc"),
    CorpusReader("molweni", "molweni", "polylogue.corpora.molweni:read_molweni"),
):
    CORPORA.register(_entry)


def reader(name: str) -> Callable[..., Iterator[Conversation]]:
    """The reader function of the shared corpus ``name``."""
    return CORPORA[name].reader()


def corpus_folder(name: str, data_root: str | Path | None = None) -> Path:
    """The folder of the shared corpus ``name`` under ``data_root`` (default: the shared one)."""
    from polylogue.paths import corpus_dir

    return corpus_dir(CORPORA[name].folder, data_root)


def load_corpus(
    name: str, root: str | Path | None = None, **options: Any
) -> Iterator[Conversation]:
    """Yield the conversations of a shared corpus (``ami``, ``friends``, ``earnings21``, ``icsi``,
    ``irc``, ``molweni``).

    ``root`` is the corpus folder; by default it is found under the shared data root.
    """
    entry = CORPORA[name]
    folder = Path(root) if root is not None else corpus_folder(name)
    return entry.reader()(folder, **options)


__all__ = [
    "CORPORA",
    "ConversationFormatError",
    "CorpusReader",
    "ReaderUnits",
    "corpus_folder",
    "load_corpus",
    "reader",
]
