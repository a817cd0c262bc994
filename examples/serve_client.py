"""Replay a transcript to a running `polylogue serve` over a WebSocket and print decisions,
surviving server restarts and crashes with the resume protocol of docs/serve-operations.md.

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

from polylogue.corpora.transcripts import read_transcript
from polylogue.serve.client import (
    ResumingClient,
    SeqError,
    SessionLost,
    session_body,
    utterance_events,
)


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
    except (SessionLost, SeqError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        await client.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
