"""Accuracy of the shipped model on held-out conversations (quoted in docs/model-card.md).

    .venv/bin/python benchmarks/default_model_eval.py build/bench-ami build/bench-friends \
        build/bench-earnings21 build/bench-icsi [--split test] [--model-dir DIR] \
        [--paper build/paper-ami build/paper-friends] [--json out.json] [--markdown out.md]
    .venv/bin/python benchmarks/default_model_eval.py build/bench-chat-irc \
        build/bench-chat-molweni --domain chat --no-fir     # the chat-domain model

Prints, per corpus (natural class ratios, the domain threshold chosen on validation):

* floor-decision balanced accuracy with a 95% interval (bootstrap over conversation groups),
  next to the previous-other-speaker baseline (``baseline:previous-speaker``: speak iff the
  target held the floor just before the current speaker), the margin, per-category accuracy
  (I1, I2, S1, S2, SA) for both, and the same on the "no visible cue" subset (points whose
  category comes from no vocative, role or name in the words);
* the same within every conversation-size stratum (people present) with >= 500 points;
* backchannel detection (precision, recall, F1 of the suggestion, and the rate);
* AMI: I1 recall at a false-interruption rate <= 10%, the threshold picked on *validation*;
* ``--paper``: paper-protocol builds (50/50 classes, per-sample split) next to the paper's best
  fine-tuned 7-8B results (AMI 72.3, Friends 72.5).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.engine.deployment import balanced_threshold
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.model import Outcomes, TurnTakingModel, domain_of_corpus, load_model
from polylogue.models.baselines import held_floor_before
from polylogue.training.engine_models.default_model import size_stratum
from polylogue.turntaking.dataset import load_benchmark
from polylogue.turntaking.types import CATEGORIES as _CATEGORIES
from polylogue.turntaking.types import Decision, DecisionPoint, Outcome

# One home for the category list (turntaking.types): v2.1 added S3.
CATEGORIES = tuple(c.value for c in _CATEGORIES)
PAPER_BEST = {"ami": 72.3, "friends": 72.5}
MIN_STRATUM = 500
N_BOOT = 1000


def fmt(v: float | None, pct: bool = False) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "-"
    return f"{100 * v:.1f}" if pct else f"{v:.3f}"


def has_visible_cue(pt: DecisionPoint) -> bool:
    """Does the category rest on words the model sees (a vocative, role or name)?"""
    g = pt.gold
    return g.address_evidence in ("vocative", "role") or g.reference_evidence is not None


def balanced_accuracy(y: np.ndarray, pred: np.ndarray) -> float | None:
    if len(y) == 0:
        return None
    pos, neg = y == 1, y == 0
    rec = [float((pred[m] == c).mean()) for m, c in ((pos, 1), (neg, 0)) if m.any()]
    return float(np.mean(rec))


def group_bootstrap(
    y: np.ndarray, pred: np.ndarray, groups: np.ndarray, seed: int = 13
) -> tuple[float, float, int]:
    """95% interval of balanced accuracy, resampling whole conversation groups."""
    names, gi = np.unique(groups, return_inverse=True)
    k = len(names)
    counts = np.zeros((k, 4))
    np.add.at(counts[:, 0], gi, (y == 1) & (pred == 1))
    np.add.at(counts[:, 1], gi, (y == 1) & (pred == 0))
    np.add.at(counts[:, 2], gi, (y == 0) & (pred == 0))
    np.add.at(counts[:, 3], gi, (y == 0) & (pred == 1))
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, k, size=(N_BOOT, k))
    tot = counts[draws].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ba = 0.5 * (tot[:, 0] / (tot[:, 0] + tot[:, 1]) + tot[:, 2] / (tot[:, 2] + tot[:, 3]))
    lo, hi = np.nanpercentile(ba, [2.5, 97.5])
    return float(lo), float(hi), k


def block(y: np.ndarray, pred: np.ndarray, cats: np.ndarray, m: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {"n": int(m.sum()), "balanced_accuracy": balanced_accuracy(y[m], pred[m])}
    for c in CATEGORIES:
        mc = m & (cats == c)
        out[f"acc_{c}"] = float((pred[mc] == y[mc]).mean()) if mc.any() else None
        out[f"n_{c}"] = int(mc.sum())
    return out


def scored(model: TurnTakingModel, points: Sequence[DecisionPoint]) -> tuple[Outcomes, float]:
    extractor = FeatureExtractor.for_model(model)
    t0 = time.perf_counter()
    x = extractor.features([p.input for p in points])
    out = model.outcomes(x)
    return out, (time.perf_counter() - t0) / max(len(points), 1)


def evaluate_corpus(
    model: TurnTakingModel,
    points: list[DecisionPoint],
    val_points: list[DecisionPoint],
    fir: bool = True,
) -> dict[str, Any]:
    corpus = points[0].input.corpus
    domain = domain_of_corpus(corpus)
    thr = balanced_threshold(model, domain)
    outcomes, per_point = scored(model, points)
    p = outcomes.take_floor
    y = np.asarray([pt.gold.label is Decision.SPEAK for pt in points], dtype=np.int8)
    cats = np.asarray([pt.gold.category.value for pt in points])
    groups = np.asarray([pt.group for pt in points])
    sizes = np.asarray([size_stratum(len(pt.input.present)) for pt in points])
    no_cue = np.asarray([not has_visible_cue(pt) for pt in points])
    pred = (p >= thr).astype(np.int8)
    base = np.asarray([held_floor_before(pt.input) for pt in points], dtype=np.int8)
    every = np.ones(len(points), dtype=bool)
    r: dict[str, Any] = {
        "corpus": corpus,
        "domain": domain,
        "threshold": thr,
        "ms_per_point_batch": per_point * 1e3,
        "model": block(y, pred, cats, every),
        "baseline": block(y, base, cats, every),
        "model_default_threshold": balanced_accuracy(y, (p >= model.threshold).astype(np.int8)),
        "speak_rate": float(y.mean()),
        "no_cue": {"model": block(y, pred, cats, no_cue), "baseline": block(y, base, cats, no_cue)},
        "sizes": {},
    }
    r["model"]["ci"] = group_bootstrap(y, pred, groups)
    r["baseline"]["ci"] = group_bootstrap(y, base, groups)
    for s in sorted(set(sizes.tolist())):
        m = sizes == s
        r["sizes"][s] = {"model": block(y, pred, cats, m), "baseline": block(y, base, cats, m)}
    # Backchannel suggestion quality (three-outcome view).
    yb = np.asarray([pt.gold.floor_outcome is Outcome.BACKCHANNEL for pt in points])
    sb = (outcomes.backchannel >= model.backchannel_threshold) & (pred == 0)
    tp = float((sb & yb).sum())
    r["backchannel"] = {
        "rate": float(yb.mean()),
        "suggested": int(sb.sum()),
        "precision": tp / sb.sum() if sb.any() else None,
        "recall": tp / yb.sum() if yb.any() else None,
        "f1": 2 * tp / (sb.sum() + yb.sum()) if yb.any() else None,
        "floor_taken_at_backchannel_points": float(pred[yb].mean()) if yb.any() else None,
    }
    # I1 recall at a false-interruption rate <= 10%, the threshold chosen on validation.
    if fir and val_points and (cats == "I1").any():
        vo, _ = scored(model, val_points)
        vy = np.asarray([pt.gold.label is Decision.SPEAK for pt in val_points])
        grid = np.round(np.arange(0.01, 1.0, 0.01), 2)
        fir_ok = [t for t in grid if (vo.take_floor[~vy] >= t).mean() <= 0.10]
        t10 = float(min(fir_ok)) if fir_ok else 1.0
        silent = y == 0
        r["i1_at_fir10"] = {
            "threshold_from_validation": t10,
            "test_false_interruption_rate": float((p[silent] >= t10).mean()),
            "i1_recall": float((p[cats == "I1"] >= t10).mean()),
            "n_I1": int((cats == "I1").sum()),
            "baseline_false_interruption_rate": float(base[silent].mean()),
            "baseline_i1_recall": float(base[cats == "I1"].mean()),
        }
    return r


def evaluate_paper(
    model: TurnTakingModel, folder: Path, split: str, unseen: set[str]
) -> dict[str, Any]:
    """A paper-protocol build: its label is the next speaker, so a backchannel answer is SPEAK.

    Scored two ways: P(take floor) at the domain threshold, and P(take floor) + P(backchannel)
    (the paper's notion of speaking next) at the threshold that maximises balanced accuracy on
    the build's own *validation* split. Also on the subset of test points from conversations
    in the default protocol's test split (the model never trained on them: the paper
    protocol's per-sample split puts points of every conversation in its test split).
    """
    bench = load_benchmark(folder)
    points = bench.points(split)
    corpus = points[0].input.corpus
    val = bench.points("validation")
    vo, _ = scored(model, val)
    vy = np.asarray([pt.gold.label is Decision.SPEAK for pt in val], dtype=np.int8)
    vs = vo.take_floor + vo.backchannel
    grid = np.round(np.arange(0.01, 1.0, 0.01), 2)
    t_val = float(max(grid, key=lambda t: balanced_accuracy(vy, (vs >= t).astype(np.int8)) or 0.0))
    outcomes, _ = scored(model, points)
    y = np.asarray([pt.gold.label is Decision.SPEAK for pt in points], dtype=np.int8)
    floor = (outcomes.take_floor >= balanced_threshold(model, domain_of_corpus(corpus))).astype(
        np.int8
    )
    speak = (outcomes.take_floor + outcomes.backchannel >= t_val).astype(np.int8)
    base = np.asarray([held_floor_before(pt.input) for pt in points], dtype=np.int8)
    m = np.asarray([pt.input.conversation_id in unseen for pt in points])
    return {
        "corpus": corpus,
        "n": len(points),
        "model_floor": balanced_accuracy(y, floor),
        "model_speak": balanced_accuracy(y, speak),
        "threshold_speak_from_validation": t_val,
        "baseline": balanced_accuracy(y, base),
        "unseen_n": int(m.sum()),
        "unseen_model_speak": balanced_accuracy(y[m], speak[m]),
        "unseen_baseline": balanced_accuracy(y[m], base[m]),
        "paper_best_7_8b": PAPER_BEST.get(corpus),
    }


def markdown(results: dict[str, Any]) -> str:
    out = [
        f"Split `{results['split']}`, natural class ratios, "
        "domain thresholds chosen on validation.",
        "",
        "| corpus | points | SPEAK % | model BalAcc [95% CI] | baseline BalAcc [95% CI] | "
        "margin | groups |",
        "|---|---:|---:|---|---|---:|---:|",
    ]
    for c, r in results["corpora"].items():
        m, b = r["model"], r["baseline"]
        lo, hi, k = m["ci"]
        blo, bhi, _ = b["ci"]
        warn = " ⚠" if k < 10 else ""
        out.append(
            f"| {c} | {m['n']:,} | {100 * r['speak_rate']:.1f} | "
            f"**{fmt(m['balanced_accuracy'], True)}**"
            f" [{fmt(lo, True)}–{fmt(hi, True)}] | {fmt(b['balanced_accuracy'], True)} "
            f"[{fmt(blo, True)}–{fmt(bhi, True)}] | "
            f"{100 * (m['balanced_accuracy'] - b['balanced_accuracy']):+.1f} | {k}{warn} |"
        )
    out += [
        "",
        "Per-category accuracy (model / baseline), all points and the no-visible-cue subset:",
        "",
        "| corpus | subset | points | BalAcc | " + " | ".join(CATEGORIES) + " |",
        "|---|---|---:|---|" + "---|" * len(CATEGORIES),
    ]
    for c, r in results["corpora"].items():
        for label, mm, bb in (
            ("all", r["model"], r["baseline"]),
            ("no visible cue", r["no_cue"]["model"], r["no_cue"]["baseline"]),
        ):
            cells = [f"{fmt(mm['balanced_accuracy'], True)} / {fmt(bb['balanced_accuracy'], True)}"]
            for cat in CATEGORIES:
                if mm[f"n_{cat}"]:
                    cells.append(
                        f"{fmt(mm['acc_' + cat], True)} / {fmt(bb['acc_' + cat], True)} "
                        f"(n={mm['n_' + cat]:,})"
                    )
                else:
                    cells.append("-")
            out.append(f"| {c} | {label} | {mm['n']:,} | " + " | ".join(cells) + " |")
    for who in ("model", "baseline"):
        n = sum(r[who]["n_S2"] for r in results["corpora"].values())
        hit = sum((r[who]["acc_S2"] or 0.0) * r[who]["n_S2"] for r in results["corpora"].values())
        results.setdefault("s2_pooled", {})[who] = (hit / n if n else None, n)
    (ms2, n2), (bs2, _) = results["s2_pooled"]["model"], results["s2_pooled"]["baseline"]
    out += [
        "",
        f"S2 (referenced, not addressed) pooled over corpora: model {fmt(ms2, True)}, "
        f"baseline {fmt(bs2, True)} ({n2} points).",
    ]
    out += [
        "",
        f"By people present (strata with ≥ {MIN_STRATUM} points):",
        "",
        "| corpus | people | points | model BalAcc | baseline | margin |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for c, r in results["corpora"].items():
        for s, e in r["sizes"].items():
            m, b = e["model"], e["baseline"]
            if m["n"] < MIN_STRATUM or m["balanced_accuracy"] is None:
                continue
            out.append(
                f"| {c} | {s} | {m['n']:,} | {fmt(m['balanced_accuracy'], True)} | "
                f"{fmt(b['balanced_accuracy'], True)} | "
                f"{100 * (m['balanced_accuracy'] - b['balanced_accuracy']):+.1f} |"
            )
    out += [
        "",
        "Backchannel suggestions (model threshold on P(backchannel), only where the floor "
        "decision is SILENT):",
        "",
        "| corpus | BACKCHANNEL % | suggested | precision | recall | F1 | model took the floor "
        "at BACKCHANNEL points |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c, r in results["corpora"].items():
        bk = r["backchannel"]
        out.append(
            f"| {c} | {100 * bk['rate']:.1f} | {bk['suggested']:,} | {fmt(bk['precision'])} | "
            f"{fmt(bk['recall'])} | {fmt(bk['f1'])} | "
            f"{fmt(bk['floor_taken_at_backchannel_points'], True)}% |"
        )
    i1 = {c: r["i1_at_fir10"] for c, r in results["corpora"].items() if "i1_at_fir10" in r}
    if i1:
        out += [
            "",
            "I1 recall at a false-interruption rate ≤ 10% (threshold picked on validation):",
            "",
            "| corpus | threshold | test FIR | I1 recall | I1 points | baseline FIR | "
            "baseline I1 recall |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for c, e in i1.items():
            out.append(
                f"| {c} | {e['threshold_from_validation']:.2f} | "
                f"{fmt(e['test_false_interruption_rate'], True)} | {fmt(e['i1_recall'], True)} | "
                f"{e['n_I1']} | {fmt(e['baseline_false_interruption_rate'], True)} | "
                f"{fmt(e['baseline_i1_recall'], True)} |"
            )
    if results.get("paper"):
        out += [
            "",
            "Paper protocol (50/50 classes, per-sample split; leaky, see benchmark.md):",
            "",
            "| corpus | test points | model P(floor) | model P(floor)+P(backchannel) | baseline "
            "| unseen conversations: points | model | baseline | paper's best fine-tuned 7–8B |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in results["paper"]:
            out.append(
                f"| {r['corpus']} | {r['n']:,} | {fmt(r['model_floor'], True)} | "
                f"{fmt(r['model_speak'], True)} (thr. {r['threshold_speak_from_validation']:.2f})"
                f" | {fmt(r['baseline'], True)} | {r['unseen_n']:,} | "
                f"{fmt(r['unseen_model_speak'], True)} | {fmt(r['unseen_baseline'], True)} | "
                f"{r['paper_best_7_8b'] or '-'} |"
            )
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("benchmarks", nargs="*", type=Path)
    ap.add_argument("--split", default="test")
    ap.add_argument("--model-dir", type=Path, default=None)
    ap.add_argument(
        "--domain", default=None, help="Load the shipped model of this domain (chat has its own)."
    )
    ap.add_argument(
        "--no-fir", action="store_true", help="Skip I1 recall at FIR <= 10%% (scores validation)."
    )
    ap.add_argument("--paper", nargs="*", type=Path, default=[], help="Paper-protocol builds.")
    ap.add_argument("--json", type=Path, default=None, help="Write all figures here.")
    ap.add_argument("--markdown", type=Path, default=None, help="Write the tables here.")
    args = ap.parse_args()

    model = load_model(args.model_dir, domain=args.domain)
    results: dict[str, Any] = {
        "split": args.split,
        "threshold": model.threshold,
        "model": str(args.model_dir or args.domain or "default"),
        "corpora": {},
    }
    #: Conversations of the default protocol's test split (never trained on).
    unseen: set[str] = set()
    for folder in args.benchmarks:
        bench = load_benchmark(folder)
        unseen |= {pt.input.conversation_id for pt in bench.points("test")}
        by_corpus: dict[str, list[DecisionPoint]] = {}
        for pt in bench.points(args.split):
            by_corpus.setdefault(pt.input.corpus, []).append(pt)
        val: dict[str, list[DecisionPoint]] = {}
        if args.split != "validation":
            for pt in bench.points("validation"):
                val.setdefault(pt.input.corpus, []).append(pt)
        for corpus, points in by_corpus.items():
            results["corpora"][corpus] = evaluate_corpus(
                model, points, val.get(corpus, []), fir=not args.no_fir
            )
    results["paper"] = [evaluate_paper(model, f, args.split, unseen) for f in args.paper]
    text = markdown(results)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=float) + "\n", encoding="utf-8")
        print(f"written {args.json}")
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
        print(f"written {args.markdown}")


if __name__ == "__main__":
    main()
