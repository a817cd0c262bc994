"""Fuzz and fault counts for `polylogue serve` on loopback (quoted in docs/serve.md).

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

``--server-src`` runs the servers from another source tree (the previous code, as the
baseline); ``--skip-client`` leaves out part 3 (the previous server has no ``last_seq``).
``--json PATH`` writes every figure. Results are recorded in docs/serve.md.
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
from polylogue.serve.local import free_port, polylogue_serve, redis_server
from polylogue.serve.probe import PROBE_OUTCOMES, ProbeTally, make_cases, run_cases

ROOT = Path(__file__).resolve().parents[1]
#: The parts below, in the order they run (``--parts`` picks some).
PARTS = ("fuzz", "creation", "client", "bodies", "unknown", "redis")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--cases", type=int, default=600, help="fuzz cases per seed")
    ap.add_argument("--kill-rounds", type=int, default=6)
    ap.add_argument("--client-runs", type=int, default=3)
    ap.add_argument("--unknown", type=int, default=10_000)
    ap.add_argument("--redis-keys", type=int, default=10_000)
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
    results["load_avg_end"] = os.getloadavg()[0]
    print(f"load average {results['load_avg']:.2f} -> {results['load_avg_end']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
