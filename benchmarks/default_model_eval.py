"""Accuracy of the shipped turn-taking model on held-out conversations (figures for the model card).

    .venv/bin/python benchmarks/default_model_eval.py /tmp/bench-ami /tmp/bench-friends \
        /tmp/bench-earnings21 /tmp/bench-icsi [--split test] [--model-dir DIR] [--json out.json]

Prints, per corpus: balanced accuracy, per-category accuracy (I1/I2/S1/S2), ECE, and the same
within strata of conversation size (people present), next to the "previous other speaker"
heuristic (the target is whoever held the floor before the current speaker).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.model import load_model
from polylogue.training.default_model import SplitData, metric_table
from polylogue.turntaking.dataset import load_benchmark
from polylogue.turntaking.types import Decision, DecisionPoint


def previous_other_speaker(p: DecisionPoint) -> float:
    """1.0 when the target is the last speaker before the current speaker's turn."""
    cur = p.input.current.speaker
    for u in reversed(p.input.history):
        if u.speaker != cur:
            return float(u.speaker == p.input.target.id)
    return 0.0


def fmt(v: float | None) -> str:
    return "  -  " if v is None else f"{v:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("benchmarks", nargs="+", type=Path)
    ap.add_argument("--split", default="test")
    ap.add_argument("--model-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="Write all figures here.")
    args = ap.parse_args()

    model = load_model(args.model_dir)
    extractor = FeatureExtractor(model.yield_model, model.relation_model)
    results: dict[str, object] = {"split": args.split, "threshold": model.threshold, "corpora": {}}
    for folder in args.benchmarks:
        bench = load_benchmark(folder)
        points = bench.points(args.split)
        t0 = time.perf_counter()
        x = extractor.features([p.input for p in points])
        p = model.proba(x)
        elapsed = time.perf_counter() - t0
        y = np.asarray([pt.gold.label is Decision.SPEAK for pt in points], dtype=np.int8)
        data = SplitData(points, x, y, np.asarray([pt.input.corpus for pt in points]))
        ours = metric_table(data, p, model.threshold)
        heuristic = metric_table(
            data, np.asarray([previous_other_speaker(pt) for pt in points]), 0.5
        )
        for corpus, entry in ours["corpora"].items():
            h = heuristic["corpora"][corpus]
            results["corpora"][corpus] = {"model": entry, "previous_other_speaker": h}  # type: ignore[index]
            print(
                f"\n== {corpus} ({args.split}, {entry['n']:,} points, "
                f"{elapsed / len(points) * 1e3:.2f} ms/point batch)"
            )
            print(f"{'':22} {'BalAcc':>7} {'I1':>6} {'I2':>6} {'S1':>6} {'S2':>6} {'ECE':>6}")
            for label, e in (("model", entry), ("prev-other-speaker", h)):
                print(
                    f"{label:22} {fmt(e['balanced_accuracy']):>7} "
                    f"{fmt(e['acc_I1']):>6} {fmt(e['acc_I2']):>6} "
                    f"{fmt(e['acc_S1']):>6} {fmt(e['acc_S2']):>6} "
                    f"{fmt(e['ece'] if label == 'model' else None):>6}"
                )
            print(
                f"{'  by people present':22} {'n':>7} {'BalAcc':>7} {'heur.':>6} "
                f"{'S2':>6} {'ECE':>6} {'speak%':>7}"
            )
            for size, e in entry["sizes"].items():
                hs = h["sizes"][size]
                print(
                    f"{'  ' + size:22} {e['n']:>7,} {fmt(e['balanced_accuracy']):>7} "
                    f"{fmt(hs['balanced_accuracy']):>6} {fmt(e['acc_S2']):>6} {fmt(e['ece']):>6} "
                    f"{100 * (e['speak_rate'] or 0):>6.1f}%"
                )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"\nwritten {args.json}")


if __name__ == "__main__":
    main()
