"""Bytes autograd keeps per LoRA training step, by sequence length (docs/results/lora_memory.md).

    python benchmarks/lora_memory.py --tokens 64 128 --batch-size 1

One forward pass of SmolLM2-135M-Instruct with the training run's LoRA set-up (r=32, α=64,
dropout 0.05, all attention and MLP projections, fp32) on random token ids, loss on the last 4
positions (a decision answer), with and without activation checkpointing (the Trainer's
``gradient_checkpointing``, non-reentrant). A ``saved_tensors_hooks`` pack hook sums the
storages autograd saves for the backward pass, each storage once; the model's own weights are
left out (they are saved by reference, not copied). Printed per configuration: the saved
bytes, their slope per token, and the size of the fp32 logits over the whole vocabulary.

The figure explains the training process's RSS (docs/results/lora-cpu.md, "Memory of a training
step"): the saved activations grow with micro-batch × prompt tokens, so a 4 × 390-token
micro-batch keeps gigabytes alive until its backward pass. Checkpointing keeps each decoder
layer's input only and recomputes the rest in the backward pass (one more forward).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from typing import Any

import torch
from peft import get_peft_model
from transformers import AutoModelForCausalLM

from polylogue.llm.hf import resolve_model_path
from polylogue.training.lora.config import TrainConfig
from polylogue.training.lora.sft import lora_config


def saved_bytes(model: Any, batch: int, tokens: int, weights: set[int]) -> dict[str, float]:
    """Saved-for-backward bytes (weights excluded) of one forward pass, and its backward cost."""
    ids = torch.randint(0, 49000, (batch, tokens))
    labels = torch.full((batch, tokens), -100)
    labels[:, -4:] = ids[:, -4:]
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in weights:
            seen.setdefault(ptr, t.untyped_storage().nbytes())
        return t

    started = time.process_time()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, labels=labels)
    forward = time.process_time() - started
    logits = out.logits.numel() * out.logits.element_size()
    started = time.process_time()
    out.loss.backward()
    backward = time.process_time() - started
    model.zero_grad(set_to_none=True)
    return {
        "saved_mb": round(sum(seen.values()) / 2**20, 1),
        "logits_mb": round(logits / 2**20, 1),
        "forward_cpu_s": round(forward, 2),
        "backward_cpu_s": round(backward, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tokens", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--batch-size", type=int, default=1)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(
        str(resolve_model_path("smollm2")), dtype=torch.float32
    )
    model = get_peft_model(model, lora_config(TrainConfig()))
    model.train()
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    rows: list[dict[str, Any]] = []
    for checkpointing in (False, True):
        if checkpointing:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
            model.enable_input_require_grads()
        for tokens in args.tokens:
            row = {"checkpointing": checkpointing, "batch": args.batch_size, "tokens": tokens}
            rows.append(row | saved_bytes(model, args.batch_size, tokens, weights))
            print(json.dumps(rows[-1]), flush=True)
    print("| checkpointing | batch × tokens | saved for backward | per token | fp32 logits |")
    print("|---|---|---|---|---|")
    for r in rows:
        per_token = r["saved_mb"] / (r["batch"] * r["tokens"])
        print(
            f"| {'on' if r['checkpointing'] else 'off'} | {r['batch']} × {r['tokens']} | "
            f"{r['saved_mb']:.0f} MB | {per_token:.2f} MB | {r['logits_mb']:.0f} MB |"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak:.0f} MB")


if __name__ == "__main__":
    main()
