"""Prompt builder and decision parser on real decision points."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
from test_eval_support import friends_benchmark

from polylogue.prompts import (
    PromptOptions,
    answer_strings,
    answer_text,
    approx_token_count,
    build_messages,
    prompt_fingerprint,
)
from polylogue.prompts.parsing import parse_decision
from polylogue.turntaking.dataset import load_benchmark
from polylogue.turntaking.types import Decision, DecisionInput


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[DecisionInput]:
    bench = load_benchmark(friends_benchmark(tmp_path_factory.mktemp("bench") / "friends"))
    # Points deep into their scenes, so truncation has turns to drop.
    return [i for i in bench.inputs("test") if len(i.context) >= 12][:20]


def test_messages_name_target_and_current_utterance(inputs: list[DecisionInput]) -> None:
    inp = inputs[0]
    system, user = build_messages(inp)
    assert system["role"] == "system" and user["role"] == "user"
    target = inp.target.name or inp.target.id
    assert f"You are {target}." in user["content"]
    # The current utterance appears once, in its own block after the history.
    assert user["content"].count(inp.current.text) >= 1
    current_block = user["content"].split("Most recent utterance (a pause follows it):")[1]
    assert inp.current.text in current_block
    assert "exactly one word: SPEAK" in user["content"]
    # Earlier turns appear in order, before the current block.
    history_block = user["content"].split("Most recent utterance")[0]
    assert inp.history[-1].text in history_block


def test_no_gold_reaches_the_prompt(inputs: list[DecisionInput]) -> None:
    # The builder's only input type has no label fields at all.
    names = {f.name for f in fields(DecisionInput)}
    assert not names & {"gold", "label", "category", "addressed", "next_speaker"}


def test_system_prompt_repetition(inputs: list[DecisionInput]) -> None:
    once = build_messages(inputs[0])[0]["content"]
    twice = build_messages(inputs[0], PromptOptions(system_repeats=2))[0]["content"]
    assert twice == once + "\n\n" + once
    assert prompt_fingerprint(PromptOptions()) != prompt_fingerprint(
        PromptOptions(system_repeats=2)
    )


def test_budget_keeps_most_recent_turns(inputs: list[DecisionInput]) -> None:
    inp = max(inputs, key=lambda i: len(i.context))
    full = build_messages(inp)
    full_tokens = sum(approx_token_count(m["content"]) for m in full)
    budget = full_tokens - 60
    cut = build_messages(inp, PromptOptions(max_prompt_tokens=budget))
    assert sum(approx_token_count(m["content"]) for m in cut) <= budget
    user = cut[1]["content"]
    assert "earlier turns omitted]" in user
    assert inp.current.text in user
    assert f"{inp.history[-1].text}" in user  # newest earlier turn kept


def test_budget_with_a_real_tokenizer_counter(inputs: list[DecisionInput]) -> None:
    words = lambda s: len(s.split())  # noqa: E731  (any callable counter works)
    inp = max(inputs, key=lambda i: len(i.context))
    budget = sum(words(m["content"]) for m in build_messages(inp)) - 30
    cut = build_messages(inp, PromptOptions(max_prompt_tokens=budget), count_tokens=words)
    assert sum(words(m["content"]) for m in cut) <= budget
    assert "earlier turns omitted]" in cut[1]["content"]


def test_user_template_override(tmp_path: Path, inputs: list[DecisionInput]) -> None:
    tpl = tmp_path / "user.txt"
    tpl.write_text("Me: $target\n$history\nNOW> $current\n$answer_format\n", encoding="utf-8")
    msgs = build_messages(inputs[0], PromptOptions(user_template=str(tpl)))
    assert msgs[1]["content"].startswith("Me: ")
    assert "NOW> " in msgs[1]["content"]
    with pytest.raises(FileNotFoundError):
        build_messages(inputs[0], PromptOptions(user_template=str(tmp_path / "missing.txt")))


def test_answer_strings_round_trip_through_the_parser() -> None:
    opts = PromptOptions()
    assert answer_strings(opts) == {Decision.SPEAK: "SPEAK", Decision.SILENT: "SILENT"}
    for d in Decision:
        assert parse_decision(answer_text(d, opts)).decision is d
        r = PromptOptions(mode="reasoning")
        text = answer_text(d, r, reasoning="Ross asked me directly.")
        parsed = parse_decision(text)
        assert parsed.decision is d and parsed.reasoning == "Ross asked me directly."
    with pytest.raises(ValueError):
        answer_text(Decision.SPEAK, PromptOptions(mode="reasoning"))


@pytest.mark.parametrize(
    ("text", "expected", "rule"),
    [
        ("SPEAK", Decision.SPEAK, "bare"),
        ("  silent.\n", Decision.SILENT, "bare"),
        ("<think>They asked me... SPEAK? no.</think>\nSILENT", Decision.SILENT, "bare"),
        ("<think>I should SPEAK", None, "none"),  # never left its thinking
        ("Reasoning: Ross asked me.\nDecision: SPEAK", Decision.SPEAK, "marker"),
        ("**Decision:** SILENT", Decision.SILENT, "marker"),
        ("<reasoning>x</reasoning><decision>SILENT</decision>", Decision.SILENT, "tag"),
        ("Decision: SILENT\n...actually, final answer: SPEAK", Decision.SPEAK, "marker"),
        ("I would SPEAK here, not SILENT", None, "none"),  # both words, no marker
        ("I think I'd stay SILENT.", Decision.SILENT, "single-word"),
        ("Hey guys!", None, "none"),
        ("", None, "none"),
    ],
)
def test_parser(text: str, expected: Decision | None, rule: str) -> None:
    parsed = parse_decision(text)
    assert parsed.decision is expected
    assert parsed.rule == rule
    if expected is not None:
        assert parsed.decision_offset is not None
        assert text[parsed.decision_offset :].upper().startswith(expected.value)
