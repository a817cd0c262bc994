"""Training defaults that keep a natural-ratio run sane: capped validation decoding and sampler
repeats, and a warning when the prompt budget leaves an example without any earlier turn."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_training_support import tiny_friends

from polylogue.prompts.builder import PromptOptions, build_messages, build_messages_kept
from polylogue.training.lora.config import TrainConfig, TrainConfigError, resolve_config
from polylogue.training.lora.data import ExampleReport, history_warning
from polylogue.turntaking.dataset import load_benchmark


def test_defaults_cap_validation_decoding_and_repeats() -> None:
    c = TrainConfig()
    assert c.eval_max_points == 1000 and c.sampler_max_repeats == 4
    off = resolve_config(None, {"eval_max_points": 0, "sampler_max_repeats": 0})
    assert off.eval_max_points == 0 and off.sampler_max_repeats == 0  # 0: no cap
    with pytest.raises(TrainConfigError, match="eval_max_points must be >= 0"):
        resolve_config(None, {"eval_max_points": -1})


def test_budget_that_drops_all_history_is_detected_and_warned(tmp_path: Path) -> None:
    folder = tiny_friends(tmp_path / "friends")
    point = next(p for p in load_benchmark(folder).points("train") if len(p.input.history) >= 3)
    _, kept = build_messages_kept(point.input, PromptOptions(max_prompt_tokens=100_000))
    assert kept == len(point.input.history)
    tight, kept = build_messages_kept(point.input, PromptOptions(max_prompt_tokens=10))
    assert kept == 0
    assert tight == build_messages(point.input, PromptOptions(max_prompt_tokens=10))
    assert point.input.current.text in tight[-1]["content"]
    report = ExampleReport(n_points=5, n_examples=5, history_dropped=[point.point_id])
    warning = history_warning(report, 10)
    assert warning is not None and "1 of 5" in warning and point.point_id in warning
    assert history_warning(ExampleReport(n_examples=5), 10) is None
