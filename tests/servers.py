"""Real servers for tests: `polylogue serve` (uvicorn), Debian's redis-server, and a scripted
OpenAI-compatible chat-completions server on loopback."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

POLYLOGUE = str(Path(sys.executable).parent / "polylogue")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def polylogue_serve(*args: str, token: str | None = None) -> Iterator[str]:
    """``polylogue serve`` on a free loopback port; yields its base URL."""
    port = free_port()
    env = dict(os.environ)
    env.pop("POLYLOGUE_SERVE_TOKEN", None)
    cmd = [POLYLOGUE, "serve", "--port", str(port), *args]
    if token:
        cmd += ["--token", token]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        for _ in range(300):
            if proc.poll() is not None:
                out = proc.stdout.read().decode() if proc.stdout else ""
                raise RuntimeError(f"polylogue serve exited: {out}")
            try:
                if httpx.get(f"{url}/healthz", headers=headers, timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def require_redis() -> None:
    if not Path(REDIS_SERVER).exists():
        # scripts/setup.sh installs it; in CI a missing server is a set-up failure, not a skip.
        if os.environ.get("CI"):
            pytest.fail("Debian redis-server is missing although CI ran scripts/setup.sh")
        pytest.skip("Debian redis-server is not installed (apt-get install -y redis-server)")


@contextmanager
def redis_server(tmp: Path) -> Iterator[str]:
    """A throw-away redis-server on a free loopback port (no persistence); yields its URL."""
    require_redis()
    port = free_port()
    proc = subprocess.Popen(
        [
            REDIS_SERVER,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


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
