"""Generate a reply for a prompt that is split into parts (YOU ``separate``: Q1, then Q2).

The Q1-alone prompt never shows Q2's text, which names the Q1 gold answer in 203 of 300
release items. Each part is one request to the generator; the parts' answers are merged into
one JSON reply (``{"Q1": ..., "Q2": ...}``) so the run row stays readable by the official
evaluator, and every part's raw reply is kept under ``usage["parts"]``.

Answers are taken from each part's reply with the official text parser for that question only,
with YOU labels unvalidated as the official evaluator does; strict scoring validates the merged
labels, so both modes score a split run as they would score the raw replies.
"""

from __future__ import annotations

import json
from typing import Any

from polylogue.tom.backends import Generation, GenerationRequest, ToMGenerator
from polylogue.tom.scoring import parse_text_answer


def generate(generator: ToMGenerator, request: GenerationRequest) -> Generation:
    """``generator.generate`` for a plain prompt; one request per part for a split prompt."""
    prompt = request.prompt
    if not prompt.parts:
        return generator.generate(request)
    answers: dict[str, str] = {}
    parts: list[dict[str, Any]] = []
    latency = 0.0
    cached = True
    for part in prompt.parts:
        gen = generator.generate(GenerationRequest(part, request.item, request.window))
        latency += gen.latency_s
        cached = cached and gen.cached
        parts.append(
            {"questions": list(part.questions), "text": gen.text, "usage": dict(gen.usage)}
        )
        for q in part.questions:
            label = parse_text_answer(gen.text, q, None)
            if label is not None:
                answers[q] = label
    merged = json.dumps(answers, separators=(",", ":"))
    return Generation(merged, latency_s=latency, usage={"parts": parts}, cached=cached)
