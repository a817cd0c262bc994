"""A deterministic OpenAI-compatible chat server for before/after comparisons of the LLM path.

The reply is a function of the request's messages only, so two runs of `polylogue eval` or
`polylogue tom run` against it differ only if the client or the task code does:

* a turn-taking prompt (it mentions SPEAK) gets SPEAK or SILENT, with ``top_logprobs`` when
  asked for them;
* any other prompt (MeetingToM) gets a JSON answer for Q1 and Q2.

Usage: ``python scripts/scripted_chat_server.py PORT [COUNT_FILE]``; the base URL is
``http://127.0.0.1:PORT/v1``. COUNT_FILE, when given, holds the number of requests so far.
Other endpoints (llama.cpp's ``/tokenize``) get a 404, as from a server without them.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LABELS = [
    "ACTIVE_ENGAGEMENT",
    "FOCUSED_LISTENING",
    "A",
    "B",
    "C",
    "D",
    "MULTIPLE",
    "SUPPORT",
    "NEUTRAL",
    "TRUE_CONSENSUS",
    "NO_CONSENSUS",
    "NONE",
]


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion for one request body."""
    h = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).digest()
    text = json.dumps(body["messages"])
    choice: dict[str, Any] = {"finish_reason": "stop"}
    if "SPEAK" in text:
        content = "SPEAK" if h[0] % 3 == 0 else "SILENT"
        first = -0.05 - h[1] / 255
        top = [
            {"token": "SP" if content == "SPEAK" else "S", "logprob": first},
            {"token": "S" if content == "SPEAK" else "SP", "logprob": -1.5 - h[2] / 100},
        ]
        if body.get("logprobs"):
            token = {"token": top[0]["token"], "logprob": first, "top_logprobs": top}
            choice["logprobs"] = {"content": [token]}
    else:
        content = json.dumps({"Q1": LABELS[h[0] % len(LABELS)], "Q2": LABELS[h[1] % len(LABELS)]})
    choice["message"] = {"role": "assistant", "content": content}
    usage = {"prompt_tokens": len(text) // 4, "completion_tokens": 2}
    return {"choices": [choice], "usage": usage}


def main() -> None:
    port = int(sys.argv[1])
    count_file = sys.argv[2] if len(sys.argv) > 2 else None
    lock = threading.Lock()
    count = [0]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            with lock:
                count[0] += 1
                if count_file:
                    with open(count_file, "w") as f:
                        f.write(str(count[0]))
            if not self.path.endswith("/chat/completions"):
                status, data = 404, b'{"error": "not found"}'
            else:
                status, data = 200, json.dumps(reply(json.loads(raw))).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
