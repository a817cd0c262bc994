"""Three agents in one meeting over `polylogue serve`: an assistant, a note-taker (observer)
and a facilitator, one floor between them.

    polylogue serve &                       # loopback, port 8765, the shipped model, offline
    python examples/agent_seats.py          # or: --url http://127.0.0.1:8765

Two people (Priya and Tom) talk; the room has three seats:

* ``Ada``, an assistant: speaks when addressed ("Ada, ...", or a follow-up right after she
  spoke);
* ``Scribe``, an observer: never speaks, and the room logs what it would have done;
* ``Mo``, a facilitator: steps into open floors.

After each line the server arbitrates: at most one agent takes the floor, an addressed agent
wins, and after two agent turns with no person between them no agent starts. When an agent
is granted the floor this script says a canned line for it (a real agent would ask its LLM)
and sends it back as ``agent_said``: the other seats hear it as that agent's words.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import httpx

PEOPLE = [{"id": "Priya"}, {"id": "Tom"}]
SEATS = [
    {"id": "Ada", "role": "assistant"},
    {"id": "Scribe", "role": "observer"},
    {"id": "Mo", "role": "facilitator"},
]
LINES = [
    ("Priya", "Okay, let's start. The launch slipped by a week."),
    ("Tom", "Right, the vendor sent the wrong parts."),
    ("Priya", "Ada, can you pull up the original delivery date?"),
    ("Tom", "And what did they promise in the contract?"),
    ("Priya", "Thanks Ada."),
    ("Tom", "So what do we do now?"),
    ("Priya", "Mo, Ada, any ideas before we wrap up?"),
]
#: What each agent says when it gets the floor (a real agent asks its LLM).
REPLIES = {
    "Ada": ["The original delivery date was the fourth of March.", "You're welcome."],
    "Mo": ["Let's list the options: wait for the parts, or ship without the add-on."],
}


def post(client: httpx.Client, path: str, body: Any) -> Any:
    r = client.post(path, json=body)
    if r.status_code >= 400:
        sys.exit(f"{path}: HTTP {r.status_code}: {r.text}")
    return r.json()


def show(who: str, text: str, decision: dict[str, Any]) -> str | None:
    arb = decision["arbitration"]
    print(f"{who}: {text}")
    print(f"    wanted: {', '.join(arb['wanted']) or '-'}; granted: {arb['granted'] or '-'}")
    print(f"    why: {arb['reason']}")
    return arb["granted"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8765")
    ap.add_argument("--token", default=None)
    ap.add_argument("--policy", default="first-named", help="first-named or in-turn")
    args = ap.parse_args()
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    with httpx.Client(base_url=args.url, headers=headers, timeout=30) as client:
        room = post(client, "/v1/rooms", {"people": PEOPLE, "seats": SEATS, "policy": args.policy})
        rid = room["room_id"]
        events = f"/v1/rooms/{rid}/events"
        for speaker, text in LINES:
            result = post(client, events, {"type": "utterance", "speaker": speaker, "text": text})
            granted = show(speaker, text, result["results"][0]["decision"])
            while granted is not None:
                replies = REPLIES.get(granted) or ["Okay."]
                reply = replies.pop(0) if len(replies) > 1 else replies[0]
                said = post(client, events, {"type": "agent_said", "seat": granted, "text": reply})
                granted = show(f"  [{granted}]", reply, said["results"][0]["decision"])
        summary = client.get(f"/v1/rooms/{rid}").json()
        print("\nthe note-taker's log (what the observer would have done):")
        for entry in summary["log"]:
            print("   ", json.dumps(entry))
        client.delete(f"/v1/rooms/{rid}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
