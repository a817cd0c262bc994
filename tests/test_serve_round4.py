"""`polylogue serve` when its store fails, its descriptors run out or a client's clock jumps,
and the second-day mistakes of a deployer: real server processes on loopback, a real full
disk (a small tmpfs, as root), a real redis-server killed, stopped, full and evicting."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from servers import free_port, polylogue_serve, redis_server

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus
from polylogue.serve.client import session_body, utterance_events
from polylogue.serve.local import POLYLOGUE, NoTmpfsError, fill_disk, small_tmpfs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ami() -> Conversation:
    return next(iter(load_corpus("ami")))


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs (a disk that really fills), unmounted afterwards."""
    try:
        with small_tmpfs(tmp_path / "disk", 3072) as path:
            yield path
    except NoTmpfsError as e:
        pytest.skip(f"full-disk test needs a tmpfs: {e}")


def _events(ami: Conversation, n: int, first_seq: int = 0) -> list[dict[str, Any]]:
    return utterance_events(ami.utterances[:n], first_seq=first_seq)


def _post(url: str, sid: str, event: Any) -> httpx.Response:
    return httpx.post(f"{url}/v1/sessions/{sid}/events", json=event, timeout=30)


def _new(url: str, ami: Conversation, **extra: Any) -> str:
    body = {**session_body("B", ami.participants), **extra}
    r = httpx.post(f"{url}/v1/sessions", json=body, timeout=30)
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


def _metric(url: str, line_start: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    found = [ln for ln in text.splitlines() if ln.startswith(line_start)]
    assert found, f"{line_start} not in /metrics"
    return float(found[0].rsplit(" ", 1)[1])


class Server:
    """`polylogue serve` as a child process that a test stops or kills itself."""

    def __init__(
        self, *args: str, logs: Path, port: int | None = None, nofile: int | None = None
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = logs / f"serve-{self.port}-{time.monotonic_ns()}.log"
        env = {k: v for k, v in os.environ.items() if k != "POLYLOGUE_SERVE_TOKEN"}

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.out = open(self.log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [POLYLOGUE, "serve", "--port", str(self.port), *args],
            stdout=self.out,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=limit,
        )
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, self.output()
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code in (200, 503):
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)

    def output(self) -> str:
        if not self.out.closed:
            self.out.flush()
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.out.close()
        return int(code)


# ----------------------------------------------------------------------------- a full disk


def test_full_disk_refuses_what_it_cannot_write_and_recovers_by_itself(
    disk: Path, ami: Conversation
) -> None:
    state = disk / "s.sqlite"
    srv = Server("--state", str(state), logs=disk.parent)
    try:
        url = srv.url
        sid = _new(url, ami, session_id="full")
        events = _events(ami, 400)
        for e in events[:5]:
            assert _post(url, sid, e).status_code == 200
        filler = fill_disk(disk)
        acked = 5
        refused: httpx.Response | None = None
        for e in events[5:300]:
            r = _post(url, sid, e)
            assert r.status_code in (200, 503), r.text  # never a 500
            if r.status_code == 503:
                refused = r
                break
            acked += 1
        assert refused is not None, "a full disk was never reported"
        # Answered within the write-behind window only: the failure is found at the next flush.
        assert acked < 60
        assert refused.headers["Retry-After"] == "1"
        result = refused.json()["results"][0]
        assert result["ok"] is False and "not applied" in result["error"]
        health = httpx.get(f"{url}/healthz", timeout=30)
        assert health.status_code == 503 and health.json()["store"]["state"] == "failing"
        assert _metric(url, "polylogue_store_up") == 0
        # Not applied: the session holds exactly the acknowledged events.
        summary = httpx.get(f"{url}/v1/sessions/{sid}", timeout=30).json()
        assert (summary["utterances"], summary["last_seq"]) == (acked, acked - 1)
        # A control that cannot be written is refused and not applied; a new session is a 503.
        role = {"type": "role", "role": "observer", "seq": acked}
        r = _post(url, sid, role)
        assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
        summary = httpx.get(f"{url}/v1/sessions/{sid}", timeout=30).json()
        assert summary["deployment"]["role"] is None and summary["last_seq"] == acked - 1
        r = httpx.post(f"{url}/v1/sessions", json=session_body("B", ami.participants), timeout=30)
        assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
        # A batch stops at the first refusal: nothing after it overtakes it.
        batch = _post(url, sid, events[acked : acked + 3])
        assert batch.status_code == 503
        assert [x["ok"] for x in batch.json()["results"]] == [False, False, False]
        # Freed: the queue is written without any new event arriving.
        filler.unlink()
        deadline = time.monotonic() + 10
        while httpx.get(f"{url}/healthz", timeout=30).status_code != 200:
            assert time.monotonic() < deadline, "the store never recovered"
            time.sleep(0.1)
        # The resent control is applied (not a duplicate), then SIGKILL: nothing answered is lost.
        r = _post(url, sid, role)
        assert r.status_code == 200 and "duplicate" not in r.json()["results"][0], r.text
        assert srv.stop(signal.SIGKILL) == -signal.SIGKILL
    finally:
        srv.stop(signal.SIGKILL)
    again = Server("--state", str(state), logs=disk.parent)
    try:
        summary = httpx.get(f"{again.url}/v1/sessions/{sid}", timeout=30).json()
        assert summary["utterances"] == acked and summary["last_seq"] == acked
        assert summary["deployment"]["role"] == "observer"
    finally:
        again.stop()
    assert "Traceback" not in srv.output() + again.output()


def test_stop_with_a_full_disk_is_not_a_clean_stop(disk: Path, ami: Conversation) -> None:
    # A wide flush window: the event is answered and queued when the disk fills.
    srv = Server("--state", str(disk / "s.sqlite"), "--flush-interval", "30", logs=disk.parent)
    sid = _new(srv.url, ami)
    filler = fill_disk(disk)
    try:
        assert _post(srv.url, sid, _events(ami, 1)[0]).status_code == 200
        code = srv.stop(signal.SIGTERM, timeout=60)
    finally:
        srv.stop(signal.SIGKILL)
        filler.unlink()
    out = srv.output()
    assert code == 1, out
    assert "error: stopped with unwritten state: 1 session(s) with answered events" in out
    assert sid in out


def test_sweeper_survives_a_full_disk_and_expires_sessions_again(
    disk: Path, ami: Conversation
) -> None:
    srv = Server(
        "--state",
        str(disk / "s.sqlite"),
        "--idle-ttl",
        "1",
        "--sweep-interval",
        "0.2",
        logs=disk.parent,
    )
    try:
        sid = _new(srv.url, ami)
        filler = fill_disk(disk)
        deadline = time.monotonic() + 20
        while _metric(srv.url, 'polylogue_task_restarts_total{task="sweeper"}') < 2:
            assert time.monotonic() < deadline, "the sweeper never hit the full disk"
            time.sleep(0.2)
        tasks = httpx.get(f"{srv.url}/healthz", timeout=30).json()["tasks"]
        assert tasks["sweeper"]["running"] and "full" in tasks["sweeper"]["last_error"]
        filler.unlink()
        deadline = time.monotonic() + 20
        while httpx.get(f"{srv.url}/v1/sessions/{sid}", timeout=30).status_code != 404:
            assert time.monotonic() < deadline, "idle sessions never expired again"
            time.sleep(0.2)
        assert _metric(srv.url, "polylogue_sessions_expired_total") >= 1
        out = srv.output()
        # Logged, once per kind of failure in a row, not once per retry.
        assert 1 <= out.count("background task sweeper failed") <= 2, out
    finally:
        srv.stop()


# ----------------------------------------------------------------------------- Redis faults


def test_redis_killed_stalled_and_restarted(tmp_path: Path, ami: Conversation) -> None:
    pids: list[int] = []
    port = free_port()
    persist = ("--appendonly", "yes", "--appendfsync", "always")
    events = _events(ami, 40)
    with redis_server(tmp_path, args=persist, pids=pids, port=port) as rurl:
        srv = Server("--state", rurl, logs=tmp_path)
        try:
            sid = _new(srv.url, ami)
            for e in events[:5]:
                assert _post(srv.url, sid, e).status_code == 200
            # Stalled (SIGSTOP): answered 503 within the client deadline, not a hang.
            os.kill(pids[0], signal.SIGSTOP)
            try:
                t0 = time.monotonic()
                r = _post(srv.url, sid, events[5])
                assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
                assert time.monotonic() - t0 < 20
                assert httpx.get(f"{srv.url}/healthz", timeout=30).status_code == 503
            finally:
                os.kill(pids[0], signal.SIGCONT)
            assert _post(srv.url, sid, events[5]).status_code == 200
            os.kill(pids[0], signal.SIGKILL)
        except BaseException:
            srv.stop()
            raise
    try:
        # Killed: 503 (never 500), for events, creations, reads and /healthz.
        r = _post(srv.url, sid, events[6])
        assert r.status_code == 503, r.text
        assert "Redis" in r.json()["results"][0]["error"]
        r = httpx.post(f"{srv.url}/v1/sessions", json=session_body("B", []), timeout=30)
        assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
        health = httpx.get(f"{srv.url}/healthz", timeout=30)
        assert health.status_code == 503 and health.json()["store"]["state"] == "unavailable"
        # Restarted with its append-only file: every acknowledged event is there.
        with redis_server(tmp_path, args=persist, port=port):
            deadline = time.monotonic() + 10
            while httpx.get(f"{srv.url}/healthz", timeout=30).status_code != 200:
                assert time.monotonic() < deadline, "never reconnected to Redis"
                time.sleep(0.2)
            for e in events[6:10]:
                assert _post(srv.url, sid, e).status_code == 200
            summary = httpx.get(f"{srv.url}/v1/sessions/{sid}", timeout=30).json()
            assert (summary["utterances"], summary["last_seq"]) == (10, 9)
    finally:
        srv.stop()
    assert "Traceback" not in srv.output()


def test_redis_out_of_memory_is_503_and_loses_nothing(tmp_path: Path, ami: Conversation) -> None:
    import redis

    with redis_server(tmp_path, args=("--maxmemory-policy", "noeviction")) as rurl:
        srv = Server("--state", rurl, logs=tmp_path)
        try:
            sid = _new(srv.url, ami)
            rc = redis.Redis.from_url(rurl)
            rc.config_set("maxmemory", str(int(rc.info("memory")["used_memory"]) + 150_000))
            rc.close()
            created, codes = [sid], set()
            for _ in range(2000):
                body = session_body("B", ami.participants)
                r = httpx.post(f"{srv.url}/v1/sessions", json=body, timeout=30)
                codes.add(r.status_code)
                if r.status_code != 201:
                    break
                created.append(r.json()["session_id"])
            assert codes == {201, 503}, codes
            assert "OutOfMemoryError" in r.json()["error"] and r.headers["Retry-After"] == "1"
            # An event that needs memory is a 503 as well; every 201 is still there.
            e = _post(srv.url, sid, _events(ami, 1)[0])
            assert e.status_code == 503 and "OutOfMemoryError" in e.text, e.text
            for sid in created:
                assert httpx.get(f"{srv.url}/v1/sessions/{sid}", timeout=30).status_code == 200
        finally:
            srv.stop()
    assert "Traceback" not in srv.output()


def test_redis_that_may_evict_is_refused_and_an_evicted_session_is_410(
    tmp_path: Path, ami: Conversation
) -> None:
    import redis

    with redis_server(tmp_path, args=("--maxmemory-policy", "allkeys-lru")) as rurl:
        done = subprocess.run(
            [POLYLOGUE, "serve", "--port", str(free_port()), "--state", rurl],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert "maxmemory-policy 'allkeys-lru'" in done.stderr and "noeviction" in done.stderr
    with redis_server(tmp_path) as rurl:
        srv = Server("--state", rurl, logs=tmp_path)
        try:
            sid = _new(srv.url, ami)
            assert _post(srv.url, sid, _events(ami, 1)[0]).status_code == 200
            # The policy changed behind the service's back, and memory ran short.
            r = redis.Redis.from_url(rurl)
            r.config_set("maxmemory-policy", "volatile-lru")  # least recently used first
            used = int(r.info("memory")["used_memory"])
            r.config_set("maxmemory", str(used + 400_000))
            for i in range(3000):  # keys with a TTL: what volatile-* may evict, ours included
                r.set(f"junk:{i}", b"x" * 2000, ex=3600)
            assert not r.exists(f"polylogue:s:{sid}", f"polylogue:v:{sid}")
            res = _post(srv.url, sid, _events(ami, 2)[1])
            assert res.status_code == 410, res.text
            assert "evicted" in res.json()["error"]
            assert httpx.get(f"{srv.url}/v1/sessions/{sid}", timeout=30).status_code == 410
        finally:
            srv.stop()


# ----------------------------------------------------------------------------- descriptors


def test_descriptor_exhaustion_is_counted_and_logged_once_per_interval(tmp_path: Path) -> None:
    srv = Server("--state", str(tmp_path / "s.sqlite"), nofile=64, logs=tmp_path)
    socks: list[socket.socket] = []
    try:
        for _ in range(120):
            socks.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5))
        time.sleep(3)
        for s in socks:
            s.close()
        socks = []
        deadline = time.monotonic() + 20
        while True:  # accepted again once descriptors are free
            try:
                refused = _metric(srv.url, 'polylogue_connections_refused_total{reason="EMFILE"}')
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.5)
        assert refused > 0
    finally:
        for s in socks:
            s.close()
        srv.stop()
    # Also the accept retries asyncio still had due when the server stopped.
    out = srv.output()
    assert "Traceback" not in out
    assert 1 <= out.count("cannot accept connections") <= 2, out[:2000]
    assert len(out) < 5000


# ----------------------------------------------------------------------------- clocks


def test_a_clock_jump_is_warned_and_not_applied(tmp_path: Path) -> None:
    people = [{"id": "alice"}, {"id": "bob"}, {"id": "dave"}]

    def run(stop_time: float) -> list[dict[str, Any]]:
        body = {"agent": "dave", "participants": people}
        r = httpx.post(f"{url}/v1/sessions", json=body, timeout=30)
        sid = r.json()["session_id"]
        stream = [
            {"type": "utterance", "speaker": "alice", "text": "We shipped the build.", "end": 10.0},
            {"type": "agent_speech", "speaking": True, "time": 11.0},
            {"type": "agent_speech", "speaking": False, "time": stop_time, "text": "Great."},
            {"type": "utterance", "speaker": "bob", "text": "So what is next for the team then?",
             "start": 40.0, "end": 44.0},
        ]  # fmt: skip
        return [_post(url, sid, e).json()["results"][0] for e in stream]

    with polylogue_serve("--state", str(tmp_path / "s.sqlite"), output=tmp_path / "log") as url:
        sane = run(14.0)
        epoch = run(1_700_000_000.0)  # epoch seconds among conversation seconds
        assert "warnings" not in sane[2]
        assert "clock jump" in epoch[2]["warnings"][0]
        # The agent is not left "just spoke" for the rest of the session.
        assert epoch[3]["decision"]["agent_state"] == sane[3]["decision"]["agent_state"] == "idle"

        # A facilitator whose client clock resets mid-meeting (200 s -> 2 s) decides as if
        # the clock had run on: no phantom 195-s silence.
        def facilitator(later: list[float]) -> list[dict[str, Any]]:
            body = {"agent": "dave", "participants": people, "deployment": {"role": "facilitator"}}
            sid = httpx.post(f"{url}/v1/sessions", json=body, timeout=30).json()["session_id"]
            line = {"type": "utterance", "speaker": "alice", "text": "Next item is the budget."}
            for t in (100.0, 150.0, 200.0):
                assert _post(url, sid, {**line, "start": t - 3, "end": t}).status_code == 200
            last, quiet, long = later
            out = [_post(url, sid, {**line, "start": last - 3, "end": last})]
            out += [_post(url, sid, {"type": "silence", "time": t}) for t in (quiet, long)]
            return [r.json()["results"][0] for r in out]

        steady = facilitator([203.0, 206.0, 210.0])
        reset = facilitator([5.0, 8.0, 12.0])
        assert "clock jump" in reset[0]["warnings"][0] and "before" in reset[0]["warnings"][0]
        assert not any("warnings" in r for r in steady + reset[1:])
        assert [r.get("decision") for r in reset[1:]] == [r.get("decision") for r in steady[1:]]
        assert "decision" not in reset[1]  # 3 s of silence, not 203
    assert "clock jump" in (tmp_path / "log").read_text()


# ----------------------------------------------------------------------------- bad input


def test_invisible_names_bad_roles_dot_ids_and_controls_without_a_value(tmp_path: Path) -> None:
    with polylogue_serve("--state", str(tmp_path / "s.sqlite")) as url:
        zw = "\u200b\u200c"
        bodies = {
            "agent": {"agent": zw},
            "participant": {"agent": "dave", "participants": [{"id": "\u2060"}]},
            "alias": {"agent": "dave", "participants": [{"id": "a", "aliases": ["\ufe0f"]}]},
            "role newline": {"agent": "dave", "participants": [{"id": "a", "role": "PM\nadmin"}]},
            "role NUL": {"agent": "dave", "participants": [{"id": "a", "role": "PM\x00"}]},
            "role bidi": {"agent": "dave", "participants": [{"id": "a", "role": "\u202eMP"}]},
            "id .": {"agent": "dave", "session_id": "."},
            "id ..": {"agent": "dave", "session_id": ".."},
        }
        for what, body in bodies.items():
            r = httpx.post(f"{url}/v1/sessions", json=body, timeout=30)
            assert r.status_code == 400, (what, r.text)
        assert (
            "only invisible characters"
            in httpx.post(f"{url}/v1/sessions", json=bodies["agent"], timeout=30).json()["error"]
        )
        people = [{"id": "alice"}, {"id": "dave"}]
        body = {"agent": "dave", "participants": people, "deployment": {"role": "assistant"}}
        sid = httpx.post(f"{url}/v1/sessions", json=body, timeout=30).json()["session_id"]
        bad = {
            "speaker": {"type": "utterance", "speaker": zw, "text": "hello there"},
            "leave": {"type": "leave", "participant": "\u200d"},
            "role": {"type": "role"},
            "audience": {"type": "audience"},
        }
        for what, event in bad.items():
            r = _post(url, sid, event)
            assert r.status_code == 400, (what, r.text)
        assert "observer, assistant, facilitator" in _post(url, sid, bad["role"]).text
        assert "group, adaptive" in _post(url, sid, bad["audience"]).text
        summary = httpx.get(f"{url}/v1/sessions/{sid}", timeout=30).json()
        assert summary["deployment"]["role"] == "assistant"  # not dropped by an empty event
        assert [p["id"] for p in summary["participants"]] == ["alice", "dave"]
        # An explicit null still returns to the session's own point.
        r = _post(url, sid, {"type": "role", "role": None})
        assert r.status_code == 200 and r.json()["results"][0]["deployment"]["role"] is None


def test_events_in_a_range_a_seq_jump_skipped_are_refused(tmp_path: Path) -> None:
    with polylogue_serve("--state", str(tmp_path / "s.sqlite")) as url:
        sid = httpx.post(f"{url}/v1/sessions", json={"agent": "dave"}, timeout=30).json()[
            "session_id"
        ]
        line = {"type": "utterance", "speaker": "alice", "text": "Dave, are you there?"}
        assert _post(url, sid, {**line, "seq": 0}).status_code == 200
        jump = _post(url, sid, {**line, "seq": 1000}).json()["results"][0]
        assert jump["ok"] and jump["seq_gap"] == 999
        # The client carries on with its own numbering: refused, never a silent duplicate.
        r = _post(url, sid, {**line, "seq": 1})
        assert r.status_code == 409, r.text
        res = r.json()["results"][0]
        assert res["ok"] is False and res["last_seq"] == 1000
        assert "next event needs seq 1001" in res["error"]
        # A real resend is still a duplicate, and the next number is applied.
        again = _post(url, sid, {**line, "seq": 0}).json()["results"][0]
        assert again["duplicate"] is True
        assert _post(url, sid, {**line, "seq": 1001}).json()["results"][0]["ok"] is True
        assert httpx.get(f"{url}/v1/sessions/{sid}", timeout=30).json()["utterances"] == 3


def test_port_out_of_range_and_token_bits(tmp_path: Path) -> None:
    done = subprocess.run(
        [POLYLOGUE, "serve", "--port", "99999", "--state", str(tmp_path / "s.sqlite")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--port" in done.stderr and "65535" in done.stderr
    done = subprocess.run(
        [POLYLOGUE, "serve", "--port", str(free_port()), "--token", "x" * 20],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "(0 bits < 64)" in done.stderr, done.stderr
    assert "-0" not in done.stderr
    # --port 0: a free port, announced as bound, and requests naming it pass the Host check.
    proc = subprocess.Popen(
        [POLYLOGUE, "serve", "--port", "0", "--state", str(tmp_path / "z.sqlite")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        url = banner.split(" on ", 1)[1].split(" ", 1)[0]
        assert not url.endswith(":0"), banner
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
    finally:
        proc.terminate()
        proc.wait(30)


def test_redis_store_messages_are_json(tmp_path: Path) -> None:
    """A store refusal is a JSON body naming the store, like every other answer."""
    with redis_server(tmp_path) as rurl:
        srv = Server("--state", rurl, logs=tmp_path)
    try:  # redis stopped: the service is up, its store is not
        r = httpx.get(f"{srv.url}/v1/sessions/nope", timeout=30)
        assert r.status_code == 503 and json.loads(r.text)["retry_after"] == 1
    finally:
        srv.stop()


# ----------------------------------------------------------------------------- large rosters


def test_a_large_roster_is_stored_apart_and_only_when_it_changes(tmp_path: Path) -> None:
    import sqlite3

    state = tmp_path / "s.sqlite"
    roster = [{"id": f"p{i}", "name": f"Guest{i}"} for i in range(3000)]
    line = {"type": "utterance", "speaker": "p1", "text": "Guest0, can you check the build?"}

    def stored(sid: str) -> tuple[int, int, str]:
        with sqlite3.connect(state) as con:
            row = con.execute(
                "SELECT length(snapshot), length(roster), roster FROM sessions WHERE id=?", (sid,)
            ).fetchone()
        return int(row[0]), int(row[1]), str(row[2])

    # --flush-interval 0: every snapshot is on disk when its event is answered.
    with polylogue_serve("--state", str(state), "--flush-interval", "0") as url:
        body = {"agent": "p0", "participants": roster, "session_id": "big"}
        assert httpx.post(f"{url}/v1/sessions", json=body, timeout=60).status_code == 201
        first = stored("big")
        assert first[0] < 20_000 < first[1]  # the snapshot is small; the roster apart
        for k in range(5):
            event = {**line, "start": 2.0 * k, "end": 2.0 * k + 1}
            assert _post(url, "big", event).status_code == 200
        after = stored("big")
        assert after[2] == first[2] and after[0] < 20_000  # the roster was not rewritten
        # A change of roster is written: a join, and a speaker nobody listed.
        join = {"type": "join", "participants": [{"id": "zoe", "name": "Zoe"}]}
        assert _post(url, "big", join).status_code == 200
        new = {**line, "speaker": "yann", "start": 20.0, "end": 21.0}
        assert _post(url, "big", new).status_code == 200
        assert '"zoe"' in stored("big")[2] and '"yann"' in stored("big")[2]
        before = httpx.get(f"{url}/v1/sessions/big", timeout=60).json()
        event = {**line, "start": 30.0, "end": 31.0}
        decided = _post(url, "big", event).json()["results"][0]["decision"]
    # A restart reads the roster back: the same people, the same present set.
    with polylogue_serve("--state", str(state), "--flush-interval", "0") as url:
        after = httpx.get(f"{url}/v1/sessions/big", timeout=60).json()
        assert len(after["participants"]) == 3002 and "zoe" in after["present"]
        assert {k: after[k] for k in ("participants", "present")} == {
            k: before[k] for k in ("participants", "present")
        }
    assert decided["p_speak"] is not None
