"""End-to-end LoRA fine-tune of SmolLM2-135M-Instruct on CPU on a small real Friends split.

Small on purpose (2 shared cores): 16 training points, a short system prompt, 2 optimizer steps
of 4 points (one per category), a decoded validation of 8 points after each. It checks what
matters, not speed: the loss falls, the checkpoint kept is the one with the best decoded
validation F1avg, and the saved adapter reloads through the evaluation harness and reproduces
that validation result point by point.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_training_support import tiny_friends

from polylogue.evaluation.runner import DatasetInfo, read_predictions, run_evaluation
from polylogue.models.base import load_predictor
from polylogue.training.lora.config import TrainConfig, load_run_config
from polylogue.training.lora.sft import ADAPTER_META, train
from polylogue.turntaking.dataset import load_split_points

SHORT_SYSTEM = (
    "You are one participant in a group conversation. At each pause decide whether to speak "
    "now ($speak) or stay silent ($silent).\n"
)


def tiny_config(bench: Path, system: Path, out: Path, **options: Any) -> TrainConfig:
    """The CPU-scale set-up these tests share: short prompts, rank 4, one process, fp32."""
    shared: dict[str, Any] = dict(
        model="smollm2",
        data=(str(bench),),
        output_dir=str(out),
        max_prompt_tokens=128,
        system_template=str(system),
        per_device_batch_size=4,
        gradient_accumulation_steps=1,
        warmup_steps=0,
        lora_r=4,
        lora_alpha=8,
        precision="fp32",
    )
    return TrainConfig(**(shared | options))


@pytest.mark.slow
def test_lora_finetune_selects_by_decoded_f1_and_reloads(tmp_path: Path) -> None:
    bench = tiny_friends(tmp_path / "friends")
    system = tmp_path / "system.txt"
    system.write_text(SHORT_SYSTEM, encoding="utf-8")
    config = tiny_config(
        bench,
        system,
        tmp_path / "run",
        max_train_points=16,
        max_steps=2,
        learning_rate=2e-3,
        eval_steps=1,
        eval_max_points=8,
        eval_batch_size=8,
        logging_steps=1,
    )
    result = train(config)
    run = result.run_dir

    losses = result.train_losses()
    assert len(losses) == 2
    assert losses[-1] < losses[0]

    # Two decoded validations (steps 1 and 2); the kept checkpoint is the first F1avg maximum.
    steps = [v["step"] for v in result.validations]
    assert steps == [1, 2]
    best = max(result.validations, key=lambda v: v["f1_avg"])
    assert result.best_step == best["step"]
    assert result.best_metric == pytest.approx(best["f1_avg"])

    # The run folder is what `polylogue eval --adapter RUN` loads, with its configuration.
    assert (run / "adapter_config.json").is_file() and (run / "adapter_model.safetensors").is_file()
    assert load_run_config(run) == config
    meta = json.loads((run / ADAPTER_META).read_text())
    assert meta["best_step"] == result.best_step and "--adapter" in meta["eval_command"]
    assert not (run / "checkpoints").exists()  # intermediate checkpoints removed after success
    summary = json.loads((run / "training_summary.json").read_text())
    assert summary["examples"]["n_examples"] == 16
    assert summary["throughput"]["tokens_per_second"] > 0

    # Reload the adapter through the evaluation harness on the same validation points.
    kept = read_predictions(
        run / "validation" / f"step-{result.best_step:06d}" / "predictions.jsonl"
    )
    wanted = [r["point_id"] for r in kept]
    by_id = {p.point_id: p for p in load_split_points(config.data, "validation")}
    points = [by_id[i] for i in wanted]
    predictor = load_predictor(
        "hf:smollm2", adapter=str(run), prompt=config.prompt_options(), batch_size=8
    )
    evaluated = run_evaluation(
        points,
        DatasetInfo(name="friends-tiny", data_hash="test", split="validation"),
        predictor,
        tmp_path / "runs",
        progress=False,
        n_boot=0,
    )
    assert evaluated.metrics is not None
    assert evaluated.metrics["f1_avg"] == pytest.approx(result.best_metric)
    fresh = {r["point_id"]: r for r in read_predictions(evaluated.folder / "predictions.jsonl")}
    for rec in kept:
        assert fresh[rec["point_id"]]["decision"] == rec["decision"]
        assert fresh[rec["point_id"]]["p_speak"] == pytest.approx(rec["p_speak"], abs=1e-4)


@pytest.mark.slow
def test_reasoning_mode_trains_on_distilled_targets_and_decodes_validation(
    tmp_path: Path,
) -> None:
    """Reasoning mode end to end (one optimizer step): targets come from a distillation folder,
    points whose distillation failed are left out, and validation is decoded by generation."""
    from polylogue.training.lora.data import stratified_subset
    from polylogue.training.lora.distill import REASONING_FILE

    bench = tiny_friends(tmp_path / "friends")
    system = tmp_path / "system.txt"
    system.write_text(SHORT_SYSTEM, encoding="utf-8")
    train_points = stratified_subset(load_split_points((str(bench),), "train"), 8, seed=42)
    distilled = tmp_path / "distill"
    distilled.mkdir()
    # Reasoning for all but one point, written in the distillation file format; the content
    # names the real speakers of each point (its quality is not what this test is about).
    with open(distilled / REASONING_FILE, "w", encoding="utf-8") as f:
        for p in train_points[1:]:
            who = p.input.current.speaker
            target = p.input.target.name or p.input.target.id
            expected = "expected" if p.gold.label.value == "SPEAK" else "not expected"
            why = f"{who} just spoke and {target} is {expected} to answer."
            f.write(json.dumps({"point_id": p.point_id, "status": "ok", "reasoning": why}) + "\n")
    config = TrainConfig(
        data=(str(bench),),
        output_dir=str(tmp_path / "run"),
        mode="reasoning",
        reasoning=(str(distilled),),
        max_train_points=8,
        max_prompt_tokens=128,
        system_template=str(system),
        per_device_batch_size=4,
        gradient_accumulation_steps=1,
        max_steps=1,
        warmup_steps=0,
        learning_rate=1e-3,
        lora_r=4,
        lora_alpha=8,
        eval_steps=1,
        eval_max_points=2,
        eval_batch_size=2,
        eval_max_new_tokens=12,
        precision="fp32",
        seed=42,
    )
    result = train(config)
    assert result.example_report["n_examples"] == 7
    assert result.example_report["n_missing_reasoning"] == 1
    assert [v["step"] for v in result.validations] == [1]
    assert 0.0 <= result.validations[0]["unparseable_rate"] <= 1.0
    preds = read_predictions(result.run_dir / "validation" / "step-000001" / "predictions.jsonl")
    assert len(preds) == 2 and all(r["raw_output"] for r in preds)  # generated, not scored
    meta = json.loads((result.run_dir / ADAPTER_META).read_text())
    assert meta["mode"] == "reasoning" and "--mode reasoning" in meta["eval_command"]
    assert (result.run_dir / "adapter_model.safetensors").is_file()


@pytest.mark.slow
def test_gradient_checkpointing_reaches_the_trainer_and_trains_the_same_step(
    tmp_path: Path,
) -> None:
    """``gradient_checkpointing: true`` (the remedy for the training RSS; its memory is measured
    by benchmarks/lora_memory.py, not here) reaches the Trainer's arguments, and it changes
    memory, not the result: one optimizer step with and without it ends in the same adapter
    (dropout off, same seed)."""
    import torch
    from safetensors.torch import load_file

    bench = tiny_friends(tmp_path / "friends")
    system = tmp_path / "system.txt"
    system.write_text(SHORT_SYSTEM, encoding="utf-8")
    adapters = {}
    for checkpointing in (False, True):
        config = tiny_config(
            bench,
            system,
            tmp_path / f"run-{checkpointing}",
            max_train_points=4,
            max_steps=1,
            learning_rate=1e-3,
            lora_dropout=0.0,
            optimizer="sgd",  # the update is the gradient itself (Adam's first step is its sign)
            eval_steps=1,
            eval_max_points=1,
            eval_batch_size=1,
            precision="fp32",
            gradient_checkpointing=checkpointing,
            seed=42,
        )
        result = train(config)
        saved = json.loads((result.run_dir / "training_config.json").read_text())
        assert saved["gradient_checkpointing"] is checkpointing
        # What the Trainer ran with (transformers 5 names it activation_checkpointing).
        args = torch.load(result.run_dir / "training_args.bin", weights_only=False)
        ran = getattr(args, "activation_checkpointing", None)
        assert (args.gradient_checkpointing if ran is None else ran) is checkpointing
        adapters[checkpointing] = load_file(str(result.run_dir / "adapter_model.safetensors"))
    plain, checkpointed = adapters[False], adapters[True]
    assert plain.keys() == checkpointed.keys() and plain
    lora_b = [name for name in plain if "lora_B" in name]
    assert lora_b
    for name, tensor in plain.items():
        assert checkpointed[name].shape == tensor.shape
        assert (checkpointed[name] - tensor).abs().max().item() < 1e-7, name
    # lora_B starts at zero, so a nonzero one shows that the step trained the adapter.
    assert all(plain[name].abs().max().item() > 0 for name in lora_b)
