"""Time and memory of the Earnings-21 turn-to-RTTM alignment, long calls (docs/performance.md).

Run: ``python benchmarks/earnings_alignment.py [--old-max 1000]``. A synthetic call has ``n``
reference turns by four alternating speakers with 1-200 words, and RTTM runs with plausible
speech times; 3% of the runs and 3% of the turns are dropped (stretches missing on one side,
as in the real calls) and 1% spurious runs are added. Prints, per size, the seconds and (from
a second, traced run) the peak traced memory of the banded alignment (``align_turns_to_runs``)
and, up to ``--old-max`` turns, of the previous full O(turns x runs) dynamic programme (the
baseline, copied below),
and whether both give the same matching. The issue's figure for the old one at 8,000 x 8,000
was 99 s and 525 MB.
"""

from __future__ import annotations

import argparse
import random
import time
import tracemalloc
from collections.abc import Callable, Sequence

from polylogue.corpora.earnings import SpeakerRun, _fit, align_turns_to_runs, plausible_duration


def synthetic_call(n: int, seed: int = 0) -> tuple[list[tuple[str, int]], list[SpeakerRun]]:
    rng = random.Random(seed)
    speakers = ["0", "1", "2", "3"]
    turns: list[tuple[str, int]] = []
    runs: list[SpeakerRun] = []
    t = 0.0
    prev = ""
    for _ in range(n):
        spk = rng.choice([s for s in speakers if s != prev])
        prev = spk
        words = rng.randint(1, 200)
        speech = words / rng.uniform(1.5, 4.5)
        keep_turn, keep_run = rng.random() > 0.03, rng.random() > 0.03
        if keep_turn:
            turns.append((spk, words))
        if keep_run:
            runs.append(SpeakerRun(spk, t, t + speech, speech))
        if rng.random() < 0.01:
            runs.append(SpeakerRun(rng.choice(speakers), t + speech, t + speech + 1.0, 1.0))
        t += speech + rng.uniform(0.1, 1.5)
    return turns, runs


def full_dp(turns: Sequence[tuple[str, int]], runs: Sequence[SpeakerRun]) -> dict[int, int]:
    """The previous implementation: every (turn, run) cell, same objective as the new one."""
    n, m = len(turns), len(runs)
    bonus = 1.0 / (n + 1)
    score = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        spk, words = turns[i]
        row, nxt = score[i], score[i + 1]
        for j in range(m - 1, -1, -1):
            best = max(nxt[j], row[j + 1])
            run = runs[j]
            if run.speaker == spk and plausible_duration(words, run.speech):
                best = max(best, 1.0 + bonus * _fit(words, run.speech) + nxt[j + 1])
            row[j] = best
    matches: dict[int, int] = {}
    i = j = 0
    while i < n and j < m:
        spk, words = turns[i]
        run = runs[j]
        if (
            run.speaker == spk
            and plausible_duration(words, run.speech)
            and score[i][j] == 1.0 + bonus * _fit(words, run.speech) + score[i + 1][j + 1]
        ):
            matches[i] = j
            i, j = i + 1, j + 1
            continue
        if score[i][j] == score[i + 1][j]:
            i += 1
        else:
            j += 1
    return matches


def _measure(
    fn: Callable[[Sequence[tuple[str, int]], Sequence[SpeakerRun]], dict[int, int]],
    turns: Sequence[tuple[str, int]],
    runs: Sequence[SpeakerRun],
) -> tuple[dict[int, int], float, float]:
    """Result, seconds (untraced run) and peak traced MB (a second, traced run)."""
    t0 = time.perf_counter()
    out = fn(turns, runs)
    dt = time.perf_counter() - t0
    tracemalloc.start()
    fn(turns, runs)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, dt, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old-max", type=int, default=1000, help="largest n for the old DP")
    args = ap.parse_args()
    head = f"{'turns':>6} {'runs':>6} {'matched':>8}  {'banded s':>9} {'MB':>6}"
    print(f"{head}  {'old s':>7} {'MB':>6}")
    for n in (500, 1000, 2000, 4000, 8000):
        turns, runs = synthetic_call(n, seed=n)
        new, dt, peak = _measure(align_turns_to_runs, turns, runs)
        line = f"{len(turns):>6} {len(runs):>6} {len(new):>8}  {dt:>9.2f} {peak:>6.1f}"
        if n <= args.old_max:
            old, dt_old, peak_old = _measure(full_dp, turns, runs)
            same = "same" if old == new else f"DIFFERENT ({len(old)} matched)"
            line += f"  {dt_old:>7.2f} {peak_old:>6.1f}  {same}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
