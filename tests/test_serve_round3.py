"""`polylogue serve` against hostile session bodies and events, run-time controls across a
SIGKILL, `seq` that jumps or goes back, the ready line, and workers whose supervisor is killed
(issue 34): real server processes on loopback, real SQLite files and a real redis-server."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from servers import free_port, polylogue_serve, redis_server
from websockets.sync.client import connect

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus
from polylogue.engine.model import model_dir_for
from polylogue.serve.app import CONTROL_EVENTS, AudienceEvent, FocusEvent, RoleEvent
from polylogue.serve.client import (
    ResumingClient,
    SeqError,
    session_body,
    utterance_events,
)
from polylogue.serve.local import POLYLOGUE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ami() -> Conversation:
    return next(iter(load_corpus("ami")))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    state = tmp_path_factory.mktemp("round3") / "s.sqlite"
    with polylogue_serve("--state", str(state)) as url:
        yield url


def _ws(url: str, sid: str) -> str:
    return url.replace("http", "ws") + f"/v1/sessions/{sid}/stream"


def _new(url: str, conv: Conversation, **extra: Any) -> str:
    r = httpx.post(f"{url}/v1/sessions", json={**session_body("B", conv.participants), **extra})
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


# ----------------------------------------------------------------------------- item 1

BAD_POLICIES = [
    ({"cooldown_s": "5"}, "cooldown_s"),
    ({"threshold_speaking": "0.5"}, "threshold_speaking"),
    ({"threshold_just_spoke": [0.5]}, "threshold_just_spoke"),
    ({"just_spoke_s": {"s": 1}}, "just_spoke_s"),
    ({"warn_after": "abc"}, "warn_after"),
    ({"warn_after": 2.5}, "warn_after"),
    ({"warn_after": True}, "warn_after"),
    ({"warn_after": 0}, "warn_after"),
    ({"cooldown_s": True}, "cooldown_s"),
    ({"cooldown_s": -1}, "cooldown_s"),
    ({"threshold_speaking": 1.5}, "threshold_speaking"),
]
#: Raw bodies: Python's json reads NaN and Infinity, JSON does not.
NON_FINITE = [
    ('{"agent": "B", "policy": {"cooldown_s": NaN}}', "policy.cooldown_s"),
    ('{"agent": "B", "policy": {"threshold_speaking": Infinity}}', "policy.threshold_speaking"),
    ('{"agent": "B", "policy": {"just_spoke_s": -Infinity}}', "policy.just_spoke_s"),
    ('{"agent": "B", "deployment": {"threshold": NaN}}', "deployment.threshold"),
    ('{"agent": "B", "participants": [{"id": "A", "aliases": ["\\udc00x"]}]}', "aliases"),
    ('{"agent": "B", "participants": [{"id": "A\\u0000B"}]}', "id"),
    ('{"agent": "B", "participants": [{"id": "A\\nB"}]}', "id"),
    ('{"agent": "B", "participants": [{"id": "A\\u202eB"}]}', "id"),
    ('{"agent": "B", "participants": [{"id": 7}]}', "id"),
]


@pytest.mark.parametrize(("policy", "field"), BAD_POLICIES)
def test_policy_of_a_wrong_type_or_range_is_a_400_naming_the_field(
    server: str, policy: dict, field: str
) -> None:
    r = httpx.post(f"{server}/v1/sessions", json={"agent": "B", "policy": policy})
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]


@pytest.mark.parametrize(("raw", "field"), NON_FINITE)
def test_non_finite_numbers_surrogates_and_control_characters_in_bodies(
    server: str, raw: str, field: str
) -> None:
    r = httpx.post(
        f"{server}/v1/sessions", content=raw, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]


def test_a_good_policy_gives_a_session_that_answers(server: str, ami: Conversation) -> None:
    """Edge values that are valid give a working session (never one that fails later)."""
    policy = {"cooldown_s": 0, "threshold_speaking": None, "warn_after": 1, "just_spoke_s": 0.0}
    sid = _new(server, ami, policy=policy)
    u = ami.utterances[0]
    r = httpx.post(
        f"{server}/v1/sessions/{sid}/events",
        json={"type": "utterance", "speaker": u.speaker, "text": u.text, "end": 1},
    )
    assert r.status_code == 200 and r.json()["results"][0]["ok"], r.text
    assert httpx.get(f"{server}/v1/sessions/{sid}").status_code == 200


BAD_EVENTS = [
    ({"type": "agent_speech", "speaking": True, "time": "5"}, "time"),
    ({"type": "agent_speech", "speaking": 1}, "speaking"),
    ({"type": "silence", "time": "12.5"}, "time"),
    ({"type": "utterance", "speaker": "A", "text": "hi", "start": "1.0"}, "start"),
    ({"type": "utterance", "speaker": "A", "text": "hi", "final": "true"}, "final"),
    ({"type": "utterance", "speaker": "A", "text": 5}, "text"),
    ({"type": "utterance", "speaker": "A\x00", "text": "hi"}, "speaker"),
    ({"type": "utterance", "speaker": "A\u2066", "text": "hi"}, "speaker"),
    ({"type": "leave", "participant": "A\nB"}, "participant"),
    ({"type": "join", "participants": [{"id": "C", "name": 3}]}, "name"),
    ({"type": "role", "role": 1}, "role"),
]
BAD_FRAMES = [
    ('{"type": "silence", "time": NaN}', "time"),
    ('{"type": "utterance", "speaker": "A", "text": "hi", "end": Infinity}', "end"),
    ('{"type": "utterance", "speaker": "\\ud800", "text": "hi"}', "speaker"),
    ('{"type": "utterance", "speaker": "A", "text": "x\\udfff"}', "text"),
]


def test_events_of_a_wrong_type_are_refused_naming_the_field(
    server: str, ami: Conversation
) -> None:
    sid = _new(server, ami)
    for event, field in BAD_EVENTS:  # HTTP: a lone bad event is a 400
        r = httpx.post(f"{server}/v1/sessions/{sid}/events", json=event)
        assert r.status_code == 400, (event, r.text)
        assert field in r.json()["results"][0]["error"], (event, r.text)
    with connect(_ws(server, sid)) as ws:  # the socket: an error result, still open
        for raw, field in BAD_FRAMES + [(json.dumps(e), f) for e, f in BAD_EVENTS]:
            ws.send(raw)
            res = json.loads(ws.recv(timeout=30))
            assert not res["ok"] and field in res["error"], (raw, res)
        u = ami.utterances[0]
        ws.send(json.dumps({"type": "utterance", "speaker": u.speaker, "text": u.text}))
        assert json.loads(ws.recv(timeout=30))["ok"]
    summary = httpx.get(f"{server}/v1/sessions/{sid}").json()
    assert summary["utterances"] == 1  # nothing bad was applied


def test_deployment_replies_name_the_model_folder_not_its_path(tmp_path: Path) -> None:
    folder = tmp_path / "private" / "our-model"
    shutil.copytree(model_dir_for("meeting"), folder)
    with polylogue_serve("--state", str(tmp_path / "s.sqlite"), "--model-dir", str(folder)) as url:
        r = httpx.post(f"{url}/v1/sessions", json={"agent": "B"})
        sid = r.json()["session_id"]
        role = httpx.post(f"{url}/v1/sessions/{sid}/events", json={"type": "role", "role": None})
        shown = [r.json()["deployment"], httpx.get(f"{url}/v1/sessions/{sid}").json()]
        shown.append(role.json()["results"][0]["deployment"])
    text = json.dumps(shown)
    assert str(folder.parent) not in text and str(tmp_path) not in text
    assert shown[0]["model"] in (None, folder.name)


def test_a_fragmented_message_over_the_limit_gets_close_code_1009(
    server: str, ami: Conversation
) -> None:
    sid = _new(server, ami)
    with connect(_ws(server, sid), max_size=None) as ws:

        def fragments() -> Any:
            # Up to 3 MB in 300 fragments, as a client would stream them: one that stops
            # writing once the server's close frame is in reads the code. (A client that keeps
            # writing into a closed socket can get the TCP reset before the close frame, which
            # no server can prevent.)
            for _ in range(300):
                if ws.protocol.close_rcvd is not None:
                    return
                yield "x" * 10_000
                time.sleep(0.002)

        with pytest.raises(Exception):  # noqa: B017 - the close, whichever side raises
            ws.send(fragments())
            ws.recv(timeout=30)
        assert ws.close_code == 1009


# ----------------------------------------------------------------------------- item 2

#: One run-time control of each kind and how to read it back from ``GET /v1/sessions/{id}``.
CONTROLS: dict[str, tuple[dict[str, Any], Any]] = {
    "role": ({"type": "role", "role": "observer"}, lambda s: s["deployment"]["role"] == "observer"),
    "audience": (
        {"type": "audience", "audience": "adaptive"},
        lambda s: s["audience"] == "adaptive",
    ),
    "focus": (
        {"type": "focus", "ignored": ["A"]},
        lambda s: s["focus"]["ignored"] == ["A"],
    ),
}


def test_every_control_event_kind_is_in_the_durable_set() -> None:
    """Each control the wire accepts is covered by the kill -9 test below."""
    assert {RoleEvent, AudienceEvent, FocusEvent} <= set(CONTROL_EVENTS)
    kinds = {m.model_fields["type"].annotation.__args__[0] for m in CONTROL_EVENTS}
    assert kinds == set(CONTROLS)


def _control_survives_sigkill(args: tuple[str, ...], ami: Conversation, kind: str) -> None:
    event, check = CONTROLS[kind]
    port = free_port()
    pids: list[int] = []
    with polylogue_serve(*args, port=port, pids=pids) as url:
        sid = _new(url, ami)
        with connect(_ws(url, sid)) as ws:
            u = ami.utterances[0]
            ws.send(json.dumps({"type": "utterance", "seq": 0, "speaker": u.speaker, "text": "ok"}))
            ws.recv(timeout=30)
            ws.send(json.dumps({**event, "seq": 1}))
            ack = json.loads(ws.recv(timeout=30))
            assert ack["ok"], ack
            os.kill(pids.pop(), signal.SIGKILL)  # at once after the acknowledgement
    with polylogue_serve(*args, port=port) as url:
        summary = httpx.get(f"{url}/v1/sessions/{sid}").json()
    assert check(summary), summary
    assert summary["last_seq"] == 1


@pytest.mark.parametrize("kind", sorted(CONTROLS))
@pytest.mark.parametrize("flush", ["default", "30"])
def test_an_acknowledged_control_survives_sigkill_sqlite(
    tmp_path: Path, ami: Conversation, kind: str, flush: str
) -> None:
    args: tuple[str, ...] = ("--state", str(tmp_path / "s.sqlite"))
    if flush != "default":
        args += ("--flush-interval", flush)  # a wide write-behind window
    _control_survives_sigkill(args, ami, kind)


@pytest.mark.parametrize("kind", sorted(CONTROLS))
def test_an_acknowledged_control_survives_sigkill_redis(
    tmp_path: Path, ami: Conversation, kind: str
) -> None:
    with redis_server(tmp_path) as redis_url:
        _control_survives_sigkill(("--state", redis_url), ami, kind)


# ----------------------------------------------------------------------------- item 3


def test_seq_jump_is_flagged_and_skipped_numbers_are_refused(
    server: str, ami: Conversation
) -> None:
    sid = _new(server, ami)
    events = utterance_events(ami.utterances[:4])
    events[2] = {**events[2], "seq": 1000}  # a client bug: far ahead
    r = httpx.post(f"{server}/v1/sessions/{sid}/events", json=events).json()["results"]
    assert [x.get("seq_gap", 0) for x in r[:3]] == [0, 0, 998]
    # seq 3 lies in the range the jump skipped: never applied, so refused, not a duplicate.
    assert r[3]["ok"] is False and r[3]["last_seq"] == 1000
    assert "next event needs seq 1001" in r[3]["error"]
    # A seq applied before the jump is a duplicate, with the session's last_seq.
    again = httpx.post(f"{server}/v1/sessions/{sid}/events", json=events[1]).json()["results"]
    assert again[0] == {"ok": True, "seq": 1, "duplicate": True, "last_seq": 1000}


def _run_client(url: str, sid: str, events: list[dict]) -> list[dict]:
    seen: list[dict] = []

    async def go() -> None:
        client = ResumingClient(url, None, sid)
        try:
            await client.run(events, lambda e, r: seen.append(r))
        finally:
            await client.close()

    asyncio.run(go())
    return seen


def test_resume_client_stops_on_a_jump_and_on_numbering_that_went_back(
    server: str, ami: Conversation
) -> None:
    # Jump ahead: the client stops at the flagged event instead of feeding duplicates.
    sid = _new(server, ami)
    events = utterance_events(ami.utterances[10:20], first_seq=0)
    events[4] = {**events[4], "seq": 77}
    seen: list[dict] = []
    with pytest.raises(SeqError, match="skipped 73"):
        seen = _run_client(server, sid, events)
    assert httpx.get(f"{server}/v1/sessions/{sid}").json()["last_seq"] == 77
    # Back: a second client numbering from 0 on a session already at 77.
    with pytest.raises(SeqError, match="last_seq is 77"):
        _run_client(server, sid, utterance_events(ami.utterances[:3]))
    # Consecutive numbering runs through.
    sid2 = _new(server, ami)
    seen = _run_client(server, sid2, utterance_events(ami.utterances[:8]))
    assert [r["seq"] for r in seen] == list(range(8)) and all(r["ok"] for r in seen)


# ----------------------------------------------------------------------------- items 4, 5


def _banner_then_connect(tmp_path: Path, *extra: str) -> None:
    port = free_port()
    cmd = [POLYLOGUE, "serve", "--port", str(port), "--state", str(tmp_path / "s.sqlite")]
    proc = subprocess.Popen([*cmd, *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert "serve on" in line, line
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # refused before the fix: the banner came before listen()
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=60).status_code == 200
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ready_line_only_once_the_socket_listens(tmp_path: Path, workers: str) -> None:
    for _ in range(3 if workers == "1" else 2):
        _banner_then_connect(tmp_path, "--workers", workers)


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _gone(pids: list[int], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = []
        for p in pids:
            try:
                os.kill(p, 0)
                state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    alive.append(p)
            except (ProcessLookupError, FileNotFoundError):
                pass
        if not alive:
            return True
        time.sleep(0.2)
    return False


def test_killing_the_workers_supervisor_ends_its_workers(tmp_path: Path, ami: Conversation) -> None:
    port = free_port()
    args = ("--state", str(tmp_path / "s.sqlite"), "--workers", "2")
    pids: list[int] = []
    with polylogue_serve(*args, port=port, pids=pids) as url:
        sid = _new(url, ami)
        supervisor = pids[0]
        workers = _children(supervisor)
        assert len(workers) >= 2
        os.kill(supervisor, signal.SIGKILL)
        assert _gone(workers), "workers kept running after their supervisor was killed"
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/healthz", timeout=2)
    with polylogue_serve(*args, port=port) as url:  # the port is free again
        assert httpx.get(f"{url}/v1/sessions/{sid}").status_code == 200
