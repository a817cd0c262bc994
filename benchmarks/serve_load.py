"""Load on `polylogue serve`: concurrent WebSocket sessions replaying AMI (docs/serve-measured.md).

    python benchmarks/serve_load.py              # the issue-13 setting (below)
    python benchmarks/serve_load.py --redis      # the same on two processes sharing Redis

Default setting (issue 13): 200 concurrent sessions, each replaying the first 120 non-empty
utterances of its own AMI meeting (the first AMI meetings with more than 200 utterances,
reused round-robin; each session with its own agent among A-D) at 4x real time: utterance i
is sent (end_i - end_0) / 4 seconds after the session's socket opened, and the session waits
for its result before the next one. Session starts are spread evenly over ``--ramp`` (10 s).
The offered event rate is printed (mean and the busiest second).

The load client runs in ``--clients`` worker processes (default 1), each owning a slice of
the sessions with its own event loop. All processes (client, servers, Redis) share this
machine's cores; the load average is printed with the figures.

Figures:

* *latency*: the client's time from sending an utterance to receiving its result (loopback,
  includes the WebSocket and the JSON); ``steady`` leaves out each session's first 10 events.
* *server*: the server's own time for the event (``server_ms``: parse, lock, decide, snapshot,
  store).
* *lost*: events whose result never came, came out of order or was an error (must be 0).
* *memory per session*: growth of the servers' resident memory divided by the sessions.
* ``--trace`` (on by default): the servers add per-step timestamps (``polylogue serve
  --trace``) and the client records when each event was due, so each latency splits into:
  ``client_late`` (sent after it was due, or after the previous result came: the client's
  own loop), ``to_server`` (send -> the server's handler reads it: socket plus waiting for
  the server's loop), ``parse``, ``lock``, ``decide``, ``snapshot``, ``store``, ``back``
  (server reply -> client has it: socket plus waiting for the client's loop); ``gc`` is the
  server's garbage-collector time inside the event's wait; ``behind`` (not part of the
  latency) is how far a send lagged its schedule because the previous result came after it
  was due; that includes utterances that end before the previous one (overlapping speech,
  11% of the events), which are sent as soon as the previous result is in. Printed as
  p50/p99 per step and the mean split of the slowest 1%.

Run all three configurations on a quiet machine: ``python benchmarks/serve_load.py`` (one
process), ``--workers 2`` (two processes on one SQLite file: the service uses both cores)
and ``--redis`` (two processes sharing a Redis). The issue's target is p99 <= 50 ms with
0 lost events.

``--json PATH`` writes every figure. Results are recorded in docs/serve-measured.md and
docs/performance.md with their date and load average.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import itertools
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import websockets

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus
from polylogue.serve.client import session_body, utterance_events
from polylogue.serve.local import polylogue_serve, redis_server

AGENTS = ("A", "B", "C", "D")
#: Steps of the latency split, in order (names of ``_Record`` differences).
STEPS = ("client_late", "to_server", "parse", "lock", "decide", "snapshot", "store", "back")
#: not part of the latency: how far a session's sends lag its schedule (closed loop)
EXTRA = ("behind",)


def _family(pids: list[int]) -> list[int]:
    """The processes and all their descendants (``--workers`` runs children)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], list(pids)
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (robust to other jobs on the machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass(frozen=True)
class _Plan:
    """One session's replay: which server, its meeting's events and their due offsets."""

    session: int
    url: str
    body: dict[str, Any]  # POST /v1/sessions
    events: list[dict[str, Any]]
    due: list[float]  # seconds after the socket opened
    start: float  # seconds after the common start


@dataclass(frozen=True)
class _Record:
    session: int
    index: int
    server: str
    due: float  # all times on the monotonic clock shared by the processes
    ready: float  # due, or later if the previous event's result came after it was due
    sent: float
    got: float
    ok: bool
    server_ms: float
    trace: dict[str, float] | None

    def split(self) -> dict[str, float]:
        t = self.trace or {}
        marks = [self.ready, self.sent, t.get("received"), t.get("parsed"), t.get("locked")]
        marks += [t.get("decided"), t.get("snapshot"), t.get("saved"), t.get("reply"), self.got]
        # "store" runs to "saved"; "back" from the server's "reply" to the client
        out: dict[str, float] = {}
        names = ["client_late", "to_server", "parse", "lock", "decide", "snapshot", "store"]
        for name, a, b in zip(names, marks, marks[1:], strict=False):
            if a is not None and b is not None:
                out[name] = b - a
        if t.get("reply") is not None:
            out["back"] = self.got - t["reply"]
        out["behind"] = self.ready - self.due
        return out


def _plans(
    convs: list[Conversation], urls: list[str], sessions: int, n: int, speed: float, ramp: float
) -> list[_Plan]:
    plans = []
    for k in range(sessions):
        conv = convs[k % len(convs)]
        utts = [u for u in conv.utterances if u.text.strip()][:n]
        t_first = utts[0].end or 0.0
        events = utterance_events(utts)
        due = [((u.end or t_first) - t_first) / speed for u in utts]
        plans.append(
            _Plan(
                k,
                urls[k % len(urls)],
                session_body(AGENTS[k % len(AGENTS)], conv.participants),
                events,
                due,
                ramp * k / sessions,
            )
        )
    return plans


async def _session(
    plan: _Plan, t_start: float, http: httpx.AsyncClient, out: list[_Record]
) -> None:
    await asyncio.sleep(max(0.0, t_start + plan.start - time.perf_counter()))
    r = await http.post(f"{plan.url}/v1/sessions", json=plan.body, timeout=120)
    r.raise_for_status()
    sid = r.json()["session_id"]
    ws_url = plan.url.replace("http", "ws") + f"/v1/sessions/{sid}/stream"
    async with websockets.connect(ws_url, max_size=2**20, open_timeout=120) as ws:
        t0 = got = time.perf_counter()
        for i, (event, offset) in enumerate(zip(plan.events, plan.due, strict=True)):
            due = t0 + offset
            ready = max(due, got)
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            sent = time.perf_counter()
            await ws.send(json.dumps(event))
            reply = json.loads(await ws.recv())
            got = time.perf_counter()
            ok = bool(reply.get("ok")) and reply.get("seq") == i
            out.append(
                _Record(
                    plan.session,
                    i,
                    plan.url,
                    due,
                    ready,
                    sent,
                    got,
                    ok,
                    float(reply.get("server_ms", float("nan"))),
                    reply.get("trace"),
                )
            )


async def _loop_lag(out: list[float], period: float = 0.01) -> None:
    """How late this process's event loop wakes up (latency the server did not cause)."""
    while True:
        t = time.perf_counter()
        await asyncio.sleep(period)
        out.append(time.perf_counter() - t - period)


async def _client_async(plans: list[_Plan], t_start: float) -> tuple[list[_Record], list[float]]:
    records: list[_Record] = []
    lag: list[float] = []
    monitor = asyncio.create_task(_loop_lag(lag))
    # One HTTP client per process: creating one costs 30-100 ms of CPU (its TLS context),
    # which, once per session, blocked this loop for seconds during the ramp.
    async with httpx.AsyncClient() as http:
        await asyncio.gather(*(_session(p, t_start, http, records) for p in plans))
    monitor.cancel()
    return records, lag


def _client_process(
    args: tuple[list[_Plan], float],
) -> tuple[list[_Record], list[float], float]:
    plans, t_start = args
    cpu0 = time.process_time()
    records, lag = asyncio.run(_client_async(plans, t_start))
    return records, lag, time.process_time() - cpu0


def _q(xs: list[float], p: int) -> float:
    if len(xs) < 2:
        return xs[0] if xs else float("nan")
    return statistics.quantiles(xs, n=100, method="inclusive")[p - 1]


def _offered(plans: list[_Plan]) -> tuple[float, int]:
    """Mean events/s over the replay and the busiest one-second window (nominal schedule)."""
    times = sorted(p.start + d for p in plans for d in p.due)
    span = times[-1] - times[0] if len(times) > 1 else 1.0
    peak = max(bisect.bisect_left(times, t + 1.0) - i for i, t in enumerate(times))
    return len(times) / span, peak


def _gc_inside(records: list[_Record]) -> dict[tuple[int, int], float]:
    """Server GC seconds between an event's send and its reply (from the traces' GC clock)."""
    by_process: dict[tuple[str, float], list[tuple[float, float]]] = {}
    for r in records:
        if r.trace and "gc_s" in r.trace:
            key = (r.server, r.trace.get("pid", 0.0))
            by_process.setdefault(key, []).append((r.trace["reply"], r.trace["gc_s"]))
    for marks in by_process.values():
        marks.sort()
    out = {}
    for r in records:
        found = by_process.get((r.server, r.trace.get("pid", 0.0))) if r.trace else None
        if not found or not r.trace:
            continue
        marks = found
        i = bisect.bisect_left(marks, (r.sent, -1.0))
        before = marks[i - 1][1] if i else 0.0
        out[(r.session, r.index)] = r.trace["gc_s"] - before
    return out


def _report(records: list[_Record], lag: list[float], plans: list[_Plan]) -> dict[str, Any]:
    lat = [r.got - r.sent for r in records]
    steady = [r.got - r.sent for r in records if r.index >= 10]
    server = [r.server_ms for r in records]
    sent = sum(len(p.events) for p in plans)
    mean_rate, peak = _offered(plans)
    res: dict[str, Any] = {
        "events": sent,
        "answered": len(records),
        "lost": sent - sum(r.ok for r in records),
        "offered_events_per_s": mean_rate,
        "offered_peak_per_s": peak,
        "p50_ms": _q(lat, 50) * 1000,
        "p99_ms": _q(lat, 99) * 1000,
        "max_ms": max(lat) * 1000,
        "steady_p50_ms": _q(steady, 50) * 1000,
        "steady_p99_ms": _q(steady, 99) * 1000,
        "server_p50_ms": _q(server, 50),
        "server_p99_ms": _q(server, 99),
        "client_loop_lag_p50_ms": _q(lag, 50) * 1000,
        "client_loop_lag_p99_ms": _q(lag, 99) * 1000,
    }
    if any(r.trace for r in records):
        splits = [r.split() for r in records]
        gc = _gc_inside(records)
        gcs = [gc.get((r.session, r.index), 0.0) for r in records]
        for p in (50, 99):
            res[f"split_p{p}_ms"] = {
                s: _q([x[s] for x in splits if s in x], p) * 1000 for s in STEPS + EXTRA
            } | {"gc": _q(gcs, p) * 1000}
        cut = _q(lat, 99)
        tail = [i for i, x in enumerate(lat) if x >= cut]
        res["slowest_1pct_mean_ms"] = {"latency": statistics.mean(lat[i] for i in tail) * 1000}
        for s in STEPS:
            res["slowest_1pct_mean_ms"][s] = (
                statistics.mean(splits[i].get(s, 0.0) for i in tail) * 1000
            )
        res["slowest_1pct_mean_ms"]["gc"] = statistics.mean(gcs[i] for i in tail) * 1000
        last: dict[tuple[str, float], float] = {}
        for r in records:
            if r.trace and "gc_s" in r.trace:
                key = (r.server, r.trace.get("pid", 0.0))
                last[key] = max(last.get(key, 0.0), r.trace["gc_s"])
        res["server_gc_s"] = sum(last.values())  # every server process, from the traces
    return res


def run(args: argparse.Namespace) -> dict[str, Any]:
    convs = [c for c in itertools.islice(load_corpus("ami"), 20) if len(c.utterances) > 200]
    tmp = Path(tempfile.mkdtemp(prefix="serve-load-"))
    server_args = ["--trace"] if args.trace else []
    with ExitStack() as stack:
        pids: list[int] = []
        if args.workers > 1:
            server_args += ["--workers", str(args.workers)]
        if args.redis:
            state = stack.enter_context(redis_server(tmp))
            urls = [
                stack.enter_context(polylogue_serve("--state", state, *server_args, pids=pids))
                for _ in range(args.servers)
            ]
        else:
            state = str(tmp / "sessions.sqlite")
            urls = [stack.enter_context(polylogue_serve("--state", state, *server_args, pids=pids))]
        pids = _family(pids)
        plans = _plans(convs, urls, args.sessions, args.utterances, args.speed, args.ramp)
        rss0 = sum(_rss_mb(p) for p in pids)
        cpu0 = {p: _cpu_s(p) for p in pids}
        load0 = os.getloadavg()
        t_start = time.perf_counter() + 1.0
        slices = [(plans[i :: args.clients], t_start) for i in range(args.clients)]
        wall0 = time.perf_counter()
        if args.clients == 1:
            parts = [_client_process(slices[0])]
        else:
            with mp.get_context("fork").Pool(args.clients) as pool:
                parts = pool.map(_client_process, slices)
        wall = time.perf_counter() - wall0
        rss1 = sum(_rss_mb(p) for p in pids)
        cpu = {p: _cpu_s(p) - c for p, c in cpu0.items()}
        metrics = [httpx.get(f"{u}/metrics").text for u in urls]
    records = [r for recs, _, _ in parts for r in recs]
    lag = [x for _, lags, _ in parts for x in lags]
    n = max(len(records), 1)
    res: dict[str, Any] = {
        "setting": {
            "setup": (f"{args.servers} servers + Redis" if args.redis else "1 server + SQLite")
            + (f", {args.workers} workers each" if args.workers > 1 else ""),
            "sessions": args.sessions,
            "utterances": args.utterances,
            "speed": args.speed,
            "ramp_s": args.ramp,
            "clients": args.clients,
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        },
        "load_average_start": load0,
        "load_average_end": os.getloadavg(),
        "wall_s": wall,
        **_report(records, lag, plans),
        "rss_before_mb": rss0,
        "rss_after_mb": rss1,
        "kb_per_session": (rss1 - rss0) * 1024 / args.sessions,
        # CPU per event: what the service costs regardless of who else uses the machine
        # (servers only; Redis is extra). Capacity of one core = 1000 / this.
        "server_cpu_ms_per_event": sum(cpu.values()) * 1000 / n,
        "client_cpu_ms_per_event": sum(c for _, _, c in parts) * 1000 / n,
        # how the work spread over the server processes (e.g. --workers)
        "server_cpu_s_by_process": {str(p): round(c, 1) for p, c in cpu.items() if c >= 0.05},
    }
    # without traces: the metric of the process that answered each /metrics
    res.setdefault(
        "server_gc_s", sum(_metric(m, "polylogue_gc_pause_seconds_total") for m in metrics)
    )
    return res


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return float("nan")


def _print(res: dict[str, Any]) -> None:
    s = res["setting"]
    la0, la1 = res["load_average_start"], res["load_average_end"]
    print(
        f"{s['setup']}: {s['sessions']} sessions x {s['utterances']} utterances at "
        f"{s['speed']:g}x real time (starts over {s['ramp_s']:g} s), {s['clients']} client "
        f"process(es), {s['cpus']} CPUs, {s['date']}, load average {la0[0]:.2f} at start, "
        f"{la1[0]:.2f} at end"
    )
    for k, v in res.items():
        if k in ("setting", "load_average_start", "load_average_end"):
            continue
        if isinstance(v, dict):
            print(f"  {k}: " + ", ".join(f"{a} {b:.2f}" for a, b in v.items()))
        elif isinstance(v, float):
            print(f"  {k:24s} {v:,.2f}")
        else:
            print(f"  {k:24s} {v:,}")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module docstring as written, and each option's default."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=_HelpFormatter)
    ap.add_argument("--sessions", type=int, default=200, help="concurrent sessions")
    ap.add_argument("--utterances", type=int, default=120, help="utterances per session")
    ap.add_argument("--speed", type=float, default=4.0, help="times faster than real time")
    ap.add_argument("--ramp", type=float, default=10.0, help="seconds over which sessions start")
    ap.add_argument("--redis", action="store_true", help="server processes sharing one Redis")
    ap.add_argument("--servers", type=int, default=2, help="server processes with --redis")
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes per server (polylogue serve --workers; with SQLite they share the file)",
    )
    ap.add_argument("--clients", type=int, default=1, help="load-client processes")
    ap.add_argument(
        "--trace",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="per-step latency split (servers run with --trace)",
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    res = run(args)
    _print(res)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
