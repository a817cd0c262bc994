"""SFT examples: the evaluation prompt and chat template, loss on the answer tokens only."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from test_training_support import tiny_friends

from polylogue.prompts.builder import PromptOptions
from polylogue.prompts.parsing import parse_decision
from polylogue.training.lora.data import (
    IGNORE_INDEX,
    build_examples,
    check_example,
    load_subset,
    stratified_subset,
    to_hf_dataset,
    training_subset,
)
from polylogue.turntaking.dataset import load_benchmark
from polylogue.turntaking.types import DecisionPoint


@pytest.fixture(scope="module")
def points(tmp_path_factory: pytest.TempPathFactory) -> list[DecisionPoint]:
    bench = load_benchmark(tiny_friends(tmp_path_factory.mktemp("bench") / "friends"))
    return stratified_subset(bench.points("train"), 12, seed=0)


def test_stratified_subset_keeps_every_category(points: list[DecisionPoint]) -> None:
    assert len(points) <= 12
    cats = {p.gold.category.value for p in points}
    assert {"I1", "I2", "S1", "S2"} <= cats <= {"I1", "I2", "S1", "S2", "S3", "SA"}
    again = stratified_subset(points, 12, seed=0)
    assert [p.point_id for p in again] == [p.point_id for p in points]


def test_four_way_training_subset_takes_equal_category_shares(tmp_path: Path) -> None:
    train = load_benchmark(tiny_friends(tmp_path / "friends")).points("train")
    natural = Counter(p.gold.category.four_way.value for p in train)
    n = 4 * min(natural.values()) + 6  # the rarest category runs out; the others fill in
    subset = training_subset(train, n, seed=3, balance="four_way")
    got = Counter(p.gold.category.four_way.value for p in subset)
    assert len(subset) == n and len({p.point_id for p in subset}) == n
    rarest = min(natural, key=lambda c: natural[c])
    assert got[rarest] == natural[rarest]
    others = [got[c] for c in got if c != rarest]
    assert max(others) - min(others) <= 1
    assert [p.point_id for p in training_subset(train, n, 3, "four_way")] == [
        p.point_id for p in subset
    ]
    assert training_subset(train, 12, 0) == stratified_subset(train, 12, 0)


def test_load_subset_builds_only_the_chosen_points_and_chooses_the_same(tmp_path: Path) -> None:
    """``polylogue train``/``distill`` draw the subset from the point index and build only it;
    it is the subset drawn from the fully built split, point for point."""
    from polylogue.turntaking.dataset import load_split_points

    folders = [str(tiny_friends(tmp_path / "friends"))]
    full = load_split_points(folders, "train")
    for balance in ("natural", "four_way"):
        light = load_subset(folders, "train", 30, 5, balance)
        heavy = training_subset(full, 30, 5, balance)
        assert [p.point_id for p in light] == [p.point_id for p in heavy]
        for a, b in zip(light, heavy, strict=True):  # same gold, same context utterances
            assert a.gold == b.gold and list(a.input.context) == list(b.input.context)
    assert [p.point_id for p in load_subset(folders, "train", None, 5)] == [
        p.point_id for p in full
    ]


@pytest.mark.slow
def test_training_prompt_is_the_evaluation_prompt_and_only_the_answer_is_trained(
    points: list[DecisionPoint],
) -> None:
    from polylogue.models.hf_local import HFLocalPredictor

    options = PromptOptions(mode="decision", max_prompt_tokens=300)
    predictor = HFLocalPredictor("smollm2", prompt=options)
    tok = predictor._tok
    examples, report = build_examples(points, tok, options)
    assert report.n_examples == len(points) and not report.too_long
    for ex, point in zip(examples, points, strict=True):
        # Byte-identical to what the evaluation backend feeds the model.
        assert ex.prompt_text == predictor.prompt_text(point.input)
        check_example(ex, tok)
        trained = [t for t in ex.labels if t != IGNORE_INDEX]
        assert tok.decode(trained) == f"{point.gold.label.value}<|im_end|>"
        # The first trained token is the token evaluation reads P(SPEAK) from.
        speak_id, silent_id = predictor.answer_first_token_ids()
        assert trained[0] == (speak_id if point.gold.label.value == "SPEAK" else silent_id)
        assert ex.labels[: ex.n_prompt_tokens] == (IGNORE_INDEX,) * ex.n_prompt_tokens
    data = to_hf_dataset(examples)
    assert data.column_names == ["input_ids", "labels", "category", "point_id"]

    # Sequences over a hard cap are dropped and reported, never cut.
    capped, capped_report = build_examples(points, tok, options, max_seq_length=200)
    assert len(capped) + len(capped_report.too_long) == len(points)
    assert all(len(e.input_ids) <= 200 for e in capped)


@pytest.mark.slow
def test_reasoning_targets_parse_back_and_missing_reasoning_is_left_out(
    points: list[DecisionPoint],
) -> None:
    from transformers import AutoTokenizer

    from polylogue.llm.hf import resolve_model_path

    tok = AutoTokenizer.from_pretrained(str(resolve_model_path("smollm2")))
    options = PromptOptions(mode="reasoning", max_prompt_tokens=300)
    why = {
        p.point_id: f"{p.input.current.speaker} was talking to the group about the plan."
        for p in points[: len(points) // 2]
    }
    examples, report = build_examples(points, tok, options, why)
    assert {e.point_id for e in examples} == set(why)
    assert sorted(report.missing_reasoning) == sorted(
        p.point_id for p in points[len(points) // 2 :]
    )
    by_id = {p.point_id: p for p in points}
    for ex in examples:
        check_example(ex, tok)
        parsed = parse_decision(ex.completion_text.removesuffix("<|im_end|>"))
        assert parsed.decision is not None
        assert parsed.decision.value == by_id[ex.point_id].gold.label.value
        assert parsed.reasoning == why[ex.point_id]
        assert "Reasoning:" in ex.prompt_text  # the reasoning answer format is requested


def test_missing_reasoning_everywhere_yields_no_examples(points: list[DecisionPoint]) -> None:
    class NoTokenizer:
        def __call__(self, *a: object, **k: object) -> None:
            raise AssertionError("no example should be tokenised")

    examples, report = build_examples(points, NoTokenizer(), PromptOptions(mode="reasoning"), {})
    assert examples == [] and len(report.missing_reasoning) == len(points)
