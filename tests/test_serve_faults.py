"""Crash semantics of `polylogue serve` (issue 27, item 5): real server processes on loopback,
killed with SIGKILL; the documented resume client (examples/serve_client.py) loses no session
and feeds no utterance twice."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from servers import free_port, polylogue_serve
from websockets.sync.client import connect

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus
from polylogue.serve.client import create_session, local_p_speak, utterance_events

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "examples" / "serve_client.py"
N = 150  # utterances replayed


@pytest.fixture(scope="module")
def ami() -> Conversation:
    return next(iter(load_corpus("ami")))


def _write_transcript(conv: Conversation, path: Path, n: int) -> None:
    lines = [json.dumps({"participants": [p.to_dict() for p in conv.participants]})]
    for u in conv.utterances[:n]:
        lines.append(
            json.dumps({"speaker": u.speaker, "text": u.text, "start": u.start, "end": u.end})
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _local(conv: Conversation, n: int, agent: str = "B") -> list[float | None]:
    return local_p_speak(agent, conv.participants, conv.utterances[:n])


def _kill(pids: list[int]) -> None:
    os.kill(pids.pop(), signal.SIGKILL)


class _Lines:
    """The client's stdout, line by line, read by a thread (so waiting is bounded)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.q: queue.Queue[str | None] = queue.Queue()
        self.all: list[str] = []
        assert proc.stdout is not None
        stdout = proc.stdout

        def pump() -> None:
            for line in stdout:
                self.q.put(line)
            self.q.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def until(self, want: str, count: int = 1, timeout_s: float = 120.0) -> list[dict]:
        """Read until ``count`` more lines of event ``want`` arrived; returns what was read."""
        got: list[dict] = []
        seen = 0
        while seen < count:
            line = self.q.get(timeout=timeout_s)
            assert line is not None, f"client ended early: {''.join(self.all)[-2000:]}"
            self.all.append(line)
            obj = json.loads(line) if line.startswith("{") else {"event": "text", "text": line}
            got.append(obj)
            seen += obj["event"] == want
        return got

    def rest(self, timeout_s: float = 300.0) -> list[dict]:
        out = []
        while (line := self.q.get(timeout=timeout_s)) is not None:
            self.all.append(line)
            out.append(json.loads(line) if line.startswith("{") else {"event": "text"})
        return out


def test_sessions_answered_201_survive_sigkill(tmp_path: Path, ami: Conversation) -> None:
    """A session is stored before its 201: a long write-behind window loses none of them."""
    port = free_port()
    args = ("--state", str(tmp_path / "s.sqlite"), "--flush-interval", "30")
    pids: list[int] = []
    with polylogue_serve(*args, port=port, pids=pids) as url:
        sids = [create_session(url, "B", ami.participants) for _ in range(3)]  # each a 201
        _kill(pids)  # at once: well inside the 30 s flush interval
    with polylogue_serve(*args, port=port) as url:
        assert [httpx.get(f"{url}/v1/sessions/{s}").status_code for s in sids] == [200] * 3


def test_a_resend_after_restart_is_not_fed_twice(tmp_path: Path, ami: Conversation) -> None:
    """``seq`` is idempotent: events resent after a restart are skipped, not applied again."""
    args = ("--state", str(tmp_path / "s.sqlite"))
    events = utterance_events(ami.utterances[:20])
    with polylogue_serve(*args) as url:
        sid = create_session(url, "B", ami.participants)
        ws_url = url.replace("http", "ws") + f"/v1/sessions/{sid}/stream"
        with connect(ws_url) as ws:
            first = []
            for e in events[:10]:
                ws.send(json.dumps(e))
                first.append(json.loads(ws.recv()))
    with polylogue_serve(*args) as url:  # a graceful restart: everything was written
        with connect(url.replace("http", "ws") + f"/v1/sessions/{sid}/stream") as ws:
            again = []
            for e in events:  # a client that resends all it has not seen acknowledged
                ws.send(json.dumps(e))
                again.append(json.loads(ws.recv()))
        summary = httpx.get(f"{url}/v1/sessions/{sid}").json()
        # HTTP resends are skipped the same way.
        r = httpx.post(f"{url}/v1/sessions/{sid}/events", json=events[5:8])
        assert [x.get("duplicate") for x in r.json()["results"]] == [True] * 3
    assert [r.get("duplicate", False) for r in again] == [True] * 10 + [False] * 10
    assert all(r["ok"] and r["seq"] == e["seq"] for r, e in zip(again, events, strict=True))
    assert summary["utterances"] == 20 and summary["last_seq"] == 19
    served = [r["decision"]["p_speak"] for r in first + again[10:]]
    assert served == _local(ami, 20)


def test_documented_client_survives_sigkill_after_creation_and_mid_burst(
    tmp_path: Path, ami: Conversation
) -> None:
    transcript = tmp_path / "meeting.jsonl"
    _write_transcript(ami, transcript, N)
    port = free_port()
    # A wide write-behind window (2 s): the mid-burst kill loses events the server had
    # already answered, which the client must send again.
    args = ("--state", str(tmp_path / "s.sqlite"), "--flush-interval", "2")
    pids: list[int] = []
    with ExitStack() as servers:
        url = servers.enter_context(polylogue_serve(*args, port=port, pids=pids))
        cmd = [sys.executable, str(CLIENT), str(transcript), "--as", "B", "--url", url, "--json"]
        client = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT
        )
        try:
            lines = _Lines(client)
            created = lines.until("created")[-1]
            _kill(pids)  # right after the 201
            servers.enter_context(polylogue_serve(*args, port=port, pids=pids))
            read = lines.until("decision", count=60)
            answered_before_kill = max(o["seq"] for o in read if o["event"] == "decision")
            _kill(pids)  # mid-burst
            servers.enter_context(polylogue_serve(*args, port=port, pids=pids))
            read += lines.rest()
            assert client.wait(timeout=60) == 0, "".join(lines.all)[-2000:]
            summary = httpx.get(f"{url}/v1/sessions/{created['session_id']}").json()
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()
    resumes = [o for o in read if o["event"] == "resumed"]
    decisions = {o["seq"]: o["p_speak"] for o in read if o["event"] == "decision"}
    assert len(resumes) == 2
    # The first kill came before the session saw any event (or lost them all); the second
    # lost events it had answered, and the client sent them again.
    assert resumes[1]["resumed_after"] is None or resumes[1]["resumed_after"] <= (
        answered_before_kill
    )
    # 0 sessions lost, 0 utterances lost, 0 fed twice: the server saw each utterance once,
    # and every decision is the one an uninterrupted engine makes.
    assert summary["utterances"] == N and summary["last_seq"] == N - 1
    assert sorted(decisions) == list(range(N))
    assert [decisions[i] for i in range(N)] == _local(ami, N)
