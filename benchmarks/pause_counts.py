"""Real pauses and decision points for several pause gaps (quoted in docs/benchmark.md).

    python benchmarks/pause_counts.py [--gaps 0 0.2 0.5]

For each gap, AMI is read with acts split at that gap (unit ``ipu``) and Earnings-21 as speaker
turns; prints pauses, points and their outcomes per corpus. Untimed corpora (Friends, QMSum)
have no pauses and keep utterance boundaries.
"""

from __future__ import annotations

import argparse
from collections import Counter

from polylogue.corpora import load_corpus
from polylogue.turntaking.points import PointOptions, conversation_points, prepare_conversation


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gaps", nargs="+", type=float, default=[0.0, 0.2, 0.5])
    ap.add_argument("--corpora", nargs="+", default=["ami", "earnings21"])
    args = ap.parse_args()
    print(
        "| corpus | gap ms | timed conversations | pauses | points | TAKE_FLOOR | BACKCHANNEL "
        "| SILENT |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for corpus in args.corpora:
        for gap in args.gaps:
            opts = {"unit": "ipu", "ipu_gap": gap} if corpus == "ami" else {}
            popts = PointOptions(gap=gap)
            timed = pauses = 0
            outcomes: Counter[str] = Counter()
            for conv in load_corpus(corpus, **opts):
                prepared = prepare_conversation(conv, popts)
                if prepared.metadata["decision_moments"] != "pause":
                    continue
                timed += 1
                seen: set[int] = set()
                for p in conversation_points(prepared, popts):
                    seen.add(p.index)
                    outcomes[p.gold.floor_outcome.value] += 1
                pauses += len(seen)
            n = sum(outcomes.values())
            counts = " | ".join(f"{outcomes[o]:,}" for o in ("TAKE_FLOOR", "BACKCHANNEL", "SILENT"))
            print(f"| {corpus} | {round(gap * 1000)} | {timed} | {pauses:,} | {n:,} | {counts} |")


if __name__ == "__main__":
    main()
