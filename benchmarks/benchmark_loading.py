"""Seconds a user waits on a built benchmark: `inspect`, `annotate create` (docs/performance.md).

Runs each command as a fresh process on a benchmark folder (build one first, e.g.
``polylogue build --corpus ami --corpus friends --out bench/ami-friends``) and prints the wall
time and the peak resident memory of the process, plus the folder's size per file type.
Prints figures; asserts nothing.

    python benchmarks/benchmark_loading.py bench/ami-friends [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLYLOGUE = str(Path(sys.executable).parent / "polylogue")


def measure(cmd: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of one run of ``cmd`` as a child process.

    CPU time (user + system) is the figure to compare on a shared machine, where wall time
    also counts waiting for a core."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"{' '.join(cmd)} failed: {err}")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024  # ru_maxrss is in kB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("bench", type=Path)
    ap.add_argument("--repeat", type=int, default=2, help="runs per command (best is shown)")
    args = ap.parse_args()
    sizes: dict[str, int] = {}
    for p in args.bench.iterdir():
        sizes[p.suffix] = sizes.get(p.suffix, 0) + p.stat().st_size
    total = sum(sizes.values())
    print(f"benchmark folder {args.bench}: {total / 1e6:.1f} MB")
    for suffix, n in sorted(sizes.items(), key=lambda kv: -kv[1]):
        print(f"  {suffix or '(none)':10s} {n / 1e6:8.1f} MB")
    with tempfile.TemporaryDirectory() as tmp:
        commands = {
            "inspect -n 3 (test)": [POLYLOGUE, "inspect", str(args.bench), "-n", "3"],
            "annotate create, 20 items (test)": [
                POLYLOGUE,
                "annotate",
                "create",
                "--db",
                f"{tmp}/s.sqlite",
                "--study",
                "s{i}",
                "--annotators",
                "a,b",
                "--benchmark",
                str(args.bench),
                "--split",
                "test",
                "--per-category",
                "4",
            ],
            "python -c pass (interpreter floor)": [sys.executable, "-c", "pass"],
            "polylogue --help (CLI floor)": [POLYLOGUE, "--help"],
        }
        print(f"{'command':40s} {'best wall s':>11s} {'best CPU s':>11s} {'peak RSS MB':>12s}")
        for name, cmd in commands.items():
            runs = [measure([c.replace("{i}", str(i)) for c in cmd]) for i in range(args.repeat)]
            wall = min(r[0] for r in runs)
            cpu = min(r[1] for r in runs)
            rss = max(r[2] for r in runs)
            print(f"{name:40s} {wall:11.2f} {cpu:11.2f} {rss:12.0f}")
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
