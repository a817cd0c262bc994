"""Real servers for tests: `polylogue serve` (uvicorn), Debian's redis-server, and a scripted
OpenAI-compatible chat-completions server on loopback."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

# The launchers live in the package, shared with benchmarks/serve_load.py.
from polylogue.serve.local import free_port, polylogue_serve, redis_available
from polylogue.serve.local import redis_server as local_redis_server

__all__ = ["LoopbackHTTPServer", "free_port", "polylogue_serve", "redis_server", "require_redis"]


def require_redis() -> None:
    if not redis_available():
        # scripts/setup.sh installs it; in CI a missing server is a set-up failure, not a skip.
        if os.environ.get("CI"):
            pytest.fail("Debian redis-server is missing although CI ran scripts/setup.sh")
        pytest.skip("Debian redis-server is not installed (apt-get install -y redis-server)")


@contextmanager
def redis_server(tmp: Path) -> Iterator[str]:
    """A throw-away redis-server on a free loopback port (no persistence); yields its URL."""
    require_redis()
    with local_redis_server(tmp) as url:
        yield url


#: ``respond(path, headers, raw_body) -> (status, reply, extra_headers)``; a str reply is sent
#: as is, anything else as JSON.
Responder = Callable[[str, dict[str, str], bytes], tuple[int, Any, dict[str, str]]]


class LoopbackHTTPServer:
    """A real HTTP server on 127.0.0.1 (a free port) answering every POST through ``respond``.

    ``url`` is the OpenAI-style base URL (``.../v1``); call :meth:`close` when done.
    """

    def __init__(self, respond: Responder) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                status, reply, headers = respond(self.path, dict(self.headers), raw)
                data = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
