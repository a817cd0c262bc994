"""Soak of `polylogue serve` under SIGKILL: many sessions, run-time role changes, restarts.

    python benchmarks/serve_soak.py                           # 100 sessions x 200 events
    python benchmarks/serve_soak.py --sessions 20 --events 100 --modes sqlite

For each mode (``sqlite``: one process, the default write-behind flush; ``redis``: one
process on a throw-away redis-server; ``workers``: ``--workers 2`` on one SQLite file, where
the *supervisor* is what gets killed), ``--sessions`` clients each stream ``--events`` events
of a real AMI meeting over WebSockets at once: utterances, with a run-time control every 50
events (in turn: role observer, audience adaptive, a participant ignored, role none, role
assistant, audience group, focus cleared, role none), each session at its own offset.
``--kills`` times, spread over the run, the server is killed with SIGKILL right after some
session's control was answered, and started again on the same port; clients resume as
docs/serve-operations.md says (``GET`` the session's ``last_seq``, send again what came after it).

At each kill, before any client may resume, every session is read back and checked against
what its client had been answered:

* **controls lost**: the stored role, audience or ignored speakers are not what the events up
  to the stored ``last_seq`` set, or ``last_seq`` is below an acknowledged control (an
  answered change undone);
* **answered events behind**: answered events the stored state does not have yet (SQLite's
  write-behind window; the client sends them again; Redis and workers write before answering);
* with ``workers``: worker processes still alive after the supervisor died.

At the end: **events lost** (a session whose utterance count or ``last_seq`` is not what its
client sent) and **fed twice** (a count above it). Everything is printed; ``--json`` writes
it.

Two more modes put the store at fault instead of the server (no kills during the run; one
SIGKILL at the end, once ``/healthz`` shows nothing queued, so the final check reads what
reached the store):

* ``disk``: the SQLite file on a small tmpfs (``--disk-kb``, 3 MiB: smaller than the size at
  which SQLite checkpoints its write-ahead log on its own, so the log fills the disk too) that
  is also filled to the last byte once a third of the events are answered and freed
  ``--fault-s`` seconds later (needs root to mount; skipped with a message otherwise);
* ``redis-stop``: redis-server (append-only file, fsync always) stopped with SIGSTOP for
  ``--fault-s`` seconds, then killed and started again on its port from its file.

Clients then follow the protocol for a refused event: an answer with ``retry_after`` (503)
means not applied, and the same event is sent again after that many seconds (capped at
0.5 s here); a ``duplicate`` answer to such a resend means an earlier attempt did land (a
Redis write that timed out on the client but ran later). Counted: **refused (503)**,
**internal errors** (500 or any other failure), and, after the final SIGKILL and restart,
**acknowledged events lost**.

The baseline is the previous code's server (``PYTHONPATH`` at its ``src``) with
``--roles-only --modes sqlite redis`` (it has no audience or focus control, and its workers
outlive their supervisor).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import httpx

from polylogue.corpora import load_corpus
from polylogue.serve.client import session_body, utterance_events
from polylogue.serve.local import (
    POLYLOGUE,
    NoTmpfsError,
    fill_disk,
    free_port,
    redis_server,
    small_tmpfs,
)

#: The run-time controls sent in turn, one every ``CONTROL_EVERY`` events (``{ignored}``:
#: a participant other than the agent).
CONTROL_CYCLE: list[dict[str, Any]] = [
    {"type": "role", "role": "observer"},
    {"type": "audience", "audience": "adaptive"},
    {"type": "focus", "ignored": ["{ignored}"]},
    {"type": "role", "role": None},
    {"type": "role", "role": "assistant"},
    {"type": "audience", "audience": "group"},
    {"type": "focus"},
    {"type": "role", "role": None},
]
CONTROL_EVERY = 50


def session_events(
    utterances: list[Any], n: int, ignored: str, roles_only: bool = False, offset: int = 0
) -> list[dict[str, Any]]:
    """``n`` events numbered 0.. : utterances, a control at every ``CONTROL_EVERY``-th (from
    ``offset``: sessions send theirs at different moments)."""
    plain = itertools.cycle(utterance_events(utterances))  # a short meeting starts again
    cycle = [c for c in CONTROL_CYCLE if c["type"] == "role" or not roles_only]
    out: list[dict[str, Any]] = []
    for seq in range(n):
        if seq % CONTROL_EVERY == offset % CONTROL_EVERY:
            control = cycle[(seq // CONTROL_EVERY) % len(cycle)]
            text = json.dumps(control).replace("{ignored}", ignored)
            out.append({**json.loads(text), "seq": seq})
        else:
            out.append({**next(plain), "seq": seq})
    return out


def controls_at(events: list[dict[str, Any]], last_seq: int | None) -> dict[str, Any]:
    """The role, audience and ignored speakers the events up to ``last_seq`` leave."""
    state: dict[str, Any] = {"role": None, "audience": "group", "ignored": []}
    for e in events:
        if last_seq is None or e["seq"] > last_seq:
            break
        if e["type"] == "role":
            state["role"] = e["role"]
        elif e["type"] == "audience":
            state["audience"] = e["audience"]
        elif e["type"] == "focus":
            state["ignored"] = e.get("ignored", [])
    return state


def controls_of(summary: dict[str, Any]) -> dict[str, Any]:
    """The same three as ``GET /v1/sessions/{id}`` shows them."""
    return {
        "role": summary["deployment"]["role"],
        "audience": summary.get("audience", "group"),
        "ignored": (summary.get("focus") or {}).get("ignored", []),
    }


class Server:
    """One `polylogue serve` process (group) on a fixed port, killed and started again."""

    def __init__(self, args: list[str], port: int, log: Path) -> None:
        self.args, self.port, self.log = args, port, log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 120.0) -> None:
        env = {k: v for k, v in os.environ.items() if k != "POLYLOGUE_SERVE_TOKEN"}
        cmd = [POLYLOGUE, "serve", "--port", str(self.port), *self.args]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError("server did not answer")

    def children(self) -> list[int]:
        assert self.proc is not None
        out = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(stat[1]) == self.proc.pid and stat[0] != "Z":
                    out.append(int(d.name))
        return out

    def kill(self) -> int:
        """SIGKILL the server (the supervisor with --workers); the workers still alive after
        10 s (they must end with their supervisor)."""
        assert self.proc is not None
        workers = self.children()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        deadline = time.monotonic() + 10
        alive = workers
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [p for p in alive if _alive(p)]
        for p in alive:  # counted, then cleaned up so the run can go on
            os.kill(p, signal.SIGKILL)
        return len(alive)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Soak:
    def __init__(self, server: Server, sessions: dict[str, list[dict[str, Any]]]) -> None:
        self.server = server
        self.sessions = sessions
        self.up = asyncio.Event()
        self.up.set()
        #: per session: highest acknowledged seq, and that of the last acknowledged control
        self.acked: dict[str, int] = {}
        self.acked_control: dict[str, int] = {}
        self.answered = 0
        #: set by a client as soon as a control is answered while a kill is due
        self.control_answered = asyncio.Event()
        self.kill_due = False
        self.resent = 0
        self.errors: list[str] = []
        #: answers with ``retry_after`` (the store refused: not applied, sent again)
        self.refused = 0
        #: failures that are not a refusal (500, "internal error", anything unexpected)
        self.internal = 0

    async def client(self, sid: str) -> None:
        import websockets

        events = self.sessions[sid]
        pos = 0
        ws_url = self.server.url.replace("http", "ws") + f"/v1/sessions/{sid}/stream"
        async with httpx.AsyncClient(timeout=30) as http:
            while pos < len(events):
                await self.up.wait()
                try:
                    async with websockets.connect(ws_url, open_timeout=30) as ws:
                        retried = False
                        while pos < len(events):
                            e = events[pos]
                            await ws.send(json.dumps(e))
                            r = json.loads(await ws.recv())
                            if not r.get("ok") and "retry_after" in r:
                                self.refused += 1  # not applied: send it again
                                retried = True
                                await asyncio.sleep(min(0.5, float(r["retry_after"])))
                                continue
                            if str(r.get("error", "")).startswith("internal error"):
                                self.internal += 1
                            landed = retried and r.get("duplicate")  # an earlier try ran
                            retried = False
                            if (
                                not r.get("ok") or r.get("duplicate") or r.get("seq_gap")
                            ) and not landed:
                                self.errors.append(f"{sid} seq {e['seq']}: {r}")
                            self.acked[sid] = e["seq"]
                            if e["type"] != "utterance":
                                self.acked_control[sid] = e["seq"]
                                if self.kill_due:
                                    self.control_answered.set()
                            self.answered += 1
                            pos += 1
                except (websockets.ConnectionClosed, websockets.InvalidHandshake, OSError):
                    await self.up.wait()
                    while True:
                        try:
                            got = (await http.get(f"{self.server.url}/v1/sessions/{sid}")).json()
                            break
                        except httpx.TransportError:
                            await asyncio.sleep(0.2)
                    last = got["last_seq"]
                    nxt = next((i for i, x in enumerate(events) if last is None or x["seq"] > last),
                               len(events))  # fmt: skip
                    self.resent += max(0, pos - nxt)
                    pos = nxt

    async def check_after_kill(self) -> dict[str, int]:
        out = {"controls_lost": 0, "answered_events_behind": 0, "sessions_lost": 0}
        async with httpx.AsyncClient(timeout=30) as http:
            for sid, events in self.sessions.items():
                r = await http.get(f"{self.server.url}/v1/sessions/{sid}")
                if r.status_code != 200:
                    out["sessions_lost"] += 1
                    continue
                got = r.json()
                last = got["last_seq"]
                if controls_of(got) != controls_at(events, last) or (
                    sid in self.acked_control and (last is None or last < self.acked_control[sid])
                ):
                    out["controls_lost"] += 1
                if sid in self.acked:
                    out["answered_events_behind"] += max(0, self.acked[sid] - (last or -1))
        return out

    async def killer(self, kills: int, total: int) -> list[dict[str, Any]]:
        rounds = []
        for k in range(kills):
            while self.answered < total * (k + 1) / (kills + 1):
                await asyncio.sleep(0.05)
            # The kill lands right after a control's answer: the window a control must not
            # fall into.
            self.control_answered.clear()
            self.kill_due = True
            with suppress(TimeoutError):
                await asyncio.wait_for(self.control_answered.wait(), 60)
            self.kill_due = False
            self.up.clear()
            left = await asyncio.to_thread(self.server.kill)
            await asyncio.to_thread(self.server.start)
            check = await self.check_after_kill()
            rounds.append({"answered_at_kill": self.answered, "workers_left": left, **check})
            self.up.set()
        return rounds


def _drained(server: Server, limit_s: float = 30.0) -> float:
    """Seconds until ``/healthz`` shows nothing queued for the store (at most ``limit_s``)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit_s:
        store = httpx.get(f"{server.url}/healthz", timeout=30).json()["store"]
        if store["state"] == "ok" and not store.get("queued"):
            break
        time.sleep(0.05)
    return round(time.perf_counter() - t0, 2)


class StoreFault:
    """Puts the store at fault once, mid-run, and gives it back: a disk filled then freed, or
    Redis stopped then restarted from its append-only file."""

    def __init__(self, kind: str, folder: Path, redis_pid: list[int] | None = None) -> None:
        self.kind, self.folder, self.redis_pid = kind, folder, redis_pid
        self.report: dict[str, Any] = {"kind": kind}

    async def run(self, soak: Soak, total: int, fault_s: float, restart: Any) -> None:
        while soak.answered < total / 3:
            await asyncio.sleep(0.05)
        t0 = time.perf_counter()
        if self.kind == "disk":
            filler = await asyncio.to_thread(fill_disk, self.folder)
            await asyncio.sleep(fault_s)
            filler.unlink()
        else:
            assert self.redis_pid
            os.kill(self.redis_pid[0], signal.SIGSTOP)
            await asyncio.sleep(fault_s)
            os.kill(self.redis_pid[0], signal.SIGKILL)
            os.kill(self.redis_pid[0], signal.SIGCONT)
            await asyncio.to_thread(restart)
        self.report["answered_at_fault"] = soak.answered
        self.report["fault_seconds"] = round(time.perf_counter() - t0, 1)


async def run_mode(
    server: Server,
    sessions: dict[str, list[dict[str, Any]]],
    kills: int,
    fault: StoreFault | None = None,
    fault_s: float = 3.0,
    restart_store: Any = None,
) -> dict[str, Any]:
    soak = Soak(server, sessions)
    total = sum(len(e) for e in sessions.values())
    t0 = time.perf_counter()
    if fault is None:
        killer = asyncio.create_task(soak.killer(kills, total))
    else:
        killer = asyncio.create_task(asyncio.sleep(0, result=[]))
        faulting = asyncio.create_task(fault.run(soak, total, fault_s, restart_store))
    await asyncio.gather(*(soak.client(sid) for sid in sessions))
    rounds = await killer
    if fault is not None:
        await faulting
        # What reached the store: kill the server once its queue is written (the write-behind
        # window, however long the loaded machine makes it) and read it back, so anything
        # missing was lost to the fault.
        fault.report["seconds_until_queue_written"] = await asyncio.to_thread(_drained, server)
        await asyncio.to_thread(server.kill)
        await asyncio.to_thread(server.start)
    lost = twice = wrong_role = 0
    async with httpx.AsyncClient(timeout=30) as http:
        for sid, events in sessions.items():
            got = (await http.get(f"{server.url}/v1/sessions/{sid}")).json()
            want = sum(e["type"] == "utterance" for e in events)
            lost += max(0, want - got["utterances"]) + (got["last_seq"] != events[-1]["seq"])
            twice += max(0, got["utterances"] - want)
            wrong_role += controls_of(got) != controls_at(events, events[-1]["seq"])
    return {
        "sessions": len(sessions),
        "events": total,
        "kills": rounds,
        "controls_lost": sum(r["controls_lost"] for r in rounds) + wrong_role,
        "sessions_lost": sum(r["sessions_lost"] for r in rounds),
        "workers_left_after_supervisor_kill": sum(r["workers_left"] for r in rounds),
        "answered_then_behind_at_kills": sum(r["answered_events_behind"] for r in rounds),
        "events_sent_again": soak.resent,
        "events_lost": lost,
        "fed_twice": twice,
        "unexpected_results": len(soak.errors),
        "first_unexpected": soak.errors[:3],
        "refused_503": soak.refused,
        "internal_errors": soak.internal,
        **({"fault": fault.report} if fault is not None else {}),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--kills", type=int, default=2)
    ap.add_argument(
        "--modes",
        nargs="+",
        default=["sqlite", "redis", "workers", "disk", "redis-stop"],
        choices=["sqlite", "redis", "workers", "disk", "redis-stop"],
    )
    ap.add_argument("--fault-s", type=float, default=3.0, help="how long a store fault lasts")
    ap.add_argument(
        "--disk-kb",
        type=int,
        default=3072,
        help="tmpfs size of the disk mode (under SQLite's 4 MB log: the log fills it too)",
    )
    ap.add_argument(
        "--roles-only",
        action="store_true",
        help="only role controls (a server from before audience and focus: the baseline)",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    meetings = list(load_corpus("ami"))
    results: dict[str, Any] = {"load_avg": os.getloadavg()[0], "modes": {}}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for mode in args.modes:
            with ExitStack() as stack:
                fault: StoreFault | None = None
                restart: Any = None
                if mode == "redis":
                    state = stack.enter_context(redis_server(tmp))
                    extra: list[str] = ["--state", state]
                elif mode == "redis-stop":
                    pids: list[int] = []
                    rport = free_port()
                    aof = ("--appendonly", "yes", "--appendfsync", "always")
                    rdir = tmp / "redis-stop"
                    rdir.mkdir()
                    state = stack.enter_context(redis_server(rdir, pids=pids, port=rport, args=aof))
                    extra = ["--state", state]
                    fault = StoreFault("redis", rdir, pids)

                    def restart(
                        rdir: Path = rdir,
                        rport: int = rport,
                        pids: list[int] = pids,
                        aof: tuple[str, ...] = aof,
                    ) -> None:
                        # The first server is dead; a second one on its port, from its file.
                        again = redis_server(rdir, pids=pids, port=rport, args=aof)
                        stack.enter_context(again)

                elif mode == "disk":
                    try:
                        disk = stack.enter_context(small_tmpfs(tmp / "disk", args.disk_kb))
                    except NoTmpfsError as e:
                        print(f"disk: skipped ({e})")
                        results["modes"][mode] = {"skipped": str(e)}
                        continue
                    extra = ["--state", str(disk / "disk.sqlite")]
                    fault = StoreFault("disk", disk)
                else:
                    extra = ["--state", str(tmp / f"{mode}.sqlite")]
                if mode == "workers":
                    extra += ["--workers", "2"]
                server = Server(extra, free_port(), tmp / f"{mode}.log")
                server.start()
                stack.callback(server.stop)
                sessions: dict[str, list[dict[str, Any]]] = {}
                for i in range(args.sessions):
                    conv = meetings[i % len(meetings)]
                    sid = f"soak-{mode}-{i}"
                    body = {**session_body(conv.participants[0].id, conv.participants),
                            "session_id": sid}  # fmt: skip
                    httpx.post(f"{server.url}/v1/sessions", json=body).raise_for_status()
                    ignored = conv.participants[-1].id
                    sessions[sid] = session_events(
                        list(conv.utterances), args.events, ignored, args.roles_only, 10 + i
                    )
                res = asyncio.run(
                    run_mode(server, sessions, args.kills, fault, args.fault_s, restart)
                )
                res["server_tracebacks_logged"] = server.log.read_text(errors="replace").count(
                    "Traceback"
                )
            results["modes"][mode] = res
            print(f"{mode}: " + json.dumps({k: v for k, v in res.items() if k != "kills"}))
            for r in res["kills"]:
                print(f"  kill: {r}")
            sys.stdout.flush()
    results["load_avg_end"] = os.getloadavg()[0]
    print(f"load average {results['load_avg']:.2f} -> {results['load_avg_end']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
