"""Real servers for tests: `polylogue serve` (uvicorn), Debian's redis-server, and a scripted
OpenAI-compatible chat-completions server on loopback.

Under pytest-xdist several test processes start servers at once. A server that binds port 0
itself (the scripted server here, llama.cpp in conftest.py, the annotation app in browsers.py)
cannot collide; a port picked here and handed to another process (`polylogue serve`,
redis-server) comes from :func:`free_port`, which gives each worker its own ports.
"""

from __future__ import annotations

import json
import os
import random
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

# The launchers live in the package, shared with benchmarks/serve_load.py.
from polylogue.serve.local import polylogue_serve as local_polylogue_serve
from polylogue.serve.local import redis_available
from polylogue.serve.local import redis_server as local_redis_server

#: First port handed out; the slices run from here up to the kernel's ephemeral range.
FIRST_PORT = 10_000
_handed: set[int] = set()
_rng = random.Random()  # seeded from the OS: two test runs on one machine start apart


def _worker_ports() -> range:
    """This process's own ports: one slice per xdist worker of the ports between
    :data:`FIRST_PORT` and the kernel's ephemeral range.

    Port-0 binds and outgoing connections take ephemeral ports, so no socket the kernel picks
    lands here, and no two workers share a slice.
    """
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        ephemeral = int(text.split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32_768  # Linux's default
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    size = (ephemeral - FIRST_PORT) // workers
    if size < 100:
        raise RuntimeError(f"the ephemeral port range starts at {ephemeral}: no room below it")
    start = FIRST_PORT + worker * size
    return range(start, start + size)


def free_port() -> int:
    """A loopback port free now that no other test process of this run hands out, and that
    this process has not handed out before (a server stopped a moment ago may linger on its
    port). For a server started in another process; in-process servers bind port 0."""
    ports = _worker_ports()
    for _ in range(1000):
        port = _rng.choice(ports)
        if port in _handed:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (another program, or another test run on this machine)
        _handed.add(port)
        return port
    raise RuntimeError(f"no free loopback port in {ports.start}-{ports.stop - 1}")


def polylogue_serve(
    *args: str, port: int | None = None, **options: Any
) -> AbstractContextManager[str]:
    """:func:`polylogue.serve.local.polylogue_serve` on :func:`free_port` (or ``port``)."""
    return local_polylogue_serve(*args, port=port or free_port(), **options)


__all__ = ["LoopbackHTTPServer", "free_port", "polylogue_serve", "redis_server", "require_redis"]


def require_redis() -> None:
    if not redis_available():
        # scripts/setup.sh installs it; in CI a missing server is a set-up failure, not a skip.
        if os.environ.get("CI"):
            pytest.fail("Debian redis-server is missing although CI ran scripts/setup.sh")
        pytest.skip("Debian redis-server is not installed (apt-get install -y redis-server)")


@contextmanager
def redis_server(
    tmp: Path, args: tuple[str, ...] = (), pids: list[int] | None = None, port: int | None = None
) -> Iterator[str]:
    """A throw-away redis-server on a free loopback port (no persistence unless ``args`` turn
    it on); yields its URL. ``pids`` receives its process id (to stop or kill it)."""
    require_redis()
    with local_redis_server(tmp, pids=pids, port=port or free_port(), args=args) as url:
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
