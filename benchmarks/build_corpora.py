"""Wall time and peak memory of building whole corpora's benchmarks (docs/performance.md).

Target (issues 1 and 11): all AMI meetings in under 60 s and 2 GB on one core, with the v2
definitions (AMI acts split at word gaps, real pauses, three outcomes).

    python benchmarks/build_corpora.py [--corpora ami friends] [--protocol default|paper]

Each corpus is built in its own process pinned to one CPU (when ``os.sched_setaffinity``
exists), reading from the shared corpora and writing a full benchmark folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, os, resource, sys, time
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
t0 = time.perf_counter()
from polylogue.corpora import load_corpus
from polylogue.turntaking.dataset import (
    BuildOptions, build_benchmark, paper_protocol_options, reader_options, save_benchmark,
)
t_import = time.perf_counter()
paper = sys.argv[3] == "paper"
opts = reader_options(sys.argv[1], protocol=sys.argv[3])
options = paper_protocol_options() if paper else BuildOptions()
build = build_benchmark(load_corpus(sys.argv[1], **opts), options)
t_build = time.perf_counter()
save_benchmark(build, sys.argv[2])
t_save = time.perf_counter()
print(json.dumps({
    "corpus": sys.argv[1],
    "protocol": sys.argv[3],
    "conversations": build.counts["conversations"],
    "points": build.counts["points"],
    "read_and_build_s": round(t_build - t_import, 2),
    "save_s": round(t_save - t_build, 2),
    "total_s": round(t_save - t0, 2),
    # CPU seconds of this process: the honest figure when other jobs share the machine.
    "cpu_s": round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), 2),
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", nargs="+", default=["ami", "friends"])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--protocol", choices=["default", "paper"], default="default")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="polylogue-bench-"))
    rows = []
    for corpus in args.corpora:
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-c", CHILD, corpus, str(out / corpus), args.protocol],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ},
        )
        row = json.loads(r.stdout.strip().splitlines()[-1])
        row["wall_s_incl_python_start"] = round(time.perf_counter() - t0, 2)
        rows.append(row)
        print(json.dumps(row))
    print()
    print(
        "| corpus | protocol | conversations | points | read+build s | save s | total s "
        "| CPU s | peak RSS MB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['corpus']} | {r['protocol']} | {r['conversations']:,} | {r['points']:,} | "
            f"{r['read_and_build_s']} | "
            f"{r['save_s']} | {r['total_s']} | {r['cpu_s']} | {r['peak_rss_mb']} |"
        )


if __name__ == "__main__":
    main()
