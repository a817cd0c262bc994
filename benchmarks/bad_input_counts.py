"""Counts of what the readers do with damaged input: the fuzz suite, run wider.

Runs the seeded damage of ``tests/test_fuzz_readers.py`` (every reader and user format, real
files, 16 kinds of damage including the later probes': big integers, BOMs, Unicode line
breaks, lone CRs, missing blank lines, look-alike names and letters, repeated keys) over more
seeds than the test, and prints per format and in total: cases, clear errors, correct, silent
garbage, tracebacks, hangs (a case over ``--timeout`` seconds).

    PYTHONPATH=src python benchmarks/bad_input_counts.py [--cases 48] [--timeout 20]

To measure the code before a change, point ``PYTHONPATH`` at that tree's ``src``: what it lacks
(the input-warning class, the stdin line splitter) is filled in with what it did then.
Results are recorded in docs/performance.md ("Bad input").
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _shim_older_code() -> None:
    """Fill in what a tree from before issue 29 does not have, as that tree behaved."""
    import polylogue.corpora.transcripts as transcripts
    import polylogue.errors as errors

    if not hasattr(errors, "InputWarning"):
        setattr(errors, "InputWarning", UserWarning)  # noqa: B010 (mypy: the name is new)
    if not hasattr(transcripts, "stream_lines"):

        def stream_lines(stream: object, *_: object) -> list[str]:  # readline on text stdin
            data = stream.read()  # type: ignore[attr-defined]
            return data.decode("utf-8", "surrogateescape").split("\n")

        setattr(transcripts, "stream_lines", stream_lines)  # noqa: B010


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Hang


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=48, help="damaged copies per format")
    ap.add_argument("--timeout", type=int, default=20, help="seconds before a case is a hang")
    ap.add_argument("--show", type=int, default=3, help="failures to print per format")
    args = ap.parse_args()
    _shim_older_code()
    import test_fuzz_readers as fuzz

    signal.signal(signal.SIGALRM, _alarm)
    total: Counter[str] = Counter()
    by_kind: dict[str, Counter[str]] = {}
    failures: list[str] = []
    print(f"{'format':<22}" + "".join(f"{o:>15}" for o in ("cases", *fuzz.OUTCOMES)))
    started = time.perf_counter()
    for fmt in fuzz.FORMATS:
        counts: Counter[str] = Counter()
        n = max(args.cases // 3, 15) if fmt.name.startswith("ami") else args.cases
        seed = sum(map(ord, fmt.name)) + 1  # other seeds than the test's
        with tempfile.TemporaryDirectory() as tmp:
            shown = 0
            for kind, case, target, label, expected in fuzz.cases(fmt, Path(tmp), seed, n):
                signal.alarm(args.timeout)
                try:
                    outcome, detail = fuzz.run_case(fmt, case, target, label, expected)
                except _Hang:
                    outcome, detail = "hang", f"{label}: over {args.timeout} s"
                finally:
                    signal.alarm(0)
                counts[outcome] += 1
                by_kind.setdefault(kind, Counter())[outcome] += 1
                if outcome not in ("clear error", "correct") and shown < args.show:
                    failures.append(detail)
                    shown += 1
        total.update(counts)
        row = [sum(counts.values()), *(counts[o] for o in fuzz.OUTCOMES)]
        print(f"{fmt.name:<22}" + "".join(f"{v:>15}" for v in row), flush=True)
    row = [sum(total.values()), *(total[o] for o in fuzz.OUTCOMES)]
    print(f"{'TOTAL':<22}" + "".join(f"{v:>15}" for v in row))
    print("\nby kind of damage:")
    for kind, counts in by_kind.items():
        print(f"  {kind:<22}" + "".join(f"{counts[o]:>15}" for o in fuzz.OUTCOMES))
    print(f"\n{time.perf_counter() - started:.0f} s")
    for line in failures:
        print("  " + line)


if __name__ == "__main__":
    main()
