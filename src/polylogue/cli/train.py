"""``polylogue train``, ``polylogue distill`` and ``polylogue training-configs``.

Thin wiring of :mod:`polylogue.training.lora`. Settings resolve as: paper defaults < ``--config``
file (YAML/JSON/TOML or a packaged name) < flags < ``--set KEY=VALUE``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from polylogue.jsonio import JsonInputError, loads_json


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)
    app.command("distill")(distill_command)
    app.command("training-configs")(configs_command)


def _parse_sets(items: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--set expects KEY=VALUE, got {item!r}")
        try:
            out[key.strip().replace("-", "_")] = loads_json(value, "--set", key)
        except JsonInputError:  # not JSON (or a number out of range): the string itself
            out[key.strip().replace("-", "_")] = value
    return out


def train_command(
    data: Annotated[
        list[Path] | None,
        typer.Option(
            "--data", "-d", help="Benchmark folder(s); several = combined-corpus training."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Run folder (the adapter).")
    ] = None,
    config: Annotated[
        str | None, typer.Option(help="Config file (YAML/JSON/TOML) or packaged name, e.g. rank16.")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Base model: smollm2, a .gguf or a folder.")
    ] = None,
    mode: Annotated[str | None, typer.Option(help="decision or reasoning.")] = None,
    reasoning: Annotated[
        list[Path] | None, typer.Option(help="Distillation folder(s) (polylogue distill).")
    ] = None,
    lora_r: Annotated[int | None, typer.Option(help="LoRA rank (paper: 32).")] = None,
    lora_alpha: Annotated[int | None, typer.Option(help="LoRA alpha (paper: 64).")] = None,
    epochs: Annotated[float | None, typer.Option(help="Epochs (paper: 3).")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Stop after N optimizer steps.")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Per-device batch (paper: 16).")] = None,
    grad_accum: Annotated[
        int | None, typer.Option(help="Gradient accumulation (paper: 2).")
    ] = None,
    lr: Annotated[float | None, typer.Option(help="Learning rate (paper: 1e-4).")] = None,
    max_prompt_tokens: Annotated[
        int | None, typer.Option(help="Prompt token budget, oldest turns dropped (paper: 2048).")
    ] = None,
    max_train_points: Annotated[
        int | None, typer.Option(help="Category-stratified subset of the training split.")
    ] = None,
    eval_steps: Annotated[int | None, typer.Option(help="Validate/save every N steps.")] = None,
    eval_max_points: Annotated[
        int | None,
        typer.Option(
            help="Decode a stratified validation subset of this size (default 1000; 0: all)."
        ),
    ] = None,
    early_stopping_patience: Annotated[
        int | None, typer.Option(help="Stop after N validations without F1avg gain.")
    ] = None,
    sampler: Annotated[str | None, typer.Option(help="four_way, label or shuffle.")] = None,
    precision: Annotated[str | None, typer.Option(help="auto, bf16, fp16 or fp32.")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Any config option KEY=VALUE (JSON values).")
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue from the newest checkpoint in the run folder.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option(help="Print the resolved configuration and exit.")
    ] = False,
) -> None:
    """Fine-tune a model with LoRA on turn-taking benchmark(s) (the paper's §4.2 recipe).

    Multi-GPU: ``accelerate launch --config_file "$(polylogue training-configs ddp)"
    -m polylogue.cli train ARGS`` (the arguments of this command).
    """
    from polylogue.training.lora.config import resolve_config

    flags: dict[str, Any] = {
        "data": None if not data else [str(d) for d in data],
        "output_dir": None if out is None else str(out),
        "model": model,
        "mode": mode,
        "reasoning": None if not reasoning else [str(r) for r in reasoning],
        "lora_r": lora_r,
        "lora_alpha": lora_alpha,
        "epochs": epochs,
        "max_steps": max_steps,
        "per_device_batch_size": batch_size,
        "gradient_accumulation_steps": grad_accum,
        "learning_rate": lr,
        "max_prompt_tokens": max_prompt_tokens,
        "max_train_points": max_train_points,
        "eval_steps": eval_steps,
        "eval_max_points": eval_max_points,
        "early_stopping_patience": early_stopping_patience,
        "sampler": sampler,
        "precision": precision,
        **_parse_sets(set_),
    }
    cfg = resolve_config(config, flags)
    if dry_run:
        typer.echo(json.dumps(cfg.to_dict(), indent=2))
        return
    if not cfg.data:
        raise typer.BadParameter("give at least one --data benchmark folder", param_hint="--data")

    from polylogue.extras import require_extra

    require_extra(
        "train", "torch", "transformers", "peft", "trl", "datasets", what="polylogue train"
    )
    from polylogue.training.lora.sft import train

    result = train(cfg, resume=resume)
    if int(os.environ.get("RANK", "0")) != 0:  # one summary per distributed run
        return
    typer.echo(f"adapter: {result.run_dir}")
    typer.echo(
        f"best checkpoint: step {result.best_step} "
        f"(validation {cfg.metric_for_best_model} {result.best_metric})"
    )
    typer.echo(f"throughput: {result.throughput.get('tokens_per_second')} tokens/s")
    typer.echo(f"evaluate with: {result.eval_command}")


def distill_command(
    teacher: Annotated[
        str,
        typer.Option(
            help="Teacher: hf:PATH_OR_ALIAS, openai:MODEL@URL, or 'cues' (rule-written "
            "sentences from the default model's cue explanations; not an LLM)."
        ),
    ],
    data: Annotated[list[Path], typer.Option("--data", "-d", help="Benchmark folder(s).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Distillation folder.")],
    split: Annotated[str, typer.Option(help="Split to justify (the paper: train only).")] = "train",
    max_points: Annotated[
        int | None, typer.Option(help="Category-stratified subset of the split.")
    ] = None,
    subset: Annotated[
        str,
        typer.Option(
            help="How --max-points are drawn: natural (category shares) or four_way (equal "
            "I1/I2/S1/S2, as train_subset=four_way)."
        ),
    ] = "natural",
    attempts: Annotated[int, typer.Option(help="Teacher answers per point before failing.")] = 3,
    retry_delay: Annotated[float, typer.Option(help="Seconds of back-off between rounds.")] = 2.0,
    rate: Annotated[
        float | None, typer.Option(help="Average teacher requests per second (rate limit).")
    ] = None,
    chunk_size: Annotated[int, typer.Option(help="Points per teacher call.")] = 8,
    max_prompt_tokens: Annotated[int, typer.Option(help="Prompt token budget.")] = 2048,
    system_template: Annotated[
        Path | None, typer.Option(help="System prompt file replacing the packaged one.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the stratified subset.")] = 42,
    option: Annotated[
        list[str] | None,
        typer.Option(
            "--option", "-O", help="Teacher backend option KEY=VALUE (e.g. max_tokens=96)."
        ),
    ] = None,
) -> None:
    """Write a one-sentence, label-conditioned justification for each training point.

    Resumable: rerunning the same command continues where it stopped and retries failures;
    failed points are reported in failures.jsonl and never used as training targets.
    """
    from polylogue.cli.output import plain_console
    from polylogue.training.lora.distill import DistillConfig, distill_from_benchmarks

    console = plain_console(stderr=True)
    cfg = DistillConfig(
        teacher=teacher,
        data=tuple(str(d) for d in data),
        out_dir=str(out),
        split=split,
        max_points=max_points,
        subset=subset,
        attempts=attempts,
        retry_delay_s=retry_delay,
        requests_per_second=rate,
        chunk_size=chunk_size,
        max_prompt_tokens=max_prompt_tokens,
        system_template=None if system_template is None else str(system_template),
        seed=seed,
        teacher_options=_parse_sets(option),
    )

    def progress(done: int, total: int) -> None:
        console.print(f"distill: {done}/{total} points justified")

    report = distill_from_benchmarks(cfg, on_chunk=progress)
    console.print(
        f"{report.n_done}/{report.n_points} points have reasoning ({report.n_new} new this run); "
        f"{len(report.failures)} failed (see {out / 'failures.jsonl'})",
        markup=False,
    )
    if report.failures:
        raise typer.Exit(3)


def configs_command(
    name: Annotated[str | None, typer.Argument(help="Print the path of this config.")] = None,
) -> None:
    """List the shipped configs (Table 5 ablations, accelerate DDP/FSDP), or print one's path."""
    from polylogue.training.lora.config import packaged_configs

    shipped = packaged_configs()
    if name is not None:
        if name not in shipped:
            raise typer.BadParameter(
                f"no packaged config {name!r}; known: {', '.join(sorted(shipped))}"
            )
        typer.echo(str(shipped[name]))
        return
    for key in sorted(shipped):
        typer.echo(f"{key}\t{shipped[key]}")
