"""OpenAI-compatible backend: a real llama.cpp server (xllamacpp) on loopback serving SmolLM2,
and a small hand-written HTTP server for error paths (429, 5xx, garbage, 4xx)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_eval_support import friends_benchmark

from polylogue.evaluation.runner import RunError, load_points, run_evaluation
from polylogue.llm.openai import AnswerTokens, answer_probabilities
from polylogue.models import PredictionError, load_predictor
from polylogue.prompts import PromptOptions
from polylogue.turntaking.types import Decision, DecisionInput


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[DecisionInput]:
    folder = friends_benchmark(tmp_path_factory.mktemp("bench") / "friends")
    points, _ = load_points(folder, "test")
    return [p.input for p in points[:6]]


# ----------------------------------------------------------------------------- fake server

GOOD = {
    "choices": [
        {
            "message": {"role": "assistant", "content": "SILENT"},
            "finish_reason": "stop",
            "logprobs": {
                "content": [
                    {
                        "token": "S",
                        "logprob": -0.2,
                        "top_logprobs": [
                            {"token": "S", "logprob": -0.2},
                            {"token": "SP", "logprob": -1.9},
                            {"token": "Hey", "logprob": -3.0},
                        ],
                    },
                    {"token": "IL", "logprob": 0.0, "top_logprobs": []},
                    {"token": "ENT", "logprob": 0.0, "top_logprobs": []},
                ]
            },
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 3},
}


class _Script:
    def __init__(self, replies: list[tuple[int, Any]]) -> None:
        self.replies = replies
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def next(self, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        with self.lock:
            self.requests.append({"headers": headers, "body": body})
            return self.replies.pop(0) if self.replies else (200, GOOD)


@pytest.fixture
def fake() -> Iterator[tuple[str, _Script]]:
    script = _Script([])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path.endswith("/tokenize"):
                status, reply = 404, {"error": "no"}
            else:
                status, reply = script.next(dict(self.headers), body)
            data = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if status == 429:
                self.send_header("Retry-After", "0.01")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", script
    server.shutdown()
    server.server_close()


def _predictor(url: str, **kw: Any) -> Any:
    return load_predictor(f"openai:test-model@{url}", backoff_s=0.01, **kw)


def test_retries_on_429_500_and_garbage(
    fake: tuple[str, _Script], inputs: list[DecisionInput]
) -> None:
    url, script = fake
    script.replies = [(429, {"error": "slow down"}), (500, {"error": "boom"}), (200, "<html>oops")]
    pred = _predictor(url, concurrency=1).predict(inputs[:1])[0]
    assert pred.decision is Decision.SILENT
    assert pred.extra["attempts"] == 4
    # P(SPEAK) from the fake's top_logprobs: SP vs S (the "S" piece resolved to SILENT
    # because the longer SPEAK prefix "SP" is listed).
    import math

    ps, pl = math.exp(-1.9), math.exp(-0.2)
    assert pred.p_speak == pytest.approx(ps / (ps + pl))


def test_exhausted_retries_keep_finished_predictions(
    fake: tuple[str, _Script], inputs: list[DecisionInput]
) -> None:
    url, script = fake
    script.replies = [(200, GOOD)] + [(503, {"error": "down"})] * 50
    with pytest.raises(PredictionError) as info:
        _predictor(url, concurrency=1, max_retries=2).predict(inputs[:3])
    assert len(info.value.completed) == 1
    assert "HTTP 503" in str(info.value)


def test_fatal_and_per_sample_client_errors(
    fake: tuple[str, _Script], inputs: list[DecisionInput]
) -> None:
    url, script = fake
    script.replies = [(400, {"error": {"type": "exceed_context_size_error"}})]
    preds = _predictor(url, concurrency=1).predict(inputs[:2])
    assert preds[0].decision is None and "exceed_context_size_error" in preds[0].extra["error"]
    assert preds[1].decision is Decision.SILENT
    script.replies = [(401, {"error": "bad key"})]
    with pytest.raises(PredictionError, match="HTTP 401"):
        _predictor(url, concurrency=1, max_retries=0).predict(inputs[:1])


def test_api_key_is_sent_but_never_stored(
    fake: tuple[str, _Script],
    inputs: list[DecisionInput],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, script = fake
    secret = "sk-test-" + "9" * 24
    monkeypatch.setenv("POLYLOGUE_TEST_KEY", secret)
    bench = friends_benchmark(tmp_path / "bench")
    points, info = load_points(bench, "test")
    predictor = _predictor(
        url,
        api_key_env="POLYLOGUE_TEST_KEY",
        cache_path=str(tmp_path / "runs" / "_cache" / "r.sqlite"),
    )
    run_evaluation(points[:5], info, predictor, tmp_path / "runs", progress=False, n_boot=0)
    assert script.requests[0]["headers"]["Authorization"] == f"Bearer {secret}"
    for f in (tmp_path / "runs").rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f


def test_answer_probability_mapping() -> None:
    top = [{"token": "S", "logprob": -0.1}, {"token": "Hello", "logprob": -2.0}]
    # Ambiguous "S" without knowing the tokenizer: no probability rather than a guess.
    assert answer_probabilities(top, "SPEAK", "SILENT", None)[2] is True
    ps, pl, amb = answer_probabilities(top, "SPEAK", "SILENT", AnswerTokens("SP", "S"))
    assert ps == 0 and pl > 0.9 and not amb


# ----------------------------------------------------------------------------- real server


@pytest.mark.slow
def test_real_server_predictions_cache_and_concurrency(
    llama_server: str, inputs: list[DecisionInput], tmp_path: Path
) -> None:
    opts = PromptOptions(max_prompt_tokens=1200)
    cache = str(tmp_path / "cache.sqlite")
    p4 = load_predictor(
        f"openai:smollm2@{llama_server}", prompt=opts, concurrency=4, cache_path=cache
    )
    first = p4.predict(inputs[:4])
    # llama.cpp's /tokenize tells the first pieces: SPEAK = SP.., SILENT = S..
    assert p4.answer_tokens == AnswerTokens("SP", "S")
    assert [x.point_id for x in first] == [i.point_id for i in inputs[:4]]
    for x in first:
        assert x.raw_output  # the 135M model answers something (often not the format)
        assert x.p_speak is not None and 0.0 <= x.p_speak <= 1.0
        assert x.extra["usage"]["prompt_tokens"] > 100
        assert x.decision is None or x.decision in Decision
    # Unparseable answers stay unparseable: counted, never guessed.
    assert all((x.decision is None) == (x.extra["parse_rule"] == "none") for x in first)
    again = p4.predict(inputs[:4])
    assert all(x.extra["cached"] for x in again)
    assert [x.raw_output for x in again] == [x.raw_output for x in first]
    # One request at a time works too. (llama.cpp's greedy output is not bit-identical across
    # batch compositions, measured here, so answers are not compared with the parallel run.)
    p1 = load_predictor(f"openai:smollm2@{llama_server}", prompt=opts, concurrency=1)
    serial = p1.predict(inputs[:2])
    assert [x.point_id for x in serial] == [i.point_id for i in inputs[:2]]
    assert all(x.p_speak is not None and not x.extra["cached"] for x in serial)


@pytest.mark.slow
def test_real_server_full_run_and_dead_server(llama_server: str, tmp_path: Path) -> None:
    bench = friends_benchmark(tmp_path / "bench")
    points, info = load_points(bench, "test")
    spec = f"openai:smollm2@{llama_server}"
    opts = PromptOptions(max_prompt_tokens=1200)
    res = run_evaluation(
        points[:6],
        info,
        load_predictor(spec, prompt=opts, concurrency=4),
        tmp_path / "runs",
        spec=spec,
        progress=False,
        n_boot=50,
    )
    m = res.metrics
    assert m is not None and m["n"] == 6
    assert m["unparseable_rate"] == pytest.approx(m["n_unparseable"] / 6)
    assert m["accuracy"] <= 1 - m["unparseable_rate"] + 1e-9
    # A server that is gone: a clear error, nothing written as if it were an answer.
    dead = "http://127.0.0.1:9/v1"
    with pytest.raises(RunError, match=r"ConnectError|refused"):
        run_evaluation(
            points[:2],
            info,
            load_predictor(f"openai:smollm2@{dead}", max_retries=1, backoff_s=0.01),
            tmp_path / "runs2",
            progress=False,
            n_boot=0,
        )
    written = list((tmp_path / "runs2").glob("*/predictions.jsonl"))
    assert all(f.read_text() == "" for f in written)
