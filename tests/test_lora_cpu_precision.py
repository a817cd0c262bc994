"""bf16 on the CPU and the shared prompt-prefix cache, on SmolLM2-135M and real Friends points.

The prefix cache must not change what the model says: decisions and P(SPEAK) with and without it
are compared point by point (decision mode at the packaged prompt, reasoning mode on a few
points). The tolerance on P(SPEAK) is 1e-5 in fp32: the cached path computes the same
attention over the same tokens at the same positions, only in other matrix shapes (the prefix
once, then each prompt's rest), so the two differ by float32 rounding (measured: at most 3e-7).
The larger check (hundreds of points) is ``benchmarks/lora_cpu_speed.py --sections equality``.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from test_training_e2e import SHORT_SYSTEM, tiny_config
from test_training_support import tiny_friends

from polylogue.llm.hf import (
    CPU_BF16_FLAGS,
    PrecisionError,
    PrefixCache,
    PrefixCacheError,
    cpu_bf16_flags,
    load_causal_lm,
    resolve_precision,
    shared_prefix_text,
)
from polylogue.models.hf_local import HFLocalPredictor
from polylogue.prompts.builder import PromptOptions
from polylogue.turntaking.dataset import load_benchmark

CPUINFO = (
    Path("/proc/cpuinfo").read_text(encoding="utf-8") if Path("/proc/cpuinfo").is_file() else ""
)
HAS_BF16 = bool(cpu_bf16_flags())


def without_bf16_flags(cpuinfo: str) -> str:
    """This machine's /proc/cpuinfo as a CPU without bf16 matrix units would report it."""
    lines = []
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            head, _, flags = line.partition(":")
            kept = [f for f in flags.split() if f not in CPU_BF16_FLAGS]
            line = f"{head}: {' '.join(kept)}"
        lines.append(line)
    return "\n".join(lines)


# ----------------------------------------------------------------------------- precision


@pytest.mark.skipif(not CPUINFO, reason="needs /proc/cpuinfo")
def test_precision_follows_the_cpu_flags() -> None:
    flags = cpu_bf16_flags(CPUINFO)
    auto = resolve_precision("auto", "cpu", CPUINFO)
    assert auto.name == ("bf16" if flags else "fp32")
    # A CPU without bf16 units: bf16 and auto fall back to fp32 with a note, never an error.
    plain = without_bf16_flags(CPUINFO)
    assert cpu_bf16_flags(plain) == []
    for choice in ("bf16", "auto"):
        resolved = resolve_precision(choice, "cpu", plain)
        assert resolved.name == "fp32"
        assert resolved.note and "neither amx_bf16 nor avx512_bf16" in resolved.note
    assert resolve_precision("fp32", "cpu", CPUINFO).name == "fp32"


def test_a_precision_the_cpu_cannot_run_is_one_clear_error() -> None:
    with pytest.raises(PrecisionError, match="fp16 needs a CUDA GPU"):
        resolve_precision("fp16", "cpu")
    with pytest.raises(PrecisionError, match="'fp8' is not one of auto, bf16, fp16, fp32"):
        resolve_precision("fp8", "cpu")


# ----------------------------------------------------------------------------- prefix cache


@pytest.fixture(scope="module")
def friends_inputs(tmp_path_factory: pytest.TempPathFactory) -> list:
    bench = load_benchmark(tiny_friends(tmp_path_factory.mktemp("friends") / "friends"))
    return [p.input for p in bench.points("validation")]


def predict(inputs: list, *, cache: bool, mode: str = "decision", **options: object) -> list:
    predictor = HFLocalPredictor(
        "smollm2",
        prompt=PromptOptions(mode=mode, max_prompt_tokens=256),  # type: ignore[arg-type]
        batch_size=8,
        prefix_cache=cache,
        **options,  # type: ignore[arg-type]
    )
    return predictor.predict(inputs)


@pytest.fixture(scope="module")
def fp32_decisions(friends_inputs: list) -> tuple[list, list]:
    """Decision-mode predictions of the first 16 points, without and with the prefix cache
    (fp32; shared by the equality and the bf16 tests: a forward pass of 16 prompts is most of
    either test's cost)."""
    points = friends_inputs[:16]
    return predict(points, cache=False), predict(points, cache=True)


@pytest.mark.slow
def test_prefix_cache_gives_the_uncached_decisions(fp32_decisions: tuple[list, list]) -> None:
    plain, cached = fp32_decisions
    assert [p.point_id for p in cached] == [p.point_id for p in plain]
    assert [p.decision for p in cached] == [p.decision for p in plain]
    assert max(abs(a.p_speak - b.p_speak) for a, b in zip(plain, cached, strict=True)) < 1e-5
    # Prompts of different lengths share one batch (padding sits between prefix and rest).
    assert len({p.extra["prompt_tokens"] for p in cached}) > 6
    assert [p.extra["prompt_tokens"] for p in cached] == [p.extra["prompt_tokens"] for p in plain]


@pytest.mark.slow
def test_prefix_cache_gives_the_uncached_reasoning(friends_inputs: list) -> None:
    points = friends_inputs[:2]
    plain = predict(points, cache=False, mode="reasoning", max_new_tokens=16)
    cached = predict(points, cache=True, mode="reasoning", max_new_tokens=16)
    assert [p.raw_output for p in cached] == [p.raw_output for p in plain]
    for a, b in zip(plain, cached, strict=True):
        assert (a.p_speak is None) == (b.p_speak is None)
        if a.p_speak is not None:
            assert abs(a.p_speak - b.p_speak) < 1e-5


@pytest.mark.slow
def test_a_prefix_cache_refuses_another_prompt_model_or_tokenizer(friends_inputs: list) -> None:
    lm = load_causal_lm("smollm2")
    predictor = HFLocalPredictor(
        "smollm2", prompt=PromptOptions(max_prompt_tokens=256), loaded=(lm.model, lm.tokenizer)
    )
    messages = predictor.messages(friends_inputs[0])
    cache = PrefixCache.build(lm, shared_prefix_text(lm, messages))
    assert "<|im_start|>system" in cache.text and cache.text.endswith("user\n")
    lm.attach_prefix(cache)
    # A prompt that does not start with the cached text: the error says where they differ.
    other = [{"role": "system", "content": "Another system prompt."}, messages[1]]
    text = lm.chat_text(other)
    with pytest.raises(PrefixCacheError, match="differ at character"):
        cache.suffix(text, lm.ids(text))
    # Another model object (a fresh load of the same weights is another object).
    other_lm = load_causal_lm("smollm2")
    with pytest.raises(PrefixCacheError, match="prefix cache built for model"):
        other_lm.attach_prefix(cache)
    # Same model, a tokenizer with one more token.
    lm.tokenizer.add_tokens(["<polylogue-extra>"])
    with pytest.raises(PrefixCacheError, match="prefix cache built for tokenizer"):
        lm.attach_prefix(cache)


# ----------------------------------------------------------------------------- bf16


@pytest.mark.slow
@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no bf16 matrix units")
def test_bf16_scoring_with_the_prefix_cache(
    friends_inputs: list, fp32_decisions: tuple[list, list]
) -> None:
    points = friends_inputs[:8]
    fp32 = fp32_decisions[1][:8]
    plain = predict(points, cache=False, precision="bf16")
    cached = predict(points, cache=True, precision="bf16")
    # bf16 keeps 8 mantissa bits: probabilities move by up to a few hundredths, not more.
    assert max(abs(a.p_speak - b.p_speak) for a, b in zip(fp32, cached, strict=True)) < 0.1
    assert max(abs(a.p_speak - b.p_speak) for a, b in zip(plain, cached, strict=True)) < 0.05
    predictor = HFLocalPredictor("smollm2", precision="bf16")
    assert predictor.describe()["precision"] == "bf16"


@pytest.mark.slow
@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no bf16 matrix units")
def test_bf16_lora_training_on_the_cpu(tmp_path: Path) -> None:
    from polylogue.training.lora.sft import train

    bench = tiny_friends(tmp_path / "friends")
    system = tmp_path / "system.txt"
    system.write_text(SHORT_SYSTEM, encoding="utf-8")
    config = tiny_config(
        bench,
        system,
        tmp_path / "run",
        max_train_points=8,
        max_steps=1,
        learning_rate=2e-3,
        eval_steps=1,
        eval_max_points=4,
        eval_batch_size=4,
        logging_steps=1,
        precision="bf16",
    )
    result = train(config)
    losses = result.train_losses()
    assert len(losses) == 1 and all(math.isfinite(x) for x in losses)
    assert [v["step"] for v in result.validations] == [1]
    # The adapter saved from bf16 base weights is fp32 (PEFT keeps LoRA weights in fp32).
    from safetensors.torch import load_file

    weights = load_file(str(result.run_dir / "adapter_model.safetensors"))
    assert weights and {str(t.dtype) for t in weights.values()} == {"torch.float32"}
