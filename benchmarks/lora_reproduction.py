"""Zero-shot vs LoRA SFT, with and without reasoning, at CPU scale (docs/training.md).

    python benchmarks/lora_reproduction.py --out runs/lora-repro            # the issue's size
    python benchmarks/lora_reproduction.py --out runs/lora-small --train-points 256 \\
        --test-points 200 --max-prompt-tokens 512 --epochs 1                 # what fits a session

Every stage is one of the CLI's own commands, run as a subprocess, and skipped when its output
folder already holds its result, so rerunning the same command after a kill continues where it
stopped (``polylogue train --resume`` continues a killed training run from its last checkpoint;
``polylogue eval`` and ``polylogue distill`` resume by themselves):

1. ``polylogue build --corpus friends|ami`` (default protocol, benchmark v2.1);
2. ``polylogue distill --teacher cues``: the reasoning targets. **Not the paper's teacher** (a
   large LLM, which these machines cannot run): label-conditioned sentences written by rule from
   the shipped default model's cue explanations (``polylogue.training.cue_teacher``);
3. ``polylogue train`` twice on the combined Friends + AMI training splits (the paper's
   combined-corpora row of Table 5), the same ``--train-points`` category-stratified points,
   the four-way balanced sampler: decision mode, then reasoning mode on the cue rationales;
4. ``polylogue eval`` on each corpus's test split, for the previous-speaker rule, the shipped
   default model, zero-shot SmolLM2 (the paper's prompt, decision mode) and the two adapters:
   a class-balanced view (the paper's Table 2 protocol: majority class subsampled within each
   category) and the natural class ratio, each a seeded category-stratified sample of
   ``--test-points`` points (``--sample-seed``). Intervals are the harness's 95% bootstrap over
   conversation groups;
5. ``OUT/results.md`` and ``OUT/results.json``: the tables, and the wall time and peak memory of
   every stage (``OUT/stages.json``).

Logs of every command are in ``OUT/logs/``. Run it under ``nice`` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polylogue.turntaking.types import CATEGORIES as ALL_CATEGORIES

CORPORA = ("friends", "ami")
CATEGORIES = tuple(c.value for c in ALL_CATEGORIES)  # benchmark v2.1: S3 too
#: For orientation only: the paper's Table 2 (zero-shot, decision) and Table 5 (Qwen2.5-7B?
#: see docs/training.md for the exact rows quoted). Not comparable: other model, other data.
PAPER_NOTE = (
    "Paper figures (Table 2 / 5) are quoted in docs/training.md for orientation only: a 7-8B "
    "model, the authors' own data and splits; this run uses SmolLM2-135M on benchmark v2.1."
)


#: Local LM evaluation: 32-point chunks (saved as they finish), batched 8 by prompt length.
HF = ("--batch-size", "32", "-O", "batch_size=8")


@dataclass(frozen=True)
class Model:
    key: str
    label: str
    args: tuple[str, ...]
    #: Only evaluated once the stage that makes it exists.
    needs: str | None = None


def run_child(
    cmd: list[str], log: Path, env: dict[str, str] | None = None, *, append: bool = False
) -> dict[str, Any]:
    """Run ``cmd`` with its output in ``log``: exit status, wall and CPU seconds, peak RSS.

    CPU seconds are the figure to extrapolate from on a shared machine (wall time also counts
    waiting for a core). ``wait4`` gives the child's own peak RSS, or the largest of the
    processes it waited for (an ``accelerate launch`` counts its largest worker).
    """
    started = time.perf_counter()
    with open(log, "a" if append else "w", encoding="utf-8") as f:
        f.write(f"\n$ {shlex.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    return {
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # KiB on Linux
        "exit": os.waitstatus_to_exitcode(status),
    }


def cli() -> list[str]:
    return [sys.executable, "-m", "polylogue.cli"]


class Stages:
    """Runs stage commands, records wall time and peak memory, skips finished stages."""

    def __init__(self, out: Path, dry_run: bool = False) -> None:
        self.out = out
        self.logs = out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.path = out / "stages.json"
        self.dry_run = dry_run
        self.record: dict[str, Any] = (
            json.loads(self.path.read_text()) if self.path.is_file() else {}
        )

    def run(
        self,
        name: str,
        cmd: list[str],
        env: dict[str, str] | None = None,
        ok: tuple[int, ...] = (0,),
    ) -> None:
        line = shlex.join(cmd)
        print(f"[{time.strftime('%H:%M:%S')}] {name}: {line}", flush=True)
        if self.dry_run:
            return
        log = self.logs / f"{name.replace('/', '_')}.log"
        child = run_child(cmd, log, env, append=True)
        # Another runner on the same folder (e.g. evaluations beside a training run) may have
        # recorded stages meanwhile: merge with the file instead of overwriting it.
        if self.path.is_file():
            self.record = {**self.record, **json.loads(self.path.read_text())}
        entry = self.record.setdefault(name, {"sessions": []})
        entry["command"] = line
        rc = child.pop("exit")
        entry["sessions"].append(
            {**child, "exit": rc, "ended": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        )
        self.path.write_text(json.dumps(self.record, indent=2) + "\n")
        print(f"    {name}: exit {rc}, {child['wall_s']:.0f} s, log {log}", flush=True)
        if rc not in ok:
            raise SystemExit(f"stage {name} failed (exit {rc}); see {log}")

    def skipped(self, name: str, why: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {name}: skipped ({why})", flush=True)


def build(stages: Stages, args: argparse.Namespace) -> dict[str, Path]:
    benches = {}
    for corpus in CORPORA:
        folder = args.out / "bench" / corpus
        benches[corpus] = folder
        if (folder / "manifest.json").is_file():
            stages.skipped(f"build/{corpus}", "benchmark exists")
            continue
        cmd = [*cli(), "build", "--corpus", corpus, "--out", str(folder)]
        if args.data_root:
            cmd += ["--data-root", str(args.data_root)]
        stages.run(f"build/{corpus}", cmd)
    return benches


def data_flags(benches: dict[str, Path]) -> list[str]:
    return [x for c in CORPORA for x in ("--data", str(benches[c]))]


def distill(stages: Stages, args: argparse.Namespace, benches: dict[str, Path]) -> Path:
    folder = args.out / "distill" / "cues"
    # Always run: distill skips the points that already have a rationale (the check needs the
    # training subset, which only loading the splits gives).
    cmd = [
        *cli(),
        "distill",
        "--teacher",
        "cues",
        *data_flags(benches),
        "--out",
        str(folder),
        "--max-points",
        str(mode_points(args, "reasoning")),
        "--subset",
        args.train_subset,
        "--max-prompt-tokens",
        str(args.max_prompt_tokens),
        "--chunk-size",
        "256",
    ]
    # Exit 3: some points got no rationale; training leaves them out and counts them.
    stages.run("distill/cues", cmd, ok=(0, 3))
    return folder


def train(
    stages: Stages, args: argparse.Namespace, benches: dict[str, Path], mode: str, rationales: Path
) -> Path:
    run = args.out / "train" / mode
    if (run / "polylogue_adapter.json").is_file():
        stages.skipped(f"train/{mode}", "adapter exists")
        return run
    cmd = [
        *cli(),
        "train",
        *data_flags(benches),
        "--out",
        str(run),
        "--model",
        "smollm2",
        "--mode",
        mode,
        "--max-train-points",
        str(mode_points(args, mode)),
        "--max-prompt-tokens",
        str(args.max_prompt_tokens),
        "--batch-size",
        str(args.batch_size),
        "--grad-accum",
        str(args.grad_accum),
        "--eval-steps",
        str(args.eval_steps),
        "--eval-max-points",
        str(args.val_points),
        "--precision",
        "fp32",
        "--lr",
        str(args.lr),
        "--set",
        f"train_subset={args.train_subset}",
        "--set",
        f"logging_steps={args.logging_steps}",
        "--set",
        "eval_batch_size=8",
        "--set",
        f"warmup_steps={args.warmup_steps}",
        "--set",
        f"eval_max_new_tokens={args.max_new_tokens}",
    ]
    cmd += (
        ["--max-steps", str(args.max_steps)] if args.max_steps else ["--epochs", str(args.epochs)]
    )
    if args.gradient_checkpointing:
        cmd += ["--set", "gradient_checkpointing=true"]
    if mode == "reasoning":
        cmd += ["--reasoning", str(rationales)]
    if any((run / "checkpoints").glob("checkpoint-*")):
        cmd.append("--resume")  # a killed run continues from its last checkpoint
    stages.run(f"train/{mode}", cmd)
    return run


def mode_points(args: argparse.Namespace, mode: str) -> int:
    """Training points of one mode (``--reasoning-points`` defaults to ``--train-points``)."""
    if mode == "reasoning" and args.reasoning_points:
        return int(args.reasoning_points)
    return int(args.train_points)


def models(args: argparse.Namespace) -> list[Model]:
    tokens = str(args.max_prompt_tokens)
    return [
        Model(
            "previous-speaker", "previous-speaker rule", ("--model", "baseline:previous-speaker")
        ),
        Model("default", "shipped default model", ("--model", "default", "--batch-size", "4096")),
        Model(
            "zero-shot",
            "SmolLM2-135M zero-shot (decision)",
            ("--model", "hf:smollm2", "--mode", "decision", "--max-prompt-tokens", tokens, *HF),
        ),
        Model(
            "sft-decision",
            "SmolLM2-135M + LoRA SFT (decision)",
            ("--adapter", str(args.out / "train" / "decision"), *HF),
            needs="decision",
        ),
        Model(
            "sft-reasoning",
            "SmolLM2-135M + LoRA SFT (reasoning, cue rationales)",
            (
                "--adapter",
                str(args.out / "train" / "reasoning"),
                *HF,
                "-O",
                f"max_new_tokens={args.max_new_tokens}",
            ),
            needs="reasoning",
        ),
    ]


def views(args: argparse.Namespace) -> list[tuple[str, int]]:
    out = [("balanced", args.test_points)]
    if args.natural_points:
        out.append(("natural", args.natural_points))
    return out


def eval_folder(args: argparse.Namespace, corpus: str, view: str, model: Model) -> Path:
    return args.out / "eval" / f"{corpus}-{view}" / model.key


def finished_metrics(folder: Path, n: int) -> dict[str, Any] | None:
    for path in sorted(folder.glob("*/metrics.json")):
        metrics = json.loads(path.read_text())
        if metrics.get("n", 0) >= n:
            return dict(metrics)
    return None


def evaluate(
    stages: Stages,
    args: argparse.Namespace,
    benches: dict[str, Path],
    which: list[tuple[str, int]],
) -> None:
    # View-major: the balanced (Table 2) comparison of every model comes first.
    for view, n in which:
        for model in models(args):
            if args.eval_models and model.key not in args.eval_models.split(","):
                continue
            adapter = args.out / "train" / str(model.needs) / "polylogue_adapter.json"
            if model.needs and not adapter.exists():
                stages.skipped(f"eval/{view}/{model.key}", f"no {model.needs} adapter yet")
                continue
            for corpus in CORPORA:
                if args.eval_corpora and corpus not in args.eval_corpora.split(","):
                    continue
                name = f"eval/{corpus}-{view}/{model.key}"
                folder = eval_folder(args, corpus, view, model)
                if finished_metrics(folder, n) is not None:
                    stages.skipped(name, f"{n} points scored")
                    continue
                if (
                    model.key == "sft-reasoning"
                    and view == "natural"
                    and not args.reasoning_natural
                ):
                    stages.skipped(name, "reasoning decoding on the natural view not asked for")
                    continue
                cmd = [
                    *cli(),
                    "eval",
                    "--data",
                    str(benches[corpus]),
                    "--split",
                    "test",
                    *model.args,
                    "--limit",
                    str(n),
                    "--sample-seed",
                    str(args.sample_seed),
                    "--out",
                    str(folder),
                    "--no-progress",
                    "--n-boot",
                    "1000",
                ]
                if view == "balanced":
                    cmd.append("--balanced")
                stages.run(name, cmd)


# ----------------------------------------------------------------------------- report


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _cell(m: dict[str, Any], key: str, ci_key: str | None = None) -> str:
    value = m.get(key) if key in m else m.get("per_category", {}).get(key)
    ci = m.get("ci95", {}).get(ci_key or key)
    if value is None:
        return "–"
    if ci:
        return f"{_pct(value)} [{_pct(ci[0])}, {_pct(ci[1])}]"
    return _pct(value)


def report(args: argparse.Namespace, stages: Stages) -> None:
    results: dict[str, Any] = {"config": {k: str(v) for k, v in vars(args).items()}, "tables": {}}
    lines = [
        "# LoRA reproduction at CPU scale (measured)",
        "",
        f"Command: `{shlex.join([sys.executable, *sys.argv])}`",
        "",
        PAPER_NOTE,
        "",
        "Cells: percent, with the 95% bootstrap interval over conversation groups. Per-category "
        "cells are accuracy on that category. Rows are on the same sampled test points.",
        "",
    ]
    for view, n in views(args):
        for corpus in CORPORA:
            rows = []
            base = None
            for model in models(args):
                m = finished_metrics(eval_folder(args, corpus, view, model), n)
                if m is None:
                    continue
                results["tables"].setdefault(f"{corpus}-{view}", {})[model.key] = {
                    k: m.get(k)
                    for k in ("n", "accuracy", "f1_avg", "balanced_accuracy", "per_category")
                } | {"ci95": m.get("ci95"), "n_groups": m.get("bootstrap", {}).get("n_units")}
                if model.key == "previous-speaker":
                    base = m
                delta = (
                    "–"
                    if base is None or model.key == "previous-speaker"
                    else f"{100 * (m['balanced_accuracy'] - base['balanced_accuracy']):+.1f}"
                )
                cats = " | ".join(_cell(m, c) for c in CATEGORIES)
                rows.append(
                    f"| {model.label} | {m['n']} | {_cell(m, 'accuracy')} | {_cell(m, 'f1_avg')} "
                    f"| {_cell(m, 'balanced_accuracy')} | {delta} | {cats} |"
                )
            if not rows:
                continue
            groups = (base or {}).get("bootstrap", {}).get("n_units")
            lines += [
                f"## {corpus}, test, {view} class ratio ({n} sampled points, {groups} groups)",
                "",
                "| model | n | Acc | F1avg | BalAcc | BalAcc − prev-speaker | "
                + " | ".join(CATEGORIES)
                + " |",
                "|---|---|---|---|---|---|" + "---|" * len(CATEGORIES),
                *rows,
                "",
            ]
    lines += ["## Stages (wall time and peak memory, all sessions)", ""]
    lines += ["| stage | sessions | wall s | CPU s | peak RSS MB |", "|---|---|---|---|---|"]
    for name, entry in stages.record.items():
        sessions = entry["sessions"]
        lines.append(
            f"| {name} | {len(sessions)} | {sum(s['wall_s'] for s in sessions):.0f} | "
            f"{sum(s['cpu_s'] for s in sessions):.0f} | "
            f"{max(s['peak_rss_mb'] for s in sessions):.0f} |"
        )
    for mode in ("decision", "reasoning"):
        summary = args.out / "train" / mode / "training_summary.json"
        if summary.is_file():
            s = json.loads(summary.read_text())
            results[f"train_{mode}"] = {
                k: s.get(k) for k in ("examples", "best_step", "best_metric", "validations")
            } | {"throughput": s.get("throughput")}
            t = s.get("throughput", {})
            lines += [
                "",
                f"train/{mode}: {int(t.get('optimizer_steps', 0))} optimizer steps, "
                f"{t.get('train_seconds')} s, {t.get('tokens_per_second')} input tokens/s, "
                f"best step {s.get('best_step')} (validation F1avg {s.get('best_metric')})",
            ]
    results["stages"] = stages.record
    (args.out / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'results.md'}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="experiment folder (resumable)")
    ap.add_argument("--data-root", type=Path, default=None, help="corpora folder")
    ap.add_argument("--train-points", type=int, default=2000, help="training points (both modes)")
    ap.add_argument(
        "--reasoning-points", type=int, default=None, help="reasoning-mode points (default: same)"
    )
    ap.add_argument(
        "--modes",
        default="decision,reasoning",
        help="training modes this invocation may train (e.g. reasoning, beside a decision run)",
    )
    ap.add_argument("--test-points", type=int, default=1000, help="balanced-view test sample")
    ap.add_argument(
        "--natural-points", type=int, default=1000, help="natural-ratio test sample (0: skip)"
    )
    ap.add_argument("--reasoning-natural", action="store_true", help="also decode reasoning there")
    ap.add_argument(
        "--train-subset",
        default="four_way",
        choices=("four_way", "natural"),
        help="training points: equal I1/I2/S1/S2 shares (default) or natural shares",
    )
    ap.add_argument("--val-points", type=int, default=200, help="decoded validation points")
    ap.add_argument("--max-prompt-tokens", type=int, default=2048, help="prompt budget (paper)")
    ap.add_argument("--epochs", type=float, default=3.0, help="epochs (paper: 3)")
    ap.add_argument("--max-steps", type=int, default=None, help="optimizer steps (overrides)")
    ap.add_argument("--batch-size", type=int, default=4, help="per-device micro-batch")
    ap.add_argument("--grad-accum", type=int, default=8, help="accumulation (4 x 8 = paper's 32)")
    ap.add_argument("--eval-steps", type=int, default=20, help="validate/checkpoint every N")
    ap.add_argument("--warmup-steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-4, help="learning rate (paper: 1e-4)")
    ap.add_argument("--logging-steps", type=int, default=1)
    ap.add_argument("--max-new-tokens", type=int, default=64, help="reasoning decode budget")
    ap.add_argument("--sample-seed", type=int, default=13, help="test sample seed")
    ap.add_argument(
        "--stages",
        default="build,distill,train,eval,report",
        help="comma-separated subset of build,distill,train,eval,report",
    )
    ap.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="recompute activations in the backward pass (less memory, about 45%% more CPU)",
    )
    ap.add_argument(
        "--eval-models",
        default="",
        help="evaluate only these model keys (comma-separated; default: all), e.g. beside "
        "another invocation",
    )
    ap.add_argument(
        "--eval-corpora", default="", help="evaluate on these corpora only (default: all)"
    )
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = ap.parse_args()
    wanted = set(args.stages.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    stages = Stages(args.out, dry_run=args.dry_run)
    benches = (
        build(stages, args) if "build" in wanted else {c: args.out / "bench" / c for c in CORPORA}
    )
    rationales = args.out / "distill" / "cues"
    # Decision mode first, evaluated on the balanced view before the rationales and the
    # reasoning run: a session cut short still ends with a complete zero-shot vs SFT
    # comparison. The natural-ratio view comes last.
    for mode in ("decision", "reasoning", None):
        if mode == "reasoning" and "distill" in wanted and mode in args.modes.split(","):
            rationales = distill(stages, args, benches)
        if "train" in wanted and mode is not None and mode in args.modes.split(","):
            train(stages, args, benches, mode, rationales)
        if "eval" in wanted:
            evaluate(stages, args, benches, views(args)[:1] if mode else views(args))
        if "report" in wanted and not args.dry_run:
            report(args, stages)


if __name__ == "__main__":
    main()
