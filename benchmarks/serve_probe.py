"""Fuzz and fault counts for `polylogue serve` on loopback (quoted in docs/serve-measured.md).

    python benchmarks/serve_probe.py                       # this checkout's server
    python benchmarks/serve_probe.py --server-src OTHER/src --skip-client   # another checkout

Everything runs against real server processes on loopback (and a throw-away redis-server):

1. **Fuzz**: ``--seeds`` x ``--cases`` seeded cases of 15 classes (polylogue.serve.probe),
   each ending clear / correct / silent / traceback / hang, per class and in total.
2. **Creation under SIGKILL**: ``--kill-rounds`` rounds of creating 3 sessions (201) and
   killing the server at once (``--flush-interval 2``); sessions missing after a restart.
3. **The documented client under SIGKILL** (examples/serve_client.py): ``--client-runs``
   replays of 150 AMI utterances, the server killed right after the session's creation and
   twice mid-burst; sessions lost, utterances lost, utterances fed twice (the server's count
   over 150), decisions that differ from an uninterrupted engine, events sent again.
4. **Bodies**: peak resident memory of the server while 5 clients each stream a 100 MB
   chunked body to ``POST /v1/sessions``.
5. **Unknown ids**: resident memory growth over ``--unknown`` events sent to unknown ids.
6. **Redis creation**: seconds per 1,000 session creations, three times in a row, with
   ``--redis-keys`` unrelated keys in the same Redis.
7. **Store faults** (``faults``): the answers while the store cannot write, by status code
   (target: 503 with ``Retry-After``, never a 500), and what an acknowledged event costs:
   a SQLite file on a full disk (a 3 MiB tmpfs filled to the last byte, as root; skipped
   with a message otherwise): events, a control, creations, then the disk freed with no
   event sent (seconds until ``/healthz`` is 200 again), a SIGKILL and the acknowledged
   events found after a restart; a stop (SIGTERM) with the disk full (exit status); Redis
   stalled (SIGSTOP), killed and restarted from its append-only file, out of memory
   (``maxmemory``, ``noeviction``), and with an eviction policy (the server must refuse to
   start); and 150 connections to a server limited to 64 descriptors (log bytes, tracebacks,
   refusals counted in ``/metrics``).
8. **Large rosters** (``roster``): a session of 4 and one of ``--roster`` people (SQLite),
   ``--roster-events`` utterances each over HTTP: median and 90th-percentile server time per
   event, the client's median round trip, and the bytes of the stored snapshot row and of
   the roster stored apart (written only when it changes). Run with ``--server-src`` at the
   previous code for the before figures.

``--server-src`` runs the servers from another source tree (the previous code, as the
baseline); ``--skip-client`` leaves out part 3 (the previous server has no ``last_seq``).
``--json PATH`` writes every figure. Results are recorded in docs/serve-measured.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus
from polylogue.serve.app import MAX_MESSAGE
from polylogue.serve.client import create_session, local_p_speak, session_body, utterance_events
from polylogue.serve.local import (
    POLYLOGUE,
    NoTmpfsError,
    fill_disk,
    free_port,
    polylogue_serve,
    redis_server,
    small_tmpfs,
)
from polylogue.serve.probe import PROBE_OUTCOMES, ProbeTally, make_cases, run_cases

ROOT = Path(__file__).resolve().parents[1]
#: The parts below, in the order they run (``--parts`` picks some).
PARTS = ("fuzz", "creation", "client", "bodies", "unknown", "redis", "faults", "roster")
CLIENT = ROOT / "examples" / "serve_client.py"
N_UTTERANCES = 150


def _status(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def fuzz(tmp: Path, conv: Conversation, seeds: int, n: int) -> dict[str, Any]:
    total = ProbeTally()
    with polylogue_serve("--state", str(tmp / "fuzz.sqlite"), output=tmp / "fuzz.log") as url:
        for seed in range(seeds):
            sid = create_session(url, "B", conv.participants)
            cases = make_cases(seed, n, utterance_events(conv.utterances), MAX_MESSAGE)
            t = run_cases(url, sid, cases)
            for kind, counts in t.by_kind.items():
                for outcome, k in counts.items():
                    total.outcomes[outcome] += k
                    total.by_kind.setdefault(kind, type(counts)())[outcome] += k
            total.problems += t.problems
    out = total.to_dict()
    out["server_tracebacks_logged"] = (tmp / "fuzz.log").read_text().count("Traceback")
    return out


def creation_kills(tmp: Path, conv: Conversation, rounds: int) -> dict[str, int]:
    port = free_port()
    args = ("--state", str(tmp / "create.sqlite"), "--flush-interval", "2")
    created: list[str] = []
    for _ in range(rounds):
        pids: list[int] = []
        with polylogue_serve(*args, port=port, pids=pids) as url:
            created += [create_session(url, "B", conv.participants) for _ in range(3)]
            os.kill(pids[0], signal.SIGKILL)
    with polylogue_serve(*args, port=port) as url:
        lost = sum(httpx.get(f"{url}/v1/sessions/{s}").status_code == 404 for s in created)
    return {"rounds": rounds, "sessions_created": len(created), "sessions_lost": lost}


def _resumes(read: list[dict[str, Any]]) -> int:
    return sum(o["event"] == "resumed" for o in read)


def client_kills(tmp: Path, conv: Conversation, runs: int) -> dict[str, int]:
    transcript = tmp / "meeting.jsonl"
    lines = [json.dumps({"participants": [p.to_dict() for p in conv.participants]})]
    lines += [
        json.dumps({"speaker": u.speaker, "text": u.text, "start": u.start, "end": u.end})
        for u in conv.utterances[:N_UTTERANCES]
    ]
    transcript.write_text("\n".join(lines) + "\n")
    expected = local_p_speak("B", conv.participants, conv.utterances[:N_UTTERANCES])
    totals = dict.fromkeys(
        ("runs", "kills", "sessions_lost", "utterances_lost", "fed_twice", "wrong_decisions"), 0
    )
    totals["events_sent_again"] = 0
    for run in range(runs):
        port = free_port()
        args = ("--state", str(tmp / f"client{run}.sqlite"), "--flush-interval", "2")
        pids: list[int] = []
        with ExitStack() as servers:
            url = servers.enter_context(polylogue_serve(*args, port=port, pids=pids))
            cmd = [sys.executable, str(CLIENT), str(transcript), "--as", "B", "--url", url]
            proc = subprocess.Popen(
                [*cmd, "--json"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            assert proc.stdout is not None
            read: list[dict[str, Any]] = []

            def pump(stdout: Any = proc.stdout, read: list[dict[str, Any]] = read) -> None:
                for line in stdout:
                    if line.startswith("{"):
                        read.append(json.loads(line))

            threading.Thread(target=pump, daemon=True).start()
            while not read:
                time.sleep(0.01)
            os.kill(pids.pop(), signal.SIGKILL)  # right after the session's 201
            servers.enter_context(polylogue_serve(*args, port=port, pids=pids))
            for kill in range(2):  # twice mid-burst, 50 and 100 decisions in
                while sum(o["event"] == "decision" for o in read) < 50 * (kill + 1):
                    if proc.poll() is not None:
                        break
                    time.sleep(0.005)
                before = max((o["seq"] for o in read if o["event"] == "decision"), default=-1)
                os.kill(pids.pop(), signal.SIGKILL)
                servers.enter_context(polylogue_serve(*args, port=port, pids=pids))
                while _resumes(read) < kill + 2 and proc.poll() is None:
                    time.sleep(0.01)
                resumed = [o for o in read if o["event"] == "resumed"][-1]["resumed_after"]
                totals["events_sent_again"] += before - (-1 if resumed is None else resumed)
            code = proc.wait(timeout=300)
            time.sleep(0.2)
            sid = next(o["session_id"] for o in read if o["event"] == "created")
            r = httpx.get(f"{url}/v1/sessions/{sid}")
        totals["runs"] += 1
        totals["kills"] += 3
        if code != 0 or r.status_code == 404:
            totals["sessions_lost"] += 1
            continue
        seen = r.json()["utterances"]
        totals["utterances_lost"] += max(0, N_UTTERANCES - seen)
        totals["fed_twice"] += max(0, seen - N_UTTERANCES)
        decisions = {o["seq"]: o.get("p_speak") for o in read if o["event"] == "decision"}
        totals["wrong_decisions"] += sum(
            decisions.get(i, "missing") != expected[i] for i in range(N_UTTERANCES)
        )
    return totals


def _stream_body(port: int, total: int) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(
            f"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        piece = f"{65536:x}\r\n".encode() + b" " * 65536 + b"\r\n"
        try:
            for _ in range(total // 65536):
                s.sendall(piece)
            s.sendall(b"0\r\n\r\n")
            s.recv(4096)
        except OSError:
            pass  # refused part-way: what a cap does


def bodies(tmp: Path, clients: int = 5, size: int = 100 * 2**20) -> dict[str, float]:
    port = free_port()
    pids: list[int] = []
    with polylogue_serve("--state", str(tmp / "bodies.sqlite"), port=port, pids=pids):
        before = _status(pids[0], "VmHWM")
        threads = [threading.Thread(target=_stream_body, args=(port, size)) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak = _status(pids[0], "VmHWM")
    return {
        "clients": clients,
        "mb_each": size / 2**20,
        "peak_rss_mb_before": before,
        "peak_rss_mb_after": peak,
    }


def unknown_ids(tmp: Path, n: int) -> dict[str, float]:
    pids: list[int] = []
    with polylogue_serve("--state", str(tmp / "unknown.sqlite"), pids=pids) as url:
        event = {"type": "utterance", "speaker": "A", "text": "hi"}
        with httpx.Client() as http:
            for i in range(200):  # warm-up
                http.post(f"{url}/v1/sessions/warm{i}/events", json=event)
            before = _status(pids[0], "VmRSS")
            codes = [
                http.post(f"{url}/v1/sessions/unknown{i}/events", json=event).status_code
                for i in range(n)
            ]
            after = _status(pids[0], "VmRSS")
    return {
        "requests": n,
        "all_404": all(c == 404 for c in codes),
        "rss_mb_before": before,
        "rss_mb_after": after,
    }


def redis_creates(tmp: Path, conv: Conversation, keys: int) -> dict[str, Any]:
    import redis

    with redis_server(tmp) as redis_url, polylogue_serve("--state", redis_url) as url:
        r = redis.Redis.from_url(redis_url)
        with r.pipeline(transaction=False) as pipe:
            for i in range(keys):
                pipe.set(f"unrelated:{i}", i)
            pipe.execute()
        seconds = []
        body = session_body("B", conv.participants)
        with httpx.Client() as http:
            for _ in range(3):
                t0 = time.perf_counter()
                for _ in range(1000):
                    http.post(f"{url}/v1/sessions", json=body).raise_for_status()
                seconds.append(round(time.perf_counter() - t0, 2))
        scans = r.info("commandstats").get("cmdstat_scan", {}).get("calls", 0)
        r.close()
    return {"unrelated_keys": keys, "seconds_per_1000": seconds, "scan_calls": scans}


class _Proc:
    """`polylogue serve` as a child whose exit status is read (``polylogue_serve`` hides it)."""

    def __init__(self, args: list[str], log: Path, nofile: int | None = None) -> None:
        import resource

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        env = {k: v for k, v in os.environ.items() if k != "POLYLOGUE_SERVE_TOKEN"}
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [POLYLOGUE, "serve", "--port", str(self.port), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=limit,
            )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code in (200, 503):
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError(f"server did not start: {log.read_text()[-1000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(60)


def _codes(responses: list[httpx.Response]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in responses:
        key = str(r.status_code)
        if r.status_code == 503 and r.headers.get("Retry-After") is None:
            key = "503 without Retry-After"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def _post(url: str, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=60)


def full_disk(tmp: Path, conv: Conversation) -> dict[str, Any]:
    """A SQLite state file on a tmpfs filled to the last byte, then freed."""
    events = utterance_events(conv.utterances[:400])
    out: dict[str, Any] = {}
    with small_tmpfs(tmp / "disk", 3072) as disk:
        srv = _Proc(["--state", str(disk / "s.sqlite")], tmp / "disk.log")
        sid = create_session(srv.url, "B", conv.participants)
        path = f"/v1/sessions/{sid}/events"
        for e in events[:10]:
            _post(srv.url, path, e).raise_for_status()
        filler = fill_disk(disk)
        acked, i = 10, 10
        while i < 300 and _post(srv.url, path, events[i]).status_code == 200:
            acked, i = acked + 1, i + 1
        out["answered_after_fill_before_refusal"] = acked - 10
        out["event_attempts"] = _codes([_post(srv.url, path, events[i]) for _ in range(50)])
        role = {"type": "role", "role": "observer", "seq": events[i]["seq"]}
        out["control_attempts"] = _codes([_post(srv.url, path, role) for _ in range(10)])
        body = session_body("B", conv.participants)
        out["creations"] = _codes([_post(srv.url, "/v1/sessions", body) for _ in range(10)])
        out["healthz_while_full"] = httpx.get(f"{srv.url}/healthz", timeout=60).status_code
        filler.unlink()
        t0 = time.perf_counter()
        while httpx.get(f"{srv.url}/healthz", timeout=60).status_code != 200:
            time.sleep(0.05)
        out["seconds_to_recover_without_events"] = round(time.perf_counter() - t0, 2)
        for e in events[i : i + 20]:
            _post(srv.url, path, e).raise_for_status()
        acked += 20
        time.sleep(0.5)  # past the write-behind window (0.05 s): a loss now is the fault's
        srv.stop(signal.SIGKILL)
        again = _Proc(["--state", str(disk / "s.sqlite")], tmp / "disk.log")
        got = httpx.get(f"{again.url}/v1/sessions/{sid}", timeout=60).json()
        out["acknowledged_events"] = acked
        out["acknowledged_lost_after_sigkill"] = acked - got["utterances"]
        again.stop()
        # A stop while answered events wait on the full disk.
        srv = _Proc(["--state", str(disk / "t.sqlite"), "--flush-interval", "30"], tmp / "t.log")
        sid = create_session(srv.url, "B", conv.participants)
        filler = fill_disk(disk)
        _post(srv.url, f"/v1/sessions/{sid}/events", events[0]).raise_for_status()
        out["sigterm_exit_status_with_unwritten_events"] = srv.stop()
        filler.unlink()
    log = (tmp / "disk.log").read_text() + (tmp / "t.log").read_text()
    out["server_tracebacks_logged"] = log.count("Traceback")
    return out


def redis_faults(tmp: Path, conv: Conversation) -> dict[str, Any]:
    """Redis stalled, killed and restarted (append-only file), full, and evicting."""
    import redis

    events = utterance_events(conv.utterances[:100])
    out: dict[str, Any] = {}
    pids: list[int] = []
    port = free_port()
    aof = ("--appendonly", "yes", "--appendfsync", "always")
    log = tmp / "redis-faults.log"
    with redis_server(tmp, pids=pids, port=port, args=aof) as rurl:
        srv = _Proc(["--state", rurl], log)
        sid = create_session(srv.url, "B", conv.participants)
        path = f"/v1/sessions/{sid}/events"
        for e in events[:10]:
            _post(srv.url, path, e).raise_for_status()
        os.kill(pids[0], signal.SIGSTOP)
        t0 = time.perf_counter()
        stalled = [_post(srv.url, path, events[10]) for _ in range(3)]
        out["stalled_attempts"] = _codes(stalled)
        out["stalled_seconds_per_answer"] = round((time.perf_counter() - t0) / 3, 2)
        out["healthz_while_stalled"] = httpx.get(f"{srv.url}/healthz", timeout=60).status_code
        os.kill(pids[0], signal.SIGKILL)
        os.kill(pids[0], signal.SIGCONT)
    killed = [_post(srv.url, path, events[10]) for _ in range(20)]
    killed += [_post(srv.url, "/v1/sessions", session_body("B", [])) for _ in range(5)]
    killed.append(httpx.get(f"{srv.url}/v1/sessions/{sid}", timeout=60))
    out["killed_attempts"] = _codes(killed)
    with redis_server(tmp, port=port, args=aof):
        while httpx.get(f"{srv.url}/healthz", timeout=60).status_code != 200:
            time.sleep(0.1)
        acked = 10
        for e in events[10:30]:
            r = _post(srv.url, path, e)
            # A stalled write may have run once Redis went on: a duplicate then.
            acked += r.status_code == 200
        got = httpx.get(f"{srv.url}/v1/sessions/{sid}", timeout=60).json()
        out["acknowledged_lost_after_restart"] = 30 - got["utterances"]
        srv.stop()
    with redis_server(tmp, args=("--maxmemory-policy", "noeviction")) as rurl:
        srv = _Proc(["--state", rurl], log)
        rc = redis.Redis.from_url(rurl)
        sid = create_session(srv.url, "B", conv.participants)
        rc.config_set("maxmemory", str(int(rc.info("memory")["used_memory"]) + 100_000))
        created, answers = [sid], []
        for _ in range(300):
            a = _post(srv.url, "/v1/sessions", session_body("B", conv.participants))
            answers.append(a)
            if a.status_code == 201:
                created.append(a.json()["session_id"])
        answers += [_post(srv.url, f"/v1/sessions/{sid}/events", events[0]) for _ in range(10)]
        out["out_of_memory_attempts"] = _codes(answers)
        lost = sum(
            httpx.get(f"{srv.url}/v1/sessions/{c}", timeout=60).status_code != 200 for c in created
        )
        out["out_of_memory_sessions_201_then_lost"] = lost
        rc.close()
        srv.stop()
    with redis_server(tmp, args=("--maxmemory-policy", "allkeys-lru")) as rurl:
        done = subprocess.run(
            [POLYLOGUE, "serve", "--port", str(free_port()), "--state", rurl],
            capture_output=True,
            text=True,
            timeout=120,
        )
        out["evicting_redis_start_exit_status"] = done.returncode
    out["server_tracebacks_logged"] = log.read_text().count("Traceback")
    return out


def descriptors(tmp: Path, connections: int = 150) -> dict[str, Any]:
    """``connections`` held open for 3 s against a server limited to 64 descriptors."""
    import socket

    log = tmp / "fds.log"
    srv = _Proc(["--state", str(tmp / "fds.sqlite")], log, nofile=64)
    size0 = log.stat().st_size
    socks = [
        socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(connections)
    ]
    time.sleep(3)
    for s in socks:
        s.close()
    time.sleep(1)
    text = httpx.get(f"{srv.url}/metrics", timeout=60).text
    refused = sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("polylogue_connections_refused_total{")
    )
    srv.stop()
    body = log.read_text()
    return {
        "connections": connections,
        "log_bytes": log.stat().st_size - size0,
        "tracebacks_logged": body.count("Traceback"),
        "report_lines": body.count("cannot accept connections"),
        "refusals_counted": refused,
    }


def roster_scale(tmp: Path, people: int, events: int) -> dict[str, Any]:
    """Per-event cost of a session of 4 and of ``people`` participants (SQLite)."""
    import sqlite3
    import statistics

    out: dict[str, Any] = {}
    for n in (4, people):
        db = tmp / f"roster{n}.sqlite"
        roster = [{"id": f"p{i}", "name": f"Guest{i}"} for i in range(n)]
        with polylogue_serve("--state", str(db)) as url, httpx.Client(timeout=60) as http:
            r = http.post(f"{url}/v1/sessions", json={"agent": "p0", "participants": roster})
            sid = r.raise_for_status().json()["session_id"]
            server_ms, client_ms = [], []
            for k in range(events):
                e = {
                    "type": "utterance",
                    "speaker": f"p{1 + k % 3}",
                    "text": "Guest0, can you check the nightly build?",
                    "start": 2.0 * k,
                    "end": 2.0 * k + 1.5,
                }
                t0 = time.perf_counter()
                res = http.post(f"{url}/v1/sessions/{sid}/events", json=e).json()["results"][0]
                client_ms.append((time.perf_counter() - t0) * 1000)
                server_ms.append(res["server_ms"])
        with sqlite3.connect(db) as con:
            columns = {row[1] for row in con.execute("PRAGMA table_info(sessions)")}
            has_roster = "roster" in columns
            row = con.execute(
                "SELECT length(snapshot), "
                + ("length(roster)" if has_roster else "0")
                + " FROM sessions WHERE id=?",
                (sid,),
            ).fetchone()
        deciles = statistics.quantiles(server_ms, n=10)
        out[f"{n}_people"] = {
            "server_ms_median": round(statistics.median(server_ms), 2),
            "server_ms_p90": round(deciles[-1], 2),
            "client_ms_median": round(statistics.median(client_ms), 2),
            "snapshot_bytes_per_event": row[0],
            "roster_bytes_stored_apart": row[1] or 0,
        }
    return out


def store_faults(tmp: Path, conv: Conversation) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        out["sqlite_full_disk"] = full_disk(tmp, conv)
    except NoTmpfsError as e:
        out["sqlite_full_disk"] = {"skipped": f"needs a tmpfs: {e}"}
    out["redis"] = redis_faults(tmp, conv)
    out["descriptors"] = descriptors(tmp)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--cases", type=int, default=600, help="fuzz cases per seed")
    ap.add_argument("--kill-rounds", type=int, default=6)
    ap.add_argument("--client-runs", type=int, default=3)
    ap.add_argument("--unknown", type=int, default=10_000)
    ap.add_argument("--redis-keys", type=int, default=10_000)
    ap.add_argument("--roster", type=int, default=5000, help="people in the large roster")
    ap.add_argument("--roster-events", type=int, default=200)
    ap.add_argument("--server-src", default=None, help="run the servers from this src folder")
    ap.add_argument("--skip-client", action="store_true")
    ap.add_argument(
        "--parts",
        nargs="+",
        default=list(PARTS),
        choices=PARTS,
        help="which parts to run (default: all)",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.server_src:
        os.environ["PYTHONPATH"] = str(Path(args.server_src).resolve())  # the servers' code
    conv = next(iter(load_corpus("ami")))
    results: dict[str, Any] = {"load_avg": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if "fuzz" in args.parts:
            results["fuzz"] = f = fuzz(tmp, conv, args.seeds, args.cases)
            outcomes = ", ".join(f"{o} {f[o]}" for o in PROBE_OUTCOMES)
            print(f"fuzz: {f['cases']} cases: {outcomes}")
            print(f"  server tracebacks logged: {f['server_tracebacks_logged']}")
            for kind, counts in f["by_kind"].items():
                each = " ".join(f"{o}={counts.get(o, 0)}" for o in PROBE_OUTCOMES)
                print(f"  {kind:22s} {each}")
            for p in f["problems"][:10]:
                print("  problem:", p)
        if "creation" in args.parts:
            results["creation_kills"] = c = creation_kills(tmp, conv, args.kill_rounds)
            print(f"creation + SIGKILL: {c}")
        if "client" in args.parts and not args.skip_client:
            results["client_kills"] = k = client_kills(tmp, conv, args.client_runs)
            print(f"documented client + SIGKILL: {k}")
        if "bodies" in args.parts:
            results["bodies"] = b = bodies(tmp)
            print(f"5 x 100 MB chunked bodies: {b}")
        if "unknown" in args.parts:
            results["unknown_ids"] = u = unknown_ids(tmp, args.unknown)
            print(f"events to unknown ids: {u}")
        if "redis" in args.parts:
            results["redis_creates"] = r = redis_creates(tmp, conv, args.redis_keys)
            print(f"Redis creates: {r}")
        if "roster" in args.parts:
            results["roster"] = ro = roster_scale(tmp, args.roster, args.roster_events)
            for name, figures in ro.items():
                print(f"roster {name}: {figures}")
        if "faults" in args.parts:
            results["store_faults"] = sf = store_faults(tmp, conv)
            for name, figures in sf.items():
                if name == "redis":
                    for k, v in figures.items():
                        print(f"store faults: redis {k}: {v}")
                else:
                    print(f"store faults: {name}: {figures}")
    results["load_avg_end"] = os.getloadavg()[0]
    print(f"load average {results['load_avg']:.2f} -> {results['load_avg_end']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
