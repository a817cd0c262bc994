"""Zero-shot turn-taking prompts: one builder shared by evaluation and training.

The model plays the target participant. It sees who is present, the earlier turns, and the
current utterance (once: the reference prompts repeated it, reference notes D.10.8), then answers
with one word (``decision`` mode) or with one sentence of reasoning plus the decision
(``reasoning`` mode). Templates are plain text files with ``$placeholders`` so users can
override any of them from a file.

Placeholders: ``system.txt``: ``$speak``, ``$silent``; ``user.txt``: ``$participants``,
``$target``, ``$history``, ``$current``, ``$answer_format``; ``answer_*.txt``: ``$speak``,
``$silent``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Literal, TypedDict

from polylogue.conversation import Participant, Utterance
from polylogue.turntaking.types import Decision, DecisionInput

PromptMode = Literal["decision", "reasoning"]
TokenCounter = Callable[[str], int]


class ChatMessage(TypedDict):
    role: str
    content: str


@dataclass(frozen=True, slots=True)
class PromptOptions:
    """Everything that changes the prompt text (part of every run key)."""

    mode: PromptMode = "decision"
    #: How many times the system prompt appears (Table 2 of the paper compares 1 and 2).
    system_repeats: int = 1
    #: Token budget for the whole prompt (chat template excluded); oldest turns go first.
    max_prompt_tokens: int | None = None
    #: Paths of user-supplied templates replacing the packaged ones.
    system_template: str | None = None
    user_template: str | None = None
    answer_template: str | None = None
    speak_word: str = "SPEAK"
    silent_word: str = "SILENT"

    def __post_init__(self) -> None:
        if self.mode not in ("decision", "reasoning"):
            raise ValueError(f"prompt mode must be 'decision' or 'reasoning', not {self.mode!r}")
        if self.system_repeats < 1:
            raise ValueError("system_repeats must be >= 1")
        if self.speak_word == self.silent_word:
            raise ValueError("the two answer words must differ")


@dataclass(frozen=True, slots=True)
class PromptTemplates:
    system: str
    user: str
    answer_format: str


def _read_template(override: str | None, packaged: str) -> str:
    if override is not None:
        path = Path(override)
        if not path.is_file():
            raise FileNotFoundError(f"prompt template {path} does not exist")
        return path.read_text(encoding="utf-8")
    return resources.files("polylogue.prompts").joinpath("templates", packaged).read_text("utf-8")


def load_templates(options: PromptOptions) -> PromptTemplates:
    answer_file = "answer_decision.txt" if options.mode == "decision" else "answer_reasoning.txt"
    return PromptTemplates(
        system=_read_template(options.system_template, "system.txt"),
        user=_read_template(options.user_template, "user.txt"),
        answer_format=_read_template(options.answer_template, answer_file),
    )


def answer_strings(options: PromptOptions) -> dict[Decision, str]:
    """The exact words a model answers with, per decision."""
    return {Decision.SPEAK: options.speak_word, Decision.SILENT: options.silent_word}


def answer_text(decision: Decision, options: PromptOptions, reasoning: str | None = None) -> str:
    """The assistant reply a model should produce (training target; parsed back by evaluation)."""
    word = answer_strings(options)[decision]
    if options.mode == "decision":
        return word
    if not reasoning:
        raise ValueError("reasoning mode needs a reasoning sentence for the answer text")
    return f"Reasoning: {reasoning.strip()}\nDecision: {word}"


def approx_token_count(text: str) -> int:
    """A tokenizer-free estimate (about 4 characters per BPE token for English)."""
    return math.ceil(len(text) / 4)


def participant_label(p: Participant) -> str:
    if p.name:
        return p.name
    return f"{p.id} ({p.role})" if p.role else p.id


def _labels(inp: DecisionInput) -> dict[str, str]:
    labels = {p.id: participant_label(p) for p in inp.present}
    labels[inp.target.id] = participant_label(inp.target)
    return labels


def _line(u: Utterance, labels: dict[str, str]) -> str:
    return f"{labels.get(u.speaker, u.speaker)}: {u.text}"


def _render(
    templates: PromptTemplates,
    options: PromptOptions,
    inp: DecisionInput,
    history_lines: Sequence[str],
    omitted: int,
) -> list[ChatMessage]:
    words = {"speak": options.speak_word, "silent": options.silent_word}
    system_once = Template(templates.system.strip()).safe_substitute(words)
    system = "\n\n".join([system_once] * options.system_repeats)
    labels = _labels(inp)
    history = list(history_lines)
    if omitted:
        history.insert(0, f"[{omitted} earlier turns omitted]")
    user = Template(templates.user.strip()).safe_substitute(
        participants=", ".join(labels[p.id] for p in inp.present) or labels[inp.target.id],
        target=labels[inp.target.id],
        history="\n".join(history) if history else "(no earlier turns)",
        current=_line(inp.current, labels),
        answer_format=Template(templates.answer_format.strip()).safe_substitute(words),
    )
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]


def messages_token_count(messages: Sequence[ChatMessage], count_tokens: TokenCounter) -> int:
    return sum(count_tokens(m["content"]) for m in messages)


def build_messages(
    inp: DecisionInput,
    options: PromptOptions | None = None,
    *,
    count_tokens: TokenCounter | None = None,
    templates: PromptTemplates | None = None,
) -> list[ChatMessage]:
    """Chat messages (system + user) asking the target of ``inp`` to speak or stay silent.

    With ``options.max_prompt_tokens`` the oldest earlier turns are dropped until the prompt fits
    (counted with ``count_tokens``, default :func:`approx_token_count`); the current utterance is
    always kept, so a prompt may exceed the budget when the current turn alone does.
    """
    return build_messages_kept(inp, options, count_tokens=count_tokens, templates=templates)[0]


def build_messages_kept(
    inp: DecisionInput,
    options: PromptOptions | None = None,
    *,
    count_tokens: TokenCounter | None = None,
    templates: PromptTemplates | None = None,
) -> tuple[list[ChatMessage], int]:
    """:func:`build_messages` and how many earlier turns the token budget kept (0: none)."""
    options = options or PromptOptions()
    templates = templates or load_templates(options)
    labels = _labels(inp)
    lines = [_line(u, labels) for u in inp.history]
    budget = options.max_prompt_tokens
    if budget is None:
        return _render(templates, options, inp, lines, 0), len(lines)

    counter = count_tokens or approx_token_count
    fixed = messages_token_count(_render(templates, options, inp, [], len(lines)), counter)
    # Newest-first selection by per-line counts, then an exact check of the whole prompt
    # (tokenizers merge across line boundaries, so per-line sums are only an estimate).
    room = budget - fixed
    keep = 0
    for line in reversed(lines):
        cost = counter(line + "\n")
        if cost > room:
            break
        room -= cost
        keep += 1
    while True:
        kept = lines[len(lines) - keep :] if keep else []
        messages = _render(templates, options, inp, kept, len(lines) - keep)
        if keep == 0 or messages_token_count(messages, counter) <= budget:
            return messages, keep
        keep -= 1


def prompt_fingerprint(options: PromptOptions) -> str:
    """A hash of the template texts and prompt options (changes when the prompt changes)."""
    templates = load_templates(options)
    payload = {
        "options": {
            k: v
            for k, v in asdict(options).items()
            if k not in ("system_template", "user_template", "answer_template")
        },
        "templates": asdict(templates),
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]
