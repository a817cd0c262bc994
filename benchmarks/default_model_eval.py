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
from typing import Any

import numpy as np

from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.model import load_model
from polylogue.models.baselines import held_floor_before
from polylogue.training.default_model import SplitData, metric_table
from polylogue.turntaking.dataset import load_benchmark
from polylogue.turntaking.types import Decision, DecisionPoint


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
    ap.add_argument(
        "--markdown", type=Path, default=None, help="Write the model card's tables here."
    )
    args = ap.parse_args()

    model = load_model(args.model_dir)
    extractor = FeatureExtractor(model.yield_model, model.relation_model)
    results: dict[str, Any] = {"split": args.split, "threshold": model.threshold, "corpora": {}}
    evidence: dict[str, dict[str, list[bool]]] = {}
    for folder in args.benchmarks:
        bench = load_benchmark(folder)
        points = bench.points(args.split)
        t0 = time.perf_counter()
        x = extractor.features([p.input for p in points])
        p = model.proba(x)
        elapsed = time.perf_counter() - t0
        y = np.asarray([pt.gold.label is Decision.SPEAK for pt in points], dtype=np.int8)
        data = SplitData(points, x, y, np.asarray([pt.input.corpus for pt in points]))
        for pt, prob in zip(points, p, strict=True):
            correct = (prob >= model.threshold) == (pt.gold.label is Decision.SPEAK)
            key = evidence_kind(pt)
            if key:
                evidence.setdefault(pt.input.corpus, {}).setdefault(key, []).append(bool(correct))
        ours = metric_table(data, p, model.threshold)
        heuristic = metric_table(
            data, np.asarray([float(held_floor_before(pt.input)) for pt in points]), 0.5
        )
        for corpus, entry in ours["corpora"].items():
            h = heuristic["corpora"][corpus]
            results["corpora"][corpus] = {"model": entry, "previous_other_speaker": h}
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
    if args.markdown:
        args.markdown.write_text(markdown_tables(results, evidence), encoding="utf-8")
        print(f"written {args.markdown}")


def evidence_kind(pt: DecisionPoint) -> str | None:
    """Where a point's I1/S2 category comes from (visible cue or invisible annotation)."""
    g = pt.gold
    cat = g.category.value
    if cat == "I1":
        return f"I1 / {g.address_evidence}"
    if cat == "S2":
        if g.addressed:
            return f"S2 / singled out ({g.address_evidence}), stayed silent"
        return f"S2 / {g.reference_evidence} mentioned, not addressed"
    if cat == "S1" and g.addressed:
        return "S1 / silent member of an addressed group"
    return None


def markdown_tables(results: dict[str, Any], evidence: dict[str, dict[str, list[bool]]]) -> str:
    corpora: dict[str, dict[str, dict[str, Any]]] = results["corpora"]
    out = [
        "| corpus | points | BalAcc | heuristic | I1 | I2 | S1 | S2 | ECE |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for corpus, r in corpora.items():
        m, h = r["model"], r["previous_other_speaker"]
        out.append(
            f"| {corpus} | {m['n']:,} | **{fmt(m['balanced_accuracy'])}** | "
            f"{fmt(h['balanced_accuracy'])} | {fmt(m['acc_I1'])} | {fmt(m['acc_I2'])} | "
            f"{fmt(m['acc_S1'])} | {fmt(m['acc_S2'])} | {fmt(m['ece'])} |"
        )
    out += [
        "",
        "| corpus | people present | points | BalAcc | heuristic | S2 | ECE | SPEAK % |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for corpus, r in corpora.items():
        sizes, hsizes = r["model"]["sizes"], r["previous_other_speaker"]["sizes"]
        for size, e in sizes.items():
            out.append(
                f"| {corpus} | {size} | {e['n']:,} | {fmt(e['balanced_accuracy'])} | "
                f"{fmt(hsizes[size]['balanced_accuracy'])} | {fmt(e['acc_S2'])} | "
                f"{fmt(e['ece'])} | {100 * (e['speak_rate'] or 0):.1f} |"
            )
    out += ["", "| corpus | category / evidence | points | accuracy |", "|---|---|---:|---:|"]
    for corpus, kinds in evidence.items():
        for kind, hits in sorted(kinds.items()):
            out.append(f"| {corpus} | {kind} | {len(hits):,} | {sum(hits) / len(hits):.3f} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
