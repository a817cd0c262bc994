"""Reasoning distillation: label-conditioned teacher, resumable, failures never used as targets.

The resume test runs the real ``polylogue distill`` command against a real teacher: SmolLM2
served by llama.cpp (xllamacpp) through the evaluation harness's OpenAI-compatible backend. The
process is killed mid-way and rerun. A small scripted teacher is used only for the failure path
(transient errors, wrong or leaking answers), which a real model cannot produce on demand.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from test_training_support import tiny_friends

from polylogue.models.base import Prediction, PredictionError
from polylogue.prompts.builder import build_messages
from polylogue.training.lora.data import stratified_subset
from polylogue.training.lora.distill import (
    ATTEMPTS_FILE,
    FAILURES_FILE,
    REASONING_FILE,
    DistillConfig,
    DistillError,
    RateLimiter,
    clean_reasoning,
    distill,
    judge,
    load_reasoning,
)
from polylogue.training.lora.teacher_prompts import teacher_prompt
from polylogue.turntaking.dataset import load_benchmark
from polylogue.turntaking.types import Decision, DecisionInput, DecisionPoint

SHORT_SYSTEM = (
    "You are one participant in a group conversation. At each pause you either speak now "
    "($speak) or stay silent ($silent).\n"
)


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_friends(tmp_path_factory.mktemp("bench") / "friends")


@pytest.fixture(scope="module")
def points(bench: Path) -> list[DecisionPoint]:
    return stratified_subset(load_benchmark(bench).points("train"), 8, seed=0)


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


# ----------------------------------------------------------------------------- pure parts


def test_teacher_prompt_is_the_evaluation_prompt_plus_the_label(
    points: list[DecisionPoint],
) -> None:
    inp = points[0].input
    for label in (Decision.SPEAK, Decision.SILENT):
        messages = build_messages(inp, teacher_prompt(label, 2048))
        user = messages[1]["content"]
        assert f"right decision at this pause: {label.value}" in user
        assert user.endswith(f"\nDecision: {label.value}")
        assert inp.current.text in user


def test_clean_reasoning_rules() -> None:
    ok, why = clean_reasoning(
        "Rachel asked Joey directly where he was. Then more text follows here."
    )
    assert ok == "Rachel asked Joey directly where he was." and why is None
    # A title is not a sentence end (Friends has Mr. Douglas, Mr. Bowmont, ...).
    titled = "Mr. Douglas was addressed by name, so it is his turn to speak."
    assert clean_reasoning(titled + " More.")[0] == titled
    assert clean_reasoning("")[0] is None
    assert clean_reasoning("Too short.")[0] is None
    assert "label" in (clean_reasoning("The ground truth says I should speak, so I will.")[1] or "")
    copied = "Everything you need to know is in that first kiss"
    assert (
        clean_reasoning(copied + ".", prompt_text=f"Rachel: {copied}.")[1]
        == "reasoning copies the prompt"
    )


def test_rate_limiter_spaces_requests() -> None:
    now = [0.0]
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        now[0] += s

    limiter = RateLimiter(2.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        limiter.acquire(4)  # 4 requests at 2/s: 2 s each round
    assert waits == [2.0, 2.0]
    assert RateLimiter(None).acquire(100) == 0.0


# ----------------------------------------------------------------------------- failure path


class ScriptedTeacher:
    """Answers by script per (point, attempt): the failure modes a real teacher can show."""

    def __init__(self, script: dict[str, list[str]]) -> None:
        from polylogue.prompts.builder import PromptOptions

        self.prompt = PromptOptions(mode="reasoning")
        self.script = script
        self.calls: list[str] = []

    @property
    def name(self) -> str:
        return "scripted"

    def describe(self) -> dict[str, Any]:
        return {"kind": "scripted"}

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        from polylogue.prompts.parsing import parse_decision

        done = []
        for inp in inputs:
            self.calls.append(inp.point_id)
            step = self.script[inp.point_id].pop(0)
            if step == "network":
                raise PredictionError("HTTP 503 three times", completed=done)
            parsed = parse_decision(step)
            done.append(
                Prediction(inp.point_id, parsed.decision, None, parsed.reasoning, step, 0.0)
            )
        return done


def test_failures_are_retried_reported_and_never_targets(
    points: list[DecisionPoint], tmp_path: Path
) -> None:
    pts = points[:4]
    good = "Reasoning: {who} had just been asked a direct question by name.\nDecision: {label}"
    script: dict[str, list[str]] = {}
    for i, p in enumerate(pts):
        label = p.gold.label.value
        other = "SILENT" if label == "SPEAK" else "SPEAK"
        ok = good.format(who=p.input.target.name or p.input.target.id, label=label)
        if i == 0:  # transient error, then a good answer
            script[p.point_id] = ["network", ok]
        elif i == 1:  # contradicts the given label every time
            script[p.point_id] = [ok.replace(label, other)] * 4
        elif i == 2:  # talks about the label, then no reasoning at all, then good
            script[p.point_id] = [
                f"Reasoning: The correct decision is {label} as stated.\nDecision: {label}",
                label,
                ok,
            ]
        else:
            script[p.point_id] = [ok]
    config = DistillConfig(
        teacher="scripted", data=("tiny",), out_dir=str(tmp_path / "d"), attempts=3, chunk_size=1
    )
    teacher = ScriptedTeacher(script)
    report = distill(config, pts, teacher, sleep=lambda s: None)  # type: ignore[arg-type]

    out = tmp_path / "d"
    ok_rows = _read(out / REASONING_FILE)
    assert sorted(r["point_id"] for r in ok_rows) == sorted(
        p.point_id for p in (pts[0], pts[2], pts[3])
    )
    assert all(r["status"] == "ok" and r["reasoning"].endswith(".") for r in ok_rows)
    failures = _read(out / FAILURES_FILE)
    assert [f["point_id"] for f in failures] == [pts[1].point_id]
    assert "not the given" in failures[0]["error"]
    assert report.failures == {pts[1].point_id: failures[0]["error"]}
    assert teacher.calls.count(pts[1].point_id) == 3  # retried up to `attempts`
    assert pts[1].point_id not in load_reasoning([out])
    log = _read(out / ATTEMPTS_FILE)
    reasons = [r["error"] for r in log if r["point_id"] == pts[2].point_id]
    assert "label" in reasons[0] and reasons[1] == "no reasoning sentence" and reasons[2] is None

    # A rerun skips successes and retries only the failure.
    script[pts[1].point_id] = [good.format(who="Monica", label=pts[1].gold.label.value)]
    again = distill(config, pts, teacher, sleep=lambda s: None)  # type: ignore[arg-type]
    assert again.n_done_before == 3 and again.n_new == 1 and not again.failures
    assert _read(out / FAILURES_FILE) == []
    assert len(load_reasoning([out])) == 4

    other_teacher = ScriptedTeacher({})
    other_teacher.describe = lambda: {"kind": "another"}  # type: ignore[method-assign]
    with pytest.raises(DistillError, match="different teacher"):
        distill(config, pts, other_teacher, sleep=lambda s: None)  # type: ignore[arg-type]


def test_judge_rejects_backend_errors() -> None:
    pred = Prediction("p", None, None, None, "", 0.0, extra={"error": "HTTP 400: context"})
    assert judge(pred, Decision.SPEAK) == (None, "backend error: HTTP 400: context")


# ----------------------------------------------------------------------------- real teacher


@pytest.mark.slow
def test_distill_with_a_real_teacher_resumes_after_a_kill(
    bench: Path, llama_server: str, tmp_path: Path
) -> None:
    system = tmp_path / "system.txt"
    system.write_text(SHORT_SYSTEM, encoding="utf-8")
    out = tmp_path / "distill"
    cmd = [
        sys.executable, "-m", "polylogue.cli", "distill",
        "--teacher", f"openai:smollm2-135m@{llama_server}",
        "--data", str(bench), "--out", str(out), "--max-points", "6",
        "--chunk-size", "2", "--attempts", "2", "--retry-delay", "0",
        "--max-prompt-tokens", "400", "--system-template", str(system),
        "-O", "max_tokens=48", "-O", "concurrency=2", "-O", "cache_path=",
    ]  # fmt: skip
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # Kill it once some teacher answers are on disk but the run is not finished.
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and first.poll() is None:
        if len(_read_complete(out / ATTEMPTS_FILE)) >= 2:
            break
        time.sleep(0.2)
    assert first.poll() is None, "the first run finished before it could be interrupted"
    first.send_signal(signal.SIGKILL)
    first.wait()
    answered_before = {r["point_id"] for r in _read_complete(out / ATTEMPTS_FILE)}
    ok_before = {r["point_id"] for r in _read_complete(out / REASONING_FILE)}
    assert answered_before and len(answered_before) < 6

    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode in (0, 3), second.stderr  # 3 = some points failed (reported)

    ok_rows = _read(out / REASONING_FILE)
    ok_ids = [r["point_id"] for r in ok_rows]
    assert len(ok_ids) == len(set(ok_ids))  # no duplicates after the kill and rerun
    assert ok_before <= set(ok_ids)  # earlier successes kept, not redone
    failed = {r["point_id"] for r in _read(out / FAILURES_FILE)}
    selected = {
        p.point_id for p in stratified_subset(load_benchmark(bench).points("train"), 6, seed=42)
    }
    assert set(ok_ids) | failed == selected and not set(ok_ids) & failed
    assert (second.returncode == 3) == bool(failed)
    # Successful targets agree with the gold label and are single clean sentences.
    gold = {p.point_id: p.gold.label.value for p in load_benchmark(bench).points("train")}
    for row in ok_rows:
        assert row["label"] == gold[row["point_id"]]
        assert clean_reasoning(row["reasoning"])[0] == row["reasoning"]
    assert set(load_reasoning([out])) == set(ok_ids)
    # Every teacher answer, good or bad, is in the audit log; the killed session's ones too.
    log = _read(out / ATTEMPTS_FILE)
    assert answered_before <= {r["point_id"] for r in log}
    assert all(r["status"] in ("ok", "failed") for r in log)
    # The rerun asked the teacher about exactly the points without a success from the first run.
    sessions = sorted({r["session"] for r in log})
    rerun = {r["point_id"] for r in log if r["session"] == sessions[-1]}
    assert len(sessions) == 2 and rerun == selected - ok_before


def _read_complete(path: Path) -> list[dict[str, Any]]:
    """Lines a concurrent writer has finished (the last one may still be half-written)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    return [json.loads(x) for x in data[: data.rfind(b"\n") + 1].splitlines() if x.strip()]


def test_cue_teacher_writes_label_conditioned_sentences_through_distill(
    bench: Path, tmp_path: Path
) -> None:
    """``--teacher cues``: every point gets a judged sentence justifying its own label, named
    after its target; the manifest says it is a template teacher; a rerun adds nothing."""
    from polylogue.training.lora.distill import MANIFEST_FILE, distill_from_benchmarks

    config = DistillConfig(
        teacher="cues", data=(str(bench),), out_dir=str(tmp_path / "d"), max_points=40
    )
    report = distill_from_benchmarks(config)
    assert report.failures == {} and report.n_new == report.n_points == 40
    rows = _read(tmp_path / "d" / REASONING_FILE)
    by_id = {p.point_id: p for p in load_benchmark(bench).points("train")}
    texts = set()
    for row in rows:
        point = by_id[row["point_id"]]
        assert row["label"] == point.gold.label.value
        name = point.input.target.name or point.input.target.id
        assert name in row["reasoning"]
        texts.add(row["reasoning"])
    assert len(texts) > 10  # sentences follow each point's cues, not one fixed line
    manifest = json.loads((tmp_path / "d" / MANIFEST_FILE).read_text())
    assert manifest["teacher"]["kind"] == "cue-template"
    again = distill_from_benchmarks(config)
    assert again.n_new == 0 and again.n_done == 40
