"""Baselines for addressee recognition and next speaker / responder: simple, causal rules.

Each baseline maps an :class:`AddressingExample` to one candidate id (its top-1 answer) or
``None`` when it has no answer. They read only the messages up to the current one.

``previous-speaker``
    The most recent earlier message's author other than the current speaker (in a two-person
    exchange, the other person).
``mention``
    The nick the current message starts with (``nick: ...``, ``nick ...``, ``@nick``; any case),
    else the first nick mentioned anywhere in it, else ``previous-speaker``.
``mention-or-addresser``
    ``mention``; failing a nick in the message, the most recent earlier author who *named the
    current speaker* (people answer whoever spoke to them), else ``previous-speaker``.
``same-speaker``
    The current speaker (next speaker / responder only: chat users often send several lines).
``chance``
    The expected P@1 of a uniform guess among the candidates (computed, not sampled).
"""

from __future__ import annotations

from collections.abc import Callable

from polylogue.addressing.tasks import AddressingExample, Task
from polylogue.conversation import Conversation
from polylogue.corpora.chat import leading_address, mentions, nick_lookup

Baseline = Callable[[AddressingExample], str | None]


class _Nicks:
    """Per-conversation nick maps, built once (examples of one conversation share them)."""

    def __init__(self) -> None:
        self._conv: Conversation | None = None
        self._map: dict[str, str] = {}

    def __call__(self, conv: Conversation) -> dict[str, str]:
        if conv is not self._conv:
            self._conv = conv
            self._map = nick_lookup(conv.participants)
        return self._map


def previous_speaker(ex: AddressingExample) -> str | None:
    me = ex.current.speaker
    for u in reversed(ex.context[:-1]):
        if u.speaker != me:
            return u.speaker
    return None


def _mentioned(ex: AddressingExample, nicks: dict[str, str]) -> str | None:
    cands = set(ex.candidates)
    me = ex.current.speaker
    lead = leading_address(ex.current.text, nicks, me)
    if lead is not None and lead in cands:
        return lead
    return next((m for m in mentions(ex.current.text, nicks, me) if m in cands), None)


def make_mention(nicks: _Nicks | None = None) -> Baseline:
    nicks = nicks or _Nicks()

    def mention(ex: AddressingExample) -> str | None:
        return _mentioned(ex, nicks(ex.conversation)) or previous_speaker(ex)

    return mention


def make_mention_or_addresser(nicks: _Nicks | None = None) -> Baseline:
    nicks = nicks or _Nicks()

    def mention_or_addresser(ex: AddressingExample) -> str | None:
        table = nicks(ex.conversation)
        hit = _mentioned(ex, table)
        if hit is not None:
            return hit
        me = ex.current.speaker
        for u in reversed(ex.context[:-1]):
            if u.speaker != me and me in mentions(u.text, table, u.speaker):
                return u.speaker
        return previous_speaker(ex)

    return mention_or_addresser


def same_speaker(ex: AddressingExample) -> str | None:
    return ex.current.speaker


def chance(ex: AddressingExample) -> float:
    """Expected P@1 of a uniform random candidate."""
    if not ex.candidates:
        return 0.0
    return len(ex.gold & set(ex.candidates)) / len(ex.candidates)


def baselines_for(task: Task) -> dict[str, Baseline]:
    """The baselines that make sense for ``task``, by name (fresh nick caches)."""
    out: dict[str, Baseline] = {
        "previous-speaker": previous_speaker,
        "mention": make_mention(),
        "mention-or-addresser": make_mention_or_addresser(),
    }
    if task is not Task.ADDRESSEE:
        out["same-speaker"] = same_speaker
    return out


__all__ = [
    "Baseline",
    "baselines_for",
    "chance",
    "make_mention",
    "make_mention_or_addresser",
    "previous_speaker",
    "same_speaker",
]
