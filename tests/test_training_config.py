"""Training configuration: the paper's defaults, file formats, layering, shipped configs, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from polylogue.training.lora.config import (
    TrainConfig,
    TrainConfigError,
    load_run_config,
    packaged_configs,
    read_config_file,
    resolve_config,
)


def test_defaults_are_the_papers_recipe() -> None:
    c = TrainConfig()
    assert (c.lora_r, c.lora_alpha, c.lora_dropout) == (32, 64, 0.05)
    assert set(c.target_modules) == {
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
    }  # fmt: skip
    assert (c.learning_rate, c.lr_scheduler, c.warmup_steps) == (1e-4, "cosine", 10)
    assert c.optimizer.startswith("adamw")
    assert (c.per_device_batch_size, c.gradient_accumulation_steps, c.effective_batch_size) == (
        16,
        2,
        32,
    )
    assert (c.epochs, c.max_prompt_tokens, c.precision) == (3.0, 2048, "auto")
    assert c.sampler == "four_way" and c.metric_for_best_model == "f1_avg"
    p = c.prompt_options()
    assert (p.mode, p.max_prompt_tokens) == ("decision", 2048)


@pytest.mark.parametrize("suffix", [".yaml", ".json", ".toml"])
def test_file_then_flags(tmp_path: Path, suffix: str) -> None:
    values = {"lora_r": 8, "lora_alpha": 16, "learning_rate": 0.0002, "data": ["a", "b"]}
    path = tmp_path / f"c{suffix}"
    if suffix == ".yaml":
        path.write_text(yaml.safe_dump({"train": values}))
    elif suffix == ".json":
        path.write_text(json.dumps(values))
    else:
        path.write_text('lora_r = 8\nlora_alpha = 16\nlearning_rate = 0.0002\ndata = ["a", "b"]\n')
    c = resolve_config(path, {"lora_r": 4, "epochs": None})
    assert (c.lora_r, c.lora_alpha, c.learning_rate, c.data) == (4, 16, 2e-4, ("a", "b"))
    assert c.epochs == 3.0  # an unset flag (None) does not override


def test_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(TrainConfigError, match="lora_rank"):
        resolve_config(None, {"lora_rank": 8})
    with pytest.raises(TrainConfigError, match="mode must be"):
        resolve_config(None, {"mode": "cot"})
    with pytest.raises(TrainConfigError, match="needs at least one distillation folder"):
        resolve_config(None, {"mode": "reasoning"})
    with pytest.raises(TrainConfigError, match="per_device_batch_size >= 4"):
        resolve_config(None, {"per_device_batch_size": 2})
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [1, 2\n")
    with pytest.raises(TrainConfigError, match=r"bad\.yaml"):
        read_config_file(bad)
    with pytest.raises(FileNotFoundError, match="rank16"):
        read_config_file(tmp_path / "missing.yaml")


def test_saved_config_round_trips(tmp_path: Path) -> None:
    c = resolve_config(None, {"data": ["x"], "mode": "reasoning", "reasoning": ["d"], "lora_r": 64})
    c.save(tmp_path)
    assert load_run_config(tmp_path) == c


def test_shipped_ablation_and_accelerate_configs() -> None:
    shipped = packaged_configs()
    assert {
        "decision_only",
        "reasoning",
        "rank16",
        "rank32",
        "rank64",
        "combined",
        "ddp",
        "fsdp",
    } <= set(shipped)
    for r in (16, 32, 64):
        c = resolve_config(f"rank{r}", {"reasoning": ["distill"], "data": ["b"]})
        assert (c.mode, c.lora_r, c.lora_alpha) == ("reasoning", r, 2 * r)
    assert resolve_config("decision_only").mode == "decision"
    combined = resolve_config("combined")
    assert combined.mode == "decision" and len(combined.data) == 3
    ddp = yaml.safe_load(shipped["ddp"].read_text())
    fsdp = yaml.safe_load(shipped["fsdp"].read_text())
    assert ddp["distributed_type"] == "MULTI_GPU" and fsdp["distributed_type"] == "FSDP"
    assert fsdp["fsdp_config"]["fsdp_sharding_strategy"] == "FULL_SHARD"


def test_cli_resolves_config_file_and_flags() -> None:
    from polylogue.cli import app

    runner = CliRunner()
    result = runner.invoke(
        app,
        ["train", "--config", "rank64", "--data", "bench", "--reasoning", "d", "--lr", "3e-4",
         "--set", "eval_steps=50", "--dry-run"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    resolved = json.loads(result.output)
    assert (resolved["lora_r"], resolved["learning_rate"], resolved["eval_steps"]) == (64, 3e-4, 50)
    assert resolved["data"] == ["bench"]
    bad = runner.invoke(app, ["train", "--data", "b", "--set", "nope=1", "--dry-run"])
    assert bad.exit_code != 0 and "nope" in bad.output
    listed = runner.invoke(app, ["training-configs"])
    assert "fsdp" in listed.output and "rank16" in listed.output


def test_gpu_benchmark_script_refuses_clearly_without_a_gpu(tmp_path: Path) -> None:
    import subprocess
    import sys

    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: benchmarks/train_gpu.py would really train")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "train_gpu.py"
    done = subprocess.run(
        [sys.executable, str(script), "--model", "smollm2", "--data", "x", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "needs a CUDA GPU" in done.stderr and "Nothing was run" in done.stderr
