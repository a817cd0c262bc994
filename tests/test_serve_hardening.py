"""`polylogue serve` against bad frames, big bodies, foreign hosts and origins, weak tokens and
tokens in URLs (issue 29, items 10-13; issue 27, item 5): real server processes on loopback."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
from servers import free_port, polylogue_serve, redis_server
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus
from polylogue.serve.app import MAX_MESSAGE, MAX_WS_FRAME
from polylogue.serve.client import session_body
from polylogue.serve.local import POLYLOGUE

pytestmark = pytest.mark.slow

TOKEN = "t0k3n-for-tests-0123456789abcdef"


@pytest.fixture(scope="module")
def ami() -> Conversation:
    return next(iter(load_corpus("ami")))


def _body(conv: Conversation, agent: str = "B") -> dict:
    return session_body(agent, conv.participants)


def _event(conv: Conversation, i: int) -> dict:
    u = conv.utterances[i]
    return {"type": "utterance", "seq": i, "speaker": u.speaker, "text": u.text, "end": u.end}


def _ws(url: str, sid: str) -> str:
    return url.replace("http", "ws") + f"/v1/sessions/{sid}/stream"


def test_bad_frames_get_an_error_and_the_socket_stays_open(
    tmp_path: Path, ami: Conversation
) -> None:
    log = tmp_path / "server.log"
    with polylogue_serve("--state", str(tmp_path / "s.sqlite"), output=log) as url:
        sid = httpx.post(f"{url}/v1/sessions", json=_body(ami)).json()["session_id"]
        good = json.dumps(_event(ami, 0))
        frames: list[str | bytes] = [
            good.encode(),  # the right JSON, as a binary frame
            b"\xff\xfe\x00garbage",
            '{"type": "utterance", "seq": ' + "7" * 5000 + ', "speaker": "A", "text": "hi"}',
            '{"type": "utterance", "seq": ' + "7" * 25 + ', "speaker": "A", "text": "hi"}',
            '{"type": "utterance", "seq": 1, "speaker": "A", "text": "hi", "end": '
            + "9" * 400
            + "}",
            '{"type": "utterance", "seq": 1, "speaker": "A", "text": "hi", "end": 1e999}',
            "[" * 100_000,
            json.dumps({"type": "utterance", "seq": 3, "speaker": "A", "text": "x" * 300_000}),
            "é" * (MAX_MESSAGE // 2 + 10),  # under the limit in characters, over it in bytes
        ]
        results = []
        with connect(_ws(url, sid), max_size=MAX_WS_FRAME) as ws:
            for f in frames:
                ws.send(f)
                results.append(json.loads(ws.recv()))
            ws.send(good)  # the socket is still open and the session still works
            last = json.loads(ws.recv())
        assert [r["ok"] for r in results] == [False] * len(frames)
        assert "binary frame" in results[0]["error"] and "binary frame" in results[1]["error"]
        assert "digits" in results[2]["error"] and "digits" in results[3]["error"]
        assert all(r["seq"] is None for r in results[2:5])  # never echo an unreadable seq
        assert "nested too deeply" in results[6]["error"]
        assert "over 262144 bytes" in results[7]["error"]
        assert "over 262144 bytes" in results[8]["error"]
        assert last["ok"] and last["seq"] == 0 and last["decision"] is not None
        # Over HTTP the same bodies are 400s with one clear line, not 500s.
        for content in (frames[1], frames[2].encode(), frames[4].encode(), b"[" * 100_000):
            r = httpx.post(f"{url}/v1/sessions/{sid}/events", content=content)
            assert r.status_code == 400, r.text
            assert r.json()["ok"] is False and "not JSON" in r.json()["error"]
        metrics = httpx.get(f"{url}/metrics").text
        assert 'polylogue_event_errors_total{kind="BinaryFrame"} 2' in metrics
        assert 'polylogue_event_errors_total{kind="InternalError"} 0' in metrics
    assert "Traceback" not in log.read_text()


def _read_response(s: socket.socket) -> str:
    """One whole HTTP response (headers and a Content-Length body) from a raw socket."""
    data = b""
    while b"\r\n\r\n" not in data and (chunk := s.recv(4096)):
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(rest) < length and (chunk := s.recv(4096)):
        rest += chunk
    return (head + b"\r\n\r\n" + rest).decode()


def _upgrade_status(port: int, path: str, host: str) -> int:
    """The status a raw WebSocket upgrade with this ``Host`` header gets."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        return int(s.recv(4096).split(b"\r\n", 1)[0].split()[1])


def _post_streaming(port: int, path: str, total: int, chunk: int = 64 * 1024) -> tuple[int, int]:
    """A chunked POST of ``total`` bytes without Content-Length, sent until the server answers.

    Returns (status, bytes sent): a server that caps while reading answers long before the end.
    """
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        s.sendall((head + "Transfer-Encoding: chunked\r\n\r\n").encode())
        sent = 0
        piece = f"{chunk:x}\r\n".encode() + b"[" * chunk + b"\r\n"
        s.settimeout(0.0)
        while sent < total:
            try:
                if s.recv(1, socket.MSG_PEEK):
                    break  # the server answered
            except BlockingIOError:
                pass
            try:
                s.settimeout(5)
                s.sendall(piece)
                s.settimeout(0.0)
            except OSError:
                break  # the server closed the connection
            sent += chunk
        s.settimeout(30)
        status_line = s.recv(4096).split(b"\r\n", 1)[0].decode()
        return int(status_line.split()[1]), sent
    finally:
        s.close()


def test_bodies_are_capped_while_reading(tmp_path: Path, ami: Conversation) -> None:
    port = free_port()
    with polylogue_serve("--state", str(tmp_path / "s.sqlite"), port=port) as url:
        # An announced 100 MB body is refused before a byte of it is read.
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(
                f"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Content-Length: {100 * 2**20}\r\n\r\n{{}}".encode()
            )
            answer = _read_response(s)
        assert answer.startswith("HTTP/1.1 413") and "over 262144 bytes" in answer
        # An unannounced (chunked) 100 MB body: refused after a little over the limit.
        status, sent = _post_streaming(port, "/v1/sessions", 100 * 2**20)
        assert status == 413
        assert sent < 20 * 2**20, f"the server read {sent} bytes before answering"
        assert httpx.get(f"{url}/healthz").status_code == 200


def test_foreign_host_and_origin_are_refused_unless_allowed(
    tmp_path: Path, ami: Conversation
) -> None:
    args = ("--state", str(tmp_path / "s.sqlite"))
    with polylogue_serve(*args) as url:
        sid = httpx.post(f"{url}/v1/sessions", json=_body(ami)).json()["session_id"]
        port = url.rsplit(":", 1)[1]
        # DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends its own Host.
        r = httpx.get(f"{url}/v1/sessions/{sid}", headers={"Host": f"evil.example:{port}"})
        assert r.status_code == 421 and r.json()["ok"] is False
        assert httpx.get(f"{url}/healthz", headers={"Host": f"localhost:{port}"}).is_success
        # A cross-site "simple" POST (text/plain, no preflight) creates nothing.
        before = httpx.get(f"{url}/metrics").text
        r = httpx.post(
            f"{url}/v1/sessions",
            content=json.dumps(_body(ami)),
            headers={"Origin": "http://evil.example", "Content-Type": "text/plain"},
        )
        assert r.status_code == 403 and "cross-origin" in r.json()["error"]
        assert "access-control-allow-origin" not in r.headers
        assert httpx.get(f"{url}/healthz").json()["sessions_cached"] == 1
        # A WebSocket from a foreign page is refused at the upgrade; so is a foreign Host.
        with pytest.raises(InvalidStatus) as refused:
            connect(_ws(url, sid), additional_headers={"Origin": "http://evil.example"})
        assert refused.value.response.status_code == 403
        path = f"/v1/sessions/{sid}/stream"
        assert _upgrade_status(int(port), path, f"evil.example:{port}") == 421
        assert _upgrade_status(int(port), path, f"127.0.0.1:{port}") == 101
        assert before  # metrics answered before and after
    allowed = "http://127.0.0.1:9999"
    with polylogue_serve(*args, "--allow-origin", allowed) as url:
        headers = {"Origin": allowed}
        pre = httpx.options(
            f"{url}/v1/sessions",
            headers={**headers, "Access-Control-Request-Method": "POST"},
        )
        assert pre.status_code == 204
        assert pre.headers["access-control-allow-origin"] == allowed
        r = httpx.post(f"{url}/v1/sessions", json=_body(ami), headers=headers)
        assert r.status_code == 201 and r.headers["access-control-allow-origin"] == allowed
        with connect(_ws(url, r.json()["session_id"]), additional_headers=headers) as ws:
            ws.send(json.dumps(_event(ami, 0)))
            assert json.loads(ws.recv())["ok"]
        other = {"Origin": "http://127.0.0.1:9998"}  # another port is another origin
        assert httpx.post(f"{url}/v1/sessions", json=_body(ami), headers=other).status_code == 403


def test_tokens_weak_refused_query_token_only_on_the_socket(
    tmp_path: Path, ami: Conversation
) -> None:
    for weak in ("x" * 16, "abababababababababab", "short"):
        r = subprocess.run(
            [POLYLOGUE, "serve", "--token", weak], capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 2 and "server token" in r.stderr, r.stderr
    log = tmp_path / "server.log"
    with polylogue_serve("--state", str(tmp_path / "s.sqlite"), token=TOKEN, output=log) as url:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        sid = httpx.post(f"{url}/v1/sessions", json=_body(ami), headers=auth).json()["session_id"]
        r = httpx.get(f"{url}/v1/sessions/{sid}", params={"token": TOKEN})
        assert r.status_code == 401 and "WebSocket upgrade only" in r.json()["error"]
        assert httpx.get(f"{url}/v1/sessions/{sid}", headers=auth).status_code == 200
        with connect(_ws(url, sid) + f"?token={TOKEN}") as ws:  # what browsers must do
            ws.send(json.dumps(_event(ami, 0)))
            assert json.loads(ws.recv())["ok"]
        with connect(_ws(url, sid), additional_headers=auth) as ws:  # what others can do
            ws.send(json.dumps(_event(ami, 1)))
            assert json.loads(ws.recv())["ok"]
    assert TOKEN not in log.read_text()


def test_banner_only_after_a_successful_bind(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cmd = [POLYLOGUE, "serve", "--port", str(port), "--state", str(tmp_path / "s.sqlite")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3
    assert "polylogue serve on" not in r.stdout
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr
    assert "Traceback" not in r.stderr


def test_status_codes_counters_and_unlisted_speakers_as_documented(
    tmp_path: Path, ami: Conversation
) -> None:
    with polylogue_serve("--state", str(tmp_path / "s.sqlite")) as url:
        metrics = httpx.get(f"{url}/metrics").text  # before any observation: zeros
        for series in (
            'polylogue_decisions_total{action="SPEAK"} 0',
            'polylogue_decisions_total{action="SILENT"} 0',
            'polylogue_events_total{type="utterance"} 0',
            'polylogue_event_errors_total{kind="NotJSON"} 0',
            "polylogue_events_duplicate_total 0",
            "polylogue_sessions_expired_total 0",
            "polylogue_decision_latency_seconds_count 0",
        ):
            assert series in metrics.splitlines(), series
        sid = httpx.post(f"{url}/v1/sessions", json=_body(ami)).json()["session_id"]
        events = f"{url}/v1/sessions/{sid}/events"
        # A lone bad event: 400, with its result in the usual shape.
        r = httpx.post(events, json={"type": "leave", "seq": 1, "participant": "nobody"})
        assert r.status_code == 400
        [res] = r.json()["results"]
        assert res == {"ok": False, "seq": 1, "error": "leave: 'nobody' is not a participant"}
        r = httpx.post(events, json={"type": "dance"})
        assert r.status_code == 400 and "bad event" in r.json()["results"][0]["error"]
        # A batch: applied in order, a bad event does not stop the rest: 200, one per event.
        batch = [_event(ami, 0), {"type": "dance", "seq": 1}, _event(ami, 2)]
        r = httpx.post(events, json=batch)
        assert r.status_code == 200
        assert [x["ok"] for x in r.json()["results"]] == [True, False, True]
        # An utterance from someone not on the roster: added, and the result says so.
        r = httpx.post(
            events, json={"type": "utterance", "seq": 3, "speaker": "Zoe", "text": "hi all"}
        )
        assert r.status_code == 200
        [res] = r.json()["results"]
        assert res["ok"] and "not on the roster" in res["warnings"][0]
        summary = httpx.get(f"{url}/v1/sessions/{sid}").json()
        assert "Zoe" in [p["id"] for p in summary["participants"]]
        # Creating a taken id is a conflict; an unknown session is 404.
        body = {**_body(ami), "session_id": "mine"}
        assert httpx.post(f"{url}/v1/sessions", json=body).status_code == 201
        assert httpx.post(f"{url}/v1/sessions", json=body).status_code == 409
        assert httpx.post(f"{url}/v1/sessions/nope/events", json=_event(ami, 0)).status_code == 404


def test_redis_creation_counts_without_scanning(tmp_path: Path, ami: Conversation) -> None:
    import redis

    with (
        redis_server(tmp_path) as redis_url,
        polylogue_serve("--state", redis_url, "--max-sessions", "5") as url,
    ):
        r = redis.Redis.from_url(redis_url)
        for i in range(200):  # other keys in the same Redis: a SCAN would walk them all
            r.set(f"unrelated:{i}", i)
        codes = [httpx.post(f"{url}/v1/sessions", json=_body(ami)).status_code for _ in range(6)]
        assert codes == [201] * 5 + [503]
        sids = [k.decode().split(":")[-1] for k in r.keys("polylogue:v:*")]
        assert httpx.delete(f"{url}/v1/sessions/{sids[0]}").status_code == 200
        assert httpx.post(f"{url}/v1/sessions", json=_body(ami)).status_code == 201
        stats = r.info("commandstats")
        assert "cmdstat_scan" not in stats and "cmdstat_keys" in stats  # only ours, above
        r.close()
