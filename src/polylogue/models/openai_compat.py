"""OpenAI-compatible chat-completions backend (vLLM, llama.cpp server, Ollama, OpenAI, ...).

A thin adapter: turn-taking prompt -> :class:`polylogue.llm.openai.OpenAIClient` (async, bounded
concurrency, retries honouring ``Retry-After``), wrapped in a
:class:`~polylogue.llm.cache.CachedLM` when ``cache_path`` is set -> :func:`parse_decision`.

* When retries run out, the predictions that did finish are handed back inside
  :class:`PredictionError` so a run keeps them.
* A request the server rejects as invalid for that input (400/413/422, e.g. a prompt over the
  context size) is recorded as an unparseable answer with the error text: it is wrong, not lost.
  So is a 200 reply that is not a chat completion (``choices`` of strings, ``content`` a number,
  ``logprob: "abc"``...), with its raw body in ``raw_output``: the run goes on past it.
  401/403/404 stop the run: they are configuration errors, not properties of a sample.
* P(SPEAK) comes from ``top_logprobs`` at the position of the decision word when the server
  returns them: the probability mass of the first token of each answer word, renormalised.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from polylogue.llm.base import GenerateConfig
from polylogue.llm.cache import with_cache
from polylogue.llm.openai import (
    AnswerTokens,
    ChatResult,
    MalformedResponse,
    OpenAIClient,
    RequestRejected,
    answer_probabilities,
    token_index_at,
)
from polylogue.models.base import (
    ModelSpec,
    Prediction,
    PredictionError,
)
from polylogue.prompts.builder import PromptOptions, build_messages, prompt_fingerprint
from polylogue.prompts.parsing import parse_decision
from polylogue.turntaking.types import DecisionInput

__all__ = [
    "AnswerTokens",
    "OpenAICompatPredictor",
    "answer_probabilities",
    "make_openai_predictor",
]


@dataclass
class OpenAICompatPredictor:
    """Turn-taking prompt -> :class:`~polylogue.llm.openai.OpenAIClient` -> parsed decision."""

    model: str
    base_url: str
    prompt: PromptOptions = field(default_factory=PromptOptions)
    concurrency: int = 8
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int | None = None
    top_logprobs: int = 20
    timeout_s: float = 120.0
    max_retries: int = 5
    backoff_s: float = 1.0
    cache_path: str | None = None
    #: Known first answer tokens; "auto" asks a llama.cpp server's /tokenize once.
    answer_tokens: AnswerTokens | str | None = "auto"
    batch_size: int = 0
    _client: OpenAIClient = field(init=False, repr=False)
    #: ``_client``, wrapped in a response cache when ``cache_path`` is set.
    _llm: Any = field(default=None, init=False, repr=False)
    _resolved_tokens: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if not self.batch_size:
            self.batch_size = self.concurrency * 2
        self._client = OpenAIClient(
            model=self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            concurrency=self.concurrency,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            backoff_s=self.backoff_s,
        )
        # Sampled replies are never cached; no file is opened for a run that samples.
        cached = self.cache_path if self.temperature == 0 else None
        self._llm = with_cache(self._client, cached or None)

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "openai",
            "model": self.model,
            "base_url": self.base_url,
            "prompt": prompt_fingerprint(self.prompt),
            "prompt_mode": self.prompt.mode,
            "system_repeats": self.prompt.system_repeats,
            "max_prompt_tokens": self.prompt.max_prompt_tokens,
            "temperature": self.temperature,
            "max_tokens": self._max_tokens(),
        }

    def _max_tokens(self) -> int:
        if self.max_tokens is not None:
            return self.max_tokens
        return 8 if self.prompt.mode == "decision" else 256

    # ------------------------------------------------------------------ public

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        import asyncio

        return asyncio.run(self._predict_all(inputs))

    # ------------------------------------------------------------------ internals

    async def _predict_all(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        import asyncio

        sem = asyncio.Semaphore(self.concurrency)
        async with self._client.session() as http:
            if self.answer_tokens == "auto" and not self._resolved_tokens:
                self.answer_tokens = await self._discover_answer_tokens(http)
                self._resolved_tokens = True

            async def one(inp: DecisionInput) -> Prediction:
                async with sem:
                    return await self._predict_one(http, inp)

            results = await asyncio.gather(*(one(i) for i in inputs), return_exceptions=True)
        done = [r for r in results if isinstance(r, Prediction)]
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise PredictionError(
                f"{self.name} at {self.base_url}: {len(errors)} of {len(inputs)} requests failed; "
                f"first error: {errors[0]}",
                completed=done,
            )
        return done

    async def _discover_answer_tokens(self, http: Any) -> AnswerTokens | None:
        """Ask a llama.cpp-style ``/tokenize`` for the answer words' first pieces (else None)."""
        pieces = []
        for word in (self.prompt.speak_word, self.prompt.silent_word):
            piece = await self._llm.tokenize_first_piece(http, word)
            if not piece:
                return None
            pieces.append(piece)
        if pieces[0] == pieces[1]:
            return None  # the first token does not separate the answers: no P(SPEAK)
        return AnswerTokens(speak=pieces[0], silent=pieces[1])

    async def _predict_one(self, http: Any, inp: DecisionInput) -> Prediction:
        start = time.perf_counter()
        try:
            config = GenerateConfig(self.temperature, self._max_tokens(), self.top_logprobs)
            result = await self._llm.agenerate(http, build_messages(inp, self.prompt), config)
        except RequestRejected as exc:  # a property of this input: wrong, with the reason
            # A malformed 200 body is kept verbatim (key redacted) so it can be inspected.
            raw = exc.body if isinstance(exc, MalformedResponse) else ""
            latency = time.perf_counter() - start
            return Prediction(
                inp.point_id, None, None, None, raw, latency, extra={"error": str(exc)}
            )
        latency = time.perf_counter() - start
        content = result.text
        parsed = parse_decision(content, self.prompt.speak_word, self.prompt.silent_word)
        reasoning = parsed.reasoning or result.reasoning
        p_speak, p_extra = self._p_speak(result, parsed.decision_offset)
        return Prediction(
            point_id=inp.point_id,
            decision=parsed.decision,
            p_speak=p_speak,
            reasoning=reasoning,
            raw_output=content,
            latency_s=latency,
            extra={
                "cached": result.cached,
                "attempts": result.attempts,
                "finish_reason": result.finish_reason,
                "usage": result.usage,
                "parse_rule": parsed.rule,
                **p_extra,
            },
        )

    def _p_speak(
        self, result: ChatResult, offset: int | None
    ) -> tuple[float | None, dict[str, Any]]:
        import math

        content = result.token_logprobs
        if not content:
            return None, {}
        index = 0 if offset is None else token_index_at(content, offset)
        if index is None:
            return None, {}
        top = content[index].get("top_logprobs") or []
        first = self.answer_tokens if isinstance(self.answer_tokens, AnswerTokens) else None
        ps, pl, ambiguous = answer_probabilities(
            top, self.prompt.speak_word, self.prompt.silent_word, first
        )
        if ps == 0 and pl == 0:
            return None, {"p_speak_note": "answer tokens not in top_logprobs"}
        if ambiguous:
            return None, {"p_speak_note": "first answer tokens ambiguous"}
        bounded = ps == 0 or pl == 0
        if bounded:  # the absent word is below the smallest listed probability
            floor = min(math.exp(float(t["logprob"])) for t in top)
            ps, pl = (floor, pl) if ps == 0 else (ps, floor)
        return ps / (ps + pl), {"p_speak_bounded": bounded}


def make_openai_predictor(spec: ModelSpec, **options: Any) -> OpenAICompatPredictor:
    """Factory for ``openai:MODEL@URL``.

    Options: prompt, concurrency, api_key_env, temperature, max_tokens, top_logprobs, timeout_s,
    max_retries, backoff_s, cache_path, batch_size.
    """
    kwargs = {k: v for k, v in options.items() if v is not None}
    assert spec.url is not None
    return OpenAICompatPredictor(model=spec.target, base_url=spec.url, **kwargs)
