"""LoRA training, scoring and decoding speed on the CPU: fp32 against bf16, with and without
the shared prompt-prefix cache (docs/training-reproduction.md, "bf16 and the prefix cache on
a CPU").

    nice -n 19 python benchmarks/lora_cpu_speed.py --threads 2 --json lora_cpu_speed.json
    # the equality check of the cache on more points (decision mode, fp32)
    nice -n 19 python benchmarks/lora_cpu_speed.py --sections equality --equality-points 400

Sections (``--sections``, comma-separated):

* ``train``: LoRA training steps of SmolLM2-135M at the long run's set-up (r=32, α=64, all
  attention and MLP projections, micro-batch 4 of ``--tokens``-token sequences, loss on the last
  4 positions, AdamW, activation checkpointing), in fp32, bf16 autocast (fp32 weights) and bf16
  weights (LoRA weights and optimizer fp32): training tokens per second.
* ``score``: decision-mode scoring of real Friends validation points at ``--tokens``-token
  prompts (``HFLocalPredictor``, batches of 8): points per second, fp32 / bf16, with and without
  the prefix cache.
* ``generate``: reasoning-mode decoding of the same points (``--new-tokens`` new tokens): new
  tokens per second, fp32 / bf16, with and without the prefix cache.
* ``converge``: ``polylogue train`` (decision mode, Friends) for ``--steps`` optimizer steps from
  the same seed in fp32 and in bf16: the loss of every step and the decoded validation decisions.
* ``equality``: decisions and P(SPEAK) with and without the prefix cache, on
  ``--equality-points`` validation points.

Every figure is printed with the load average when it was taken (the machine is shared) and
with CPU seconds of this process beside wall seconds: on a loaded machine the CPU figure
(throughput per CPU-second) is the steadier one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from polylogue.llm.hf import resolve_model_path

TESTS = Path(__file__).resolve().parents[1] / "tests"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.1f}/{five:.1f}/{fifteen:.1f}"


class Clock:
    """Wall and process-CPU seconds of a block."""

    def __enter__(self) -> Clock:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0
        self.load = load()


def figure(name: str, amount: float, unit: str, clock: Clock) -> dict[str, Any]:
    row = {
        "name": name,
        "unit": unit,
        "per_wall_s": round(amount / clock.wall, 3),
        "per_cpu_s": round(amount / clock.cpu, 3),
        "wall_s": round(clock.wall, 2),
        "cpu_s": round(clock.cpu, 2),
        "load": clock.load,
    }
    print(
        f"{name}: {row['per_wall_s']} {unit}/s wall, {row['per_cpu_s']} {unit}/CPU-s "
        f"({row['wall_s']} s wall, {row['cpu_s']} s CPU, {clock.load})",
        flush=True,
    )
    return row


# ----------------------------------------------------------------------------- train


def train_steps(path: str, dtype: Any, autocast: bool, args: argparse.Namespace) -> Clock:
    """Time ``args.train_steps`` LoRA optimizer steps (after one warm-up step)."""
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from polylogue.training.lora.config import TrainConfig
    from polylogue.training.lora.sft import lora_config

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    base.enable_input_require_grads()
    model = get_peft_model(base, lora_config(TrainConfig(model="smollm2")))
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(0, 49000, (args.batch, args.tokens))
    labels = torch.full_like(ids, -100)
    labels[:, -4:] = ids[:, -4:]

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # warm-up (allocations, oneDNN kernels)
    with Clock() as clock:
        for _ in range(args.train_steps):
            step()
    return clock


def train_section(args: argparse.Namespace) -> list[dict[str, Any]]:
    path = str(resolve_model_path("smollm2"))
    rows = []
    tokens = args.train_steps * args.batch * args.tokens
    for name, dtype, autocast in (
        ("fp32", torch.float32, False),
        ("bf16 autocast (fp32 weights)", torch.float32, True),
        ("bf16 weights (fp32 LoRA)", torch.bfloat16, False),
    ):
        clock = train_steps(path, dtype, autocast, args)
        rows.append(figure(f"train {name}", tokens, "tokens", clock))
    return rows


# ----------------------------------------------------------------------------- score / generate


def validation_inputs(n: int) -> list[Any]:
    sys.path.insert(0, str(TESTS))
    from benches import friends_benchmark

    from polylogue.turntaking.dataset import load_benchmark

    folder = Path(tempfile.gettempdir()) / "polylogue-lora-speed" / "friends"
    bench = load_benchmark(friends_benchmark(folder, 40))
    return [p.input for p in bench.points("validation")][:n]


def predictor(mode: str, precision: str, cache: bool, args: argparse.Namespace) -> Any:
    from polylogue.models.hf_local import HFLocalPredictor
    from polylogue.prompts.builder import PromptOptions

    return HFLocalPredictor(
        "smollm2",
        prompt=PromptOptions(mode=mode, max_prompt_tokens=args.tokens),  # type: ignore[arg-type]
        batch_size=8,
        max_new_tokens=args.new_tokens,
        precision=precision,
        prefix_cache=cache,
    )


def score_section(args: argparse.Namespace, mode: str) -> list[dict[str, Any]]:
    n = args.score_points if mode == "decision" else args.generate_points
    inputs = validation_inputs(n)
    rows = []
    for precision in ("fp32", "bf16"):
        for cache in (False, True):
            pred = predictor(mode, precision, cache, args)
            pred.predict(inputs[:8])  # warm-up (and the prefix's own cache)
            with Clock() as clock:
                out = pred.predict(inputs)
            label = f"{precision}, prefix cache {'on' if cache else 'off'}"
            if mode == "decision":
                rows.append(figure(f"score {label}", len(inputs), "points", clock))
            else:
                new = sum(len(pred._lm.ids(p.raw_output)) for p in out)
                rows.append(figure(f"generate {label}", new, "new tokens", clock))
                rows[-1]["points_per_wall_s"] = round(len(inputs) / clock.wall, 3)
    return rows


def equality_section(args: argparse.Namespace) -> dict[str, Any]:
    inputs = validation_inputs(args.equality_points)
    results = {}
    for cache in (False, True):
        results[cache] = predictor("decision", "fp32", cache, args).predict(inputs)
    diffs = [
        abs(float(a.p_speak or 0) - float(b.p_speak or 0))
        for a, b in zip(results[False], results[True], strict=True)
    ]
    same = sum(a.decision == b.decision for a, b in zip(results[False], results[True], strict=True))
    row = {"points": len(inputs), "same_decisions": same, "max_abs_p_speak_diff": max(diffs)}
    print(f"equality (decision, fp32, {args.tokens} tokens): {row} ({load()})", flush=True)
    return row


# ----------------------------------------------------------------------------- converge


def converge_section(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(TESTS))
    from benches import friends_benchmark

    from polylogue.training.lora.config import TrainConfig
    from polylogue.training.lora.sft import train

    # Friends only: a few AMI meetings of the published split hold no training points.
    root = Path(tempfile.gettempdir()) / "polylogue-lora-speed"
    data = (str(friends_benchmark(root / "friends", 40)),)
    out: dict[str, Any] = {}
    for precision in args.converge_precisions.split(","):
        with tempfile.TemporaryDirectory() as run, Clock() as clock:
            result = train(
                TrainConfig(
                    model="smollm2",
                    data=data,
                    output_dir=run,
                    max_prompt_tokens=args.tokens,
                    per_device_batch_size=4,
                    gradient_accumulation_steps=args.converge_accum,
                    max_train_points=args.steps * 4 * args.converge_accum,
                    train_subset="four_way",
                    max_steps=args.steps,
                    eval_steps=args.steps,
                    eval_max_points=args.converge_val_points,
                    eval_batch_size=8,
                    warmup_steps=2,
                    logging_steps=1,
                    precision=precision,
                    gradient_checkpointing=True,
                )
            )
            preds = Path(run) / "validation" / f"step-{args.steps:06d}" / "predictions.jsonl"
            decisions = [json.loads(x)["decision"] for x in preds.read_text().splitlines()]
        out[precision] = {
            "losses": [round(x, 4) for x in result.train_losses()],
            "validation": result.validations[-1],
            "decisions": decisions,
            "wall_s": round(clock.wall, 1),
            "cpu_s": round(clock.cpu, 1),
            "load": clock.load,
        }
        print(f"converge {precision}: {out[precision]['losses']} {result.validations[-1]}")
    return compare_converge(out) if {"fp32", "bf16"} <= set(out) else out


def compare_converge(out: dict[str, Any]) -> dict[str, Any]:
    """How close the bf16 run's losses and validation decisions are to the fp32 run's."""
    a, b = out["fp32"], out["bf16"]
    out["max_abs_loss_diff"] = max(
        abs(x - y) for x, y in zip(a["losses"], b["losses"], strict=True)
    )
    out["same_validation_decisions"] = sum(
        x == y for x, y in zip(a["decisions"], b["decisions"], strict=True)
    )
    out["validation_points"] = len(a["decisions"])
    print(
        f"converge: max |loss fp32 - loss bf16| {out['max_abs_loss_diff']:.4f}; validation "
        f"decisions equal {out['same_validation_decisions']} of {out['validation_points']}",
        flush=True,
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sections", default="train,score,generate,converge,equality")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=384, help="prompt tokens (the long run's)")
    ap.add_argument("--batch", type=int, default=4, help="training micro-batch")
    ap.add_argument("--train-steps", type=int, default=3)
    ap.add_argument("--score-points", type=int, default=48)
    ap.add_argument("--generate-points", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10, help="converge: optimizer steps")
    ap.add_argument("--converge-accum", type=int, default=1)
    ap.add_argument(
        "--converge-precisions",
        default="fp32,bf16",
        help="converge: the runs to make (one each in two processes, then --compare-converge)",
    )
    ap.add_argument(
        "--compare-converge",
        nargs=2,
        type=Path,
        default=None,
        metavar="JSON",
        help="compare the converge results of two --json files (fp32 and bf16) and exit",
    )
    ap.add_argument("--converge-val-points", type=int, default=48)
    ap.add_argument("--equality-points", type=int, default=200)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.compare_converge:
        merged: dict[str, Any] = {}
        for path in args.compare_converge:
            merged |= json.loads(path.read_text(encoding="utf-8"))["converge"]
        print(
            json.dumps(
                {k: v for k, v in compare_converge(merged).items() if k not in ("fp32", "bf16")}
            )
        )
        return
    torch.set_num_threads(args.threads)
    sections = args.sections.split(",")
    print(f"torch {torch.__version__}, {args.threads} threads, {load()}", flush=True)
    report: dict[str, Any] = {"threads": args.threads, "tokens": args.tokens}
    if "train" in sections:
        report["train"] = train_section(args)
    if "score" in sections:
        report["score"] = score_section(args, "decision")
    if "generate" in sections:
        report["generate"] = score_section(args, "reasoning")
    if "equality" in sections:
        report["equality"] = equality_section(args)
    if "converge" in sections:
        report["converge"] = converge_section(args)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
