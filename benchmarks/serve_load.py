"""Load on `polylogue serve`: many concurrent WebSocket sessions replaying real AMI meetings.

    python benchmarks/serve_load.py [--sessions 200] [--speed 4] [--utterances 120] [--redis]

Each session replays its own AMI meeting (meetings are reused round-robin, each session with
its own agent) faster than real time: utterance i is sent at (end_i - end_0) / speed seconds
after the session starts. Decision latency is the client's time from sending an utterance to
receiving its result (loopback, includes the WebSocket and the JSON). An event is lost when
its result never arrives or arrives out of order. Memory per session is the growth of the
server's resident memory divided by the sessions created. ``--redis`` runs two server
processes on one Redis (Debian redis-server started here), clients split between them.
Prints the figures; results are recorded in docs/serve.md.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import websockets

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus

POLYLOGUE = str(Path(sys.executable).parent / "polylogue")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _start_server(state: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _port()
    proc = subprocess.Popen(
        [POLYLOGUE, "serve", "--port", str(port), "--state", state],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


Sample = tuple[int, float, float]  # (utterance index, client latency s, server ms)


async def _session(
    url: str,
    conv: Conversation,
    agent: str,
    n: int,
    speed: float,
    lat: list[Sample],
    delay: float,
) -> tuple[int, int]:
    """Replay ``n`` utterances; returns (sent, received in order)."""
    await asyncio.sleep(delay)
    async with httpx.AsyncClient() as http:
        body = {"agent": agent, "participants": [p.to_dict() for p in conv.participants]}
        r = await http.post(f"{url}/v1/sessions", json=body, timeout=60)
        r.raise_for_status()
        sid = r.json()["session_id"]
    utts = [u for u in conv.utterances if u.text.strip()][:n]
    t_first = utts[0].end or 0.0
    sent = received = 0
    ws_url = url.replace("http", "ws") + f"/v1/sessions/{sid}/stream"
    async with websockets.connect(ws_url, max_size=2**20) as ws:
        t0 = time.perf_counter()
        for i, u in enumerate(utts):
            due = ((u.end or t_first) - t_first) / speed
            wait = due - (time.perf_counter() - t0)
            if wait > 0:
                await asyncio.sleep(wait)
            event = {
                "type": "utterance",
                "seq": i,
                "speaker": u.speaker,
                "text": u.text,
                "start": u.start,
                "end": u.end,
            }
            t = time.perf_counter()
            await ws.send(json.dumps(event))
            sent += 1
            reply = json.loads(await ws.recv())
            lat.append((i, time.perf_counter() - t, reply.get("server_ms", float("nan"))))
            if reply.get("ok") and reply.get("seq") == i:
                received += 1
    return sent, received


async def _loop_lag(out: list[float]) -> None:
    while True:
        t = time.perf_counter()
        await asyncio.sleep(0.05)
        out.append(time.perf_counter() - t - 0.05)


async def _run(
    urls: list[str], convs: list[Conversation], sessions: int, n: int, speed: float, ramp: float
) -> dict[str, float]:
    lat: list[Sample] = []
    agents = ["A", "B", "C", "D"]
    lag: list[float] = []
    monitor = asyncio.create_task(_loop_lag(lag))
    t0 = time.perf_counter()
    results = await asyncio.gather(
        *(
            _session(
                urls[k % len(urls)],
                convs[k % len(convs)],
                agents[k % 4],
                n,
                speed,
                lat,
                ramp * k / sessions,
            )
            for k in range(sessions)
        )
    )
    wall = time.perf_counter() - t0
    monitor.cancel()
    sent = sum(s for s, _ in results)
    got = sum(r for _, r in results)
    q = statistics.quantiles([x for _, x, _ in lat], n=100)
    # Steady state: without each session's first 10 events (connection and warm-up).
    qs = statistics.quantiles([x for i, x, _ in lat if i >= 10], n=100)
    # Time inside the server for the event (parse, decide, snapshot); the rest is queueing,
    # the WebSocket and the client's own loop.
    qsv = statistics.quantiles([sv for _, _, sv in lat], n=100)
    return {
        "sessions": sessions,
        "events": sent,
        "lost": sent - got,
        "p50_ms": q[49] * 1000,
        "p99_ms": q[98] * 1000,
        "steady_p50_ms": qs[49] * 1000,
        "steady_p99_ms": qs[98] * 1000,
        "server_p50_ms": qsv[49],
        "server_p99_ms": qsv[98],
        "max_ms": max(x for _, x, _ in lat) * 1000,
        # How late the client's own event loop wakes up: latency the server did not cause.
        "client_lag_p50_ms": statistics.median(lag) * 1000,
        "events_per_s": sent / wall,
        "wall_s": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--speed", type=float, default=4.0, help="times faster than real time")
    ap.add_argument("--utterances", type=int, default=120, help="per session")
    ap.add_argument("--redis", action="store_true", help="two processes sharing one Redis")
    ap.add_argument("--ramp", type=float, default=10.0, help="seconds over which sessions start")
    args = ap.parse_args()
    convs = [c for c in itertools.islice(load_corpus("ami"), 20) if len(c.utterances) > 200]
    tmp = Path(tempfile.mkdtemp(prefix="serve-load-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        if args.redis:
            redis = shutil.which("redis-server") or "/usr/sbin/redis-server"
            rport = _port()
            procs.append(
                subprocess.Popen(
                    [
                        redis,
                        "--port",
                        str(rport),
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
                )
            )
            time.sleep(0.5)
            state = f"redis://127.0.0.1:{rport}/0"
            servers = [_start_server(state) for _ in range(2)]
        else:
            servers = [_start_server(str(tmp / "sessions.sqlite"))]
        procs += [p for p, _ in servers]
        urls = [u for _, u in servers]
        rss0 = sum(_rss_mb(p.pid) for p, _ in servers)
        res = asyncio.run(_run(urls, convs, args.sessions, args.utterances, args.speed, args.ramp))
        rss1 = sum(_rss_mb(p.pid) for p, _ in servers)
        res["rss_before_mb"] = rss0
        res["rss_after_mb"] = rss1
        res["kb_per_session"] = (rss1 - rss0) * 1024 / args.sessions
        label = "2 processes + Redis" if args.redis else "1 process + SQLite"
        print(
            f"{label}: {args.sessions} sessions x {args.utterances} utterances at "
            f"{args.speed:g}x real time (starts spread over {args.ramp:g} s) on "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
        )
        for k, v in res.items():
            print(f"  {k:16s} {v:,.2f}" if isinstance(v, float) else f"  {k:16s} {v:,}")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
