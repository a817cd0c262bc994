"""OpenAI-compatible chat-completions backend (vLLM, llama.cpp server, Ollama, OpenAI, ...).

* Async requests with bounded concurrency inside a synchronous ``predict``.
* Retries with exponential backoff (and ``Retry-After``) on 429, 5xx, timeouts and connection
  errors; a malformed response body is retried too. When retries run out, the predictions that
  did finish are handed back inside :class:`PredictionError` so a run keeps them.
* A request the server rejects as invalid for that input (400/413/422, e.g. a prompt over the
  context size) is recorded as an unparseable answer with the error text: it is wrong, not lost.
  401/403/404 stop the run: they are configuration errors, not properties of a sample.
* The API key is read from the environment variable named by ``api_key_env``; it is sent in
  the ``Authorization`` header only, and never enters descriptions, caches, logs or run folders.
* P(SPEAK) comes from ``top_logprobs`` at the position of the decision word when the server
  returns them: the probability mass of the first token of each answer word, renormalised.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from polylogue.evaluation.parsing import parse_decision
from polylogue.models.base import ModelSpec, Prediction, PredictionError
from polylogue.models.cache import ResponseCache, request_key
from polylogue.prompts.builder import PromptOptions, build_messages, prompt_fingerprint
from polylogue.turntaking.types import DecisionInput

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
FATAL_STATUS = frozenset({401, 403, 404})


class _Retryable(Exception):
    pass


@dataclass(frozen=True, slots=True)
class AnswerTokens:
    """The first token of each answer word as the model generates it (pieces, no whitespace)."""

    speak: str
    silent: str


def answer_probabilities(
    top: Sequence[dict[str, Any]], speak_word: str, silent_word: str, first: AnswerTokens | None
) -> tuple[float, float, bool]:
    """(P(first token of SPEAK), P(first token of SILENT), whether the pieces were ambiguous).

    With known first tokens a candidate counts when its stripped text equals that token. Without
    them a candidate counts for a word it is a prefix of; a piece that is a prefix of both ("S"
    for SPEAK/SILENT) is given to the word whose longer prefix does *not* appear, else left out.
    """
    probs = [(str(t.get("token", "")).strip(), math.exp(float(t["logprob"]))) for t in top]
    p_speak = p_silent = 0.0
    ambiguous = 0.0
    if first is not None:
        for tok, p in probs:
            if tok and tok == first.speak:
                p_speak += p
            elif tok and tok == first.silent:
                p_silent += p
        return p_speak, p_silent, False
    sw, lw = speak_word.upper(), silent_word.upper()
    longer_speak = longer_silent = False
    for tok, p in probs:
        u = tok.upper()
        if not u:
            continue
        a, b = sw.startswith(u), lw.startswith(u)
        if a and b:
            ambiguous += p
        elif a:
            p_speak += p
            longer_speak = True
        elif b:
            p_silent += p
            longer_silent = True
    if ambiguous and longer_speak != longer_silent:
        if longer_speak:
            p_silent += ambiguous
        else:
            p_speak += ambiguous
        return p_speak, p_silent, False
    return p_speak, p_silent, ambiguous > 0


def _token_index_at(tokens: Sequence[dict[str, Any]], offset: int) -> int | None:
    pos = 0
    for i, t in enumerate(tokens):
        pos += len(str(t.get("token", "")))
        if pos > offset:
            return i
    return None


@dataclass
class OpenAICompatPredictor:
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
    _cache: ResponseCache | None = field(default=None, init=False, repr=False)
    _logprobs_ok: bool = field(default=True, init=False, repr=False)
    _resolved_tokens: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if not self.batch_size:
            self.batch_size = self.concurrency * 2
        if self.cache_path and self.temperature == 0:
            self._cache = ResponseCache(self.cache_path)

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

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env)
        return {"Authorization": f"Bearer {key}"} if key else {}

    # ------------------------------------------------------------------ public

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        return asyncio.run(self._predict_all(inputs))

    # ------------------------------------------------------------------ internals

    async def _predict_all(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        sem = asyncio.Semaphore(self.concurrency)
        # No keep-alive: xllamacpp drops pooled connections after some responses
        # (offline-models.md), and one TCP handshake per LLM call costs nothing in comparison.
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=0)
        async with httpx.AsyncClient(
            timeout=self.timeout_s, limits=limits, headers=self._headers()
        ) as client:
            if self.answer_tokens == "auto" and not self._resolved_tokens:
                self.answer_tokens = await self._discover_answer_tokens(client)
                self._resolved_tokens = True

            async def one(inp: DecisionInput) -> Prediction:
                async with sem:
                    return await self._predict_one(client, inp)

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

    async def _discover_answer_tokens(self, client: httpx.AsyncClient) -> AnswerTokens | None:
        """Ask a llama.cpp-style ``/tokenize`` for the answer words' first pieces (else None)."""
        root = self.base_url.removesuffix("/v1")
        pieces = []
        for word in (self.prompt.speak_word, self.prompt.silent_word):
            try:
                r = await client.post(
                    f"{root}/tokenize", json={"content": word, "with_pieces": True}, timeout=10
                )
                toks = r.json()["tokens"] if r.status_code == 200 else None
                piece = toks[0]["piece"] if toks and isinstance(toks[0], dict) else None
            except (httpx.HTTPError, ValueError, KeyError, TypeError, IndexError):
                piece = None
            if not piece:
                return None
            pieces.append(str(piece).strip())
        if pieces[0] == pieces[1]:
            return None  # the first token does not separate the answers: no P(SPEAK)
        return AnswerTokens(speak=pieces[0], silent=pieces[1])

    def _payload(self, inp: DecisionInput) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": build_messages(inp, self.prompt),
            "temperature": self.temperature,
            "max_tokens": self._max_tokens(),
        }
        if self._logprobs_ok and self.top_logprobs > 0:
            payload["logprobs"] = True
            payload["top_logprobs"] = self.top_logprobs
        return payload

    async def _predict_one(self, client: httpx.AsyncClient, inp: DecisionInput) -> Prediction:
        start = time.perf_counter()
        payload = self._payload(inp)
        key = (
            request_key({"url": self.base_url, "payload": payload})
            if self._cache is not None
            else None
        )
        cached = self._cache.get(key) if self._cache is not None and key else None
        attempts = 0
        if cached is not None:
            body = cached
        else:
            body, attempts = await self._post_with_retries(client, payload)
            if "error" not in body and self._cache is not None and key:
                self._cache.put(key, body)
        latency = time.perf_counter() - start
        if "error" in body:  # rejected for this input: recorded as unparseable, with the reason
            return Prediction(
                inp.point_id, None, None, None, "", latency, extra={"error": body["error"]}
            )
        choice = body["choices"][0]
        message = choice.get("message") or {}
        content = message.get("content") or ""
        parsed = parse_decision(content, self.prompt.speak_word, self.prompt.silent_word)
        reasoning = parsed.reasoning or message.get("reasoning_content") or None
        p_speak, p_extra = self._p_speak(choice, parsed.decision_offset)
        return Prediction(
            point_id=inp.point_id,
            decision=parsed.decision,
            p_speak=p_speak,
            reasoning=reasoning,
            raw_output=content,
            latency_s=latency,
            extra={
                "cached": cached is not None,
                "attempts": attempts,
                "finish_reason": choice.get("finish_reason"),
                "usage": body.get("usage"),
                "parse_rule": parsed.rule,
                **p_extra,
            },
        )

    def _p_speak(
        self, choice: dict[str, Any], offset: int | None
    ) -> tuple[float | None, dict[str, Any]]:
        content = ((choice.get("logprobs") or {}).get("content")) or []
        if not content:
            return None, {}
        index = 0 if offset is None else _token_index_at(content, offset)
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

    async def _post_with_retries(
        self, client: httpx.AsyncClient, payload: dict[str, Any]
    ) -> tuple[dict[str, Any], int]:
        url = f"{self.base_url}/chat/completions"
        last: Exception | None = None
        for attempt in range(1, self.max_retries + 2):
            try:
                return await self._post_once(client, url, payload), attempt
            except _Retryable as exc:
                last = exc
                retry_after = getattr(exc, "retry_after", None)
            if attempt > self.max_retries:
                break
            delay = retry_after if retry_after is not None else self.backoff_s * 2 ** (attempt - 1)
            await asyncio.sleep(min(60.0, delay) * (1 + 0.1 * random.random()))
        raise RuntimeError(f"gave up after {self.max_retries + 1} attempts: {last}")

    async def _post_once(
        self, client: httpx.AsyncClient, url: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        try:
            r = await client.post(url, json=payload)
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
        if r.status_code in RETRY_STATUS or r.status_code >= 500:
            err = _Retryable(f"HTTP {r.status_code}: {r.text[:200]}")
            ra = r.headers.get("retry-after")
            err.retry_after = float(ra) if ra and ra.replace(".", "", 1).isdigit() else None  # type: ignore[attr-defined]
            raise err
        if r.status_code in FATAL_STATUS:
            raise PredictionError(f"HTTP {r.status_code} from {url}: {r.text[:300]}")
        if r.status_code >= 400:
            text = r.text[:500]
            if self._logprobs_ok and "logprob" in text.lower() and "logprobs" in payload:
                # Some servers/models refuse logprobs: drop them for the rest of the run.
                self._logprobs_ok = False
                payload = {
                    k: v for k, v in payload.items() if k not in ("logprobs", "top_logprobs")
                }
                return await self._post_once(client, url, payload)
            return {"error": f"HTTP {r.status_code}: {text}"}
        try:
            body = r.json()
            if not isinstance(body, dict) or not body.get("choices"):
                raise ValueError("no choices in response")
        except ValueError as exc:
            raise _Retryable(f"malformed response ({exc}): {r.text[:200]!r}") from exc
        return body


def make_openai_predictor(spec: ModelSpec, **options: Any) -> OpenAICompatPredictor:
    """Factory for ``openai:MODEL@URL``.

    Options: prompt, concurrency, api_key_env, temperature, max_tokens, top_logprobs, timeout_s,
    max_retries, backoff_s, cache_path, batch_size.
    """
    allowed = {
        "prompt",
        "concurrency",
        "api_key_env",
        "temperature",
        "max_tokens",
        "top_logprobs",
        "timeout_s",
        "max_retries",
        "backoff_s",
        "cache_path",
        "batch_size",
    }
    kwargs = {k: v for k, v in options.items() if k in allowed and v is not None}
    if options.get("adapter"):
        raise ValueError("LoRA adapters are served by the server; --adapter is for hf: models")
    assert spec.url is not None
    return OpenAICompatPredictor(model=spec.target, base_url=spec.url, **kwargs)
