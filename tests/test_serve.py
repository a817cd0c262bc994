"""`polylogue serve` against a real uvicorn server on loopback: protocol, auth, bad input,
restart-restore (SQLite), expiry, metrics, and sessions shared by two processes via Redis."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from servers import polylogue_serve, redis_server
from websockets.sync.client import connect

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus
from polylogue.serve.app import ServeConfigError, check_bind
from polylogue.serve.client import create_session, local_p_speak, utterance_events

pytestmark = pytest.mark.slow

TOKEN = "t0k3n-for-tests-0123456789abcdef"


@pytest.fixture(scope="module")
def ami() -> Conversation:
    return next(iter(load_corpus("ami")))


def _events(conv: Conversation, a: int, b: int) -> list[dict]:
    return utterance_events(conv.utterances[a:b], first_seq=a)


def _session(url: str, conv: Conversation, agent: str = "B", headers: dict | None = None) -> str:
    return create_session(url, agent, conv.participants, headers)


def _local(conv: Conversation, n: int, agent: str = "B") -> list[float | None]:
    return local_p_speak(agent, conv.participants, conv.utterances[:n])


def _stream(url: str, sid: str, events: list[dict], token: str | None = None) -> list[dict]:
    ws_url = url.replace("http", "ws") + f"/v1/sessions/{sid}/stream"
    if token:
        ws_url += f"?token={token}"
    with connect(ws_url) as ws:
        out = []
        for e in events:
            ws.send(json.dumps(e))
            out.append(json.loads(ws.recv()))
    return out


def test_stream_protocol_matches_the_engine_and_survives_bad_input(
    tmp_path: Path, ami: Conversation
) -> None:
    with polylogue_serve("--state", str(tmp_path / "s.sqlite")) as url:
        sid = _session(url, ami)
        other = _session(url, ami)
        events = _events(ami, 0, 60)
        # Bad input mid-stream: not JSON, unknown type, NaN time, extra field, a too-long
        # text, an interim; each gets an error result (or an ack), the socket stays open.
        bad = [
            "{not json",
            json.dumps({"type": "dance", "seq": -1}),
            json.dumps(
                {"type": "utterance", "seq": -2, "speaker": "A", "text": "x", "start": float("nan")}
            ).replace("NaN", "1e999"),
            json.dumps({"type": "utterance", "seq": -3, "speaker": "A", "text": "hi", "x": 1}),
            json.dumps({"type": "utterance", "seq": -4, "speaker": "A", "text": "w" * 20_000}),
            json.dumps(
                {"type": "utterance", "seq": -5, "speaker": "A", "text": "so the", "final": False}
            ),
        ]
        ws_url = url.replace("http", "ws") + f"/v1/sessions/{sid}/stream"
        results = []
        with connect(ws_url) as ws:
            for i, e in enumerate(events):
                if i == 10:
                    for b in bad:
                        ws.send(b)
                        results.append(json.loads(ws.recv()))
                ws.send(json.dumps(e))
                results.append(json.loads(ws.recv()))
        errors = [r for r in results if not r["ok"]]
        assert len(errors) == 5
        assert "not JSON" in errors[0]["error"] and errors[1]["seq"] == -1
        assert all(r.get("error") for r in errors)
        good = [r for r in results if r["ok"] and r["seq"] is not None and r["seq"] >= 0]
        assert [r["seq"] for r in good] == list(range(60))  # in order, none lost
        served = [r["decision"]["p_speak"] for r in good]
        assert served == _local(ami, 60)
        assert any(r["decision"]["action"] == "SPEAK" for r in good)
        # The other session never saw any of it.
        summary = httpx.get(f"{url}/v1/sessions/{other}").json()
        assert summary["utterances"] == 0
        # HTTP one-offs: a batch, a 4xx for a bad event body, 404s for unknown sessions.
        r = httpx.post(f"{url}/v1/sessions/{other}/events", json=_events(ami, 0, 5))
        assert r.status_code == 200 and [x["ok"] for x in r.json()["results"]] == [True] * 5
        assert httpx.post(f"{url}/v1/sessions/{other}/events", content=b"[{").status_code == 400
        assert httpx.post(f"{url}/v1/sessions", json={"agent": ""}).status_code == 400
        assert httpx.post(f"{url}/v1/sessions/nope/events", json=events[0]).status_code == 404
        assert httpx.delete(f"{url}/v1/sessions/{other}").status_code == 200
        assert httpx.get(f"{url}/v1/sessions/{other}").status_code == 404
        metrics = httpx.get(f"{url}/metrics").text
        assert 'polylogue_decisions_total{action="SPEAK"}' in metrics
        assert "polylogue_decision_latency_seconds_bucket" in metrics
        assert 'polylogue_event_errors_total{kind="NotJSON"} 1' in metrics


def test_token_on_every_route_and_socket(tmp_path: Path, ami: Conversation) -> None:
    with pytest.raises(ServeConfigError):
        check_bind("0.0.0.0", None)
    with pytest.raises(ServeConfigError):
        check_bind("0.0.0.0", "short")
    check_bind("0.0.0.0", TOKEN)
    import subprocess

    from polylogue.serve.local import POLYLOGUE

    r = subprocess.run(
        [POLYLOGUE, "serve", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2 and "needs a token" in r.stderr
    with polylogue_serve("--state", str(tmp_path / "s.sqlite"), token=TOKEN) as url:
        ok = {"Authorization": f"Bearer {TOKEN}"}
        bad = {"Authorization": "Bearer " + TOKEN[:-1] + "x"}
        for path in ("/healthz", "/metrics", "/v1/sessions/x"):
            assert httpx.get(url + path).status_code == 401
            assert httpx.get(url + path, headers=bad).status_code == 401
        assert httpx.post(f"{url}/v1/sessions", json={"agent": "B"}).status_code == 401
        sid = _session(url, ami, headers=ok)
        assert httpx.get(f"{url}/v1/sessions/{sid}", headers=ok).status_code == 200
        with pytest.raises(Exception, match="4401"):
            _stream(url, sid, _events(ami, 0, 1))
        assert _stream(url, sid, _events(ami, 0, 2), token=TOKEN)[1]["ok"]


def test_sessions_survive_a_restart(tmp_path: Path, ami: Conversation) -> None:
    db = str(tmp_path / "state.sqlite")
    with polylogue_serve("--state", db) as url:
        sid = _session(url, ami)
        first = _stream(url, sid, _events(ami, 0, 40))
    with polylogue_serve("--state", db) as url:  # a new process on the same state
        second = _stream(url, sid, _events(ami, 40, 80))
    served = [r["decision"]["p_speak"] for r in first + second]
    assert served == _local(ami, 80)


def test_worker_processes_share_one_sqlite_file(tmp_path: Path, ami: Conversation) -> None:
    """``--workers 2``: streams land on either process; decisions stay the engine's."""
    args = ("--state", str(tmp_path / "s.sqlite"), "--workers", "2", "--trace")
    with polylogue_serve(*args) as url:
        sid = _session(url, ami)
        results: list[dict] = []
        # A new connection each time (the kernel picks the process) until both processes
        # have continued the session (the trace names the one that answered).
        while len(results) < 40 or len({r["trace"]["pid"] for r in results}) < 2:
            assert len(results) < 200, "one process answered every connection"
            results += _stream(url, sid, _events(ami, len(results), len(results) + 5))
        assert [r["decision"]["p_speak"] for r in results] == _local(ami, len(results))
        summary = httpx.get(f"{url}/v1/sessions/{sid}").json()
        assert summary["utterances"] == len(results)


def test_idle_sessions_expire(tmp_path: Path, ami: Conversation) -> None:
    import time

    args = ("--state", str(tmp_path / "s.sqlite"), "--idle-ttl", "1", "--sweep-interval", "0.2")
    with polylogue_serve(*args) as url:
        sid = _session(url, ami)
        assert httpx.get(f"{url}/v1/sessions/{sid}").status_code == 200
        time.sleep(2.5)
        assert httpx.get(f"{url}/v1/sessions/{sid}").status_code == 404


def test_two_processes_share_sessions_through_redis(tmp_path: Path, ami: Conversation) -> None:
    with (
        redis_server(tmp_path) as redis_url,
        polylogue_serve("--state", redis_url) as a,
        polylogue_serve("--state", redis_url) as b,
    ):
        sid = _session(a, ami)
        results = []
        # Alternate processes every 10 utterances: each continues where the other stopped.
        for k in range(6):
            url = a if k % 2 == 0 else b
            results += _stream(url, sid, _events(ami, 10 * k, 10 * k + 10))
        assert [r["decision"]["p_speak"] for r in results] == _local(ami, 60)
        assert httpx.get(f"{b}/v1/sessions/{sid}").json()["utterances"] == 60
    with redis_server(tmp_path) as redis_url, polylogue_serve("--state", redis_url) as a:
        assert httpx.get(f"{a}/v1/sessions/{sid}").status_code == 404  # a fresh Redis


def test_redis_store_refuses_a_stale_write(tmp_path: Path) -> None:
    """A process with a stale copy cannot overwrite a newer snapshot (compare-and-set)."""
    import asyncio

    from polylogue.serve.store import RedisStore, StaleSessionError

    async def scenario(url: str) -> None:
        store = RedisStore(url, idle_s=60)
        await store.save("s1", 0, {"n": 0})
        await store.save("s1", 1, {"n": 1})
        with pytest.raises(StaleSessionError):
            await store.save("s1", 1, {"n": "stale"})  # derived from version 0 again
        assert await store.load("s1") == (1, {"n": 1})
        async with store.lock("s1"):  # orders this process's events on one session
            with pytest.raises(TimeoutError):
                async with store.lock("s1", timeout_s=0.2):
                    pass
        assert not store._locks  # no per-session state left behind
        # Another process with a stale copy (version 0) cannot write over version 1.
        other = RedisStore(url, idle_s=60)
        assert await other.version("s1") == 1
        with pytest.raises(StaleSessionError):
            await other.save("s1", 1, {"n": "stale"})
        await other.save("s1", 2, {"n": 2})
        assert await store.load("s1") == (2, {"n": 2})
        await other.close()
        await store.close()

    with redis_server(tmp_path) as url:
        asyncio.run(scenario(url))
