"""Faults around runs (issue 18 items 8-12, issue 15 item 7), against a real misbehaving
chat-completions server on loopback, real run folders and real processes.

* malformed 200 bodies are recorded as unparseable with their raw body; the run goes on;
* unparseable points count as wrong in the threshold metrics too;
* the API key never reaches disk, unknown ``-O`` keys are refused;
* a run folder is locked against a second identical run;
* full / read-only disks give one clear line and leave nothing that looks complete.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers import LoopbackHTTPServer
from test_eval_support import friends_benchmark

from polylogue.evaluation.runner import load_points, read_predictions, run_evaluation
from polylogue.llm.base import GenerateConfig
from polylogue.llm.openai import (
    MalformedResponse,
    OpenAIClient,
    RequestRejected,
    ServerUnreachable,
)
from polylogue.models import load_predictor

POLYLOGUE = str(Path(sys.executable).parent / "polylogue")
MESSAGES = [{"role": "user", "content": "hi"}]


def completion(content: Any = "SILENT", logprob: Any = -0.1) -> dict[str, Any]:
    return {
        "choices": [
            {
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
                "logprobs": {
                    "content": [
                        {
                            "token": "S",
                            "logprob": logprob,
                            "top_logprobs": [
                                {"token": "S", "logprob": logprob},
                                {"token": "SP", "logprob": -2.5},
                            ],
                        }
                    ]
                },
            }
        ]
    }


#: 200 bodies that are JSON but no chat completion (the issue's reproductions).
MALFORMED: dict[str, Any] = {
    "choices of strings": {"choices": ["SPEAK"]},
    "choices an object": {"choices": {"0": {"message": {"content": "SPEAK"}}}},
    "content a number": completion(content=7),
    "content a list": completion(content=["SPEAK"]),
    "logprob a string": completion(logprob="abc"),
    "body a list": [1, 2],
}


class Misbehaving(LoopbackHTTPServer):
    """A chat-completions server on loopback whose replies a test scripts.

    ``reply(headers, body)`` returns (status, JSON-able or str); by default every request gets
    a good completion. Headers and bodies of all requests are kept.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.reply = lambda headers, body: (200, completion())
        super().__init__(self._respond)

    def _respond(
        self, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, Any, dict[str, str]]:
        json_type = {"Content-Type": "application/json"}
        if path.endswith("/tokenize"):
            return 404, {"error": "no"}, json_type
        body = json.loads(raw)
        with self.lock:
            self.requests.append({"headers": headers, "body": body})
            status, reply = self.reply(headers, body)
        return status, reply, json_type


@pytest.fixture
def server() -> Iterator[Misbehaving]:
    s = Misbehaving()
    yield s
    s.close()


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return friends_benchmark(tmp_path_factory.mktemp("bench") / "friends")


def _user_text(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


# ----------------------------------------------------------------------------- item 8


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_200_body_is_rejected_with_its_raw_body(server: Misbehaving, name: str) -> None:
    server.reply = lambda headers, body: (200, MALFORMED[name])
    client = OpenAIClient("m", server.url, backoff_s=0.01)
    with pytest.raises(MalformedResponse) as info:
        client.generate(MESSAGES, GenerateConfig(top_logprobs=2))
    assert isinstance(info.value, RequestRejected)  # tasks record it as this point's answer
    assert json.loads(info.value.body) == MALFORMED[name]
    assert len(server.requests) == 1  # not retried: the same request gets the same body


def test_run_records_malformed_points_and_goes_on(
    server: Misbehaving, bench: Path, tmp_path: Path
) -> None:
    points, info = load_points(bench, "test")
    points = points[:12]
    bad_ids = {p.point_id for p in points[::3]}
    # The server answers by prompt: the points chosen here get one malformed body each.
    bad_prompts = {}
    for p, body in zip(
        [p for p in points if p.point_id in bad_ids], MALFORMED.values(), strict=False
    ):
        bad_prompts[p.point_id] = body

    from polylogue.prompts.builder import PromptOptions, build_messages

    by_text = {
        str(build_messages(p.input, PromptOptions())[-1]["content"]): bad_prompts.get(p.point_id)
        for p in points
    }

    def reply(headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        bad = by_text.get(_user_text(body))
        return (200, bad) if bad is not None else (200, completion())

    server.reply = reply
    spec = f"openai:m@{server.url}"
    cache = str(tmp_path / "runs" / "_cache" / "r.sqlite")

    def run() -> Any:
        predictor = load_predictor(spec, concurrency=3, backoff_s=0.01, cache_path=cache)
        return run_evaluation(points, info, predictor, tmp_path / "runs", progress=False, n_boot=0)

    result = run()
    assert result.complete and result.n_done == 12
    records = {r["point_id"]: r for r in read_predictions(result.folder / "predictions.jsonl")}
    for pid, body in bad_prompts.items():
        rec = records[pid]
        assert rec["decision"] is None and rec["p_speak"] is None
        assert "malformed response" in rec["extra"]["error"]
        assert json.loads(rec["raw_output"]) == body
    assert all(
        records[p.point_id]["decision"] == "SILENT" for p in points if p.point_id not in bad_ids
    )
    assert result.metrics is not None and result.metrics["n_unparseable"] == len(bad_prompts)
    # A rerun finds everything done (the malformed points are answers, not holes).
    n_requests = len(server.requests)
    again = run()
    assert again.n_new == 0 and len(server.requests) == n_requests


# ----------------------------------------------------------------------------- issue 15 item 7


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_refused_connection_fails_fast_naming_the_url() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    # Generous backoff: were refusals retried with it, this would wait minutes.
    client = OpenAIClient("m", url, max_retries=5, backoff_s=30.0)
    with pytest.raises(ServerUnreachable, match=url.replace(".", r"\.")) as info:
        client.generate(MESSAGES)
    assert "refused" in str(info.value).lower() or "connect" in str(info.value).lower()


def test_eval_cli_on_a_dead_server_is_one_line_with_the_url(bench: Path, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    out = subprocess.run(
        [
            *(POLYLOGUE, "eval", "-d", str(bench), "-m", f"openai:m@{url}", "--limit", "4"),
            *("--out", str(tmp_path / "runs"), "--no-progress", "--n-boot", "0"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and url in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_429_and_5xx_keep_their_backoff(server: Misbehaving) -> None:
    replies = [(503, "busy"), (429, "slow"), (200, completion())]
    server.reply = lambda headers, body: replies.pop(0)
    result = OpenAIClient("m", server.url, max_retries=3, backoff_s=0.01).generate(MESSAGES)
    assert result.attempts == 3 and result.text == "SILENT"


# ----------------------------------------------------------------------------- item 9


def test_unparseable_points_are_wrong_in_the_threshold_metrics() -> None:
    from polylogue.evaluation.metrics import compute_metrics

    gold = ["SPEAK", "SPEAK", "SILENT", "SILENT"]
    probs = [0.9, 0.8, 0.1, 0.2]  # separates the classes perfectly
    clean = compute_metrics(gold, gold, p_speak=probs, n_boot=0)["threshold_sweep"]
    assert clean["roc_auc"] == 1.0 and clean["best_balanced_accuracy"] == 1.0
    # The second SPEAK answer did not parse: its 0.8 must not count. It ranks below both
    # SILENT points (AUC 2/4) and is missed at every threshold (best balanced accuracy 3/4).
    pred = ["SPEAK", None, "SILENT", "SILENT"]
    sweep = compute_metrics(gold, pred, p_speak=probs, n_boot=0)["threshold_sweep"]
    assert sweep["roc_auc"] == 0.5
    assert sweep["best_balanced_accuracy"] == 0.75
    assert all(0.0 <= t <= 1.0 for t in sweep["thresholds"])
    assert min(sweep["missed_turn_rate"]) == 0.5
    # An unparseable SILENT point speaks at every threshold.
    pred = ["SPEAK", "SPEAK", None, "SILENT"]
    sweep = compute_metrics(gold, pred, p_speak=probs, n_boot=0)["threshold_sweep"]
    assert min(sweep["false_interruption_rate"]) == 0.5 and sweep["roc_auc"] == 0.5


def test_run_with_unparseable_answers_scores_below_the_clean_run(
    server: Misbehaving, bench: Path, tmp_path: Path
) -> None:
    from polylogue.prompts.builder import PromptOptions, build_messages

    points, info = load_points(bench, "test")
    points = points[:60]
    gold = {str(build_messages(p.input, PromptOptions())[-1]["content"]): p for p in points}
    unparseable = {p.point_id for p in points[:52]}

    def answer(mangle: bool) -> Any:
        def reply(headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
            point = gold[_user_text(body)]
            speak = point.gold.label.value == "SPEAK"
            content = "SPEAK" if speak else "SILENT"
            if mangle and point.point_id in unparseable:
                content = "hard to say"
            # Informative first-token logprobs: the same in both runs.
            top = [
                {"token": "SP", "logprob": -0.2 if speak else -2.0},
                {"token": "S", "logprob": -2.0 if speak else -0.2},
            ]
            tok = {"token": content[:1], "logprob": -0.2, "top_logprobs": top}
            return 200, {
                "choices": [
                    {
                        "message": {"content": content},
                        "finish_reason": "stop",
                        "logprobs": {"content": [tok]},
                    }
                ]
            }

        return reply

    sweeps = {}
    for name, mangle in (("clean", False), ("mangled", True)):
        server.reply = answer(mangle)
        res = run_evaluation(
            points,
            info,
            load_predictor(f"openai:m@{server.url}", concurrency=4),
            tmp_path / name,
            progress=False,
            n_boot=0,
        )
        assert res.metrics is not None
        sweeps[name] = res.metrics["threshold_sweep"]
        if mangle:
            assert res.metrics["n_unparseable"] == 52
    assert sweeps["clean"]["roc_auc"] == 1.0
    assert sweeps["mangled"]["roc_auc"] < 0.8
    assert sweeps["mangled"]["best_balanced_accuracy"] < sweeps["clean"]["best_balanced_accuracy"]


# ----------------------------------------------------------------------------- item 10


def test_api_key_echoed_by_the_server_never_reaches_disk(
    server: Misbehaving, bench: Path, tmp_path: Path
) -> None:
    secret = "pl-" + "7f3a9c" * 6
    calls = []

    def echo(headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        calls.append(1)
        auth = headers.get("Authorization", "")
        if len(calls) == 2:  # a 400 whose message quotes the header
            return 400, {"error": f"bad request from {auth}"}
        if len(calls) == 3:  # a malformed body that quotes it
            return 200, {"choices": [auth]}
        return 200, completion(content=f"SILENT (you sent {auth})")

    server.reply = echo
    env = {**os.environ, "MY_LLM_CREDS": secret}
    out = subprocess.run(
        [
            *(POLYLOGUE, "eval", "-d", str(bench), "-m", f"openai:m@{server.url}"),
            *("--limit", "5", "--concurrency", "1", "--api-key-env", "MY_LLM_CREDS"),
            *("--out", str(tmp_path / "runs"), "--no-progress", "--n-boot", "0"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {secret}"
    files = [f for f in (tmp_path / "runs").rglob("*") if f.is_file()]
    assert any(f.name == "predictions.jsonl" for f in files)
    assert any(f.suffix == ".sqlite" for f in files)
    for f in files:
        assert secret.encode() not in f.read_bytes(), f
    preds = next(f for f in files if f.name == "predictions.jsonl").read_text()
    assert "[REDACTED]" in preds and "Bearer [REDACTED]" in preds
    assert secret not in out.stdout + out.stderr


def test_unknown_and_secret_options_are_refused(bench: Path, tmp_path: Path) -> None:
    from polylogue.errors import PolylogueInputError

    with pytest.raises(PolylogueInputError, match="max_retires"):
        load_predictor("openai:m@http://127.0.0.1:9/v1", max_retires=2)
    with pytest.raises(PolylogueInputError, match="seed"):
        load_predictor("baseline:always-speak", seed=2)
    secret = "pl-" + "1b" * 16
    out = subprocess.run(
        [
            *(POLYLOGUE, "eval", "-d", str(bench), "-m", "openai:m@http://127.0.0.1:9/v1"),
            *("-O", f"api_key={secret}", "--out", str(tmp_path / "runs")),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "api_key" in out.stderr and "--api-key-env" in out.stderr
    assert secret not in out.stderr and not (tmp_path / "runs").exists()


def test_saved_command_line_has_no_secrets() -> None:
    from polylogue.runs import redact_argv, secret_values

    env = {"OPENAI_API_KEY": "sk-abcdefgh12345", "MYVAR": "zz-secret-999", "HOME": "/home/u"}
    argv = [
        *("polylogue", "eval", "-O", "api_key=sk-1", "--option=auth_token=t0k"),
        *("-O", "max_retries=2", "-m", "openai:m@https://bob:pw@host/v1"),
        *("--note", "sk-abcdefgh12345", "x=zz-secret-999", "--home", "/home/u"),
    ]
    got = redact_argv(argv, secret_values(env, extra=["MYVAR"]))
    assert got == [
        *("polylogue", "eval", "-O", "api_key=[REDACTED]", "--option=auth_token=[REDACTED]"),
        *("-O", "max_retries=2", "-m", "openai:m@https://[REDACTED]@host/v1"),
        *("--note", "[REDACTED]", "x=[REDACTED]", "--home", "/home/u"),
    ]


# ----------------------------------------------------------------------------- item 11


def _eval_cmd(bench: Path, url: str, out: Path, *extra: str) -> list[str]:
    return [
        *(POLYLOGUE, "eval", "-d", str(bench), "-m", f"openai:m@{url}", "--concurrency", "1"),
        *("--batch-size", "1", "--out", str(out), "--no-progress", "--n-boot", "0", *extra),
    ]


def _wait_for_lines(folder: Path, n: int, proc: subprocess.Popen[str]) -> Path:
    import time

    for _ in range(600):
        found = list(folder.glob("*/predictions.jsonl"))
        if found and found[0].read_text().count("\n") >= n:
            return found[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the first run wrote nothing")


def test_second_identical_run_stops_while_the_first_holds_the_folder(
    server: Misbehaving, bench: Path, tmp_path: Path
) -> None:
    import signal
    import time

    def slow(headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        time.sleep(0.05)
        return 200, completion()

    server.reply = slow
    out = tmp_path / "runs"
    cmd = _eval_cmd(bench, server.url, out, "--limit", "8")
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    preds = _wait_for_lines(out, 1, first)
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert second.returncode == 1, second.stderr
    assert "in use by another polylogue run" in second.stderr and "Traceback" not in second.stderr
    assert first.wait(120) == 0, first.communicate()
    ids = [json.loads(line)["point_id"] for line in preds.read_text().splitlines()]
    assert len(ids) == 8 == len(set(ids))  # every point once, the server asked once per point
    assert len(server.requests) == 8
    # A killed holder releases the lock (the kernel drops it): a rerun resumes.
    cmd = _eval_cmd(bench, server.url, out, "--limit", "14")
    killed = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_lines(out, 10, killed)  # 8 from before + 2 new
    killed.send_signal(signal.SIGKILL)
    killed.wait(30)
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    ids = [json.loads(line)["point_id"] for line in preds.read_text().splitlines() if line]
    assert len(set(ids)) == len(ids) == 14


def test_every_runner_takes_the_same_lock(tmp_path: Path) -> None:
    import inspect

    from polylogue.evaluation import runner as eval_runner
    from polylogue.runs import RunFolderBusy, lock_run_folder
    from polylogue.tom import runner as tom_runner
    from polylogue.training.lora import distill

    # flock locks belong to an open file description: a second open conflicts in one process too.
    with (
        lock_run_folder(tmp_path),
        pytest.raises(RunFolderBusy, match=str(tmp_path)),
        lock_run_folder(tmp_path),
    ):
        pass
    with lock_run_folder(tmp_path):  # released on exit
        pass
    for fn in (eval_runner.run_evaluation, tom_runner.run_tom, distill.distill):
        assert "lock_run_folder(" in inspect.getsource(fn), fn


# ----------------------------------------------------------------------------- item 12
# A full or read-only disk, for real: a tiny tmpfs (or a read-only bind mount) in a private
# mount namespace (``unshare -rm``: no root needed where user namespaces are allowed).


def _in_namespace(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no user namespaces here to mount a small disk: {probe.stderr.strip()}")
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"set -u\n{script}"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def test_full_disk_during_eval_is_one_line_and_keeps_what_finished(
    bench: Path, tmp_path: Path
) -> None:
    disk, copy = tmp_path / "disk", tmp_path / "copy"
    disk.mkdir()
    copy.mkdir()
    cmd = " ".join(
        [
            *(POLYLOGUE, "eval", "-d", str(bench), "-m", "baseline:explicit-address"),
            *("--out", str(disk / "runs"), "--no-progress", "--n-boot", "0", "2>", "err.txt"),
        ]
    )
    out = _in_namespace(
        f"mount -t tmpfs -o size=40k tmpfs {disk}\n{cmd}\necho rc=$?\ncp -a {disk}/. {copy}/",
        tmp_path,
    )
    assert "rc=1" in out.stdout, out.stdout + out.stderr
    err = _errors((tmp_path / "err.txt").read_text())
    assert len(err) == 1 and err[0].startswith("error:"), err
    assert "No space left on device" in err[0] and "Traceback" not in err[0]
    (folder,) = (copy / "runs").iterdir()
    assert not list(folder.glob("*.tmp"))
    manifest = json.loads((folder / "manifest.json").read_text())
    # No room for a new manifest: the old one is overwritten over its own blocks.
    assert manifest["status"] == "failed" and "No space left" in manifest["error"]
    kept = read_predictions(folder / "predictions.jsonl")  # readable; a torn tail is cut
    assert 0 < len(kept) < 200


def test_complete_run_is_rescored_in_a_read_only_folder(bench: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    cmd = [POLYLOGUE, "eval", "-d", str(bench), "-m", "baseline:previous-speaker"]
    cmd += ["--out", str(runs), "--no-progress", "--n-boot", "20"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    (folder,) = runs.iterdir()
    before = {f.name: f.read_bytes() for f in folder.iterdir()}
    out = _in_namespace(
        f"mount --bind {runs} {runs} && mount -o remount,bind,ro {runs}\n"
        f"touch {folder}/probe 2>/dev/null && echo WRITABLE\n" + " ".join(cmd) + "\necho rc=$?",
        tmp_path,
    )
    assert "WRITABLE" not in out.stdout and "rc=0" in out.stdout, out.stdout + out.stderr
    assert "complete" in out.stderr and "Acc" in out.stderr
    assert {f.name: f.read_bytes() for f in folder.iterdir()} == before


def test_build_on_a_full_disk_leaves_no_benchmark_folder(tmp_path: Path) -> None:
    disk, copy = tmp_path / "disk", tmp_path / "copy"
    disk.mkdir()
    copy.mkdir()
    from polylogue.paths import data_root

    cmd = (
        f"{POLYLOGUE} build --corpus friends --limit-conversations 4 --out {disk}/bench "
        f"--data-root {data_root()}"
    )
    out = _in_namespace(
        f"mount -t tmpfs -o size=64k tmpfs {disk}\n{cmd} 2> err.txt\necho rc=$?\n"
        f"cp -a {disk}/. {copy}/",
        tmp_path,
    )
    assert "rc=1" in out.stdout, out.stdout + out.stderr
    stderr = (tmp_path / "err.txt").read_text()
    # (the build's progress line may precede it; the error itself is one line)
    err = [line for line in _errors(stderr) if line.startswith("error:")]
    assert err == ["error: No space left on device"] and "Traceback" not in stderr, stderr
    assert list(copy.iterdir()) == []  # no bench/, no half-written staging folder


def test_decide_json_to_a_full_device_is_one_line(tmp_path: Path) -> None:
    transcript = tmp_path / "t.txt"
    transcript.write_text("Alice: Dave, can you check?\nBob: sure\nDave: ok\nAlice: thanks\n")
    with open("/dev/full", "w") as full:
        out = subprocess.run(
            [POLYLOGUE, "decide", str(transcript), "--as", "Dave", "--json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert out.returncode == 1
    err = _errors(out.stderr)
    assert err == ["error: cannot write the output: No space left on device"] or (
        len(err) == 1 and "No space left on device" in err[0]
    ), out.stderr


def test_report_marks_a_run_still_in_progress_as_unfinished(
    server: Misbehaving, bench: Path, tmp_path: Path
) -> None:
    """`polylogue report` on a run another process is still writing (manifest "running")
    says so in the row and a note; once the run stops, the row says what it is then."""
    import threading
    import time

    release = threading.Event()

    def slow(headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        if len(server.requests) > 3:
            release.wait(60)
        time.sleep(0.01)
        return 200, completion()

    server.reply = slow
    out = tmp_path / "runs"
    running = subprocess.Popen(
        _eval_cmd(bench, server.url, out, "--limit", "8"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_lines(out, 2, running)
        report = subprocess.run(
            [POLYLOGUE, "report", str(out), "--out", str(tmp_path / "r1")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert report.returncode == 0, report.stderr
        md = (tmp_path / "r1" / "report.md").read_text(encoding="utf-8")
        assert "(unfinished: running)" in md and "- unfinished: the run was still" in md
        csv_text = (tmp_path / "r1" / "report.csv").read_text(encoding="utf-8")
        assert ",False,running," in csv_text
    finally:
        release.set()
    assert running.wait(120) == 0, running.communicate()
    subprocess.run(
        [POLYLOGUE, "report", str(out), "--out", str(tmp_path / "r2")],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    md = (tmp_path / "r2" / "report.md").read_text(encoding="utf-8")
    # Finished, but only 8 points of the split (--limit): partial, never "running".
    assert "(unfinished: running)" not in md and "(unfinished: partial)" in md
