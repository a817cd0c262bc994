"""Live-conversation snapshots from one declaration: a replayed AMI meeting decides the same
whether it runs straight through, is restored from a snapshot after every utterance, or is
probed on forks first; old snapshots upgrade or are refused by version, in `serve` too."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx
import pytest
from servers import polylogue_serve
from websockets.sync.client import connect

from polylogue.conversation import Conversation, Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.live import (
    SNAPSHOT_VERSION,
    LiveConversation,
    SnapshotError,
    snapshot_deployment,
    upgrade_snapshot,
)
from polylogue.turntaking.points import PointOptions


@pytest.fixture(scope="module")
def ami() -> Conversation:
    return next(iter(load_corpus("ami")))


def _decision(d) -> str:
    row = d.to_dict()
    row.pop("latency_ms", None)  # wall clock
    return json.dumps(row, sort_keys=True)


def _utt(u: Utterance) -> Utterance:
    return Utterance(u.speaker, u.text, u.start, u.end)


def test_replay_decides_identically_straight_restored_and_probed(ami: Conversation) -> None:
    straight = LiveConversation.start("B", ami.participants)
    restored = LiveConversation.start("B", ami.participants)
    probed = LiveConversation.start("B", ami.participants)
    decided = 0
    for u in ami.utterances:
        a = _decision(straight.utterance(_utt(u)))
        # A snapshot through JSON after every utterance, as serve stores it.
        restored = LiveConversation.from_dict(
            json.loads(json.dumps(restored.to_dict())), restored.deployment
        )
        b = _decision(restored.utterance(_utt(u)))
        # The LiveKit probe: decide on a fork first; the conversation must not move.
        before = json.dumps(probed.to_dict(), sort_keys=True)
        c = _decision(probed.fork().utterance(_utt(u)))
        assert json.dumps(probed.to_dict(), sort_keys=True) == before
        d = _decision(probed.utterance(_utt(u)))
        assert a == b == c == d, u
        decided += json.loads(a)["action"] is not None
    assert decided > 100  # the meeting has real decision points, not only skips
    assert json.dumps(straight.to_dict(), sort_keys=True) == json.dumps(
        restored.to_dict(), sort_keys=True
    )


def test_point_options_are_saved(ami: Conversation) -> None:
    live = LiveConversation.start("B", ami.participants)
    live.point_options = PointOptions(min_chars=12, drop_fillers=False)
    back = LiveConversation.from_dict(json.loads(json.dumps(live.to_dict())), live.deployment)
    assert back.point_options == PointOptions(min_chars=12, drop_fillers=False)


def test_old_snapshots_upgrade_or_are_refused_by_version(ami: Conversation) -> None:
    live = LiveConversation.start("B", ami.participants)
    for u in ami.utterances[:30]:
        live.utterance(_utt(u))
    snap = json.loads(json.dumps(live.to_dict()))
    assert snap["version"] == SNAPSHOT_VERSION == 4
    # Version 3 had no audience or focus (the group audience, nobody ignored), and stored the
    # point a role or the default chose as if it had been asked for: upgraded.
    v3 = {k: v for k, v in snap.items() if k not in ("audience", "focus")} | {"version": 3}
    v3["deployment"] = snap["deployment"] | {"operating_point": "matched"}
    assert upgrade_snapshot(v3) == snap
    # Version 2 had no point options (it always ran with the defaults): upgraded.
    v2 = {k: v for k, v in v3.items() if k != "point_options"} | {"version": 2}
    old = LiveConversation.from_dict(v2, snapshot_deployment(v2))
    assert old.point_options == PointOptions()
    nxt = _utt(ami.utterances[30])
    assert _decision(old.utterance(nxt)) == _decision(live.fork().utterance(nxt))
    assert upgrade_snapshot(v2) == snap
    # Version 1 (before the deployment layer) and unknown versions: one error naming it.
    for version in (1, 99, None):
        bad = snap | {"version": version}
        with pytest.raises(SnapshotError, match=f"snapshot version {version!r}; this"):
            snapshot_deployment(bad)
        with pytest.raises(SnapshotError, match=f"snapshot version {version!r}"):
            LiveConversation.from_dict(bad, live.deployment)
    # A field missing or malformed: named, never a KeyError.
    with pytest.raises(SnapshotError, match="lacks 'index'"):
        LiveConversation.from_dict({k: v for k, v in snap.items() if k != "index"}, live.deployment)
    with pytest.raises(SnapshotError, match="bad 'agent'"):
        LiveConversation.from_dict(snap | {"agent": {"spec": "B"}}, live.deployment)
    with pytest.raises(SnapshotError, match="bad 'state'"):
        LiveConversation.from_dict(snap | {"state": {}}, live.deployment)


@pytest.mark.slow
def test_serve_answers_an_unreadable_stored_session_clearly(
    tmp_path: Path, ami: Conversation
) -> None:
    db = tmp_path / "state.sqlite"
    events = [
        {"type": "utterance", "seq": i, "speaker": u.speaker, "text": u.text}
        for i, u in enumerate(ami.utterances[:6])
    ]
    with polylogue_serve("--state", str(db)) as url:
        body = {"agent": "B", "participants": [p.to_dict() for p in ami.participants]}
        sids = [httpx.post(f"{url}/v1/sessions", json=body).json()["session_id"] for _ in "ab"]
        for sid in sids:
            r = httpx.post(f"{url}/v1/sessions/{sid}/events", json=events[:3])
            assert r.status_code == 200 and all(x["ok"] for x in r.json()["results"]), r.text
    # Rewrite what the store holds: one session as version 1, the other as version 2.
    con = sqlite3.connect(db)
    for sid, version in zip(sids, (1, 2), strict=True):
        (text,) = con.execute("SELECT snapshot FROM sessions WHERE id=?", (sid,)).fetchone()
        snap = json.loads(text)
        snap = {k: v for k, v in snap.items() if k != "point_options"} | {"version": version}
        con.execute("UPDATE sessions SET snapshot=? WHERE id=?", (json.dumps(snap), sid))
    con.commit()
    con.close()
    old, upgraded = sids
    with polylogue_serve("--state", str(db)) as url:
        r = httpx.post(f"{url}/v1/sessions/{old}/events", json=events[3:4])
        (res,) = r.json()["results"]
        assert not res["ok"] and "snapshot version 1" in res["error"], res
        assert "internal error" not in res["error"]
        r = httpx.get(f"{url}/v1/sessions/{old}")
        assert r.status_code == 400 and "snapshot version 1" in r.text
        ws_url = url.replace("http", "ws") + f"/v1/sessions/{old}/stream"
        with pytest.raises(Exception, match="4400") as e, connect(ws_url) as ws:
            ws.send(json.dumps(events[3]))
            ws.recv()
        assert "snapshot version 1" in str(e.value)
        r = httpx.post(f"{url}/v1/sessions/{upgraded}/events", json=events[3:])
        assert all(x["ok"] for x in r.json()["results"]), r.text


def test_chat_model_forks_and_restores_with_its_chat_state() -> None:
    from polylogue.engine.deployment import Deployment

    conv = next(iter(load_corpus("irc")))
    dep = Deployment.resolve(domain="chat")
    target = conv.utterances[1].speaker
    live = LiveConversation(dep, target)
    restored = LiveConversation(dep, target)
    for u in conv.utterances[:80]:
        probe = _decision(live.fork().utterance(_utt(u)))
        a = _decision(live.utterance(_utt(u)))
        snap = json.loads(json.dumps(restored.to_dict()))
        assert "chat_state" in snap
        restored = LiveConversation.from_dict(snap, dep)
        assert probe == a == _decision(restored.utterance(_utt(u)))
