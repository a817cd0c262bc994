"""Who may talk to a local web service: bind checks, server tokens, ``Host`` and ``Origin``.

Shared by ``polylogue serve`` and the annotation app (``annotate.app`` imports these). A
service on loopback is reachable by every web page the user opens: a page can send a
cross-site ``text/plain`` POST or open a WebSocket (browsers send ``Origin`` on both), and a
DNS-rebinding name reaches ``127.0.0.1`` with a foreign ``Host``. :class:`RequestGuard`
refuses both before the app sees the request.
"""

from __future__ import annotations

import ipaddress
import json
import math
from collections import Counter
from collections.abc import Collection
from typing import Any

from polylogue.errors import PolylogueInputError

#: A server token must carry at least this much (character-frequency) entropy.
MIN_TOKEN_BITS = 64.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_problem(token: str) -> str | None:
    """Why ``token`` is too weak to guard a server, or ``None`` if it looks random.

    At least 16 characters, and at least :data:`MIN_TOKEN_BITS` bits by the entropy of its
    character frequencies (sixteen ``x`` carry 0 bits; ``secrets.token_urlsafe(24)`` ~130).
    """
    if len(token) < 16:
        return f"has {len(token)} characters (needs at least 16 characters)"
    counts = Counter(token)
    # One repeated character: the sum is -0.0, printed "-0" unless clamped.
    per_char = max(0.0, -sum(c / len(token) * math.log2(c / len(token)) for c in counts.values()))
    bits = per_char * len(token)
    if bits < MIN_TOKEN_BITS:
        return f"is not random enough ({bits:.0f} bits < {MIN_TOKEN_BITS:.0f})"
    return None


def host_allowed(host_header: str, allowed_hosts: Collection[str], port: int | None) -> bool:
    """Does a request's ``Host`` header name one of ``allowed_hosts`` (and ``port``)?"""
    value = host_header.strip().lower()
    if value.startswith("["):  # [::1]:8765
        name, _, rest = value[1:].partition("]")
        given_port = rest.removeprefix(":") or None
    else:
        name, sep, given_port_s = value.rpartition(":")
        if not sep:
            name, given_port_s = value, ""
        given_port = given_port_s or None
    if name not in {h.lower().strip("[]") for h in allowed_hosts}:
        return False
    return port is None or given_port is None or given_port == str(port)


def bound_hosts(host: str) -> set[str]:
    """Names a client may use for a server bound to ``host``."""
    if host in ("0.0.0.0", "::"):
        return set()  # every interface: no single name to check (remote mode needs a token)
    if is_loopback(host):
        return {host, "localhost", "127.0.0.1", "::1"}
    return {host}


class ListenError(PolylogueInputError):
    """The address given to a server cannot be listened on (port in use, no such address)."""


def listening_socket(host: str, port: int) -> Any:
    """A TCP socket bound to ``host:port`` (``port`` 0: a free one) and listening, for uvicorn.

    Binding before uvicorn starts lets a command print where it listens only once it does.
    """
    import socket

    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        # Listening now, not when uvicorn's loop starts: a client that connects as soon as
        # the banner is printed is queued by the kernel instead of refused.
        sock.listen(2048)
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def normalise_origin(origin: str) -> str:
    """``scheme://host[:port]`` as browsers send it (lower case, no trailing slash)."""
    return origin.strip().rstrip("/").lower()


#: Methods and headers a page on an allowed origin may use (answered to CORS preflights).
_CORS_METHODS = b"GET, POST, DELETE"
_CORS_HEADERS = b"authorization, content-type"


class RequestGuard:
    """Raw ASGI layer: refuse a foreign ``Host`` (421) and a foreign ``Origin`` (403).

    ``allowed_hosts`` empty: no ``Host`` check (a bind to every interface needs a token).
    A request without ``Origin`` (curl, SDKs, agents) passes; one whose ``Origin`` is not in
    ``allowed_origins`` is refused, over HTTP and on the WebSocket upgrade (the handshake is
    answered 403, so the page's socket never opens). Allowed origins get CORS headers, and
    their preflights (``OPTIONS``) are answered here.
    """

    def __init__(
        self,
        app: Any,
        allowed_hosts: Collection[str],
        port: int | None,
        allowed_origins: Collection[str] = (),
    ) -> None:
        self.app = app
        self.allowed_hosts = set(allowed_hosts)
        self.port = port
        self.allowed_origins = {normalise_origin(o) for o in allowed_origins}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.allowed_hosts and not host_allowed(
            headers.get("host", ""), self.allowed_hosts, self.port
        ):
            await self._refuse(scope, send, 421, "request for another host name")
            return
        origin = headers.get("origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        origin = normalise_origin(origin)
        if origin not in self.allowed_origins and "*" not in self.allowed_origins:
            await self._refuse(
                scope, send, 403, f"cross-origin request from {origin[:100]!r} (see --allow-origin)"
            )
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        cors = [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"vary", b"Origin"),
        ]
        if scope["method"] == "OPTIONS":
            preflight = [
                (b"access-control-allow-methods", _CORS_METHODS),
                (b"access-control-allow-headers", _CORS_HEADERS),
                (b"access-control-max-age", b"600"),
            ]
            await _send_json(send, 204, None, [*cors, *preflight])
            return

        async def with_cors(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *cors]}
            await send(message)

        await self.app(scope, receive, with_cors)

    async def _refuse(self, scope: Any, send: Any, status: int, error: str) -> None:
        if scope["type"] == "websocket":
            if "websocket.http.response" not in scope.get("extensions", {}):
                await send({"type": "websocket.close", "code": 1008})  # answered 403
                return
            # Before accept: the server answers the upgrade with this HTTP status.
            await send(
                {
                    "type": "websocket.http.response.start",
                    "status": status,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            body = json.dumps({"ok": False, "error": error}).encode()
            await send({"type": "websocket.http.response.body", "body": body})
            return
        await _send_json(send, status, error)


async def _send_json(
    send: Any, status: int, error: str | None, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = b"" if error is None else json.dumps({"ok": False, "error": error}).encode()
    await send_json_body(send, status, body, extra)


async def send_json_body(
    send: Any, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A whole JSON response straight to an ASGI ``send`` (for middleware that answers itself)."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
