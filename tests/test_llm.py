"""The shared LLM layer: spec parser, OpenAI-compatible client (against a real local HTTP server
that scripts the replies), and how the MeetingToM backend maps its errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers import LoopbackHTTPServer

from polylogue.errors import PolylogueInputError
from polylogue.llm.base import GenerateConfig
from polylogue.llm.cache import CachedLM, ResponseCache
from polylogue.llm.openai import (
    OpenAIClient,
    RequestRejected,
    RetriesExhausted,
    ServerConfigError,
)
from polylogue.llm.spec import LLMSpec, parse_llm_spec

OK = {
    "choices": [{"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}
MESSAGES = [{"role": "user", "content": "hi"}]


class Scripted(LoopbackHTTPServer):
    """A chat-completions server answering from a list of (status, body, headers)."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, Any, dict[str, str]]] = []
        self.bodies: list[dict[str, Any]] = []
        #: Answer 400 to every request asking for logprobs (a server without logprobs support).
        self.refuse_logprobs = False
        self.lock = threading.Lock()
        super().__init__(self._respond)

    def _respond(
        self, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, Any, dict[str, str]]:
        with self.lock:
            body = json.loads(raw)
            self.bodies.append(body)
            if self.refuse_logprobs and "logprobs" in body:
                return 400, {"error": "logprobs are not supported"}, {}
            return self.replies.pop(0) if self.replies else (200, OK, {})


@pytest.fixture
def server() -> Iterator[Scripted]:
    s = Scripted()
    yield s
    s.close()


def test_spec_parser() -> None:
    assert parse_llm_spec("hf:smollm2") == LLMSpec("hf", "smollm2")
    assert parse_llm_spec("hf:", default_hf="smollm2") == LLMSpec("hf", "smollm2")
    # The URL has ':' and may have '@' in a path: the model ends at the last '@'.
    spec = parse_llm_spec("openai:org/model@2@http://h:8000/v1/")
    assert spec == LLMSpec("openai", "org/model@2", "http://h:8000/v1")
    assert spec.text == "openai:org/model@2@http://h:8000/v1"
    for bad in ("hf:", "openai:m", "openai:m@h:8000", "vllm:m"):
        with pytest.raises(PolylogueInputError):
            parse_llm_spec(bad)


def test_retries_honour_retry_after_then_succeed(server: Scripted) -> None:
    server.replies = [
        (429, {"error": "slow"}, {"Retry-After": "0.01"}),
        (503, {"error": "busy"}, {}),
        (200, "<html>not json", {}),
    ]
    client = OpenAIClient("m", server.url, backoff_s=0.01)
    result = client.generate(MESSAGES, GenerateConfig(max_tokens=4))
    assert result.text == "hello" and result.attempts == 4 and not result.cached
    assert result.usage == {"prompt_tokens": 3, "completion_tokens": 1}


def test_error_classes(server: Scripted) -> None:
    client = OpenAIClient("m", server.url, max_retries=1, backoff_s=0.01)
    server.replies = [(413, {"error": "prompt too long"}, {})]
    with pytest.raises(RequestRejected, match="413"):
        client.generate(MESSAGES)
    server.replies = [(401, {"error": "no key"}, {})]
    with pytest.raises(ServerConfigError, match="401"):
        client.generate(MESSAGES)
    server.replies = [(500, "boom", {}), (500, "boom", {})]
    with pytest.raises(RetriesExhausted, match="2 attempts"):
        client.generate(MESSAGES)


def test_logprobs_dropped_when_refused_and_many_in_order(server: Scripted) -> None:
    server.refuse_logprobs = True
    client = OpenAIClient("m", server.url, concurrency=3)
    results = client.generate_many([MESSAGES] * 5, GenerateConfig(top_logprobs=5))
    assert all(not isinstance(r, BaseException) and r.text == "hello" for r in results)
    assert "logprobs" in server.bodies[0] and "logprobs" not in server.bodies[-1]
    # Only requests already in flight when the first refusal came back asked for logprobs
    # (at most the 3 concurrent ones); each refused request was asked again without them.
    refused = sum("logprobs" in b for b in server.bodies)
    assert 1 <= refused <= 3
    assert len(server.bodies) == 5 + refused


def test_cache_keys_ignore_the_api_key(
    server: Scripted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    monkeypatch.setenv("LLM_TEST_KEY", "secret-1")
    first = CachedLM(OpenAIClient("m", server.url, api_key_env="LLM_TEST_KEY"), cache)
    assert not first.generate(MESSAGES).cached
    monkeypatch.setenv("LLM_TEST_KEY", "secret-2")
    again = CachedLM(OpenAIClient("m", server.url, api_key_env="LLM_TEST_KEY"), cache)
    assert again.generate(MESSAGES).cached and len(server.bodies) == 1
    sampled = GenerateConfig(temperature=0.7)
    assert not again.generate(MESSAGES, sampled).cached  # sampling is never cached
    assert "secret" not in (tmp_path / "c.sqlite").read_bytes().decode("latin-1")
    cache.close()


def test_tom_backend_maps_client_errors(server: Scripted) -> None:
    from polylogue.paths import corpus_dir
    from polylogue.tom.backends import (
        GenerationError,
        GenerationRequest,
        OpenAIChatGenerator,
        TransientGenerationError,
    )
    from polylogue.tom.prompts import build_prompt, parse_variant
    from polylogue.tom.records import load_tom_benchmark
    from polylogue.tom.transcript import AmiSessions, transcript_window

    record = next(iter(load_tom_benchmark().all_records()))
    options = parse_variant("noprompt+utter")
    window = transcript_window(
        AmiSessions(corpus_dir("ami")),
        record.item.session_id,
        record.item.window,
        options.transcript_options(),
    )
    request = GenerationRequest(build_prompt(record.item, options, window), record.item, window)
    gen = OpenAIChatGenerator("m", server.url, max_retries=1, backoff_s=0.01)
    assert gen.generate(request).text == "hello"
    server.replies = [(400, {"error": "bad image"}, {})]
    with pytest.raises(GenerationError):  # this record only: recorded, the run goes on
        gen.generate(request)
    server.replies = [(404, {"error": "no such model"}, {})]
    with pytest.raises(TransientGenerationError):  # configuration: stop, resumable
        gen.generate(request)
    server.replies = [(502, "down", {}), (502, "down", {})]
    with pytest.raises(TransientGenerationError):
        gen.generate(request)
