"""Time ``polylogue scorecard`` of the shipped model and the baselines on the shared corpora.

    python benchmarks/scorecard_time.py [--cache DIR] [--work DIR] [--data NAME ...]

Three phases, each a fresh ``polylogue scorecard`` process (``os.wait4``: wall, user+system
CPU, peak RSS):

1. **cold**: an empty cache and runs folder: builds every benchmark (ami, friends, earnings21,
   icsi; paper:ami, paper:friends), then 4 operating points + 2 baselines on each;
2. **warm**: the same command again: every run is reused (only re-read and re-scored);
3. **runs only**: the benchmarks cached, the runs folder empty: what a new model costs.

Target: the cold scorecard in under 10 minutes on two cores. On a shared machine the CPU
time is the comparable figure.
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

DEFAULT = ("ami", "friends", "earnings21", "icsi", "paper:ami", "paper:friends")


def timed(args: list[str], env: dict[str, str]) -> dict[str, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "polylogue.cli", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"polylogue {' '.join(args)} failed:\n{err.decode()}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temp)")
    ap.add_argument("--data", nargs="*", default=list(DEFAULT))
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="polylogue-scorecard-time-"))
    cache, runs, out = work / "cache", work / "runs", work / "scorecard"
    env = {**os.environ, "POLYLOGUE_CACHE": str(cache), "PYTHONHASHSEED": "0"}
    cmd = ["scorecard", "--out", str(out), "--runs", str(runs), "--no-progress"]
    for d in args.data:
        cmd += ["--data", d]
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"data: {', '.join(args.data)}; models: default x 4 points, 2 baselines")
    print("| phase | wall s | CPU s | peak RSS MB |")
    print("|---|---:|---:|---:|", flush=True)

    def phase(name: str) -> None:  # printed as it ends: a long run can be stopped after one
        r = timed(cmd, env)
        print(
            f"| {name} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['peak_rss_mb']:.0f} |",
            flush=True,
        )

    phase("cold (build + run)")
    phase("warm (all reused)")
    shutil.rmtree(runs)
    phase("runs only (benchmarks cached)")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    print(f"scorecard: {out / 'scorecard.md'}")


if __name__ == "__main__":
    main()
