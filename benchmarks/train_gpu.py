"""LoRA fine-tuning on a GPU: tokens/s and validation metrics
(docs/training-reproduction.md; not run yet).

Runs the same code as ``polylogue train`` (paper defaults unless overridden) for a fixed number of
optimizer steps and prints throughput, peak GPU memory and the decoded validation metrics of the
selected checkpoint. Needs a CUDA GPU; without one it exits with status 2 and says so (CPU
training is covered by ``tests/test_training_e2e.py`` with SmolLM2-135M).

No model is downloaded: pass a local Hugging Face folder (or a .gguf file), e.g.::

    polylogue build --corpus friends --out bench/friends
    python benchmarks/train_gpu.py --model /models/Qwen2.5-0.5B-Instruct \\
        --data bench/friends --out runs/gpu-bench --max-steps 60

    # several GPUs (DDP): the same script under accelerate
    accelerate launch --config_file "$(polylogue training-configs ddp)" --num_processes 8 \\
        benchmarks/train_gpu.py --model /models/Llama-3.1-8B-Instruct --data bench/friends \\
        --out runs/gpu-bench-8b --grad-accum 1

A JSON copy of the figures is written to ``OUT/benchmark.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="Local HF folder, .gguf file or smollm2.")
    parser.add_argument("--data", required=True, nargs="+", help="Benchmark folder(s).")
    parser.add_argument("--out", required=True, type=Path, help="Run folder.")
    parser.add_argument("--mode", default="decision", choices=["decision", "reasoning"])
    parser.add_argument("--reasoning", nargs="*", default=[], help="Distillation folder(s).")
    parser.add_argument("--max-steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--grad-accum", type=int, default=2)
    parser.add_argument("--lora-r", type=int, default=32)
    parser.add_argument("--max-prompt-tokens", type=int, default=2048)
    parser.add_argument("--eval-steps", type=int, default=20)
    parser.add_argument("--eval-max-points", type=int, default=256)
    parser.add_argument("--gradient-checkpointing", action="store_true")
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print(
            "train_gpu.py needs a CUDA GPU and none is visible (torch "
            f"{torch.__version__}, cuda={torch.version.cuda}). Nothing was run.",
            file=sys.stderr,
        )
        return 2

    from polylogue.training.lora.config import TrainConfig
    from polylogue.training.lora.sft import train

    config = TrainConfig(
        model=args.model,
        data=tuple(args.data),
        output_dir=str(args.out),
        mode=args.mode,
        reasoning=tuple(args.reasoning),
        lora_r=args.lora_r,
        lora_alpha=2 * args.lora_r,
        per_device_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        max_steps=args.max_steps,
        max_prompt_tokens=args.max_prompt_tokens,
        eval_steps=args.eval_steps,
        eval_max_points=args.eval_max_points,
        eval_batch_size=32,
        gradient_checkpointing=args.gradient_checkpointing,
        keep_checkpoints=False,
    )
    torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    result = train(config)
    wall = time.perf_counter() - started
    best = next((v for v in result.validations if v["step"] == result.best_step), None)
    figures = {
        "device": torch.cuda.get_device_name(0),
        "model": args.model,
        "mode": args.mode,
        "optimizer_steps": result.throughput.get("optimizer_steps"),
        "effective_batch_per_process": config.effective_batch_size,
        "train_tokens_per_second": result.throughput.get("tokens_per_second"),
        "train_seconds": result.throughput.get("train_seconds"),
        "wall_seconds_incl_loading_and_validation": round(wall, 1),
        "validation_seconds": round(sum(v["seconds"] or 0 for v in result.validations), 1),
        "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "best_step": result.best_step,
        "best_validation": best,
        "final_train_loss": result.train_losses()[-1] if result.train_losses() else None,
        "eval_command": result.eval_command,
    }
    (args.out / "benchmark.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    for key, value in figures.items():
        print(f"{key:>42}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
