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
  text the server sends back (bodies, cached replies, error messages) has it replaced by
  ``[REDACTED]`` before anyone sees it, so a server echoing the header cannot put it on disk.
* With a :class:`~polylogue.llm.cache.ResponseCache`, deterministic replies (temperature 0) are
  stored by a hash of (base URL, request payload).

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

from polylogue.llm.cache import ResponseCache, request_key

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
FATAL_STATUS = frozenset({401, 403, 404})

Messages = Sequence[Mapping[str, Any]]


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
    cache: ResponseCache | None = None
    _logprobs_ok: bool = field(default=True, init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")

    def _api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None

    def _redact(self, text: str) -> str:
        return str(redact(text, self._api_key()))

    @property
    def root_url(self) -> str:
        """The server root (``base_url`` without ``/v1``), for llama.cpp's ``/tokenize``."""
        return self.base_url.removesuffix("/v1")

    def payload(
        self,
        messages: Messages,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        top_logprobs: int = 0,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": temperature,
        }
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if self._logprobs_ok and top_logprobs > 0:
            payload["logprobs"] = True
            payload["top_logprobs"] = top_logprobs
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

    def generate(self, messages: Messages, **options: Any) -> ChatResult:
        """One chat completion, synchronously (see :meth:`agenerate` for the options)."""

        async def run() -> ChatResult:
            async with self.session() as http:
                return await self.agenerate(http, messages, **options)

        return asyncio.run(run())

    def generate_many(
        self, requests: Sequence[Messages], **options: Any
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
                        return await self.agenerate(http, messages, **options)

                return await asyncio.gather(*(one(m) for m in requests), return_exceptions=True)

        return asyncio.run(run())

    async def agenerate(
        self,
        http: Any,
        messages: Messages,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        top_logprobs: int = 0,
    ) -> ChatResult:
        """One chat completion on an open session (:meth:`session`), cached when deterministic."""
        payload = self.payload(
            messages, temperature=temperature, max_tokens=max_tokens, top_logprobs=top_logprobs
        )
        cache = self.cache if temperature == 0 else None
        key = request_key({"url": self.base_url, "payload": payload}) if cache is not None else None
        if cache is not None and key is not None:
            hit = cache.get(key)
            # A reply cached by an older version is used only if it is still well formed.
            if hit is not None and chat_body_problem(hit) is None:
                return ChatResult(redact(hit, self._api_key()), 0, True)
        body, attempts = await self._post_with_retries(http, payload)
        if cache is not None and key is not None:
            cache.put(key, body)
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
            if self._logprobs_ok and "logprob" in text.lower() and "logprobs" in payload:
                # Some servers/models refuse logprobs: drop them for the rest of the run.
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
