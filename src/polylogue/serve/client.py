"""The client side of the ``polylogue serve`` protocol: the JSON a client sends.

One home for the bodies that tests, benchmarks and ``examples/serve_client.py`` send: they
are written through the server's own wire models (``serve.app.UtteranceEvent`` and
``SessionIn``), so a renamed or dropped field cannot drift between server and clients. They
are *not* validated here: the server is what judges an event, and the fuzz cases built from
these events rely on it answering bad ones with an error result.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import httpx

from polylogue.conversation import Participant, Utterance
from polylogue.engine.live import LiveConversation, Policy
from polylogue.serve.app import ParticipantIn, SessionIn, UtteranceEvent


def utterance_event(u: Utterance, seq: int) -> dict[str, Any]:
    """``u`` as an ``utterance`` event with ``seq``: type, seq, speaker, text, start, end."""
    event = UtteranceEvent.model_construct(
        type="utterance", seq=seq, speaker=u.speaker, text=u.text, start=u.start, end=u.end
    )
    # Only the fields set above: ``final`` keeps the server's default (a final utterance).
    return event.model_dump(exclude_unset=True)


def utterance_events(utterances: Iterable[Utterance], first_seq: int = 0) -> list[dict[str, Any]]:
    """One event per utterance, ``seq`` counting up from ``first_seq``."""
    return [utterance_event(u, seq) for seq, u in enumerate(utterances, start=first_seq)]


def session_body(agent: str, participants: Sequence[Participant]) -> dict[str, Any]:
    """The ``POST /v1/sessions`` body for ``agent`` with a known roster (no options)."""
    roster = [ParticipantIn.model_construct(**p.to_dict()) for p in participants]
    spec = SessionIn.model_construct(agent=agent, participants=roster)
    return spec.model_dump(exclude_unset=True)


def create_session(
    url: str,
    agent: str,
    participants: Sequence[Participant],
    headers: dict[str, str] | None = None,
) -> str:
    """A new session on the server at ``url``; its id. Anything but 201 is an error."""
    r = httpx.post(f"{url}/v1/sessions", json=session_body(agent, participants), headers=headers)
    if r.status_code != 201:
        raise RuntimeError(f"POST /v1/sessions answered {r.status_code}: {r.text}")
    return str(r.json()["session_id"])


def local_p_speak(
    agent: str, participants: Sequence[Participant], utterances: Iterable[Utterance]
) -> list[float | None]:
    """P(speak) per utterance (4 places, as compared) from an in-process engine with the
    default policy and model: what an uninterrupted session answers for the same events."""
    live = LiveConversation.start(agent, participants, Policy())
    out: list[float | None] = []
    for u in utterances:
        d = live.utterance(Utterance(u.speaker, u.text, u.start, u.end))
        out.append(None if d.p_speak is None else round(d.p_speak, 4))
    return out
