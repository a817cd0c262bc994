"""Chat-specific cues shared by the chat readers, the builder and the addressing tasks.

Chat differs from speech in how people are addressed: a message starts with the nick of the
person it is for (``bob2: install linux-headers``), often without punctuation
(``actionparsnip how??``), with an ``@`` (``@llutz thanks``) or in any case (nicks are typed
from memory). These functions are pure: (text, nicks) in, participant ids out.

Nick matching is case-insensitive and works on whitespace-separated tokens with only sentence
punctuation stripped, so nicks with IRC characters (``|trey|``, ``Matt|``, ``bob_2``) match.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from polylogue.conversation import Conversation, Participant, Utterance
from polylogue.turntaking.cues import UtteranceCues

# Characters that surround a nick in running text but are not part of it.
_EDGE = ".,:;!?()\"'<>@~*"


def nick_lookup(participants: Iterable[Participant]) -> dict[str, str]:
    """Lower-cased nick / name / alias -> participant id (ambiguous keys left out)."""
    keys: dict[str, set[str]] = {}
    for p in participants:
        for k in (p.id, p.name, *p.aliases):
            if k and len(k.strip()) >= 2:
                keys.setdefault(k.strip().lower(), set()).add(p.id)
    return {k: next(iter(v)) for k, v in keys.items() if len(v) == 1}


def _token_key(token: str) -> str:
    return token.strip(_EDGE).lower()


def leading_address(text: str, nicks: Mapping[str, str], speaker: str | None = None) -> str | None:
    """The participant a message is addressed to by its first word, or None.

    Recognises ``nick: ...``, ``nick, ...``, ``nick ...`` (no punctuation), ``@nick ...`` and
    ``nick> ...`` in any case. ``nicks`` is :func:`nick_lookup`'s map; the speaker never
    addresses themselves.
    """
    words = text.split(maxsplit=1)
    if not words:
        return None
    pid = nicks.get(_token_key(words[0]))
    if pid is None or pid == speaker:
        return None
    return pid


def mentions(text: str, nicks: Mapping[str, str], speaker: str | None = None) -> list[str]:
    """Participants named anywhere in ``text`` (in order of first mention, speaker excluded)."""
    out: dict[str, None] = {}
    for tok in text.split():
        pid = nicks.get(_token_key(tok))
        if pid is not None and pid != speaker:
            out.setdefault(pid, None)
    return list(out)


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


__all__ = ["chat_address_cues", "leading_address", "mentions", "nick_lookup", "present_in_window"]
