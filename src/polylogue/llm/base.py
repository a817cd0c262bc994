"""The two primitives every LLM client implements, and the types they exchange.

A client (:class:`~polylogue.llm.openai.OpenAIClient`, :class:`~polylogue.llm.hf.HFCausalLM`,
or :class:`~polylogue.llm.cache.CachedLM` around either) offers:

* ``describe() -> dict``: what determines its answers (model, server or weights hash), never a
  secret; the response cache keys on it;
* ``generate(messages, config) -> ChatResult``: one reply (``generate_batch`` for many);
* ``score(messages, continuations, options) -> ScoreResult``: how likely each continuation is
  as the start of the reply (``score_batch`` for many). Local models only: over an API the
  ``top_logprobs`` of a ``generate`` call play that role
  (:func:`polylogue.llm.openai.answer_probabilities`).

A reply is a :class:`ChatResult` around an OpenAI-style chat-completion body whatever the
client, so a cached reply is that body and one validator (:func:`chat_body_problem`) checks it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Messages = Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class GenerateConfig:
    """Decoding options of one ``generate`` request (part of the cache key)."""

    #: 0 is greedy/deterministic: the only setting whose replies are cached.
    temperature: float = 0.0
    max_tokens: int | None = None
    #: Alternatives returned per generated token (OpenAI-compatible servers).
    top_logprobs: int = 0
    #: Keep only the last N prompt tokens (local models; the end holds the question).
    max_prompt_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ScoreOptions:
    """How ``score`` reads the continuations (part of the cache key).

    By default each continuation's summed log-probability after the prompt and ``prefix``,
    each piece tokenized on its own (prompt, then every prefix piece, then the continuation).
    """

    #: Text the reply already holds before the continuation (e.g. ``{"Q1":"``), in pieces.
    prefix: tuple[str, ...] = ()
    #: The probability (not log) of each continuation's first token only, as the model would
    #: write it right after the assistant prefix; prompts of a batch share one forward pass.
    first_token: bool = False
    #: Tokenize prompt + prefix + continuation as one text, so a continuation that merges with
    #: the end of the prefix is scored the way the model would write it.
    joined: bool = False
    #: Keep only the last N prompt tokens (piece-wise scoring only).
    max_prompt_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ScoreResult:
    """One value per continuation (see :class:`ScoreOptions`) and the prompt's size."""

    values: tuple[float, ...]
    prompt_tokens: int
    truncated: bool = False
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "values": list(self.values),
            "prompt_tokens": self.prompt_tokens,
            "truncated": self.truncated,
        }

    @classmethod
    def from_json(cls, data: Any, n: int) -> ScoreResult | None:
        """The stored result, or None when ``data`` is not one with ``n`` finite values."""
        if not isinstance(data, dict) or not isinstance(data.get("values"), list):
            return None
        values = data["values"]
        ok = len(values) == n and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in values
        )
        if not ok or not isinstance(data.get("prompt_tokens"), int):
            return None
        return cls(
            tuple(float(v) for v in values),
            data["prompt_tokens"],
            bool(data.get("truncated")),
            True,
        )


@dataclass(frozen=True, slots=True)
class ChatResult:
    """One chat completion: the response body and how it was obtained."""

    body: Mapping[str, Any]
    attempts: int = 0
    cached: bool = False

    @property
    def choice(self) -> Mapping[str, Any]:
        choice: Mapping[str, Any] = self.body["choices"][0]
        return choice

    @property
    def text(self) -> str:
        return str((self.choice.get("message") or {}).get("content") or "")

    @property
    def reasoning(self) -> str | None:
        """A server-side reasoning channel (``reasoning_content``), when the server has one."""
        return (self.choice.get("message") or {}).get("reasoning_content") or None

    @property
    def finish_reason(self) -> str | None:
        return self.choice.get("finish_reason")

    @property
    def usage(self) -> Mapping[str, Any] | None:
        return self.body.get("usage")

    @property
    def token_logprobs(self) -> list[dict[str, Any]]:
        """Per generated token: ``token``, ``logprob`` and ``top_logprobs`` (empty if absent)."""
        return list(((self.choice.get("logprobs") or {}).get("content")) or [])


def chat_body(text: str, usage: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI-style chat-completion body for a locally generated reply."""
    return {
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": None}],
        "usage": dict(usage),
    }


def chat_body_problem(body: Any) -> str | None:
    """Why ``body`` is not a usable chat completion, or None when it is.

    Checked: ``choices`` is a non-empty list of objects; the first has a ``message`` object
    (or none) whose ``content`` is text or null; ``logprobs.content`` (when present) is a list
    of objects whose ``logprob`` values, and those of their ``top_logprobs``, are finite numbers.
    """
    if not isinstance(body, dict):
        return f"body is a JSON {type(body).__name__}, not an object"
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        return "no choices list in response"
    choice = choices[0]
    if not isinstance(choice, dict):
        return f"choices[0] is a JSON {type(choice).__name__}, not an object"
    message = choice.get("message")
    if message is not None and not isinstance(message, dict):
        return "choices[0].message is not an object"
    content = (message or {}).get("content")
    if content is not None and not isinstance(content, str):
        return f"message content is a JSON {type(content).__name__}, not text"
    reasoning = (message or {}).get("reasoning_content")
    if reasoning is not None and not isinstance(reasoning, str):
        return "reasoning_content is not text"
    if body.get("usage") is not None and not isinstance(body.get("usage"), dict):
        return "usage is not an object"
    logprobs = choice.get("logprobs")
    if logprobs is None:
        return None
    if not isinstance(logprobs, dict):
        return "choices[0].logprobs is not an object"
    tokens = logprobs.get("content")
    if tokens is None:
        return None
    if not isinstance(tokens, list):
        return "logprobs.content is not a list"
    for i, tok in enumerate(tokens):
        entries = [tok, *((tok.get("top_logprobs") or []) if isinstance(tok, dict) else [])]
        if isinstance(tok, dict) and not isinstance(tok.get("top_logprobs") or [], list):
            return f"logprobs.content[{i}].top_logprobs is not a list"
        for entry in entries:
            if not isinstance(entry, dict):
                return f"logprobs.content[{i}] holds a non-object"
            lp = entry.get("logprob")
            if isinstance(lp, bool) or not isinstance(lp, int | float) or not math.isfinite(lp):
                return f"logprobs.content[{i}] has logprob {lp!r}, not a finite number"
    return None


class ScoresInBatches:
    """``score`` for a client that scores in batches (``score_batch``): a batch of one."""

    def score(
        self,
        messages: Messages,
        continuations: Sequence[str],
        options: ScoreOptions = ScoreOptions(),
    ) -> ScoreResult:
        return self.score_batch([(messages, continuations)], options)[0]

    def score_batch(
        self, requests: Sequence[tuple[Messages, Sequence[str]]], options: ScoreOptions
    ) -> list[ScoreResult]:
        raise NotImplementedError


class LLMClient(Protocol):
    """What :class:`~polylogue.llm.cache.CachedLM` wraps (a client may lack ``score``)."""

    def describe(self) -> dict[str, Any]: ...

    def generate(self, messages: Messages, config: GenerateConfig = ...) -> ChatResult: ...
