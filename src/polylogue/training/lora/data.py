"""Supervised examples from benchmark points, in exactly the format evaluation uses.

Every example is built from the evaluation prompt builder (:func:`build_messages`, same
options and same token budget, counted with the model's own tokenizer), rendered with the
model's chat template plus the generation prompt, exactly as
:class:`~polylogue.models.hf_local.HFLocalPredictor` renders it at evaluation time. The target
is the assistant turn the chat template writes for :func:`answer_text` (the answer and the
end-of-turn token). The input is the prompt's own tokens followed by the target's tokens as they
continue the prompt, which is what the model sees at inference time (prompt tokens, then
generated tokens). The loss covers the target tokens only: every prompt position carries the
label ``-100``. :func:`check_example` verifies that mask.

This fixes the reference implementation's train/eval mismatch (notes D.10.8): raw pseudo-tags
in training but chat templates in zero-shot evaluation, untruncated training contexts but a
2,048-token budget at evaluation, and a system prompt asking for three tags in decision mode.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from polylogue.prompts.builder import (
    ChatMessage,
    PromptOptions,
    answer_text,
    build_messages_kept,
)
from polylogue.training.lora.sampler import four_way_group
from polylogue.turntaking.types import CATEGORIES, DecisionPoint

IGNORE_INDEX = -100


@dataclass(frozen=True, slots=True)
class SFTExample:
    point_id: str
    category: str
    label: str
    input_ids: tuple[int, ...]
    #: ``IGNORE_INDEX`` on prompt positions, the token id on answer positions.
    labels: tuple[int, ...]
    prompt_text: str
    completion_text: str
    #: The point has earlier turns but the prompt budget left none of them in the prompt.
    history_dropped: bool = False

    @property
    def n_prompt_tokens(self) -> int:
        return sum(1 for x in self.labels if x == IGNORE_INDEX)

    @property
    def n_answer_tokens(self) -> int:
        return len(self.labels) - self.n_prompt_tokens


@dataclass
class ExampleReport:
    """What happened to each point while building examples (saved with the run)."""

    n_points: int = 0
    n_examples: int = 0
    #: Points left out because they had no usable reasoning target (reasoning mode).
    missing_reasoning: list[str] = field(default_factory=list)
    #: Points left out because prompt + answer exceed ``max_seq_length``.
    too_long: list[str] = field(default_factory=list)
    #: Points with earlier turns of which the prompt budget kept none (context-blind prompts).
    history_dropped: list[str] = field(default_factory=list)
    categories: dict[str, int] = field(default_factory=dict)
    max_tokens: int = 0
    mean_tokens: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_points": self.n_points,
            "n_examples": self.n_examples,
            "n_missing_reasoning": len(self.missing_reasoning),
            "missing_reasoning_examples": self.missing_reasoning[:20],
            "n_too_long": len(self.too_long),
            "too_long_examples": self.too_long[:20],
            "n_history_dropped": len(self.history_dropped),
            "history_dropped_examples": self.history_dropped[:20],
            "categories": self.categories,
            "max_tokens": self.max_tokens,
            "mean_tokens": round(self.mean_tokens, 1),
        }


def token_counter(tokenizer: Any) -> Any:
    """The token count the evaluation backend uses for prompt budgets."""

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count


def render_prompt(tokenizer: Any, messages: Sequence[ChatMessage]) -> str:
    """Chat-template text of the prompt with the assistant generation prefix (as evaluation)."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError(
            "the tokenizer has no chat template; training and evaluation both need the model's "
            "chat template (use an instruction-tuned model)"
        )
    return str(
        tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    )


def render_completion(
    tokenizer: Any, messages: Sequence[ChatMessage], prompt: str, answer: str
) -> str:
    """The text the chat template writes after ``prompt`` for the assistant reply ``answer``.

    Usually ``answer`` plus the end-of-turn token. Whitespace the template puts *between* turns
    is dropped (it is never generated). Templates that rewrite earlier turns when a reply is
    appended fall back to ``answer`` + EOS.
    """
    full = str(
        tokenizer.apply_chat_template(
            [*messages, {"role": "assistant", "content": answer}], tokenize=False
        )
    )
    if full.startswith(prompt):
        tail = full[len(prompt) :].rstrip()
        if answer in tail:
            return tail
    return answer + (tokenizer.eos_token or "")


def build_example(
    point: DecisionPoint,
    tokenizer: Any,
    options: PromptOptions,
    reasoning: str | None = None,
) -> SFTExample:
    messages, kept = build_messages_kept(
        point.input, options, count_tokens=token_counter(tokenizer)
    )
    prompt = render_prompt(tokenizer, messages)
    answer = answer_text(point.gold.label, options, reasoning)
    completion = render_completion(tokenizer, messages, prompt, answer)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    # The answer tokens as they follow the prompt (how the evaluation backend finds the first
    # answer token); separate tokenisation only if the tokenizer merges across the boundary.
    joint = tokenizer(prompt + completion, add_special_tokens=False)["input_ids"]
    if joint[: len(prompt_ids)] == prompt_ids:
        answer_ids = joint[len(prompt_ids) :]
    else:
        answer_ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    if not answer_ids:
        raise ValueError(f"point {point.point_id}: the answer tokenises to nothing")
    return SFTExample(
        point_id=point.point_id,
        category=point.gold.category.value,
        label=point.gold.label.value,
        input_ids=tuple(prompt_ids) + tuple(answer_ids),
        labels=(IGNORE_INDEX,) * len(prompt_ids) + tuple(answer_ids),
        prompt_text=prompt,
        completion_text=completion,
        history_dropped=bool(point.input.history) and kept == 0,
    )


def check_example(example: SFTExample, tokenizer: Any) -> None:
    """Raise unless the loss covers exactly the answer: prompt masked, answer tokens intact."""
    if len(example.input_ids) != len(example.labels):
        raise AssertionError(f"{example.point_id}: input_ids and labels differ in length")
    first = next(i for i, x in enumerate(example.labels) if x != IGNORE_INDEX)
    if any(x == IGNORE_INDEX for x in example.labels[first:]):
        raise AssertionError(f"{example.point_id}: masked tokens inside the answer span")
    if list(example.labels[first:]) != list(example.input_ids[first:]):
        raise AssertionError(f"{example.point_id}: answer labels differ from the input tokens")
    prompt_ids = tokenizer(example.prompt_text, add_special_tokens=False)["input_ids"]
    if first != len(prompt_ids):
        raise AssertionError(f"{example.point_id}: mask does not end where the prompt ends")
    decoded = tokenizer.decode(list(example.labels[first:]), skip_special_tokens=False)
    # Whitespace-insensitive: SentencePiece decoders may drop a leading space of a suffix.
    if "".join(decoded.split()) != "".join(example.completion_text.split()):
        raise AssertionError(
            f"{example.point_id}: trained tokens decode to {decoded!r}, expected "
            f"{example.completion_text!r}"
        )


def build_examples(
    points: Sequence[DecisionPoint],
    tokenizer: Any,
    options: PromptOptions,
    reasoning: Mapping[str, str] | None = None,
    max_seq_length: int | None = None,
) -> tuple[list[SFTExample], ExampleReport]:
    """Examples for ``points``; in reasoning mode, points without a reasoning target are left
    out (and listed in the report), never trained on a placeholder."""
    report = ExampleReport(n_points=len(points))
    out: list[SFTExample] = []
    for point in points:
        why = None
        if options.mode == "reasoning":
            why = (reasoning or {}).get(point.point_id)
            if not why:
                report.missing_reasoning.append(point.point_id)
                continue
        ex = build_example(point, tokenizer, options, why)
        if max_seq_length is not None and len(ex.input_ids) > max_seq_length:
            report.too_long.append(point.point_id)
            continue
        out.append(ex)
        if ex.history_dropped:
            report.history_dropped.append(point.point_id)
    report.n_examples = len(out)
    report.categories = dict(sorted(Counter(e.category for e in out).items()))
    lengths = [len(e.input_ids) for e in out]
    report.max_tokens = max(lengths, default=0)
    report.mean_tokens = sum(lengths) / len(lengths) if lengths else 0.0
    return out, report


def history_warning(report: ExampleReport, max_prompt_tokens: int) -> str | None:
    """A warning when the prompt budget left some examples without any earlier turn."""
    n = len(report.history_dropped)
    if not n:
        return None
    return (
        f"warning: the prompt budget ({max_prompt_tokens} tokens) drops ALL earlier turns from "
        f"{n} of {report.n_examples} training examples (e.g. {report.history_dropped[0]}): they "
        "see only the current utterance; raise max_prompt_tokens or shorten the templates"
    )


def stratified_subset(
    points: Sequence[DecisionPoint], n: int | None, seed: int
) -> list[DecisionPoint]:
    """At most ``n`` points with the categories' shares kept (every present category >= 1
    while ``n`` allows; with fewer slots than categories the rarest are left out).

    Deterministic for a seed; the original order is kept so runs are reproducible.
    """
    chosen = _stratified_indices([p.gold.category.value for p in points], n, seed)
    return [points[i] for i in chosen]


def _stratified_indices(categories: Sequence[str], n: int | None, seed: int) -> list[int]:
    if n is None or n >= len(categories):
        return list(range(len(categories)))
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(categories):
        by_cat[c].append(i)
    rng = random.Random(seed)
    total = len(categories)
    quota = {c: max(1, round(n * len(ix) / total)) for c, ix in by_cat.items()}
    # Trim the largest quotas until the total fits (rounding and the >=1 floor can overshoot).
    while sum(quota.values()) > n:
        biggest = max(quota, key=lambda c: quota[c])
        if quota[biggest] <= 1:
            break
        quota[biggest] -= 1
    # More categories than n (five since benchmark v2 added SA): keep "at most n" by leaving
    # out the rarest categories.
    for c in sorted(quota, key=lambda c: (len(by_cat[c]), c)):
        if sum(quota.values()) <= n:
            break
        quota[c] = 0
    chosen: set[int] = set()
    for c in sorted(by_cat):
        chosen.update(rng.sample(by_cat[c], min(quota[c], len(by_cat[c]))))
    return sorted(chosen)


def training_subset(
    points: Sequence[DecisionPoint], n: int | None, seed: int, balance: str = "natural"
) -> list[DecisionPoint]:
    """The training points of a run: all of them, or ``n`` of them.

    ``balance="natural"`` keeps the categories' shares (:func:`stratified_subset`).
    ``"four_way"`` takes an equal share of I1, I2, S1 and S2 (SA and S3 count as S2, as in the
    balanced sampler), each category short of its share giving its slots to the others. On a
    natural-ratio build a small natural subset holds only a handful of I1/S2 points: the
    four-way sampler then repeats them up to its cap and cuts the epoch to what they fill
    (128 points of Friends + AMI: 2 I1, 2 S2+SA, so 8 batches an epoch instead of 32).
    """
    chosen = subset_indices([p.gold.category.value for p in points], n, seed, balance)
    return [points[i] for i in chosen]


def subset_indices(
    categories: Sequence[str], n: int | None, seed: int, balance: str = "natural"
) -> list[int]:
    """Indices (in order) of :func:`training_subset`, from the points' categories alone."""
    if balance == "natural":
        return _stratified_indices(categories, n, seed)
    if balance != "four_way":
        raise ValueError(f"training subset balance must be natural or four_way, not {balance!r}")
    if n is None or n >= len(categories):
        return list(range(len(categories)))
    pools: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(categories):
        pools[four_way_group(c)].append(i)
    rng = random.Random(seed)
    for ix in pools.values():
        rng.shuffle(ix)
    quota = dict.fromkeys(pools, 0)
    left = n
    while left > 0:  # deal one slot per category in turn while a category has points left
        open_cats = [c for c in sorted(pools) if quota[c] < len(pools[c])]
        if not open_cats:
            break
        for c in open_cats[:left]:
            quota[c] += 1
        left = n - sum(quota.values())
    return sorted(i for c, ix in pools.items() for i in ix[: quota[c]])


def load_subset(
    folders: Sequence[str], split: str, n: int | None, seed: int, balance: str = "natural"
) -> list[DecisionPoint]:
    """:func:`training_subset` of the combined split, building only the chosen points.

    The subset is drawn from the split's point index (ids and categories); only its points
    are built. For 128 of the 146,562 Friends + AMI training points this took 2.6 CPU-s and
    340 MB of peak RSS, against 26.9 CPU-s and 839 MB for building the whole split first.
    """
    from polylogue.turntaking.dataset import load_benchmark, load_split_points

    if n is None:
        return load_split_points(folders, split)
    benches = [load_benchmark(f) for f in folders]
    keys = [(b, k) for b in benches for k in b.point_index(split)]
    ids = [k.point_id for _, k in keys]
    if len(set(ids)) != len(ids):  # the same refusal as load_split_points
        return training_subset(load_split_points(folders, split), n, seed, balance)
    chosen = subset_indices([k.category for _, k in keys], n, seed, balance)
    out: list[DecisionPoint] = []
    for bench in benches:
        wanted = [keys[i][1].point_id for i in chosen if keys[i][0] is bench]
        out.extend(bench.points_by_id(split, wanted))
    return out


def category_counts(points: Sequence[DecisionPoint]) -> dict[str, int]:
    counts = Counter(p.gold.category.value for p in points)
    return {c.value: counts.get(c.value, 0) for c in CATEGORIES}


def to_hf_dataset(examples: Sequence[SFTExample]) -> Any:
    """A ``datasets.Dataset`` with ``input_ids``, ``labels`` (masked) and ``category``."""
    from datasets import Dataset

    return Dataset.from_dict(
        {
            "input_ids": [list(e.input_ids) for e in examples],
            "labels": [list(e.labels) for e in examples],
            "category": [e.category for e in examples],
            "point_id": [e.point_id for e in examples],
        }
    )
