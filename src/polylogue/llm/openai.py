"""One OpenAI-compatible chat-completions client (vLLM, llama.cpp server, Ollama, OpenAI, ...).

* Async requests with bounded concurrency (:meth:`OpenAIClient.generate_many`), or one at a
  time (:meth:`OpenAIClient.generate`).
* Retries with exponential backoff, honouring ``Retry-After``, on 408/409/425/429, 5xx,
  timeouts, dropped connections and bodies that are not JSON; :class:`RetriesExhausted` when
  they run out. A server that refuses the connection (nothing listening, unknown host) gets one
  quick retry, then :class:`ServerUnreachable` names the URL: a dead server fails in about a
  second, not after the whole backoff.
* 400/413/422 (e.g. a prompt over the context size) raise :class:`RequestRejected`: a property
  of that input, which a task records as an unparseable answer. 401/403/404 raise
  :class:`ServerConfigError`: the configuration is wrong, stop.
* A 200 body that is JSON but not a chat completion (``choices`` not a list of objects,
  ``content`` neither text nor null, a ``logprob`` that is not a finite number...) raises
  :class:`MalformedResponse` (a :class:`RequestRejected`) holding the raw body, without retrying:
  a task records that point as unparseable and the run goes on. Such a body is never cached.
* A server that refuses ``logprobs`` is asked again without them, and not asked for them again.
* The API key is read from the environment variable ``api_key_env`` and sent only in the
  ``Authorization`` header: it never enters payloads, cache keys or descriptions, and every
  text the server sends back (bodies, error messages) has it replaced by ``[REDACTED]``
  before anyone sees it, so a server echoing the header cannot put it on disk.
* No cache of its own: wrap the client in :class:`~polylogue.llm.cache.CachedLM`
  (:func:`~polylogue.llm.cache.with_cache`), which keys on :meth:`OpenAIClient.describe`
  (model and base URL, never the key) and the request.

:func:`answer_probabilities` is the ``score`` primitive over an API: it turns the
``top_logprobs`` at one position into the probability of two answers' first tokens.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from polylogue.llm.base import ChatResult, GenerateConfig, Messages, chat_body_problem

__all__ = [
    "AnswerTokens",
    "ChatResult",
    "MalformedResponse",
    "OpenAIClient",
    "RequestRejected",
    "RetriesExhausted",
    "ServerConfigError",
    "ServerUnreachable",
    "answer_probabilities",
    "chat_body_problem",
    "redact",
    "token_index_at",
]

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
FATAL_STATUS = frozenset({401, 403, 404})


class RequestRejected(Exception):
    """The server rejected this request as invalid for its input (400/413/422)."""


class ServerConfigError(RuntimeError):
    """Authentication, permission or not-found: the run's configuration is wrong (401/403/404)."""


class MalformedResponse(RequestRejected):
    """A 200 reply that is not a usable chat completion; ``body`` is its (redacted) raw text."""

    def __init__(self, message: str, body: str) -> None:
        super().__init__(message)
        self.body = body


class RetriesExhausted(RuntimeError):
    """Every attempt failed with a retryable error (server down, overloaded, garbage)."""


class ServerUnreachable(RetriesExhausted):
    """Nothing accepts connections at the server's URL (refused, unknown host)."""


#: Retries after a refused connection (one, after :data:`CONNECT_RETRY_DELAY_S`): a server that
#: is starting gets a second chance, a dead one fails fast.
CONNECT_RETRIES = 1
CONNECT_RETRY_DELAY_S = 0.5

REDACTED = "[REDACTED]"


class _Retryable(Exception):
    def __init__(
        self, message: str, retry_after: float | None = None, *, refused: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        #: The connection was refused: retried at most :data:`CONNECT_RETRIES` times.
        self.refused = refused


def redact(value: Any, secret: str | None) -> Any:
    """``value`` with every occurrence of ``secret`` in its strings (keys too) replaced."""
    if not secret:
        return value
    if isinstance(value, str):
        return value.replace(secret, REDACTED)
    if isinstance(value, Mapping):
        return {redact(k, secret): redact(v, secret) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, secret) for v in value]
    return value


def _parse_retry_after(value: str | None) -> float | None:
    return float(value) if value and value.replace(".", "", 1).isdigit() else None


@dataclass
class OpenAIClient:
    """A chat-completions client for one model on one server."""

    model: str
    base_url: str
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 5
    backoff_s: float = 1.0
    _logprobs_ok: bool = field(default=True, init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")

    def describe(self) -> dict[str, Any]:
        """What determines the replies (never the API key)."""
        return {"kind": "openai", "model": self.model, "base_url": self.base_url}

    def _api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None

    def _redact(self, text: str) -> str:
        return str(redact(text, self._api_key()))

    @property
    def root_url(self) -> str:
        """The server root (``base_url`` without ``/v1``), for llama.cpp's ``/tokenize``."""
        return self.base_url.removesuffix("/v1")

    def payload(self, messages: Messages, config: GenerateConfig) -> dict[str, Any]:
        """The request body (``max_prompt_tokens`` is the server's business: not sent)."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": config.temperature,
        }
        if config.max_tokens is not None:
            payload["max_tokens"] = config.max_tokens
        if self._logprobs_ok and config.top_logprobs > 0:
            payload["logprobs"] = True
            payload["top_logprobs"] = config.top_logprobs
        return payload

    # ------------------------------------------------------------------ sessions

    def session(self) -> Any:
        """An ``httpx.AsyncClient`` sized to the concurrency, with the key in its headers."""
        import httpx

        # No keep-alive: xllamacpp drops pooled connections after some responses
        # (offline-models.md), and one TCP handshake per LLM call costs nothing in comparison.
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=0)
        key = self._api_key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.AsyncClient(timeout=self.timeout_s, limits=limits, headers=headers)

    def generate(self, messages: Messages, config: GenerateConfig = GenerateConfig()) -> ChatResult:
        """One chat completion, synchronously."""

        async def run() -> ChatResult:
            async with self.session() as http:
                return await self.agenerate(http, messages, config)

        return asyncio.run(run())

    def generate_many(
        self, requests: Sequence[Messages], config: GenerateConfig = GenerateConfig()
    ) -> list[ChatResult | BaseException]:
        """Chat completions for many message lists, ``concurrency`` at a time, in order.

        Each slot holds the result or the exception of that request, so one failure never
        discards the others.
        """

        async def run() -> list[ChatResult | BaseException]:
            sem = asyncio.Semaphore(self.concurrency)
            async with self.session() as http:

                async def one(messages: Messages) -> ChatResult:
                    async with sem:
                        return await self.agenerate(http, messages, config)

                return await asyncio.gather(*(one(m) for m in requests), return_exceptions=True)

        return asyncio.run(run())

    async def agenerate(
        self, http: Any, messages: Messages, config: GenerateConfig = GenerateConfig()
    ) -> ChatResult:
        """One chat completion on an open session (:meth:`session`)."""
        body, attempts = await self._post_with_retries(http, self.payload(messages, config))
        return ChatResult(body, attempts, False)

    async def tokenize_first_piece(self, http: Any, text: str) -> str | None:
        """The first token piece of ``text`` from a llama.cpp-style ``/tokenize`` (else None)."""
        import httpx

        try:
            r = await http.post(
                f"{self.root_url}/tokenize", json={"content": text, "with_pieces": True}, timeout=10
            )
            toks = r.json()["tokens"] if r.status_code == 200 else None
            piece = toks[0]["piece"] if toks and isinstance(toks[0], dict) else None
        except (httpx.HTTPError, ValueError, KeyError, TypeError, IndexError):
            piece = None
        return str(piece).strip() if piece else None

    # ------------------------------------------------------------------ HTTP

    async def _post_with_retries(
        self, http: Any, payload: dict[str, Any]
    ) -> tuple[dict[str, Any], int]:
        url = f"{self.base_url}/chat/completions"
        last: _Retryable | None = None
        refusals = 0
        for attempt in range(1, self.max_retries + 2):
            try:
                return await self._post_once(http, url, payload), attempt
            except _Retryable as exc:
                last = exc
            if last.refused:
                refusals += 1
                if refusals > CONNECT_RETRIES or attempt > self.max_retries:
                    raise ServerUnreachable(
                        f"cannot connect to {self.base_url} ({last}); is the server running "
                        "at that address?"
                    )
                await asyncio.sleep(CONNECT_RETRY_DELAY_S)
                continue
            if attempt > self.max_retries:
                break
            delay = (
                last.retry_after
                if last.retry_after is not None
                else self.backoff_s * 2 ** (attempt - 1)
            )
            await asyncio.sleep(min(60.0, delay) * (1 + 0.1 * random.random()))
        raise RetriesExhausted(
            f"{self.base_url}: gave up after {self.max_retries + 1} attempts: {last}"
        )

    async def _post_once(self, http: Any, url: str, payload: dict[str, Any]) -> dict[str, Any]:
        import httpx

        try:
            r = await http.post(url, json=payload)
        except httpx.ConnectError as exc:  # refused / unknown host: nobody is listening
            raise _Retryable(f"{type(exc).__name__}: {exc}", refused=True) from exc
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
        text = self._redact(r.text)
        if r.status_code in RETRY_STATUS or r.status_code >= 500:
            raise _Retryable(
                f"HTTP {r.status_code}: {text[:200]}",
                _parse_retry_after(r.headers.get("retry-after")),
            )
        if r.status_code in FATAL_STATUS:
            raise ServerConfigError(f"HTTP {r.status_code} from {url}: {text[:300]}")
        if r.status_code >= 400:
            text = text[:500]
            if "logprob" in text.lower() and "logprobs" in payload:
                # Some servers/models refuse logprobs: drop them for the rest of the run. Not
                # gated on the flag: requests sent concurrently before the first refusal came
                # back are refused too and must be asked again the same way.
                self._logprobs_ok = False
                payload = {
                    k: v for k, v in payload.items() if k not in ("logprobs", "top_logprobs")
                }
                return await self._post_once(http, url, payload)
            raise RequestRejected(f"HTTP {r.status_code}: {text}")
        try:
            body = r.json()
        except ValueError as exc:  # not JSON at all (a proxy's HTML page...): try again
            raise _Retryable(f"malformed response ({exc}): {text[:200]!r}") from exc
        problem = chat_body_problem(body)
        if problem is not None:  # JSON, but not a chat completion: this point is unparseable
            raise MalformedResponse(f"malformed response: {problem}", text)
        redacted: dict[str, Any] = redact(body, self._api_key())
        return redacted


# ----------------------------------------------------------------------------- scoring


@dataclass(frozen=True, slots=True)
class AnswerTokens:
    """The first token of each answer word as the model generates it (pieces, no whitespace)."""

    speak: str
    silent: str


def answer_probabilities(
    top: Sequence[Mapping[str, Any]], speak_word: str, silent_word: str, first: AnswerTokens | None
) -> tuple[float, float, bool]:
    """(P(first token of answer 1), P(first token of answer 2), whether pieces were ambiguous).

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


def token_index_at(tokens: Sequence[Mapping[str, Any]], offset: int) -> int | None:
    """Index of the generated token covering character ``offset`` of the reply."""
    pos = 0
    for i, t in enumerate(tokens):
        pos += len(str(t.get("token", "")))
        if pos > offset:
            return i
    return None
