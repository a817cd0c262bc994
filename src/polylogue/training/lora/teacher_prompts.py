"""The label-conditioned teacher prompt: the evaluation reasoning prompt plus the given label.

Shared by the distillation loop and the rule-written ``cues`` teacher, which reads the label
back from the prompt's answer block.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from polylogue.prompts.builder import PromptOptions
from polylogue.turntaking.types import Decision


def teacher_template(label: Decision) -> Path:
    name = "teacher_speak.txt" if label is Decision.SPEAK else "teacher_silent.txt"
    return Path(str(resources.files("polylogue.training.lora").joinpath("templates", name)))


def teacher_prompt(
    label: Decision,
    max_prompt_tokens: int,
    system_repeats: int = 1,
    system_template: str | None = None,
) -> PromptOptions:
    """The evaluation reasoning prompt with the label-conditioned answer block."""
    return PromptOptions(
        mode="reasoning",
        system_repeats=system_repeats,
        max_prompt_tokens=max_prompt_tokens,
        system_template=system_template,
        answer_template=str(teacher_template(label)),
    )
