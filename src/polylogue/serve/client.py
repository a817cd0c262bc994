"""The client side of the ``polylogue serve`` protocol: the JSON a client sends.

One home for the bodies that tests, benchmarks and ``examples/serve_client.py`` send, and
the resuming client of docs/serve-operations.md (:class:`ResumingClient`). The bodies
are written through the server's own wire models (``serve.app.UtteranceEvent`` and
``SessionIn``), so a renamed or dropped field cannot drift between server and clients. They
are *not* validated here: the server is what judges an event, and the fuzz cases built from
these events rely on it answering bad ones with an error result.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from typing import Any

import httpx

from polylogue.conversation import Participant, Utterance
from polylogue.engine.live import LiveConversation, Policy
from polylogue.errors import PolylogueInputError
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


#: How long the client keeps trying to reach a server that went away (bounded).
RETRY_S = 120.0


class SessionLost(PolylogueInputError):
    """The server no longer has the session (404): nothing to resume."""


class SeqError(PolylogueInputError):
    """The server's ``last_seq`` is at or past an event this client never had answered: its
    numbering jumped ahead (or went back), and every later event would be skipped."""


class ResumingClient:
    """One session on one server, resumed after every lost connection."""

    def __init__(self, url: str, token: str | None, session_id: str) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.session_id = session_id
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(headers=self.headers, timeout=10)

    async def _retrying(self, call: Any) -> Any:
        """``call()`` until the server answers (connection errors only), for RETRY_S."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RETRY_S
        delay = 0.1
        while True:
            try:
                return await call()
            except (httpx.TransportError, OSError):
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def create(self, body: dict[str, Any]) -> None:
        body = {**body, "session_id": self.session_id}
        r = await self._retrying(lambda: self.http.post(f"{self.url}/v1/sessions", json=body))
        if r.status_code == 409:
            return  # our own earlier attempt got through: the session exists
        r.raise_for_status()

    async def last_seq(self) -> int | None:
        url = f"{self.url}/v1/sessions/{self.session_id}"
        r = await self._retrying(lambda: self.http.get(url))
        if r.status_code == 404:
            raise SessionLost(f"session {self.session_id} is gone: {r.json()['error']}")
        r.raise_for_status()
        seq = r.json()["last_seq"]
        return None if seq is None else int(seq)

    def _ws_url(self) -> str:
        ws = self.url.replace("http", "ws", 1) + f"/v1/sessions/{self.session_id}/stream"
        # Browsers cannot set headers on a WebSocket; this client can, so no ?token=.
        return ws

    async def run(self, events: list[dict[str, Any]], on_result: Any) -> int:
        """Send ``events`` (each with an increasing ``seq``); returns how often it resumed."""
        import websockets

        resumes = 0
        position = 0  # index into events of the next one to send
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RETRY_S
        while position < len(events):
            try:
                async with websockets.connect(
                    self._ws_url(), additional_headers=self.headers, open_timeout=10
                ) as ws:
                    deadline = loop.time() + RETRY_S
                    while position < len(events):
                        await ws.send(json.dumps(events[position]))
                        result = json.loads(await ws.recv())
                        check_seq(events[position], result)
                        on_result(events[position], result)
                        position += 1
            except (websockets.ConnectionClosed, websockets.InvalidHandshake, OSError):
                if loop.time() > deadline:
                    raise
                seq = await self.last_seq()  # retries until the server is back
                resumes += 1
                position = next(
                    (i for i, e in enumerate(events) if seq is None or e["seq"] > seq),
                    len(events),
                )
                on_result(None, {"resumed_after": seq, "next_seq": _seq_at(events, position)})
                await asyncio.sleep(0.05)
        return resumes

    async def close(self) -> None:
        await self.http.aclose()


def _seq_at(events: list[dict[str, Any]], i: int) -> int | None:
    return events[i]["seq"] if i < len(events) else None


def check_seq(event: dict[str, Any], result: dict[str, Any]) -> None:
    """Stop on an answer that shows the numbering is off (see docs/serve-operations.md, "seq").

    The client only sends events above the server's ``last_seq``, so a ``duplicate`` answer
    means the session is ahead of this client's numbering; a ``seq_gap`` means an event
    skipped numbers. Either way later events would be skipped or misread: an error, never
    a silent stream of duplicates.
    """
    if result.get("duplicate"):
        raise SeqError(
            f"event seq {event.get('seq')} answered as a duplicate: the session's last_seq is "
            f"{result.get('last_seq')} (the numbering jumped ahead or went back)"
        )
    if result.get("seq_gap"):
        raise SeqError(
            f"event seq {event.get('seq')} skipped {result['seq_gap']} number(s) after the "
            "session's last event: events must be numbered consecutively"
        )
