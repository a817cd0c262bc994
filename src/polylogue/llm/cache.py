"""One response cache around any LLM client (lm-evaluation-harness's ``CachingLM``, here).

:class:`CachedLM` wraps a client that implements the primitives of :mod:`polylogue.llm.base`
(``generate``, and ``score`` for local models) and answers a request it has seen before from a
SQLite file instead of asking the model again. Only deterministic requests are cached:
``generate`` at temperature 0 (greedy) and every ``score``. The key is a SHA-256 of the client's
``describe()`` (model name and server URL, or the weights' content hash; never an API key), the
primitive's name and the request (messages, decoding or scoring options).

:class:`ResponseCache` is the store: SQLite in WAL mode, so a process killed mid-write or two
runs sharing the file leave it consistent. A file that is not such a cache is refused with
:class:`ResponseCacheError` naming it; a stored value that does not read back as what the
request expects (a file written by another version) is a miss, asked again and overwritten.

The cache only saves repeated identical LLM calls; resuming a run is the run folder's job
(:mod:`polylogue.runs`), which skips finished items before any client is called.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from polylogue.errors import PolylogueInputError
from polylogue.llm.base import (
    ChatResult,
    GenerateConfig,
    Messages,
    ScoreOptions,
    ScoreResult,
    ScoresInBatches,
    chat_body_problem,
)

T = TypeVar("T")


class ResponseCacheError(PolylogueInputError):
    """The cache path exists but is not a SQLite response cache."""


def request_key(payload: Any) -> str:
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Key -> JSON value in one SQLite table; safe across threads of one process."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT)"
            )
            self._db.execute("SELECT key, value FROM responses LIMIT 1").fetchall()
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise ResponseCacheError(
                f"{self.path}: not a polylogue response cache ({exc}); "
                "pass another cache path or remove the file"
            ) from exc

    def get(self, key: str) -> Any | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except (TypeError, ValueError):  # not JSON: treated as a miss and overwritten
            return None

    def put(self, key: str, value: Any) -> None:
        blob = json.dumps(value, ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", (key, blob)
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _cached_chat(data: Any) -> ChatResult | None:
    return ChatResult(data, 0, True) if chat_body_problem(data) is None else None


class CachedLM(ScoresInBatches):
    """Any client's ``generate``/``score`` answered from a :class:`ResponseCache` when seen.

    Batch calls look every request up and hand only the misses, in order, to the client in
    one batch. ``agenerate``/``session`` serve async clients (OpenAI-compatible). The client is
    reachable as ``inner`` for anything the primitives do not cover.
    """

    def __init__(self, inner: Any, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache
        #: The client's identity, read once: it is part of every key.
        self.identity: dict[str, Any] = inner.describe()

    def describe(self) -> dict[str, Any]:
        return self.identity

    def session(self) -> Any:
        return self.inner.session()

    def close(self) -> None:
        self.cache.close()

    def key(self, primitive: str, request: dict[str, Any]) -> str:
        return request_key({"client": self.identity, "primitive": primitive, **request})

    # ------------------------------------------------------------------ generate

    def _generate_key(self, messages: Messages, config: GenerateConfig) -> str | None:
        if config.temperature != 0:  # sampled replies differ each time: never cached
            return None
        return self.key("generate", {"messages": list(messages), "config": asdict(config)})

    def generate(self, messages: Messages, config: GenerateConfig = GenerateConfig()) -> ChatResult:
        return self.generate_batch([messages], config)[0]

    def generate_batch(
        self, batch: Sequence[Messages], config: GenerateConfig = GenerateConfig()
    ) -> list[ChatResult]:
        keys = [self._generate_key(m, config) for m in batch]

        def fresh(todo: list[int]) -> list[ChatResult]:
            if not hasattr(self.inner, "generate_batch"):  # an API client: one at a time
                return [self.inner.generate(batch[i], config) for i in todo]
            results: list[ChatResult] = self.inner.generate_batch([batch[i] for i in todo], config)
            return results

        return self._through(keys, _cached_chat, fresh, lambda r: dict(r.body))

    async def agenerate(
        self, http: Any, messages: Messages, config: GenerateConfig = GenerateConfig()
    ) -> ChatResult:
        key = self._generate_key(messages, config)
        hit = _cached_chat(self.cache.get(key)) if key is not None else None
        if hit is not None:
            return hit
        result: ChatResult = await self.inner.agenerate(http, messages, config)
        if key is not None:
            # SQLite off the event loop: other requests keep going while this one is written.
            await asyncio.to_thread(self.cache.put, key, dict(result.body))
        return result

    async def tokenize_first_piece(self, http: Any, text: str) -> str | None:
        """The server's first token piece of ``text`` (llama.cpp ``/tokenize``), cached once
        found; a server without the endpoint (None) is asked again next time."""
        key = self.key("tokenize_first_piece", {"text": text})
        hit = self.cache.get(key)
        if isinstance(hit, dict) and isinstance(hit.get("piece"), str):
            return str(hit["piece"])
        piece: str | None = await self.inner.tokenize_first_piece(http, text)
        if piece is not None:
            await asyncio.to_thread(self.cache.put, key, {"piece": piece})
        return piece

    # ------------------------------------------------------------------ score

    def score_batch(
        self,
        requests: Sequence[tuple[Messages, Sequence[str]]],
        options: ScoreOptions = ScoreOptions(),
    ) -> list[ScoreResult]:
        keys: list[str | None] = [
            self.key(
                "score",
                {"messages": list(m), "continuations": list(c), "options": asdict(options)},
            )
            for m, c in requests
        ]
        sizes = [len(c) for _, c in requests]

        def fresh(todo: list[int]) -> list[ScoreResult]:
            results: list[ScoreResult] = self.inner.score_batch(
                [requests[i] for i in todo], options
            )
            return results

        decoders = [(lambda data, n=n: ScoreResult.from_json(data, n)) for n in sizes]
        return self._through(keys, decoders, fresh, ScoreResult.to_json)

    # ------------------------------------------------------------------ shared

    def _through(
        self,
        keys: Sequence[str | None],
        decode: Callable[[Any], T | None] | Sequence[Callable[[Any], T | None]],
        fresh: Callable[[list[int]], list[T]],
        encode: Callable[[T], Any],
    ) -> list[T]:
        """Hits from the cache, misses from ``fresh`` (one call, in order), misses stored."""
        decoders = decode if isinstance(decode, Sequence) else [decode] * len(keys)
        out: list[T | None] = [
            None if key is None else dec(self.cache.get(key))
            for key, dec in zip(keys, decoders, strict=True)
        ]
        todo = [i for i, hit in enumerate(out) if hit is None]
        if todo:
            for i, result in zip(todo, fresh(todo), strict=True):
                out[i] = result
                key = keys[i]
                if key is not None:
                    self.cache.put(key, encode(result))
        return [r for r in out if r is not None]


def with_cache(client: T, cache_path: str | Path | None) -> T | CachedLM:
    """``client`` wrapped in a :class:`CachedLM` over ``cache_path``, or itself when None."""
    if cache_path is None or str(cache_path) == "":
        return client
    return CachedLM(client, ResponseCache(cache_path))
