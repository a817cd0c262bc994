"""LoRA fine-tuning on TRL's ``SFTTrainer`` with PEFT and accelerate (the paper's §4.2).

What differs from the reference implementation (notes D.6, D.10.7-9):

* Examples come from :mod:`polylogue.training.lora.data`: the evaluation prompt builder and the
  model's chat template, loss on the answer tokens only.
* Batches come from :class:`~polylogue.training.lora.sampler.BalancedBatchSampler` (25% I1/I2/S1/S2)
  whenever ``sampler="four_way"``; it cannot be disabled by another option.
* Checkpoints are selected by validation F1avg of *decoded* decisions: at every evaluation the
  live model answers the validation points through the evaluation backend
  (:class:`~polylogue.models.hf_local.HFLocalPredictor`'s own decision code: P(SPEAK) from the
  first answer token in decision mode, greedy generation + parsing in reasoning mode) and
  :func:`~polylogue.evaluation.metrics.compute_metrics` scores them. Teacher-forced token
  accuracy at a guessed position is not used.
* Reasoning mode trains only on points whose distilled reasoning succeeded; validation is
  decoded, so no placeholder targets are needed there.

Run folder layout (``output_dir``)::

    adapter_config.json, adapter_model.safetensors   the selected (best) LoRA adapter
    polylogue_adapter.json      base model, prompt options, selection metric, eval command
    training_config.json        the resolved configuration
    training_summary.json       example report, log history, validations, throughput
    examples_preview.txt        decoded examples showing the prompt/answer boundary
    validation/step-000020/     predictions.jsonl + metrics.json of each decoded validation
    checkpoints/                Trainer checkpoints (removed after success unless kept)

``polylogue eval --model hf:<model> --adapter <output_dir>`` evaluates the adapter with the same
prompt options (``polylogue_adapter.json`` lists the exact command).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polylogue.errors import PolylogueInputError
from polylogue.evaluation.metrics import compute_metrics
from polylogue.llm.hf import resolve_model_path
from polylogue.models.hf_local import HFLocalPredictor
from polylogue.prompts.builder import PromptOptions
from polylogue.training.lora.config import TrainConfig
from polylogue.training.lora.data import (
    ExampleReport,
    SFTExample,
    build_examples,
    category_counts,
    check_example,
    load_subset,
    to_hf_dataset,
)
from polylogue.turntaking.types import DecisionPoint

ADAPTER_META = "polylogue_adapter.json"
SUMMARY_FILE = "training_summary.json"
#: Decoded-validation metrics logged at every evaluation (prefixed ``eval_``).
LOGGED_METRICS = (
    "f1_avg",
    "balanced_accuracy",
    "accuracy",
    "unparseable_rate",
    "false_interruption_rate",
    "missed_turn_rate",
)


class TrainingDataError(PolylogueInputError):
    """The benchmark folders cannot provide the requested training data."""


@dataclass
class SFTResult:
    run_dir: Path
    best_step: int | None
    best_metric: float | None
    validations: list[dict[str, Any]]
    log_history: list[dict[str, Any]]
    example_report: dict[str, Any]
    eval_command: str
    throughput: dict[str, float] = field(default_factory=dict)

    def train_losses(self) -> list[float]:
        return [float(h["loss"]) for h in self.log_history if "loss" in h]


# ----------------------------------------------------------------------------- data


def _preview(examples: Sequence[SFTExample], n: int = 4) -> str:
    parts = []
    for ex in examples[:n]:
        parts.append(
            f"===== {ex.point_id} ({ex.category}, {ex.label}): {ex.n_prompt_tokens} prompt tokens "
            f"(no loss), {ex.n_answer_tokens} answer tokens (loss)\n"
            f"{ex.prompt_text}<<<LOSS STARTS>>>{ex.completion_text}<<<LOSS ENDS>>>\n"
        )
    return "\n".join(parts)


# ----------------------------------------------------------------------------- validation


class DecodedValidation:
    """Decode validation decisions with the live model and score them (one call per eval)."""

    def __init__(
        self,
        points: Sequence[DecisionPoint],
        prompt: PromptOptions,
        tokenizer: Any,
        model_id: str,
        out_dir: Path,
        *,
        batch_size: int,
        max_new_tokens: int,
        write_files: bool,
    ) -> None:
        self.points = list(points)
        self.prompt = prompt
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.out_dir = out_dir
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.write_files = write_files
        self.history: list[dict[str, Any]] = []
        #: The training precision: an fp32 model trained under bf16 autocast validates in it.
        self.precision = "fp32"

    def __call__(self, model: Any, step: int) -> dict[str, float]:
        was_training = model.training
        model.eval()
        try:
            device = str(next(model.parameters()).device)
            # The evaluation backend's own decision code, on the model still in training.
            predictor = HFLocalPredictor(
                model_id=self.model_id,
                prompt=self.prompt,
                batch_size=self.batch_size,
                max_new_tokens=self.max_new_tokens,
                device=device,
                precision=self.precision,
                loaded=(model, self.tokenizer),
            )
            started = time.perf_counter()
            preds = predictor.predict([p.input for p in self.points])
            seconds = time.perf_counter() - started
        finally:
            if was_training:
                model.train()
        by_id = {p.point_id: p for p in preds}
        ordered = [by_id[p.point_id] for p in self.points]
        probs = [p.p_speak for p in ordered]
        metrics = compute_metrics(
            [p.gold.label.value for p in self.points],
            [None if p.decision is None else p.decision.value for p in ordered],
            [p.gold.category.value for p in self.points],
            [p.group for p in self.points],
            probs if all(x is not None for x in probs) else None,
            n_boot=0,
        )
        flat = {k: float(metrics[k]) for k in LOGGED_METRICS if metrics.get(k) is not None}
        self.history.append({"step": step, "seconds": round(seconds, 3), **flat})
        if self.write_files:
            self._write(step, ordered, metrics)
        return flat

    def _write(self, step: int, preds: Sequence[Any], metrics: Mapping[str, Any]) -> None:
        folder = self.out_dir / f"step-{step:06d}"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "predictions.jsonl", "w", encoding="utf-8") as f:
            for pred, point in zip(preds, self.points, strict=True):
                rec = pred.to_dict()
                rec.update(
                    {
                        "gold": point.gold.label.value,
                        "category": point.gold.category.value,
                        "group": point.group,
                        "corpus": point.input.corpus,
                    }
                )
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        (folder / "metrics.json").write_text(
            json.dumps({"step": step, **metrics}, indent=2, default=str) + "\n", encoding="utf-8"
        )


# ----------------------------------------------------------------------------- trainer


def _trainer_class() -> type:
    """An ``SFTTrainer`` subclass (built lazily: trl is heavy and optional)."""
    import torch
    from torch.utils.data import DataLoader
    from trl import SFTTrainer

    from polylogue.training.lora.sampler import BalancedBatchSampler, sampler_groups

    class TurnTakingTrainer(SFTTrainer):
        def __init__(
            self,
            *args: Any,
            sampler_kind: str,
            epoch_size: str,
            max_repeats: int | None,
            validation: DecodedValidation,
            loss_on_eval: bool,
            **kwargs: Any,
        ) -> None:
            super().__init__(*args, **kwargs)
            self._sampler_kind = sampler_kind
            self._epoch_size = epoch_size
            self._max_repeats = max_repeats
            self._validation = validation
            self._loss_on_eval = loss_on_eval
            self._batch_log: BatchLog | None = None
            self.balanced_sampler: BalancedBatchSampler | None = None

        def training_step(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            loss = super().training_step(model, inputs, *args, **kwargs)
            if self._batch_log is not None:
                self._batch_log.write(self.state.global_step + 1, inputs, float(loss))
            return loss

        def get_train_dataloader(self) -> Any:
            if self._sampler_kind == "shuffle":
                return super().get_train_dataloader()
            data: Any = self.train_dataset  # a datasets.Dataset built by to_hf_dataset
            groups, names = sampler_groups(self._sampler_kind, data["category"])
            # One global sequence of balanced batches; accelerate hands whole batches to
            # processes round-robin (BatchSamplerShard), so every rank's batch stays balanced.
            sampler = self.balanced_sampler = BalancedBatchSampler(
                groups,
                self.args.per_device_train_batch_size,
                group_names=names,
                seed=self.args.seed,
                epoch_size=self._epoch_size,  # type: ignore[arg-type]
                max_repeats=self._max_repeats,
            )
            loader = DataLoader(
                data.select_columns(["input_ids", "labels"]),
                batch_sampler=sampler,
                collate_fn=self.data_collator,
                num_workers=self.args.dataloader_num_workers,
                pin_memory=self.args.dataloader_pin_memory and torch.cuda.is_available(),
            )
            return self.accelerator.prepare(loader)

        def evaluate(
            self,
            eval_dataset: Any = None,
            ignore_keys: list[str] | None = None,
            metric_key_prefix: str = "eval",
        ) -> dict[str, float]:
            start = time.time()
            metrics: dict[str, float] = {}
            if self._loss_on_eval:
                loader = self.get_eval_dataloader(eval_dataset)
                out = self.evaluation_loop(
                    loader,
                    description="Validation loss",
                    prediction_loss_only=True,
                    ignore_keys=ignore_keys,
                    metric_key_prefix=metric_key_prefix,
                )
                metrics.update(out.metrics or {})
            decoded = self._validation(self.model, self.state.global_step)
            metrics.update({f"{metric_key_prefix}_{k}": v for k, v in decoded.items()})
            metrics[f"{metric_key_prefix}_runtime"] = round(time.time() - start, 3)
            self.log(metrics)
            self.control = self.callback_handler.on_evaluate(
                self.args, self.state, self.control, metrics
            )
            return metrics

    return TurnTakingTrainer


def _sampler_epoch_callback(trainer: Any) -> Any:
    from transformers import TrainerCallback

    class SamplerEpoch(TrainerCallback):
        """Give the balanced sampler the trainer's epoch at the start of every epoch.

        The Trainer's own ``set_epoch`` calls reach the sampler through accelerate's wrappers,
        which differ between one process, several (``BatchSamplerShard``) and a resumed epoch
        (``SkipBatchSampler``); a resumed epoch that missed the call would replay epoch 0's
        batches. ``state.epoch`` is the (fractional) epoch reached, so its integer part is the
        epoch being started or resumed.
        """

        def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            sampler = trainer.balanced_sampler
            if sampler is not None:
                sampler.set_epoch(int(state.epoch + 1e-9))
            return control

    return SamplerEpoch()


class BatchLog:
    """``batches/rank-R.jsonl``: the point ids of every micro-batch a process trains on.

    Rows are matched back to points by their unpadded token sequence (the collator keeps only
    ``input_ids`` and ``labels``). Used to show that distributed and resumed runs cover the same
    data as a single uninterrupted one.
    """

    def __init__(self, path: Path, examples: Sequence[SFTExample], rank: int) -> None:
        self.path = path
        self.rank = rank
        self._ids: dict[tuple[int, ...], str] = {tuple(e.input_ids): e.point_id for e in examples}
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, step: int, inputs: Mapping[str, Any], loss: float) -> None:
        ids = inputs["input_ids"].tolist()
        mask = inputs.get("attention_mask")
        rows = mask.tolist() if mask is not None else None
        points = []
        for i, row in enumerate(ids):
            tokens = [t for t, m in zip(row, rows[i], strict=True) if m] if rows else row
            points.append(self._ids.get(tuple(tokens), self._strip_pad(tokens)))
        record = {"step": step, "rank": self.rank, "point_ids": points, "loss": loss}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def _strip_pad(self, tokens: Sequence[int]) -> str:
        # Without an attention mask, trailing pad tokens are cut until the sequence is known.
        for end in range(len(tokens), 0, -1):
            if tuple(tokens[:end]) in self._ids:
                return self._ids[tuple(tokens[:end])]
        return "?"


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest *complete* Trainer checkpoint in ``run_dir/checkpoints`` (or None).

    The Trainer writes ``trainer_state.json`` last; a process killed while saving leaves a
    checkpoint folder without it, which ``--resume`` must skip rather than load.
    """
    found = []
    for folder in (run_dir / "checkpoints").glob("checkpoint-*"):
        step = _step_of(str(folder))
        if step is not None and (folder / "trainer_state.json").is_file():
            found.append((step, folder))
    return max(found)[1] if found else None


def _final_step_callback() -> Any:
    from transformers import TrainerCallback

    class EvaluateAtEnd(TrainerCallback):
        """Make the last step a checkpoint candidate even off the eval_steps grid."""

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if state.global_step >= state.max_steps:
                control.should_evaluate = True
                control.should_save = True
            return control

    return EvaluateAtEnd()


def _checkpointing_option(args_class: type, enabled: bool) -> dict[str, bool]:
    """transformers 5.x renamed gradient_checkpointing to activation_checkpointing."""
    fields = getattr(args_class, "__dataclass_fields__", {})
    name = (
        "activation_checkpointing"
        if "activation_checkpointing" in fields
        else "gradient_checkpointing"
    )
    return {name: enabled}


def _precision(config: TrainConfig) -> tuple[bool, bool, Any]:
    """(Trainer bf16 flag, Trainer fp16 flag, torch dtype for loading the base model).

    ``auto`` is bf16 on a GPU that supports it and fp32 on a CPU. On a GPU, bf16 loads bf16
    weights and trains under mixed precision. On a CPU with bf16
    matrix units (:func:`~polylogue.llm.hf.resolve_precision`), ``cpu_bf16="weights"`` stores
    the frozen base weights in bf16 and keeps the LoRA weights (PEFT casts adapters to fp32)
    and the optimizer in fp32, with no autocast; ``autocast`` keeps fp32 weights and runs the
    arithmetic in bf16. A CPU without bf16 units trains in fp32 (said on stderr).
    """
    import torch

    from polylogue.llm.hf import resolve_precision

    cuda = torch.cuda.is_available()
    # On a CPU, auto trains in fp32: bf16 training measured 1.1x fp32 per CPU-second there and
    # its loss ran about a step behind fp32's (docs/results/lora-cpu.md); bf16 is there on request.
    choice = "fp32" if config.precision == "auto" and not cuda else config.precision
    resolved = resolve_precision(choice, "cuda" if cuda else "cpu")
    if resolved.note and int(os.environ.get("RANK", "0")) == 0:
        print(resolved.note, file=sys.stderr, flush=True)
    if resolved.name == "bf16":
        if not cuda and config.cpu_bf16 == "weights":
            return False, False, torch.bfloat16
        return True, False, torch.bfloat16 if cuda else torch.float32
    if resolved.name == "fp16":
        return False, True, torch.float32  # fp16 AMP keeps fp32 master weights
    return False, False, torch.float32


def lora_config(config: TrainConfig) -> Any:
    """The PEFT ``LoraConfig`` of a training configuration (rank, alpha, dropout, modules)."""
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )


def suggested_eval_command(config: TrainConfig, run_dir: Path, data: str = "BENCHMARK") -> str:
    p = config.prompt_options()
    parts = [
        "polylogue eval",
        f"--data {data}",
        f"--model hf:{config.model}",
        f"--adapter {run_dir}",
        f"--mode {p.mode}",
        f"--max-prompt-tokens {p.max_prompt_tokens}",
    ]
    if p.system_repeats != 1:
        parts.append(f"--system-repeats {p.system_repeats}")
    if p.system_template:
        parts.append(f"--system-template {p.system_template}")
    if p.user_template:
        parts.append(f"--user-template {p.user_template}")
    return " ".join(parts)


def train(config: TrainConfig, *, resume: bool = False) -> SFTResult:
    """Fine-tune ``config.model`` with LoRA on the configured benchmark(s); returns the result.

    Runs unchanged on one CPU, one GPU, or many GPUs under ``accelerate launch`` (DDP/FSDP).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, EarlyStoppingCallback
    from trl import SFTConfig

    if not config.data:
        raise TrainingDataError("no benchmark folder given (data=...)")
    run_dir = Path(config.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    prompt = config.prompt_options()
    model_path = resolve_model_path(config.model)
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    data = _training_data(config, tokenizer, prompt)
    train_points, val_points, train_examples = data.train_points, data.val_points, data.examples
    report, eval_dataset, loss_on_eval = data.report, data.eval_dataset, data.loss_on_eval

    if int(os.environ.get("RANK", "0")) == 0:  # accelerate sets RANK on every process
        for line in _data_notes(config, train_examples, report):
            print(line, file=sys.stderr, flush=True)
        config.save(run_dir)
        (run_dir / "examples_preview.txt").write_text(_preview(train_examples), "utf-8")

    bf16, fp16, dtype = _precision(config)
    model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=dtype)
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    lora = lora_config(config)
    trainer_options = _trainer_options(config, run_dir, bf16, fp16, torch.cuda.is_available())
    trainer_options.update(_checkpointing_option(SFTConfig, config.gradient_checkpointing))
    args = SFTConfig(**trainer_options)
    validation_tok = AutoTokenizer.from_pretrained(str(model_path))  # its own padding side
    validation = DecodedValidation(
        val_points,
        prompt,
        validation_tok,
        config.model,
        run_dir / "validation",
        batch_size=config.eval_batch_size,
        max_new_tokens=config.eval_max_new_tokens,
        write_files=False,  # set below: only the main process writes files
    )
    callbacks: list[Any] = [_final_step_callback()]
    if config.early_stopping_patience is not None:
        callbacks.append(
            EarlyStoppingCallback(early_stopping_patience=config.early_stopping_patience)
        )
    trainer_cls = _trainer_class()
    trainer = trainer_cls(
        model=model,
        args=args,
        train_dataset=to_hf_dataset(train_examples),
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        peft_config=lora,
        callbacks=callbacks,
        sampler_kind=config.sampler,
        epoch_size=config.epoch_size,
        max_repeats=config.sampler_max_repeats or None,
        validation=validation,
        loss_on_eval=loss_on_eval,
    )
    validation.write_files = bool(trainer.is_world_process_zero())
    validation.precision = "bf16" if bf16 or dtype == torch.bfloat16 else "fp32"
    trainer.add_callback(_sampler_epoch_callback(trainer))
    if config.log_batches:
        rank = int(trainer.args.process_index)
        trainer._batch_log = BatchLog(
            run_dir / "batches" / f"rank-{rank}.jsonl", train_examples, rank
        )
    started = time.perf_counter()
    resume_from = latest_checkpoint(run_dir) if resume else None
    if resume_from is not None and trainer.is_world_process_zero():
        print(f"resuming from {resume_from}", file=sys.stderr, flush=True)
    output = trainer.train(resume_from_checkpoint=None if resume_from is None else str(resume_from))
    seconds = time.perf_counter() - started

    state = trainer.state
    best_step = _step_of(state.best_model_checkpoint)
    tokens = float(getattr(state, "num_input_tokens_seen", 0) or 0)
    throughput = {
        "train_seconds": round(seconds, 3),
        "optimizer_steps": float(state.global_step),
        "input_tokens_seen": tokens,
        "tokens_per_second": round(tokens / seconds, 2) if seconds > 0 else 0.0,
        "train_loss": float(output.training_loss),
    }
    result = SFTResult(
        run_dir=run_dir,
        best_step=best_step,
        best_metric=None if state.best_metric is None else float(state.best_metric),
        validations=_validations(state.log_history, validation.history),
        log_history=list(state.log_history),
        example_report=report.to_dict(),
        eval_command=suggested_eval_command(config, run_dir, config.data[0]),
        throughput=throughput,
    )
    # load_best_model_at_end has restored the best adapter: save it at the run root. Every
    # process calls save_model (FSDP gathers the shards); only the main process writes.
    trainer.save_model(str(run_dir))
    if trainer.is_world_process_zero():
        _write_run_files(config, result, report, train_points, val_points)
        if not config.keep_checkpoints:
            shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    return result


@dataclass
class _TrainingData:
    train_points: list[DecisionPoint]
    val_points: list[DecisionPoint]
    examples: list[SFTExample]
    report: ExampleReport
    eval_dataset: Any
    #: Decision mode scores validation loss; reasoning mode decodes validation instead.
    loss_on_eval: bool


def _data_notes(
    config: TrainConfig, examples: Sequence[SFTExample], report: ExampleReport
) -> list[str]:
    """What the log should say before training: dropped history, how often examples repeat."""
    from polylogue.training.lora.data import history_warning
    from polylogue.training.lora.sampler import BalancedBatchSampler, sampler_groups

    notes = []
    warning = history_warning(report, config.max_prompt_tokens)
    if warning:
        notes.append(warning)
    if config.sampler != "shuffle":
        groups, names = sampler_groups(config.sampler, [e.category for e in examples])
        sampler = BalancedBatchSampler(
            groups,
            config.per_device_batch_size,
            group_names=names,
            seed=config.seed,
            epoch_size=config.epoch_size,
            max_repeats=config.sampler_max_repeats or None,
        )
        notes.append(sampler.describe())
    return notes


def _training_data(config: TrainConfig, tokenizer: Any, prompt: PromptOptions) -> _TrainingData:
    """The (subsampled) splits, checked training examples and the validation dataset."""
    from polylogue.training.lora.distill import load_reasoning

    # Only the chosen points are built (a whole split's contexts cost gigabytes).
    train_points = load_subset(
        config.data, config.train_split, config.max_train_points, config.seed, config.train_subset
    )
    val_points = load_subset(
        config.data, config.validation_split, config.eval_max_points or None, config.seed
    )
    if not train_points or not val_points:
        raise TrainingDataError("the training or validation split is empty")
    reasoning = load_reasoning(config.reasoning) if config.mode == "reasoning" else None
    train_examples, report = build_examples(
        train_points, tokenizer, prompt, reasoning, config.max_seq_length
    )
    if not train_examples:
        raise TrainingDataError(
            f"no training examples left ({json.dumps(report.to_dict())}); in reasoning mode run "
            "`polylogue distill` on the training split first"
        )
    for ex in train_examples[:256]:  # the mask is verified, not assumed
        check_example(ex, tokenizer)
    loss_on_eval = config.mode == "decision"
    if loss_on_eval:
        val_examples, _ = build_examples(val_points, tokenizer, prompt, None, None)
        eval_dataset = to_hf_dataset(val_examples)
    else:  # reasoning targets exist for train only; validation is decoded, not teacher-forced
        from datasets import Dataset

        eval_dataset = Dataset.from_dict({"point_id": [p.point_id for p in val_points]})

    return _TrainingData(
        train_points, val_points, train_examples, report, eval_dataset, loss_on_eval
    )


def _trainer_options(
    config: TrainConfig, run_dir: Path, bf16: bool, fp16: bool, cuda: bool
) -> dict[str, Any]:
    """``SFTConfig`` arguments from the training config (checkpointing added by the caller)."""
    return dict(
        output_dir=str(run_dir / "checkpoints"),
        per_device_train_batch_size=config.per_device_batch_size,
        per_device_eval_batch_size=config.eval_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler,
        warmup_steps=config.warmup_steps,
        weight_decay=config.weight_decay,
        optim=config.optimizer,
        num_train_epochs=config.epochs,
        max_steps=config.max_steps if config.max_steps is not None else -1,
        bf16=bf16,
        fp16=fp16,
        use_cpu=not cuda,
        logging_steps=config.logging_steps,
        eval_strategy="steps",
        eval_steps=config.eval_steps,
        save_strategy="steps",
        save_steps=config.eval_steps,
        save_total_limit=config.save_total_limit,
        load_best_model_at_end=True,
        metric_for_best_model=f"eval_{config.metric_for_best_model}",
        greater_is_better=True,
        seed=config.seed,
        data_seed=config.seed,
        dataloader_num_workers=config.dataloader_workers,
        report_to=[],
        remove_unused_columns=False,
        dataset_kwargs={"skip_prepare_dataset": True},
        max_length=None,
        include_num_input_tokens_seen="non_padding",
        disable_tqdm=not os.isatty(2),
    )


def _validations(
    log_history: Sequence[Mapping[str, Any]], session: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Decoded validations of the whole run (a resumed run's log history holds earlier ones)."""
    seconds = {v["step"]: v["seconds"] for v in session}
    out = []
    for h in log_history:
        if f"eval_{LOGGED_METRICS[0]}" in h:
            step = int(h["step"])
            metrics = {m: float(h[f"eval_{m}"]) for m in LOGGED_METRICS if f"eval_{m}" in h}
            out.append({"step": step, "seconds": seconds.get(step), **metrics})
    return out


def _step_of(checkpoint: str | None) -> int | None:
    if not checkpoint:
        return None
    name = Path(checkpoint).name
    return int(name.rsplit("-", 1)[1]) if name.startswith("checkpoint-") else None


def _write_run_files(
    config: TrainConfig,
    result: SFTResult,
    report: ExampleReport,
    train_points: Sequence[DecisionPoint],
    val_points: Sequence[DecisionPoint],
) -> None:
    meta = {
        "kind": "polylogue.training.adapter",
        "base_model": config.model,
        "model_spec": f"hf:{config.model}",
        "prompt": dataclasses.asdict(config.prompt_options()),
        "mode": config.mode,
        "selected_by": f"validation {config.metric_for_best_model} (decoded decisions)",
        "best_step": result.best_step,
        "best_metric": result.best_metric,
        "eval_command": result.eval_command,
    }
    (result.run_dir / ADAPTER_META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    summary = {
        "examples": report.to_dict(),
        "train_categories": category_counts(train_points),
        "validation_categories": category_counts(val_points),
        "best_step": result.best_step,
        "best_metric": result.best_metric,
        "validations": result.validations,
        "throughput": result.throughput,
        "log_history": result.log_history,
    }
    (result.run_dir / SUMMARY_FILE).write_text(
        json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8"
    )
