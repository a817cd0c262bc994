"""Time and memory of the AMI and ICSI readers on whole corpora (docs/corpora.md, performance.md).

Run: ``python benchmarks/corpora_readers.py [--data-root DIR]``. Prints one line per step with
wall time, counts and the process's peak resident memory so far (one core, no parallelism).
The turn-taking benchmark target is all AMI meetings parsed and turned into decision points
in < 60 s and < 2 GB; the reader's share should stay well under 25 s.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

from polylogue.corpora.ami import ami_meetings, read_ami, read_ami_topics, read_ami_words
from polylogue.corpora.icsi import read_icsi
from polylogue.paths import corpus_dir


def _peak_mb() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _step(name: str, fn: Callable[[], Any]) -> None:
    t0 = time.perf_counter()
    summary = fn()
    dt = time.perf_counter() - t0
    print(f"{name:<28} {dt:7.2f} s   peak RSS {_peak_mb():7.0f} MB   {summary}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=None)
    args = ap.parse_args()
    ami = corpus_dir("ami", args.data_root)
    icsi = corpus_dir("icsi-qmsum", args.data_root)
    meetings = ami_meetings(ami)

    def ami_da() -> str:
        convs = list(read_ami(ami))
        return f"{len(convs)} meetings, {sum(len(c) for c in convs)} dialogue acts"

    def ami_turn() -> str:
        convs = list(read_ami(ami, unit="turn"))
        return f"{len(convs)} meetings, {sum(len(c) for c in convs)} turns"

    def ami_words() -> str:
        return f"{sum(len(read_ami_words(ami, m)) for m in meetings)} words"

    def ami_topics() -> str:
        return f"{sum(len(read_ami_topics(ami, m)) for m in meetings)} topic segments"

    def icsi_all() -> str:
        convs = list(read_icsi(icsi))
        return f"{len(convs)} meetings, {sum(len(c) for c in convs)} turns"

    _step("read_ami unit=da", ami_da)
    _step("read_ami unit=turn", ami_turn)
    _step("read_ami_words (all)", ami_words)
    _step("read_ami_topics (all)", ami_topics)
    _step("read_icsi", icsi_all)


if __name__ == "__main__":
    main()
