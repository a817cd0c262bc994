"""Chat-specific cues shared by the chat readers, the builder and the addressing tasks.

Chat differs from speech in how people are addressed: a message starts with the nick of the
person it is for (``bob2: install linux-headers``), often without punctuation
(``actionparsnip how??``), with an ``@`` (``@llutz thanks``) or in any case (nicks are typed
from memory). These functions are pure: (text, nicks) in, participant ids out; how the
benchmark builder uses them is in :mod:`polylogue.turntaking.chat`.

Nick matching is case-insensitive and works on whitespace-separated tokens with only sentence
punctuation stripped, so nicks with IRC characters (``|trey|``, ``Matt|``, ``bob_2``) match.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from polylogue.conversation import Participant

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


__all__ = ["leading_address", "mentions", "nick_lookup"]
