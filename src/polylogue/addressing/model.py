"""The shipped turn-taking model as a next-speaker / responder ranker.

At the pause after message ``index`` the turn-taking model gives each participant present a
P(SPEAK) (the same decision points the builder makes); the candidate with the highest one is
the answer. Candidates who are not present at that point (in a channel: not active in the
presence window) are not scored and never chosen, nor is the current author (the model decides
for the others), so it never predicts that someone continues their own turn. The model reads
only the messages up to the current one, with addressee annotation stripped, like every model
in polylogue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from polylogue.addressing.tasks import AddressingExample, Task
from polylogue.conversation import Conversation
from polylogue.turntaking.points import Prefixes, model_visible, present_at
from polylogue.turntaking.types import DecisionInput


def turn_taking_ranker(
    examples: Sequence[AddressingExample], model_dir: str | Path | None = None
) -> Callable[[AddressingExample], str | None]:
    """Score ``examples`` (next-speaker or responder) once; returns a lookup predictor."""
    from polylogue.engine.extract import FeatureExtractor
    from polylogue.engine.model import load_model

    if any(ex.task is Task.ADDRESSEE for ex in examples):
        raise ValueError("the turn-taking model ranks who speaks next, not addressees")
    model = load_model(Path(model_dir) if model_dir is not None else None)
    extractor = FeatureExtractor.for_model(model)
    answers: dict[str, str | None] = {}
    by_conv: dict[str, list[AddressingExample]] = {}
    for ex in examples:
        by_conv.setdefault(ex.conversation.id, []).append(ex)
    for exs in by_conv.values():
        conv = exs[0].conversation
        inputs, owners = _inputs(conv, sorted(exs, key=lambda e: e.index))
        if not inputs:
            answers.update({ex.example_id: None for ex in exs})
            continue
        p = np.asarray(model.proba(extractor.features(inputs)))
        best: dict[str, tuple[float, str]] = {}
        for (ex_id, pid), prob in zip(owners, p.tolist(), strict=True):
            if ex_id not in best or prob > best[ex_id][0]:
                best[ex_id] = (prob, pid)
        for ex in exs:
            answers[ex.example_id] = best[ex.example_id][1] if ex.example_id in best else None

    def predict(ex: AddressingExample) -> str | None:
        return answers.get(ex.example_id)

    return predict


def _inputs(
    conv: Conversation, exs: Sequence[AddressingExample]
) -> tuple[list[DecisionInput], list[tuple[str, str]]]:
    visible = Prefixes(model_visible(conv))
    presence = present_at(conv)
    by_id = {p.id: p for p in conv.participants}
    inputs: list[DecisionInput] = []
    owners: list[tuple[str, str]] = []
    for ex in exs:
        present = presence[ex.index]
        # The model decides for others than the current author: no self-continuation.
        scored = [c for c in ex.candidates if c in present and c != ex.current.speaker]
        ctx = visible.view(ex.index + 1)
        people = tuple(by_id[q] for q in sorted(present))
        for pid in scored:
            inputs.append(
                DecisionInput(
                    point_id=f"{ex.example_id}:{pid}",
                    conversation_id=conv.id,
                    corpus=conv.corpus,
                    domain=conv.domain,
                    target=by_id[pid],
                    present=people,
                    context=ctx,
                )
            )
            owners.append((ex.example_id, pid))
    return inputs, owners


__all__ = ["turn_taking_ranker"]
