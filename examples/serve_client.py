"""Replay a transcript to a running `polylogue serve` over a WebSocket and print decisions.

    polylogue serve &                                  # loopback, port 8765
    python examples/serve_client.py examples/standup.jsonl --as Dave

Needs `pip install 'polylogue[serve]'` (for the `websockets` client).
"""

from __future__ import annotations

import argparse
import asyncio
import json

import httpx
import websockets

from polylogue.corpora.transcripts import read_transcript


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("transcript")
    ap.add_argument("--as", dest="agent", required=True)
    ap.add_argument("--url", default="http://127.0.0.1:8765")
    ap.add_argument("--token", default=None)
    args = ap.parse_args()
    conv = read_transcript(args.transcript)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    body = {"agent": args.agent, "participants": [p.to_dict() for p in conv.participants]}
    r = httpx.post(f"{args.url}/v1/sessions", json=body, headers=headers)
    r.raise_for_status()
    sid = r.json()["session_id"]
    ws_url = args.url.replace("http", "ws") + f"/v1/sessions/{sid}/stream"
    if args.token:
        ws_url += f"?token={args.token}"
    async with websockets.connect(ws_url) as ws:
        for i, u in enumerate(conv.utterances):
            event = {
                "type": "utterance",
                "seq": i,
                "speaker": u.speaker,
                "text": u.text,
                "start": u.start,
                "end": u.end,
            }
            await ws.send(json.dumps(event))
            d = json.loads(await ws.recv())["decision"]
            verdict = d["action"] or f"({d['reason']})"
            p = "" if d["p_speak"] is None else f"P(speak)={d['p_speak']:.2f} "
            print(f"{u.speaker:>6}: {u.text[:60]:60s} -> {p}{verdict}")


if __name__ == "__main__":
    asyncio.run(main())
