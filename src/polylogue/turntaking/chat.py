"""Chat channels in the decision-point builder: nick address and presence windows.

Used by :func:`polylogue.turntaking.points.conversation_points` for conversations with
``domain == "chat"`` (nick address) or a ``metadata["presence_window"]`` (the IRC reader sets
one); see ``docs/corpora-chat.md``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from polylogue.conversation import Conversation, Utterance
from polylogue.corpora.chat import leading_address, nick_lookup
from polylogue.turntaking.cues import UtteranceCues


def chat_address_cues(conv: Conversation) -> Callable[[Utterance, UtteranceCues], UtteranceCues]:
    """Adds chat nick address to the builder's cues of an unannotated message.

    The speech rules of :mod:`polylogue.turntaking.cues` need punctuation or an opener around a
    vocative; in chat ``actionparsnip how??`` addresses ActionParsnip. Annotated messages keep
    their annotation (it is trusted first everywhere); a nick found this way has evidence
    ``"nick"`` and stops being a mere reference.
    """
    nicks = nick_lookup(conv.participants)

    def add(u: Utterance, cues: UtteranceCues) -> UtteranceCues:
        if u.addressees is not None:
            return cues
        pid = leading_address(u.text, nicks, u.speaker)
        if pid is None or pid in cues.addressed:
            return cues
        referenced = {k: v for k, v in cues.referenced.items() if k != pid}
        return replace(cues, addressed={**cues.addressed, pid: "nick"}, referenced=referenced)

    return add


def present_in_window(
    utterances: Sequence[Utterance],
    real: set[str],
    window: int,
    addressed: Sequence[Iterable[str]] | None = None,
) -> list[frozenset[str]]:
    """Per utterance: participants who spoke or were addressed in the last ``window`` ones.

    Causal like :func:`polylogue.turntaking.points.present_at`, but people who went quiet
    drop out again, as they do in a busy channel.
    """
    active: Counter[str] = Counter()
    members: list[list[str]] = []
    out: list[frozenset[str]] = []
    for i, u in enumerate(utterances):
        ids = [u.speaker, *(u.addressees or ())]
        if addressed is not None:
            ids += list(addressed[i])
        ids = [p for p in dict.fromkeys(ids) if p in real]
        members.append(ids)
        active.update(ids)
        if i >= window:
            active.subtract(members[i - window])
        out.append(frozenset(p for p, n in active.items() if n > 0))
    return out


__all__ = ["chat_address_cues", "present_in_window"]
