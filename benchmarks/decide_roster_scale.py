"""`polylogue decide` on thousands of distinct speakers, file vs stdin (docs/performance.md).

Issue 29 (item 9): ``decide FILE`` without a roster registered every speaker up front and
passed "everyone who has spoken" to the features as a list, so each decision walked the roster:
10,000 speakers 17.9 s, 20,000 81 s, against 9.5 s for 20,000 on stdin. The presence is now
computed from counters (``engine.features.SPOKEN``), as on stdin.

For each size the script writes N utterances by N distinct speakers (JSONL for the file, the
same lines as ``Name: text`` for stdin) and times the real command both ways (wall seconds of
the subprocess, engine loading included), then times the feature rows alone with the presence
given as the old list and as SPOKEN (the old path is the baseline: same features, bit for bit).

    PYTHONPATH=src python benchmarks/decide_roster_scale.py [--sizes 2000 5000 10000 20000]

Results are recorded in docs/performance.md ("decide on huge rosters").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLYLOGUE = [str(Path(sys.executable).parent / "polylogue")]


def _write(folder: Path, n: int) -> tuple[Path, Path]:
    lines = [
        {"speaker": f"Speaker{i}", "text": f"hello number {i}, what do you think?"}
        for i in range(n)
    ]
    jsonl, txt = folder / f"roster{n}.jsonl", folder / f"roster{n}.txt"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in lines))
    txt.write_text("".join(f"{r['speaker']}: {r['text']}\n" for r in lines))
    return jsonl, txt


def _time_cli(args: list[str], stdin: Path | None = None) -> float:
    start = time.perf_counter()
    with open(stdin or "/dev/null", "rb") as f:
        proc = subprocess.run(
            [*POLYLOGUE, *args], stdin=f, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.decode())
    return time.perf_counter() - start


def _time_features(n: int, listed_too: bool) -> tuple[float | None, float]:
    """Seconds for the feature rows of n decisions: presence as a list (the old path, when
    ``listed_too``: it is quadratic), and SPOKEN."""
    from polylogue.conversation import Participant, Utterance
    from polylogue.engine.engine import TurnTakingEngine
    from polylogue.engine.features import SPOKEN

    engine = TurnTakingEngine.load()
    engine.add_participants(Participant(id=f"Speaker{i}", name=f"Speaker{i}") for i in range(n))
    state = engine.state
    listed = spoken = 0.0
    for i in range(n):
        engine.observe(Utterance(f"Speaker{i}", f"hello number {i}, what do you think?"))
        t0 = time.perf_counter()
        if listed_too:
            state.features("Speaker3", [*state.utt_count, "Speaker3"])
        t1 = time.perf_counter()
        state.features("Speaker3", SPOKEN)
        t2 = time.perf_counter()
        listed += t1 - t0
        spoken += t2 - t1
    return (listed if listed_too else None), spoken


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 5000, 10000, 20000])
    ap.add_argument(
        "--list-up-to", type=int, default=10000, help="time the old list path up to this size"
    )
    args = ap.parse_args()
    heads = ("speakers", "decide FILE s", "decide - s", "features list s", "features SPOKEN s")
    print(" ".join(f"{h:>{max(len(h), 9)}}" for h in heads))
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            jsonl, txt = _write(Path(tmp), n)
            file_s = _time_cli(["decide", str(jsonl), "--as", "Speaker3", "--json"])
            stdin_s = _time_cli(["decide", "-", "--as", "Speaker3", "--json"], txt)
            listed, spoken = _time_features(n, n <= args.list_up_to)
            old = "-" if listed is None else f"{listed:.2f}"
            print(
                f"{n:>9,} {file_s:>13.1f} {stdin_s:>10.1f} {old:>15} {spoken:>17.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
