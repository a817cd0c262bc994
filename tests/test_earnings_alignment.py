"""The banded Earnings-21 alignment gives the full dynamic programme's matching, in linear space.

The reference below is the previous O(turns x runs) programme with the same objective (most
matched pairs, then the best summed duration fit); the banded one must agree with it on every
real call and on seeded synthetic calls with stretches missing on either side.
"""

from __future__ import annotations

import math
import random
import tracemalloc

import pytest

from polylogue.corpora.earnings import (
    SpeakerRun,
    _banded_alignment,
    _best_outside_band,
    _turns,
    align_turns_to_runs,
    plausible_duration,
    read_nlp_tokens,
    read_rttm_runs,
)
from polylogue.paths import corpus_dir

Turns = list[tuple[str, int]]


def reference_alignment(turns: Turns, runs: list[SpeakerRun]) -> dict[int, int]:
    n, m = len(turns), len(runs)
    bonus = 1.0 / (n + 1)

    def fit(words: int, speech: float) -> float:
        expected = max(words, 1) / 3.3
        return math.exp(-abs(math.log((speech + 0.5) / (expected + 0.5))))

    score = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        spk, words = turns[i]
        for j in range(m - 1, -1, -1):
            best = max(score[i + 1][j], score[i][j + 1])
            if runs[j].speaker == spk and plausible_duration(words, runs[j].speech):
                best = max(best, 1 + bonus * fit(words, runs[j].speech) + score[i + 1][j + 1])
            score[i][j] = best
    # Only the number of pairs and their summed fit are compared: the two programmes round
    # the fit differently in the last bit, which may pick another of two equal matchings.
    out: dict[int, int] = {}
    i = j = 0
    while i < n and j < m:
        spk, words = turns[i]
        if runs[j].speaker == spk and plausible_duration(words, runs[j].speech):
            take = 1 + bonus * fit(words, runs[j].speech) + score[i + 1][j + 1]
            if math.isclose(score[i][j], take, rel_tol=1e-12):
                out[i] = j
                i, j = i + 1, j + 1
                continue
        if math.isclose(score[i][j], score[i + 1][j], rel_tol=1e-12):
            i += 1
        else:
            j += 1
    return out


def synthetic_call(n: int, seed: int, drop: float = 0.05) -> tuple[Turns, list[SpeakerRun]]:
    """Alternating speakers, plausible speech times, ``drop`` of each side missing."""
    rng = random.Random(seed)
    turns: Turns = []
    runs: list[SpeakerRun] = []
    t, prev = 0.0, ""
    for _ in range(n):
        spk = rng.choice([s for s in "ABCD" if s != prev])
        prev = spk
        words = rng.randint(1, 120)
        speech = words / rng.uniform(1.5, 4.5)
        if rng.random() > drop:
            turns.append((spk, words))
        if rng.random() > drop:
            runs.append(SpeakerRun(spk, t, t + speech, speech))
        t += speech + rng.uniform(0.1, 1.5)
    return turns, runs


def test_every_real_call_matches_the_full_programme() -> None:
    root = corpus_dir("earnings21")
    for nlp in sorted((root / "transcripts" / "nlp_references").glob("*.nlp")):
        turns = [(t.speaker, t.words) for t in _turns(read_nlp_tokens(nlp))]
        runs = read_rttm_runs(root / "rttms" / f"{nlp.stem}.rttm")
        assert align_turns_to_runs(turns, runs) == reference_alignment(turns, runs), nlp.stem


@pytest.mark.parametrize("seed", range(3))
def test_narrow_bands_are_certified_or_flagged(seed: int) -> None:
    turns, runs = synthetic_call(300, seed)
    full = reference_alignment(turns, runs)
    assert align_turns_to_runs(turns, runs) == full
    for half in (4, 16, 64):
        banded = _banded_alignment(turns, runs, half)
        assert all(plausible_duration(w, runs[banded[i]].speech) for i, (_, w) in
                   enumerate(turns) if i in banded)  # fmt: skip
        assert list(banded.values()) == sorted(banded.values())  # monotone, one run per turn
        if len(banded) > _best_outside_band(len(turns), len(runs), half):
            assert banded == full  # a certified band is the exact optimum
        else:
            assert len(banded) <= len(full)


def test_long_call_aligns_in_linear_memory() -> None:
    """2,000 x 2,000: the full programme held ~4 M cells (~35 MB traced); the band holds
    two flags per cell of a 1-2 K-wide band. Timing is printed by
    benchmarks/earnings_alignment.py."""
    turns, runs = synthetic_call(2000, seed=11, drop=0.03)
    tracemalloc.start()
    try:
        matches = align_turns_to_runs(turns, runs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak
    assert len(matches) > 0.9 * min(len(turns), len(runs))
