"""Run-time controls: a role set while a session runs behaves exactly as the same role given at
creation (the whole transition matrix, through LiveConversation, ``serve``, LiveKit and
Pipecat on a real AMI meeting), the ``adaptive`` audience (one-to-one with one person, group
rules with two or more), focus (ignored speakers, the only ones answered), all persisted with
the session, and one clear error for a bad value with the session unchanged."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from servers import polylogue_serve

from polylogue.conversation import Conversation, Participant, Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.deployment import ROLES, Deployment
from polylogue.engine.live import (
    AUDIENCES,
    EventError,
    LiveConversation,
    SnapshotError,
    addresses_nobody_else,
    snapshot_deployment,
)

AGENT = "B"
N = 70  # utterances of the meeting replayed
AT = 30  # the transition comes just before this utterance
ROLE_NAMES: tuple[str | None, ...] = (None, *ROLES)
MATRIX = list(itertools.product(ROLE_NAMES, ROLE_NAMES))


@pytest.fixture(scope="module")
def lines() -> list[Utterance]:
    """The first shared AMI meeting, untimed (LiveKit and Pipecat carry no times here)."""
    conv: Conversation = next(iter(load_corpus("ami")))
    out = [Utterance(u.speaker, u.text) for u in conv.utterances[:N]]
    assert len({u.speaker for u in out}) >= 4 and any(u.speaker == AGENT for u in out[AT:])
    return out


@pytest.fixture(scope="module")
def dep() -> Deployment:
    return Deployment.resolve()


def _action(d: Any) -> str | None:
    return None if d.action is None else d.action.value


def _live_rows(
    dep: Deployment, lines: list[Utterance], start: str | None, switch: Any = ...
) -> tuple[list[tuple[str | None, str | None]], dict[str, Any]]:
    """(action, suggested) after each line from AT on, and the deployment at the end."""
    live = LiveConversation.start(AGENT, deployment=dep.with_role(start))
    rows = []
    for i, u in enumerate(lines):
        if i == AT and switch is not ...:
            live.set_role(switch)
        d = live.utterance(u)
        if i >= AT:
            rows.append((_action(d), None if d.suggested is None else d.suggested.value))
    return rows, live.deployment.to_dict()


def test_role_matrix_in_a_live_conversation(dep: Deployment, lines: list[Utterance]) -> None:
    created = {role: _live_rows(dep, lines, role) for role in ROLE_NAMES}
    # The roles really differ on this meeting (else the matrix would prove nothing).
    assert len({json.dumps(created[r][0]) for r in ROLE_NAMES}) == len(ROLE_NAMES)
    for start, target in MATRIX:
        assert _live_rows(dep, lines, start, target) == created[target], (start, target)


def test_clearing_the_role_returns_to_the_sessions_own_point() -> None:
    own = Deployment.resolve(domain="tv", operating_point="polite", threshold=0.4)
    for role in ROLES:
        created = Deployment.resolve(
            domain="tv", operating_point="polite", threshold=0.4, role=role
        )
        assert own.with_role(role).to_dict() == created.to_dict()
        assert own.with_role(role).with_role(None).to_dict() == own.to_dict()
    # An explicit point wins over the role's preset, at creation and at run time alike.
    assert own.with_role("assistant").operating_point == "polite"
    plain = Deployment.resolve()
    assert plain.with_role("assistant").addressed_only
    assert plain.with_role("assistant").operating_point == "addressed-only"
    assert plain.with_role("facilitator").operating_point == "balanced"
    assert not plain.with_role("assistant").with_role(None).addressed_only
    # A snapshot keeps only what was asked for: restored, clearing the role still returns.
    live = LiveConversation.start(AGENT, deployment=plain.with_role("assistant"))
    snap = json.loads(json.dumps(live.to_dict()))
    back = LiveConversation.from_dict(snap, snapshot_deployment(snap))
    back.set_role(None)
    assert back.deployment.to_dict() == plain.to_dict()


def test_role_matrix_through_serve(tmp_path: Path, lines: list[Utterance]) -> None:
    events = [{"type": "utterance", "speaker": u.speaker, "text": u.text} for u in lines]

    def run(url: str, start: str | None, target: Any = ...) -> tuple[list, dict]:
        r = httpx.post(f"{url}/v1/sessions", json={"agent": AGENT, "deployment": {"role": start}})
        assert r.status_code == 201, r.text
        sid = r.json()["session_id"]
        batch = [*events[:AT]]
        if target is not ...:
            batch.append({"type": "role", "role": target})
        batch += events[AT:]
        res = httpx.post(f"{url}/v1/sessions/{sid}/events", json=batch, timeout=120).json()
        results = res["results"]
        assert all(x["ok"] for x in results), results
        deployment = r.json()["deployment"]
        if target is not ...:
            deployment = results[AT]["deployment"]
            assert httpx.get(f"{url}/v1/sessions/{sid}").json()["deployment"] == deployment
        after = [
            (x["decision"]["action"], x["decision"]["suggested"])
            for x in results[-(len(lines) - AT) :]
        ]
        return after, deployment

    with polylogue_serve("--state", str(tmp_path / "s.sqlite")) as url:
        created = {role: run(url, role) for role in ROLE_NAMES}
        for start, target in MATRIX:
            assert run(url, start, target) == created[target], (start, target)
    # The service decides as the library does.
    dep = Deployment.resolve()
    assert created["assistant"][0] == _live_rows(dep, lines, "assistant")[0]


def _adapter_actions(rows: list[dict]) -> list[str | None]:
    return [r["decision"] for r in rows[AT:]]


def test_role_matrix_through_livekit(dep: Deployment, lines: list[Utterance]) -> None:
    pytest.importorskip("livekit.agents")
    from polylogue.adapters.livekit import replay_transcript

    def run(start: str | None, target: Any = ...) -> tuple[list, dict]:
        seen: dict[str, Any] = {}

        def switch(session: Any) -> None:
            if target is not ...:
                session.set_role(target)
            seen["deployment"] = session.live.deployment.to_dict()

        rows = asyncio.run(
            replay_transcript(lines, AGENT, deployment=dep, role=start, controls={AT: switch})
        )
        return _adapter_actions(rows), seen["deployment"]

    created = {role: run(role) for role in ROLE_NAMES}
    live = {role: [a for a, _ in _live_rows(dep, lines, role)[0]] for role in ROLE_NAMES}
    for role in ROLE_NAMES:
        assert created[role][0] == live[role], role  # the adapter decides as the library
    for start, target in MATRIX:
        assert run(start, target) == created[target], (start, target)


def test_role_matrix_through_pipecat(dep: Deployment, lines: list[Utterance]) -> None:
    pytest.importorskip("pipecat")
    from polylogue.adapters.pipecat import replay_transcript

    async def run(start: str | None, target: Any = ...) -> tuple[list, dict]:
        seen: dict[str, Any] = {}

        def switch(gate: Any) -> None:
            if target is not ...:
                gate.set_role(target)
            seen["deployment"] = gate.live.deployment.to_dict()

        rows = await replay_transcript(
            lines, AGENT, deployment=dep, role=start, controls={AT: switch}
        )
        return _adapter_actions(rows), seen["deployment"]

    async def matrix() -> None:
        created = {role: await run(role) for role in ROLE_NAMES}
        for role in ROLE_NAMES:
            assert created[role][0] == [a for a, _ in _live_rows(dep, lines, role)[0]], role
        for start, target in MATRIX:
            assert await run(start, target) == created[target], (start, target)

    asyncio.run(matrix())


# ----------------------------------------------------------------------------- audience

ROSTER = [Participant("dave", "Dave"), Participant("alice", "Alice"), Participant("bob", "Bob")]
#: A completed turn that addresses nobody and that no group rule answers, but that turns to
#: the one listener of a two-person talk (a question by its words).
PLAIN = "Should I move the release notes to the shared folder this morning?"
#: Narration: one-to-one, still no question, request or reply to the agent.
NARRATION = "I moved the release notes to the shared folder this morning."


def _assistant(audience: str = "adaptive") -> LiveConversation:
    live = LiveConversation.start(
        "Dave", ROSTER, deployment=Deployment.resolve(role="assistant"), roster_known=False
    )
    live.join([ROSTER[0], ROSTER[1]])  # Dave and Alice present; Bob known, not here
    live.set_audience(audience)
    return live


def test_adaptive_audience_one_to_one_then_group_then_one_to_one() -> None:
    live = _assistant()
    d = live.utterance(Utterance("alice", PLAIN))
    assert d.action is not None and d.action.value == "SPEAK" and d.reason.startswith("one-to-one")
    assert live.utterance(Utterance("alice", "Mm-hmm.")).action is None  # still no decision
    # A turn put to someone else is not the agent's, even one-to-one.
    to_bob = live.utterance(Utterance("alice", "Bob, can you send me the numbers later?"))
    assert to_bob.engine is not None and not addresses_nobody_else(to_bob.engine)
    assert to_bob.action is not None and to_bob.action.value == "SILENT"
    # Group: the assistant's rule (addressed only) as soon as a second person is present.
    live.join([ROSTER[2]])
    assert live.utterance(Utterance("alice", PLAIN)).action.value == "SILENT"  # type: ignore[union-attr]
    named = live.utterance(Utterance("alice", "Dave, can you check the logs?"))
    assert named.action is not None and named.action.value == "SPEAK"
    live.leave("bob")
    back = live.utterance(Utterance("alice", PLAIN))
    assert back.action is not None and back.action.value == "SPEAK"
    # The group audience never answers as one-to-one.
    group = _assistant("group")
    assert group.utterance(Utterance("alice", PLAIN)).action.value == "SILENT"  # type: ignore[union-attr]


def test_adaptive_audience_answers_talk_turned_to_the_agent_only() -> None:
    live = _assistant()
    # Narration, thinking aloud and text read out are not answered one-to-one.
    for text in (
        NARRATION,
        "ugh forty three updates seriously",
        "it says your parcel will arrive between nine and five",
        "honey can you get the door",
    ):
        d = live.utterance(Utterance("alice", text))
        assert d.action is not None and d.action.value == "SILENT", text
        assert not d.reason.startswith("one-to-one"), text
    # A request, a need and a "you" statement turn to the agent (recognizer text).
    for text in ("remind me to call the bank at five", "i need a taxi for tomorrow morning"):
        d = live.utterance(Utterance("alice", text))
        assert d.action is not None and d.action.value == "SPEAK", text
        assert d.reason.startswith("one-to-one"), text
    # A reply to the agent's own question is for the agent, whatever its words.
    live.utterance(Utterance("dave", "Which day suits you for the dentist?"))
    d = live.utterance(Utterance("alice", "thursday afternoon probably"))
    assert d.action is not None and d.action.value == "SPEAK"


def test_adaptive_audience_without_a_roster_counts_first_speech() -> None:
    live = LiveConversation.start("Dave", deployment=Deployment.resolve(role="assistant"))
    live.set_audience("adaptive")
    assert live.utterance(Utterance("Alice", PLAIN)).action.value == "SPEAK"  # type: ignore[union-attr]
    live.utterance(Utterance("Bob", "Sorry I'm late, the train was stuck outside the station."))
    assert live.utterance(Utterance("Alice", PLAIN)).action.value == "SILENT"  # type: ignore[union-attr]


def test_an_observer_in_adaptive_mode_logs_the_one_to_one_answer() -> None:
    live = _assistant()
    live.set_role("observer")
    d = live.utterance(Utterance("alice", PLAIN))
    assert d.action is not None and d.action.value == "SILENT"
    assert d.suggested is not None and d.suggested.value == "SPEAK"


# ----------------------------------------------------------------------------- focus


def test_focus_ignored_and_only() -> None:
    people = [*ROSTER, Participant("tv", "TV")]
    live = LiveConversation.start("Dave", people, deployment=Deployment.resolve())
    live.set_focus(ignored=["TV"])
    d = live.utterance(Utterance("tv", "Dave, what do you think about that?"))
    assert d.action is None and d.reason.startswith("ignored speaker")
    asked = live.utterance(Utterance("alice", "Dave, what do you think about that?"))
    assert asked.action is not None and asked.action.value == "SPEAK"
    # Ignored participants are not people for the adaptive audience.
    live.leave("bob")
    live.set_audience("adaptive")
    assert live.humans_present() == ["alice"]
    live.set_focus(only=["bob"])
    d = live.utterance(Utterance("alice", "Dave, can you check the logs?"))
    assert d.action is None and d.reason.startswith("not in focus")
    assert live.utterance(Utterance("bob", "Dave, can you check the logs?")).action is not None
    live.set_focus()
    assert live.focus.ignored == () and live.focus.only == ()


def _p_after_tv(ignored: bool, snapshot: bool = False) -> tuple[float, dict[str, Any]]:
    """P(speak) for Dave after Bob's plain reply to a TV that called Dave by name."""
    people = [*ROSTER, Participant("tv", "TV")]
    live = LiveConversation.start("Dave", people, deployment=Deployment.resolve())
    live.utterance(Utterance("dave", "Morning, everyone."))
    if ignored:
        live.set_focus(ignored=["TV"])
    if snapshot:
        snap = json.loads(json.dumps(live.to_dict()))
        live = LiveConversation.from_dict(snap, snapshot_deployment(snap))
    live.utterance(Utterance("tv", "Dave, can you hear me? Dave!"))
    d = live.utterance(Utterance("bob", "Yeah, go on."))
    assert d.engine is not None and d.p_speak is not None
    return d.p_speak, d.engine.cues


def test_an_ignored_speakers_words_address_nobody_later_either() -> None:
    # Heard, Bob's reply follows a call to Dave ("addressed by name one utterance earlier");
    # ignored, the TV's words are context for the turn sequence but name nobody.
    heard, _ = _p_after_tv(ignored=False)
    ignored, cues = _p_after_tv(ignored=True)
    assert ignored < heard
    assert cues["address"]["target"] == "not named"
    # The focus travels with a snapshot, and so does its effect on the words.
    assert _p_after_tv(ignored=True, snapshot=True)[0] == ignored


def test_decide_takes_the_audience_and_the_focus(tmp_path: Path) -> None:
    from cli_run import run_polylogue

    path = tmp_path / "tv.txt"
    path.write_text(
        "Dave: Morning, everyone.\nAnna: ok let's look at the numbers\n"
        "TV: Dave, can you hear me? Dave!\nBob: yeah go on\nAnna: dave can you check the logs\n",
        encoding="utf-8",
    )

    def rows(*flags: str, stdin: bytes | None = None) -> list[dict[str, Any]]:
        source = "-" if stdin is not None else str(path)
        proc = run_polylogue(["decide", source, "--as", "Dave", "--json", *flags], stdin=stdin)
        assert proc.returncode == 0, proc.stderr
        return [json.loads(x) for x in proc.stdout.splitlines()]

    heard, ignored = rows(), rows("--ignore", "TV")
    assert heard[2]["decision"] == "SPEAK" and ignored[2].get("skipped", "").startswith(
        "ignored speaker"
    )
    assert ignored[3]["p_speak"] < heard[3]["p_speak"]
    assert ignored[4]["decision"] == "SPEAK"  # addressed by a person: still answered

    # The same on stdin, where the TV is known only once it speaks.
    def key(rs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(r.get("decision"), r.get("p_speak"), r.get("skipped")) for r in rs]

    assert key(rows("--ignore", "TV", stdin=path.read_bytes())) == key(ignored)
    plain = run_polylogue(["decide", str(path), "--as", "Dave", "--ignore", "TV"]).stdout.decode()
    assert "context only: TV" in plain.splitlines()[2]  # said in the header
    only = rows("--only", "Bob")
    assert only[1]["skipped"].startswith("not in focus") and only[3]["decision"] is not None
    for flags, words in (
        (["--ignore", "Zed"], ["--ignore", "'Zed'", "Anna", "TV"]),
        (["--only", "dave"], ["--only", "decided for"]),
        (["--audience", "solo"], ["--audience", "'solo'", "group, adaptive"]),
    ):
        proc = run_polylogue(["decide", str(path), "--as", "Dave", *flags])
        assert proc.returncode == 2
        err = " ".join(proc.stderr.decode().split())  # rich wraps the usage error
        for w in words:
            assert w in err, (w, err)


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda lv: lv.set_focus(ignored=["zoe"]), ["'zoe'", "alice", "bob"]),
        (lambda lv: lv.set_focus(only=["Dave"]), ["'Dave'", "the agent itself"]),
        (lambda lv: lv.set_focus(ignored=["bob"], only=["bob"]), ["bob", "both"]),
        (lambda lv: lv.set_focus(ignored=[7]), ["7", "alice"]),
        (lambda lv: lv.set_audience("solo"), ["'solo'", "group, adaptive"]),
        (lambda lv: lv.set_audience(None), ["None", "group, adaptive"]),
        (lambda lv: lv.set_role("boss"), ["'boss'", "observer, assistant, facilitator"]),
    ],
)
def test_a_bad_control_is_one_error_and_changes_nothing(call: Any, words: list[str]) -> None:
    from polylogue.errors import PolylogueInputError

    live = _assistant()
    live.set_focus(ignored=["bob"])
    before = json.dumps(live.to_dict(), sort_keys=True)
    with pytest.raises(PolylogueInputError) as e:
        call(live)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert json.dumps(live.to_dict(), sort_keys=True) == before
    assert live.deployment.role == "assistant"


def test_audience_and_focus_survive_a_snapshot() -> None:
    live = _assistant()
    live.set_focus(ignored=["bob"])
    snap = json.loads(json.dumps(live.to_dict()))
    assert snap["audience"] == "adaptive" and snap["focus"] == {"ignored": ["bob"], "only": []}
    back = LiveConversation.from_dict(snap, snapshot_deployment(snap))
    assert back.audience == "adaptive" and back.focus == live.focus
    assert back.utterance(Utterance("alice", PLAIN)).reason.startswith("one-to-one")
    with pytest.raises(SnapshotError, match=r"bad 'audience'.*group, adaptive"):
        LiveConversation.from_dict(snap | {"audience": "solo"}, snapshot_deployment(snap))


# ----------------------------------------------------------------------------- serve


def test_serve_audience_and_focus_events_persist_and_refuse_bad_values(tmp_path: Path) -> None:
    state = str(tmp_path / "s.sqlite")
    people = [{"id": p.id, "name": p.name} for p in ROSTER[:2]]
    with polylogue_serve("--state", state) as url:
        for extra, words in (
            ({"audience": "solo"}, ["'solo'", "group, adaptive"]),
            ({"audience": 3}, ["3", "group, adaptive"]),
            ({"focus": {"ignored": ["zoe"]}}, ["'zoe'", "alice"]),
            ({"focus": {"muted": ["alice"]}}, ["muted"]),
        ):
            body = {"agent": "Dave", "participants": people, **extra}
            r = httpx.post(f"{url}/v1/sessions", json=body)
            assert r.status_code == 400, r.text
            assert all(w in r.json()["error"] for w in words), r.text
        r = httpx.post(
            f"{url}/v1/sessions",
            json={
                "agent": "Dave",
                "participants": people,
                "deployment": {"role": "assistant"},
                "audience": "adaptive",
            },
        )
        assert r.status_code == 201, r.text
        assert r.json()["audience"] == "adaptive" and r.json()["focus"]["ignored"] == []
        sid = r.json()["session_id"]

        def send(event: dict) -> httpx.Response:
            return httpx.post(f"{url}/v1/sessions/{sid}/events", json=event, timeout=60)

        one = send({"type": "utterance", "speaker": "alice", "text": PLAIN}).json()["results"][0]
        assert one["decision"]["action"] == "SPEAK", one
        assert one["decision"]["reason"].startswith("one-to-one")
        tv_joins = send({"type": "join", "participants": [{"id": "tv", "name": "TV"}]})
        assert tv_joins.status_code == 200
        ok = send({"type": "focus", "ignored": ["TV"]}).json()["results"][0]
        assert ok["focus"] == {"ignored": ["tv"], "only": []} and ok["audience"] == "adaptive"
        # The TV is not a person: still one-to-one with Alice.
        again = send({"type": "utterance", "speaker": "alice", "text": PLAIN}).json()
        assert again["results"][0]["decision"]["action"] == "SPEAK"
        tv = send({"type": "utterance", "speaker": "tv", "text": "Dave, what do you think?"})
        assert tv.json()["results"][0]["decision"]["action"] is None
        before = httpx.get(f"{url}/v1/sessions/{sid}").json()
        for event, words in (
            ({"type": "focus", "only": ["zoe"]}, ["'zoe'", "alice", "tv"]),
            ({"type": "focus", "ignored": "tv"}, ["ignored"]),
            ({"type": "audience", "audience": "crowd"}, ["'crowd'", "group, adaptive"]),
            ({"type": "audience"}, ["missing", "group, adaptive"]),
            ({"type": "role", "role": "boss"}, ["'boss'", "observer, assistant, facilitator"]),
        ):
            bad = send(event)
            assert bad.status_code == 400, bad.text
            error = bad.json()["results"][0]["error"]
            assert all(w in error for w in words), (event, error)
        after = httpx.get(f"{url}/v1/sessions/{sid}").json()
        assert {k: after[k] for k in ("audience", "focus", "deployment", "version")} == {
            k: before[k] for k in ("audience", "focus", "deployment", "version")
        }
        assert send({"type": "audience", "audience": "group"}).status_code == 200
    # A restarted server continues the stored session with its controls.
    with polylogue_serve("--state", state) as url:
        shown = httpx.get(f"{url}/v1/sessions/{sid}").json()
        assert shown["audience"] == "group" and shown["focus"]["ignored"] == ["tv"]
        assert shown["deployment"]["role"] == "assistant"
        r = httpx.post(
            f"{url}/v1/sessions/{sid}/events",
            json={"type": "utterance", "speaker": "alice", "text": PLAIN},
        )
        assert r.json()["results"][0]["decision"]["action"] == "SILENT"  # group: not addressed


# ----------------------------------------------------------------------------- adapters


def test_adapters_expose_audience_and_focus() -> None:
    pytest.importorskip("livekit.agents")
    pytest.importorskip("pipecat")
    from polylogue.adapters.livekit import MultiPartySession, PolylogueTurnDetector
    from polylogue.adapters.pipecat import PolylogueGate

    dep = Deployment.resolve()
    for front in (
        MultiPartySession("Dave", role="assistant", deployment=dep, audience="adaptive"),
        PolylogueGate("Dave", deployment=dep, role="assistant", audience="adaptive"),
        PolylogueTurnDetector("Dave", deployment=dep, role="assistant", audience="adaptive"),
    ):
        room = front.room
        room.join("alice", "Alice")
        assert front.audience == "adaptive"
        r = room.final("alice", PLAIN)
        assert r is not None and r[1].reason.startswith("one-to-one"), type(front)
        room.join("bob", "Bob")
        room.final("bob", "Hi all, sorry I'm late.")
        r = room.final("alice", PLAIN)
        assert r is not None and r[1].action is not None and r[1].action.value == "SILENT"
        front.set_focus(ignored=["bob"])  # a note-taking bot: not a person, never answered
        r = room.final("alice", PLAIN)
        assert r is not None and r[1].reason.startswith("one-to-one")
        r = room.final("bob", "Dave, can you check the logs?")
        assert r is not None and r[1].action is None
        with pytest.raises(EventError, match="'zoe'"):
            front.set_focus(only=["zoe"])
        assert front.focus.ignored == ("bob",)
        with pytest.raises(EventError, match="group, adaptive"):
            front.set_audience("everyone")
        front.set_audience("group")
        assert front.audience == "group"
    assert set(AUDIENCES) == {"group", "adaptive"}
