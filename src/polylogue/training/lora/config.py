"""Typed LoRA fine-tuning configuration with the paper's defaults (§4.2, reference notes D.6).

A run is configured in three layers, later layers winning: the defaults below, an optional
config file (YAML, JSON or TOML; a packaged name such as ``rank16`` also works), then explicit
command-line flags. The resolved configuration is written to ``training_config.json`` in the run
folder so a run can be reproduced from its output alone.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from polylogue.errors import PolylogueInputError
from polylogue.jsonio import JsonInputError, load_json_object, loads_json
from polylogue.prompts.builder import PromptOptions
from polylogue.training.lora.sampler import EpochSize

TrainMode = Literal["decision", "reasoning"]
SamplerKind = Literal["four_way", "label", "shuffle"]
Precision = Literal["auto", "bf16", "fp16", "fp32"]

#: Attention and MLP projections of Llama-style decoders (SmolLM2, Llama, Qwen, Mistral).
DEFAULT_TARGET_MODULES: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)
CONFIG_FILE = "training_config.json"


class TrainConfigError(PolylogueInputError):
    """A configuration file or flag is invalid."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a fine-tuning run."""

    #: Base model: ``smollm2`` alias, a ``.gguf`` file or a local Hugging Face folder
    #: (resolved exactly like ``polylogue eval --model hf:...``; no hub downloads).
    model: str = "smollm2"
    #: Benchmark folders (``polylogue build``); several folders = combined-corpus training.
    data: tuple[str, ...] = ()
    output_dir: str = "runs/train"
    train_split: str = "train"
    validation_split: str = "validation"
    #: ``decision``: the answer word only; ``reasoning``: one sentence, then the decision.
    mode: TrainMode = "decision"
    #: Distillation folders (``polylogue distill``) holding the reasoning targets.
    reasoning: tuple[str, ...] = ()

    # LoRA (paper: r=32, alpha=64, dropout 0.05 on attention + MLP projections)
    lora_r: int = 32
    lora_alpha: int = 64
    lora_dropout: float = 0.05
    target_modules: tuple[str, ...] = DEFAULT_TARGET_MODULES

    # Optimisation (paper: AdamW, lr 1e-4, cosine, 10 warm-up steps, 16 x 2 = 32, 3 epochs)
    learning_rate: float = 1e-4
    lr_scheduler: str = "cosine"
    warmup_steps: int = 10
    weight_decay: float = 0.0
    optimizer: str = "adamw_torch"
    per_device_batch_size: int = 16
    gradient_accumulation_steps: int = 2
    epochs: float = 3.0
    #: Stop after this many optimizer steps (overrides ``epochs``; for smoke tests).
    max_steps: int | None = None
    precision: Precision = "auto"
    #: How bf16 trains on a CPU: ``weights`` (frozen base weights stored in bf16, LoRA weights
    #: and optimizer in fp32) or ``autocast`` (fp32 weights, bf16 arithmetic). GPUs always
    #: use mixed precision (autocast) for bf16.
    cpu_bf16: Literal["weights", "autocast"] = "weights"
    gradient_checkpointing: bool = False
    seed: int = 42

    # Inputs: the same prompt builder and budget as evaluation (oldest turns dropped first)
    max_prompt_tokens: int = 2048
    system_repeats: int = 1
    #: Prompt template files replacing the packaged ones (evaluation must use the same).
    system_template: str | None = None
    user_template: str | None = None
    #: Drop (never truncate) examples whose prompt + answer exceed this many tokens.
    max_seq_length: int | None = None
    #: Use only a subset of the training split of this size.
    max_train_points: int | None = None
    #: How that subset is drawn: ``natural`` keeps the category shares, ``four_way`` takes an
    #: equal share of I1/I2/S1/S2 (what the balanced sampler draws; see ``training_subset``).
    train_subset: Literal["natural", "four_way"] = "natural"

    # Batches
    sampler: SamplerKind = "four_way"
    #: ``dataset``: one epoch = as many examples as the split; ``largest``: the reference's
    #: "largest category pool // quota" batches (oversamples every smaller category).
    epoch_size: EpochSize = "dataset"
    #: Balanced samplers: draw one example at most this many times per epoch (0 = no cap).
    #: Natural-ratio builds otherwise repeat the rarest category ~30x an epoch (AMI S2); the
    #: epoch is shortened to what the rarest category fills within the cap.
    sampler_max_repeats: int = 4

    # Validation and checkpoint selection (decoded decisions, evaluation harness)
    eval_steps: int = 20
    eval_batch_size: int = 8
    #: Decode only a category-stratified subset of the validation split (0 = all of it).
    #: Capped by default: decoding a whole natural-ratio split (14-29k points) every
    #: ``eval_steps`` steps costs more than the training between validations.
    eval_max_points: int = 1000
    #: Generation budget for reasoning-mode validation decoding.
    eval_max_new_tokens: int = 96
    metric_for_best_model: str = "f1_avg"
    #: Stop after this many evaluations without improvement (None = never; reference: 5).
    early_stopping_patience: int | None = None
    save_total_limit: int = 3
    #: Keep intermediate checkpoints after a finished run (the best adapter is always kept).
    keep_checkpoints: bool = False
    logging_steps: int = 10
    dataloader_workers: int = 0
    #: Write the point ids of every micro-batch to ``batches/rank-R.jsonl`` (coverage checks).
    log_batches: bool = False

    def __post_init__(self) -> None:
        problems = []
        if self.mode not in ("decision", "reasoning"):
            problems.append(f"mode must be decision or reasoning, not {self.mode!r}")
        if self.sampler not in ("four_way", "label", "shuffle"):
            problems.append(f"sampler must be four_way, label or shuffle, not {self.sampler!r}")
        if self.train_subset not in ("natural", "four_way"):
            problems.append(f"train_subset must be natural or four_way, not {self.train_subset!r}")
        if self.epoch_size not in ("dataset", "largest"):
            problems.append(f"epoch_size must be dataset or largest, not {self.epoch_size!r}")
        if self.cpu_bf16 not in ("weights", "autocast"):
            problems.append(f"cpu_bf16 must be weights or autocast, not {self.cpu_bf16!r}")
        if self.precision not in ("auto", "bf16", "fp16", "fp32"):
            problems.append(f"precision must be auto, bf16, fp16 or fp32, not {self.precision!r}")
        for name in (
            "lora_r",
            "lora_alpha",
            "per_device_batch_size",
            "gradient_accumulation_steps",
            "eval_steps",
            "eval_batch_size",
            "max_prompt_tokens",
            "system_repeats",
            "logging_steps",
            "save_total_limit",
        ):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1")
        if not 0 <= self.lora_dropout < 1:
            problems.append("lora_dropout must be in [0, 1)")
        if self.learning_rate <= 0:
            problems.append("learning_rate must be > 0")
        if self.epochs <= 0 and self.max_steps is None:
            problems.append("epochs must be > 0")
        if self.max_steps is not None and self.max_steps < 1:
            problems.append("max_steps must be >= 1")
        for name in ("sampler_max_repeats", "eval_max_points"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0 (0: no cap)")
        if self.sampler == "four_way" and self.per_device_batch_size < 4:
            problems.append(
                "the four-way sampler needs per_device_batch_size >= 4 (one per category)"
            )
        if self.mode == "reasoning" and not self.reasoning:
            problems.append("reasoning mode needs at least one distillation folder (reasoning=...)")
        if not self.target_modules:
            problems.append("target_modules must not be empty")
        if problems:
            raise TrainConfigError("invalid training configuration: " + "; ".join(problems))

    # ------------------------------------------------------------------ derived

    @property
    def effective_batch_size(self) -> int:
        """Examples per optimizer step on one process (times the number of processes)."""
        return self.per_device_batch_size * self.gradient_accumulation_steps

    def prompt_options(self) -> PromptOptions:
        """The evaluation prompt this run trains on (use the same for ``polylogue eval``)."""
        return PromptOptions(
            mode=self.mode,
            system_repeats=self.system_repeats,
            max_prompt_tokens=self.max_prompt_tokens,
            system_template=self.system_template,
            user_template=self.user_template,
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return d

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / CONFIG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path


_FIELD_TYPES = {f.name: f for f in fields(TrainConfig)}
_TUPLE_FIELDS = {"data", "reasoning", "target_modules"}


def _coerce(name: str, value: Any, source: str) -> Any:
    if name in _TUPLE_FIELDS:
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list | tuple):
            return tuple(str(v) for v in value)
        raise TrainConfigError(f"{source}: {name} must be a string or a list of strings")
    default = _FIELD_TYPES[name].default
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise TrainConfigError(f"{source}: {name} must be true or false, not {value!r}")
        return value
    if (
        isinstance(default, float)
        and isinstance(value, int | float)
        and not isinstance(value, bool)
    ):
        return float(value)
    return value


def merge_config(
    base: TrainConfig, values: Mapping[str, Any], source: str = "config"
) -> TrainConfig:
    """``base`` with ``values`` applied; unknown keys are errors (typos must not pass silently)."""
    unknown = sorted(set(values) - set(_FIELD_TYPES))
    if unknown:
        raise TrainConfigError(
            f"{source}: unknown training option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(_FIELD_TYPES))}"
        )
    updates = {k: _coerce(k, v, source) for k, v in values.items()}
    try:
        return replace(base, **updates)
    except TypeError as exc:
        raise TrainConfigError(f"{source}: {exc}") from exc


def packaged_configs() -> dict[str, Path]:
    """Shipped configs by name (ablations of Table 5 and accelerate launch configs)."""
    folder = resources.files("polylogue.training.lora").joinpath("configs")
    return {
        Path(str(p)).stem: Path(str(p))
        for p in folder.iterdir()
        if str(p).endswith((".yaml", ".yml", ".json", ".toml"))
    }


def read_config_file(path_or_name: str | Path) -> dict[str, Any]:
    """A config mapping from a YAML/JSON/TOML file, or from a packaged config name."""
    path = Path(path_or_name)
    if not path.is_file():
        shipped = packaged_configs()
        if str(path_or_name) in shipped:
            path = shipped[str(path_or_name)]
        else:
            raise FileNotFoundError(
                f"training config {path_or_name} does not exist (packaged configs: "
                f"{', '.join(sorted(shipped))})"
            )
    text = path.read_text(encoding="utf-8")
    suffix = path.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            import yaml

            loaded = yaml.safe_load(text) or {}
        elif suffix == ".toml":
            loaded = tomllib.loads(text)
        elif suffix == ".json":
            loaded = loads_json(text, path)
        else:
            raise TrainConfigError(f"{path}: config files must be .yaml, .yml, .json or .toml")
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise TrainConfigError(f"{path}: cannot parse config: {exc}") from exc
    except Exception as exc:  # yaml.YAMLError does not subclass ValueError
        if type(exc).__module__.startswith("yaml"):
            raise TrainConfigError(f"{path}: cannot parse YAML: {exc}") from exc
        raise
    if not isinstance(loaded, dict):
        raise TrainConfigError(f"{path}: the top level must be a mapping of option: value")
    # A config file may carry a "train" section beside accelerate or notes.
    section = loaded.get("train", loaded)
    if not isinstance(section, dict):
        raise TrainConfigError(f"{path}: 'train' must be a mapping")
    return {k.replace("-", "_"): v for k, v in section.items()}


def resolve_config(
    config_file: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> TrainConfig:
    """Defaults, then the config file, then flags (only the flags the user actually set)."""
    values: dict[str, Any] = {}
    if config_file is not None:
        values.update(read_config_file(config_file))
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    # Apply everything at once: reasoning mode and its folders may come from different layers.
    unknown = sorted(set(values) - set(_FIELD_TYPES))
    if unknown:
        raise TrainConfigError(f"unknown training option(s) {', '.join(unknown)}")
    source = str(config_file) if config_file is not None else "flags"
    coerced = {k: _coerce(k, v, source) for k, v in values.items()}
    try:
        return TrainConfig(**coerced)
    except TypeError as exc:
        raise TrainConfigError(f"{source}: {exc}") from exc


def load_run_config(run_dir: str | Path) -> TrainConfig:
    """The resolved configuration saved with a run."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} has no {CONFIG_FILE}: not a polylogue training run")
    try:
        values = load_json_object(path, "a configuration object")
    except JsonInputError as exc:
        raise TrainConfigError(str(exc)) from None
    return resolve_config(None, values)
