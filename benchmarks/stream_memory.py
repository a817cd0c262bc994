"""Memory and time of long, crowded streams through `polylogue decide -` (docs/serve-measured.md).

    python benchmarks/stream_memory.py [--lines 200000] [--speakers 5000]

1. Memory: real AMI utterances (meetings cycled, ``Speaker: text`` lines) piped into
   ``polylogue decide - --as <name> --json``; the decide process's resident memory (VmRSS) is
   sampled as lines go in. Flat after warm-up means the state keeps a bounded window.
2. Speakers: ``GuestN: Dave, can you check? N`` for N new speakers (the reported stall); the
   time per line in the first and last windows of 500 lines.
Prints the figures; results are recorded in docs/serve-measured.md.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import threading
import time
from pathlib import Path

from polylogue.corpora import load_corpus

POLYLOGUE = str(Path(sys.executable).parent / "polylogue")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _drain(proc: subprocess.Popen[str], counter: list[int]) -> None:
    assert proc.stdout is not None
    for _ in proc.stdout:
        counter[0] += 1


def memory(n_lines: int) -> None:
    meetings = list(itertools.islice(load_corpus("ami"), 8))
    # AMI speakers are letters; name them so the stream is like a user's ("Alice: ...").
    names = {"A": "Alice Ames", "B": "Bruno Berg", "C": "Chen Cho", "D": "Dana Diaz"}
    lines = (
        f"{names[u.speaker]}: {u.text}\n"
        for c in itertools.cycle(meetings)
        for u in c.utterances
        if u.text.strip()
    )
    proc = subprocess.Popen(
        [POLYLOGUE, "decide", "-", "--as", "dana", "--json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    got = [0]
    reader = threading.Thread(target=_drain, args=(proc, got), daemon=True)
    reader.start()
    assert proc.stdin is not None
    marks = {1_000, 10_000, 25_000, 50_000, 100_000, 150_000, n_lines}
    t0 = time.perf_counter()
    print(f"{'lines':>8} {'answered':>9} {'RSS MB':>7} {'ms/line':>8}")
    for i, line in enumerate(itertools.islice(lines, n_lines), start=1):
        proc.stdin.write(line)
        if i in marks:
            proc.stdin.flush()
            while got[0] < i - 50:  # let decide catch up before measuring
                time.sleep(0.01)
            dt = (time.perf_counter() - t0) / i * 1000
            print(f"{i:8d} {got[0]:9d} {_rss_mb(proc.pid):7.1f} {dt:8.2f}", flush=True)
    proc.stdin.close()
    proc.wait()
    reader.join()
    print(f"answered {got[0]} of {n_lines} lines")


def speakers(n: int) -> None:
    proc = subprocess.Popen(
        [POLYLOGUE, "decide", "-", "--as", "Dave", "--json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )
    assert proc.stdin is not None and proc.stdout is not None
    times = []
    for i in range(n):
        t = time.perf_counter()
        proc.stdin.write(f"Guest{i}: Dave, can you check? {i}\n")
        proc.stdin.flush()
        proc.stdout.readline()
        times.append(time.perf_counter() - t)
    proc.stdin.close()
    proc.wait()
    w = 500
    first = sum(times[:w]) / w * 1000
    last = sum(times[-w:]) / w * 1000
    print(
        f"{n} new speakers: {first:.2f} ms/line (first {w}), {last:.2f} ms/line (last {w}); "
        f"total {sum(times):.1f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--speakers", type=int, default=5_000)
    args = ap.parse_args()
    if args.speakers:
        speakers(args.speakers)
    if args.lines:
        memory(args.lines)


if __name__ == "__main__":
    main()
