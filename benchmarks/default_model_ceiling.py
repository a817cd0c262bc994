"""Where the shipped model's errors come from: floor change vs selection (docs/model-card.md).

    .venv/bin/python benchmarks/default_model_ceiling.py /tmp/bench-ami /tmp/bench-friends \
        /tmp/bench-earnings21 /tmp/bench-icsi [--model-dir DIR] [--json F] [--markdown F]

Per corpus, on the test split (validation only to tune):

* balanced accuracy at the shipped threshold, and at the threshold ``polylogue tune-threshold``
  picks on that corpus's validation split (what a deployment is told to do);
* the floor decomposition (``polylogue.evaluation.floor``): how often a listener takes the floor,
  how well the summed P(SPEAK) predicts that (AUC), how often the top-rated listener is the one
  who spoke (selection accuracy, next to chance and to two rules), and the balanced accuracy
  the model would reach if it knew at each pause whether the floor changes.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.conversation import Conversation
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.model import TurnTakingModel, load_model
from polylogue.evaluation.floor import floor_decomposition, pause_index, top1_accuracy
from polylogue.evaluation.metrics import balanced_accuracy_binary as balanced_accuracy
from polylogue.evaluation.metrics import sweep_thresholds
from polylogue.models.baselines import held_floor_before
from polylogue.turntaking.dataset import load_benchmark
from polylogue.turntaking.types import Decision, DecisionPoint


def talk_share(p: DecisionPoint) -> float:
    """The target's share of the utterances so far (the most talkative listener wins)."""
    ctx = p.input.context
    return sum(1 for u in ctx if u.speaker == p.input.target.id) / len(ctx)


def overlap_figures(conversations: list[Conversation]) -> dict[str, float | int | None]:
    """How often the next speaker starts before the current utterance has ended.

    The benchmark orders utterances by start time (as the paper does), so with timed dialogue
    acts the "next" utterance of a speaker change can begin, or even end, before the pause
    after the current one. Its start time is never a model input.
    """
    changes = starts_before = inside = 0
    for conv in conversations:
        for cur, nxt in itertools.pairwise(conv.utterances):
            if nxt.speaker == cur.speaker or None in (cur.end, nxt.start, nxt.end):
                continue
            changes += 1
            starts_before += nxt.start < cur.end  # type: ignore[operator]
            inside += nxt.end <= cur.end  # type: ignore[operator]
    return {
        "timed_speaker_changes": changes,
        "next_starts_before_end": starts_before / changes if changes else None,
        "next_wholly_inside": inside / changes if changes else None,
    }


def scored(
    model: TurnTakingModel, extractor: FeatureExtractor, points: list[DecisionPoint]
) -> tuple[np.ndarray, np.ndarray]:
    p = model.proba(extractor.features([pt.input for pt in points]))
    y = np.asarray([pt.gold.label is Decision.SPEAK for pt in points], dtype=np.int8)
    return y, p


def corpus_figures(
    model: TurnTakingModel, extractor: FeatureExtractor, bench_dir: Path
) -> dict[str, dict[str, Any]]:
    bench = load_benchmark(bench_dir)
    val_points, test_points = bench.points("validation"), bench.points("test")
    yv, pv = scored(model, extractor, val_points)
    yt, pt = scored(model, extractor, test_points)
    out: dict[str, dict[str, Any]] = {}
    for corpus in sorted({p.input.corpus for p in test_points}):
        mv = np.asarray([p.input.corpus == corpus for p in val_points])
        mt = np.asarray([p.input.corpus == corpus for p in test_points])
        pts = [p for p, keep in zip(test_points, mt, strict=True) if keep]
        _, tuned = sweep_thresholds(yv[mv], pv[mv])
        cats = np.asarray([p.gold.category.value for p in pts])
        keys = [(p.input.conversation_id, p.index) for p in pts]
        conv_ids = [k[0] for k in keys]
        pause = pause_index(keys)
        y, p = yt[mt], pt[mt]
        decomposition = floor_decomposition(keys, y, p, model.threshold)

        out[corpus] = {
            "points": len(pts),
            "shipped_threshold": model.threshold,
            "balanced_accuracy": balanced_accuracy(y, (p >= model.threshold).astype(np.int8)),
            "s2_accuracy": category_accuracy(cats, "S2", y, p, model.threshold),
            "tuned_threshold": tuned,
            "tuned_balanced_accuracy": balanced_accuracy(y, (p >= tuned).astype(np.int8)),
            "tuned_s2_accuracy": category_accuracy(cats, "S2", y, p, tuned),
            **decomposition.to_dict(),
            "selection_previous_other_speaker": top1_accuracy(
                pause, y, np.asarray([float(held_floor_before(q.input)) for q in pts])
            ),
            "selection_talk_share": top1_accuracy(
                pause, y, np.asarray([talk_share(q) for q in pts])
            ),
            **overlap_figures([bench.conversations[cid] for cid in dict.fromkeys(conv_ids)]),
        }
    return out


def category_accuracy(
    cats: np.ndarray, category: str, y: np.ndarray, p: np.ndarray, threshold: float
) -> float | None:
    m = cats == category
    return float(((p[m] >= threshold) == y[m]).mean()) if m.any() else None


def fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def markdown(results: dict[str, dict[str, Any]]) -> str:
    rows = [
        "| corpus | BalAcc (shipped thr.) | S2 | tuned thr. | BalAcc (tuned) | S2 (tuned) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c, r in results.items():
        rows.append(
            f"| {c} | {fmt(r['balanced_accuracy'])} | {fmt(r['s2_accuracy'])} | "
            f"{r['tuned_threshold']:.2f} | {fmt(r['tuned_balanced_accuracy'])} | "
            f"{fmt(r['tuned_s2_accuracy'])} |"
        )
    rows += [
        "",
        "| corpus | floor changes | floor-change AUC | selection pauses | selection acc. "
        "| chance | prev. other speaker | talk share | BalAcc with floor oracle | (best thr.) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c, r in results.items():
        rows.append(
            f"| {c} | {fmt(r['floor_change_rate'])} | {fmt(r['floor_change_auc'])} | "
            f"{fmt(r['selection_pauses'])} | {fmt(r['selection_accuracy'])} | "
            f"{fmt(r['selection_chance'])} | {fmt(r['selection_previous_other_speaker'])} | "
            f"{fmt(r['selection_talk_share'])} | {fmt(r['oracle_floor_balanced_accuracy'])} | "
            f"{fmt(r['oracle_floor_best_balanced_accuracy'])} |"
        )
    rows += [
        "",
        "| corpus | timed speaker changes | next starts before the current ends "
        "| ... and ends before it |",
        "|---|---:|---:|---:|",
    ]
    for c, r in results.items():
        rows.append(
            f"| {c} | {fmt(r['timed_speaker_changes'])} | {fmt(r['next_starts_before_end'])} | "
            f"{fmt(r['next_wholly_inside'])} |"
        )
    return "\n".join(rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("benchmarks", nargs="+", type=Path)
    ap.add_argument("--model-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args()
    model = load_model(args.model_dir)
    extractor = FeatureExtractor.for_model(model)
    results: dict[str, dict[str, Any]] = {}
    for folder in args.benchmarks:
        results.update(corpus_figures(model, extractor, folder))
    table = markdown(results)
    print(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")


if __name__ == "__main__":
    main()
