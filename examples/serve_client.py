"""Replay a transcript to a running `polylogue serve` over a WebSocket and print decisions,
surviving server restarts and crashes with the resume protocol of docs/serve.md.

    polylogue serve &                                  # loopback, port 8765
    python examples/serve_client.py examples/standup.jsonl --as Dave

The protocol, step by step:

1. The client names its session (``session_id``), so creating it is idempotent: a retry
   after a lost answer gets 409 "already exists", which means "created".
2. Every event carries ``seq`` (here: the utterance's index), strictly increasing.
3. On a lost connection the client asks ``GET /v1/sessions/{id}`` for ``last_seq``, the last
   event the server has, and sends again everything after it. The server skips any event
   whose ``seq`` is not above ``last_seq`` (``"duplicate": true``), so a resend never
   feeds an utterance twice. A 404 there means the session is gone (expired or deleted).

Events the server answered may still be lost in a crash (SQLite writes behind, at most the
last ``--flush-interval``): that is why the client keeps what it sent until it has resumed
past it. A transcript replay keeps everything anyway.

Needs `pip install 'polylogue[serve]'` (for the `websockets` client).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
from typing import Any

import httpx
import websockets

from polylogue.corpora.transcripts import read_transcript
from polylogue.serve.client import session_body, utterance_events

#: How long the client keeps trying to reach a server that went away (bounded).
RETRY_S = 120.0


class SessionLost(RuntimeError):
    """The server no longer has the session (404): nothing to resume."""


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
                        on_result(events[position], json.loads(await ws.recv()))
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


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("transcript")
    ap.add_argument("--as", dest="agent", required=True)
    ap.add_argument("--url", default="http://127.0.0.1:8765")
    ap.add_argument("--token", default=None)
    ap.add_argument("--session-id", default=None, help="default: a new random id")
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    args = ap.parse_args()
    conv = read_transcript(args.transcript)
    client = ResumingClient(args.url, args.token, args.session_id or secrets.token_urlsafe(12))
    body = session_body(args.agent, conv.participants)

    def emit(line: str) -> None:
        if args.json:
            print(line, flush=True)  # read line by line by whoever drives the client

    printed: set[int] = set()

    def on_result(event: dict[str, Any] | None, result: dict[str, Any]) -> None:
        if event is None:
            emit(json.dumps({"event": "resumed", **result}))
            if not args.json:
                print(f"-- reconnected; resuming at seq {result['next_seq']}", file=sys.stderr)
            return
        i = event["seq"]
        if i in printed:  # answered before a crash that lost it, applied again: same decision
            return
        printed.add(i)
        if not result["ok"]:
            emit(json.dumps({"event": "error", "seq": i, "error": result["error"]}))
            if not args.json:
                print(f"seq {i}: {result['error']}", file=sys.stderr)
            return
        d = result.get("decision") or {}
        if args.json:
            emit(json.dumps({"event": "decision", "seq": i, **d}))
            return
        verdict = d.get("action") or f"({d.get('reason')})"
        p = "" if d.get("p_speak") is None else f"P(speak)={d['p_speak']:.2f} "
        print(f"{event['speaker']:>6}: {event['text'][:60]:60s} -> {p}{verdict}")

    try:
        await client.create(body)
        emit(json.dumps({"event": "created", "session_id": client.session_id}))
        await client.run(utterance_events(conv.utterances), on_result)
    except SessionLost as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        await client.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
