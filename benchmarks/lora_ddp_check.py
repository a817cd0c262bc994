"""One short LoRA SFT run on one and on two CPU processes, compared
(docs/results/lora-cpu.md, "Distributed training on CPU").

Two processes run through accelerate on gloo.

    python benchmarks/lora_ddp_check.py --data bench/friends --data bench/ami --out runs/ddp \\
        --steps 30 --train-points 240

Run A is ``polylogue train`` with micro-batches of B and gradient accumulation 2. Run B is the
same command under ``accelerate launch --config_file "$(polylogue training-configs ddp)"
--num_processes 2 --mixed_precision no`` with accumulation 1, so both make optimizer steps of
2B examples. On a machine without CUDA the Trainer runs with ``use_cpu``, and accelerate then
sets up a two-process gloo group from the launcher's environment.

Both runs write ``batches/rank-R.jsonl`` (``log_batches``). The script checks that each
optimizer step trained the same multiset of points in both runs, and it prints the two loss
curves and their differences. Logged DDP losses are the mean over the processes. LoRA dropout is
off by default (``--lora-dropout 0``): both runs then compute the same function of the same
batches, and the curves may differ only by floating-point summation order (gradient all-reduce
vs accumulation). With the paper's 0.05 the two runs draw different dropout masks; the
step-to-step spread of run A is printed beside the differences as the noise scale.
Results go to ``OUT/ddp_check.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# The sibling script (this folder is on sys.path when a script here runs).
from lora_reproduction import run_child

from polylogue.runs import portable_path

SHORT_SYSTEM = (
    "You are one participant in a group conversation. At each pause decide whether to speak "
    "now ($speak) or stay silent ($silent).\n"
)


def train_args(args: argparse.Namespace, out: Path, grad_accum: int) -> list[str]:
    return [
        "train",
        *[x for d in args.data for x in ("--data", str(d))],
        "--out",
        str(out),
        "--max-train-points",
        str(args.train_points),
        "--max-prompt-tokens",
        str(args.max_prompt_tokens),
        "--batch-size",
        str(args.batch_size),
        "--grad-accum",
        str(grad_accum),
        "--max-steps",
        str(args.steps),
        "--eval-steps",
        str(args.steps),
        "--eval-max-points",
        "8",
        "--lr",
        "5e-4",
        "--precision",
        "fp32",
        "--set",
        "logging_steps=1",
        "--set",
        "warmup_steps=0",
        "--set",
        "log_batches=true",
        "--set",
        "train_subset=four_way",
        "--set",
        f"lora_dropout={args.lora_dropout}",
        "--set",
        f"system_template={args.out / 'system.txt'}",
    ]


def run(cmd: list[str], log: Path, env: dict[str, str]) -> dict[str, float]:
    cost = run_child(cmd, log, env)
    rc = cost.pop("exit")
    if rc != 0:
        raise SystemExit(f"exit {rc}: {' '.join(cmd)} (log {log})")
    return cost


def step_points(run_dir: Path) -> dict[int, Counter[str]]:
    """Optimizer step -> multiset of point ids trained in it (all micro-batches, all ranks)."""
    out: dict[int, Counter[str]] = {}
    for path in sorted((run_dir / "batches").glob("rank-*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            out.setdefault(int(rec["step"]), Counter()).update(rec["point_ids"])
    return out


def losses(run_dir: Path) -> list[float]:
    summary = json.loads((run_dir / "training_summary.json").read_text())
    return [float(h["loss"]) for h in summary["log_history"] if "loss" in h]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--data", type=Path, action="append", required=True, help="benchmark folder (repeat)"
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--train-points", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=4, help="micro-batch per process")
    ap.add_argument("--max-prompt-tokens", type=int, default=96)
    ap.add_argument(
        "--lora-dropout",
        type=float,
        default=0.0,
        help="0 (default): both runs compute the same function, so the curves must agree to "
        "float precision; the paper's 0.05 draws different masks in the two runs",
    )
    ap.add_argument("--parallel", action="store_true", help="run both trainings at once")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    # A one-line system prompt: the packaged one (about 200 tokens) would fill a CPU-sized
    # prompt budget on its own.
    (args.out / "system.txt").write_text(SHORT_SYSTEM, encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    polylogue = [sys.executable, "-m", "polylogue.cli"]
    ddp_config = subprocess.run(
        [*polylogue, "training-configs", "ddp"], check=True, capture_output=True, text=True
    ).stdout.strip()

    single, ddp = args.out / "single", args.out / "ddp"
    for folder in (single, ddp):
        shutil.rmtree(folder, ignore_errors=True)
    single_cmd = [*polylogue, *train_args(args, single, 2)]
    launcher = [sys.executable, "-m", "accelerate.commands.launch"]
    launch = [
        *launcher,
        "--config_file",
        ddp_config,
        "--num_processes",
        "2",
        "--mixed_precision",
        "no",
        "-m",
        "polylogue.cli",
        *train_args(args, ddp, 1),
    ]
    jobs = {"single": (single_cmd, args.out / "single.log"), "ddp": (launch, args.out / "ddp.log")}
    if args.parallel:  # both runs at once: the same CPU work, less wall time on a shared machine
        with ThreadPoolExecutor(2) as pool:
            futures = {k: pool.submit(run, cmd, log, env) for k, (cmd, log) in jobs.items()}
            cost = {k: f.result() for k, f in futures.items()}
    else:
        cost = {k: run(cmd, log, env) for k, (cmd, log) in jobs.items()}

    a, b = step_points(single), step_points(ddp)
    ranks = sorted(p.name for p in (ddp / "batches").glob("rank-*.jsonl"))
    same = sorted(a) == sorted(b) and all(a[s] == b[s] for s in a)
    la, lb = losses(single), losses(ddp)
    diffs = [round(y - x, 6) for x, y in zip(la, lb, strict=False)]
    spread = statistics.pstdev([y - x for x, y in itertools.pairwise(la)]) if la else 0.0
    result: dict[str, Any] = {
        # Paths as a user types them (relative, or a placeholder), never the machine's.
        "config": {k: str(v) for k, v in vars(args).items()}
        | {
            "data": [portable_path(d, placeholder="BENCH") for d in args.data],
            "out": portable_path(args.out, placeholder="OUT"),
            "accelerate_config": portable_path(ddp_config),
        },
        "ddp_ranks": ranks,
        "steps": sorted(a),
        "same_points_every_step": same,
        "examples_per_step": {str(s): sum(a[s].values()) for s in sorted(a)},
        "loss_single": la,
        "loss_ddp": lb,
        "loss_diff": diffs,
        "max_abs_loss_diff": max((abs(d) for d in diffs), default=None),
        "single_step_to_step_sd": round(spread, 4),
        "cost": cost,
    }
    (args.out / "ddp_check.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"ranks {ranks}; same points in every optimizer step: {same}")
    print("step | loss 1 process | loss 2 processes | diff")
    for i, (x, y) in enumerate(zip(la, lb, strict=False), start=1):
        print(f"{i} | {x:.4f} | {y:.4f} | {y - x:+.4f}")
    print(f"step-to-step sd of the 1-process loss: {spread:.4f}; cost {cost}")


if __name__ == "__main__":
    main()
