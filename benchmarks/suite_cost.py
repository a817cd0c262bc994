"""CPU seconds and waiting of the test suite, per xdist worker (quoted in docs/development.md).

    python benchmarks/suite_cost.py --workers 2 [--out cost.json] [-- PYTEST ARGS]
    python benchmarks/suite_cost.py --workers 0            # serially

Runs ``python -m pytest -q -p no:cacheprovider`` (with ``-n N --dist loadfile
--no-loadscope-reorder`` when ``--workers`` is above 0, as ``scripts/test.sh`` does) and
prints its wall time and its CPU seconds (user + system of pytest and every process it waited
for, from the kernel's accounting at exit).

On a shared machine the wall time says little, so the script also samples the process tree
every ``--interval`` seconds: for each branch that runs tests (each xdist worker and what it
started, or pytest itself when serial) it counts the time during which no process of the
branch was running or waiting for a CPU: time spent waiting on sockets, timers and other
processes' exits, which a quiet machine does not shorten. A branch on a quiet core of its own
would take about its CPU seconds plus that waiting; the largest such sum is printed as an
estimate of the suite's wall time on a quiet machine with one core per worker. It is an
estimate: it leaves out the workers' contention for the cores (torch uses two threads) and
the sampling error (a wait shorter than the interval is missed).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Where each test process writes the times its tests ran (this module is its pytest plugin).
SPANS_ENV = "SUITE_COST_SPANS"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """(plugin) Record when each test ran, so that waiting counts only inside tests."""
    folder = os.environ.get(SPANS_ENV)
    start = time.monotonic()
    try:
        return (yield)
    finally:
        if folder:
            with open(Path(folder) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps([start, time.monotonic()]) + "\n")


@dataclass
class Branch:
    """One test process (an xdist worker, or serial pytest) and everything it started."""

    pid: int
    cpu_s: float = 0.0  # its own and its waited children's, at the last sample
    waiting_s: float = 0.0
    #: Times of the samples at which nothing of the branch was running.
    idle_at: list[float] = field(default_factory=list)
    samples: int = 0
    started: float = field(default_factory=time.monotonic)
    ended: float = 0.0

    def estimate_s(self) -> float:
        return self.cpu_s + self.waiting_s


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def _busy(proc: psutil.Process) -> bool:
    """Whether a thread of ``proc`` or of any process below it is running or runnable."""
    try:
        tree = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return False
    for p in tree:
        for stat in Path(f"/proc/{p.pid}/task").glob("*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            if text[text.rindex(")") + 2] == "R":
                return True
    return False


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workers", type=int, default=2, help="xdist workers; 0: serially")
    ap.add_argument("--interval", type=float, default=0.25, help="seconds between samples")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    ap.add_argument("pytest_args", nargs="*", help="passed on to pytest (after --)")
    args = ap.parse_args()
    spans_dir = Path(tempfile.mkdtemp(prefix="suite-cost-"))
    env = {
        **os.environ,
        SPANS_ENV: str(spans_dir),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "suite_cost"]
    if args.workers > 0:
        cmd += ["-n", str(args.workers), "--dist", "loadfile", "--no-loadscope-reorder"]
    cmd += args.pytest_args or ["tests"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    top = psutil.Process(proc.pid)
    branches: dict[int, Branch] = {}
    while proc.poll() is None:
        if args.workers > 0:
            try:
                heads = [c for c in top.children() if "python" in c.name()]
            except psutil.Error:
                heads = []
        else:
            heads = [top]
        for head in heads:
            b = branches.setdefault(head.pid, Branch(head.pid))
            try:
                b.cpu_s = _cpu(head)
            except psutil.Error:
                continue
            b.samples += 1
            b.ended = time.monotonic()
            if not _busy(head):
                b.idle_at.append(time.monotonic())
        time.sleep(args.interval)
    wall = time.monotonic() - start
    status = proc.returncode
    # Waiting counts only while a test runs (an xdist worker out of work waits too).
    for b in branches.values():
        path = spans_dir / f"{b.pid}.jsonl"
        spans = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        inside = sum(any(a <= t <= z for a, z in spans) for t in b.idle_at)
        b.waiting_s = inside * args.interval
        b.idle_at = []
    shutil.rmtree(spans_dir, ignore_errors=True)
    # The kernel's totals for pytest and every descendant it waited for.
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_total = ru.ru_utime + ru.ru_stime
    result = {
        "command": cmd,
        "exit_status": status,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu_total, 1),
        "user_s": round(ru.ru_utime, 1),
        "system_s": round(ru.ru_stime, 1),
        "load_average_at_end": os.getloadavg(),
        "branches": [
            {
                **asdict(b),
                "cpu_s": round(b.cpu_s, 1),
                "estimate_s": round(b.estimate_s(), 1),
            }
            for b in branches.values()
        ],
        "quiet_wall_estimate_s": round(
            max((b.estimate_s() for b in branches.values()), default=0.0), 1
        ),
    }
    print(json.dumps(result, indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    sys.exit(status)


if __name__ == "__main__":
    main()
