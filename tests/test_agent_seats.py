"""Agent seats: several agents in one room with one floor, over a real AMI meeting replayed
with two of its participants played as agent seats (their real lines are what they say).

The arbitration invariants (never two agents at once, an addressed agent wins, the loop
brake), a one-seat room deciding exactly as one agent alone, run-time seat changes, one
clear error for bad input with the room unchanged, and the snapshot round trip."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from servers import polylogue_serve

from polylogue.conversation import Conversation, Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.deployment import Action, Deployment
from polylogue.engine.live import LiveConversation
from polylogue.engine.seats import (
    AgentRoom,
    Bid,
    RoomDecision,
    SeatError,
    SeatSpec,
    arbitrate,
)

N = 400  # utterances of the meeting replayed
SEATS = ("B", "C")
TOKEN = "room-stream-test-token-0123"


@pytest.fixture(scope="module")
def meeting() -> Conversation:
    return next(iter(load_corpus("ami")))


@pytest.fixture(scope="module")
def dep() -> Deployment:
    return Deployment.resolve()


def _lines(conv: Conversation) -> list[Utterance]:
    return [Utterance(u.speaker, u.text, u.start, u.end) for u in conv.utterances[:N]]


def _room(conv: Conversation, dep: Deployment, **kw: Any) -> AgentRoom:
    people = [p for p in conv.participants if p.id not in SEATS]
    seats = [
        SeatSpec(p.id, p.name, p.aliases, role=kw.pop(f"role_{p.id}", None))
        for p in conv.participants
        if p.id in SEATS
    ]
    return AgentRoom.start(people, seats, model=dep.model, **kw)


def _replay(room: AgentRoom, lines: list[Utterance]) -> list[RoomDecision]:
    return [room.utterance(u) for u in lines]


@pytest.fixture(scope="module")
def replayed(meeting: Conversation, dep: Deployment) -> list[RoomDecision]:
    room = _room(meeting, dep, role_B="facilitator")
    return _replay(room, _lines(meeting))


def test_never_two_agents_at_once(replayed: list[RoomDecision]) -> None:
    wanted_together = 0
    for rd in replayed:
        speaking = [s for s, a in rd.arbitration.actions.items() if a is Action.SPEAK]
        assert len(speaking) <= 1, rd.to_dict()
        assert speaking == ([rd.arbitration.granted] if rd.arbitration.granted else [])
        own = [s for s, d in rd.decisions.items() if d.action is Action.SPEAK]
        wanted_together += len(own) >= 2
        # every arbitration says who wanted the floor and why each seat does what it does
        assert set(rd.arbitration.reasons) == set(SEATS) and rd.arbitration.reason
    # the meeting has pauses where both gates alone would speak: the floor rule mattered
    assert wanted_together > 0


def test_an_addressed_agent_wins(replayed: list[RoomDecision]) -> None:
    checked = 0
    for rd in replayed:
        if rd.speaker in SEATS or rd.arbitration.blocked:
            continue
        addressed = [
            s for s, d in rd.decisions.items() if d.engine is not None and d.engine.addressed
        ]
        if addressed and rd.arbitration.granted is not None:
            assert rd.arbitration.granted in addressed, rd.to_dict()
            checked += 1
    assert checked > 0


def test_agents_hear_each_other_and_the_brake_holds(meeting: Conversation, dep: Deployment) -> None:
    room = _room(meeting, dep, brake=2)
    seen_brake = 0
    for u in _lines(meeting):
        before = room.agent_run
        rd = room.utterance(u)
        if u.speaker in SEATS:
            # the agent's line is in the other seat's conversation as that agent's
            other = next(s for s in SEATS if s != u.speaker)
            assert room.seats[other].live.engine.state.last.speaker == u.speaker
            assert room.agent_run >= before
        if room.agent_run >= 2 and u.speaker in SEATS:
            assert rd.arbitration.granted is None and rd.arbitration.reason == "loop brake"
            seen_brake += 1
    assert seen_brake > 0


def test_one_seat_decides_as_one_agent(meeting: Conversation, dep: Deployment) -> None:
    people = [p for p in meeting.participants if p.id != "B"]
    me = next(p for p in meeting.participants if p.id == "B")
    room = AgentRoom.start(people, [SeatSpec("B", me.name, me.aliases)], model=dep.model)
    alone = LiveConversation.start("B", [*people, me], deployment=dep)
    for u in _lines(meeting)[:150]:
        got = room.utterance(u)
        if u.speaker == "B":
            alone.agent_speech(True, u.start)
            alone.agent_speech(False, u.end, u.text)
            continue
        d = alone.utterance(u)
        mine = got.decisions["B"]
        assert (mine.action, mine.reason, mine.p_speak) == (d.action, d.reason, d.p_speak)
        if d.action is Action.SPEAK:
            assert got.arbitration.granted == "B"


def test_a_follow_up_to_an_agent_is_that_agents(meeting: Conversation, dep: Deployment) -> None:
    people = [p for p in meeting.participants if p.id not in SEATS]
    room = AgentRoom.start(people, [SeatSpec("B", "Nova"), SeatSpec("C", "Quill")], dep.model)
    for u in _lines(meeting)[:30]:
        if u.speaker not in SEATS:
            room.utterance(u)
    assert (
        room.utterance(
            Utterance("A", "Nova, can you summarise the budget for us?")
        ).arbitration.granted
        == "B"
    )
    said = room.agent_said("B", "The budget is twelve euros fifty per unit, and we are at eleven.")
    # Quill heard Nova: the line is Nova's in Quill's conversation
    assert room.seats["C"].live.engine.state.last.speaker == "B"
    assert said.arbitration.granted is None and room.agent_run == 1
    follow = room.utterance(Utterance("A", "Why eleven and not twelve?"))
    assert follow.arbitration.granted == "B" and room.agent_run == 0
    # no name, no "you": the talk is with Nova (continuity), a backchannel between keeps it
    assert follow.arbitration.reason == "the talk is with B (continuity)"
    room.utterance(Utterance("D", "Mm-hmm."))
    assert room.talk == ["B", "A"]  # a backchannel is no turn of the talk
    assert room.talking_with("A", "And the case?") == "B"
    more = room.utterance(Utterance("A", "And the case?"))
    assert more.arbitration.actions["C"] is not Action.SPEAK
    # group words open the floor again
    assert room.talking_with("A", "What do you guys think about the price?") is None
    assert AgentRoom.from_dict(room.to_dict(), dep.model).talk == room.talk == ["B", "A"]
    room.agent_said("B", "Because the case is cheaper than planned.")
    thanks = room.utterance(Utterance("A", "Okay, thanks Nova."))
    assert thanks.arbitration.actions["C"] is not Action.SPEAK
    # agent to agent: Nova asks Quill (allowed), Quill asks Nova back (the brake: two agent
    # turns with no person between them)
    ask = room.agent_said("B", "You are welcome. Quill, what do you think?")
    assert ask.arbitration.granted == "C"
    back = room.agent_said("C", "I agree with Nova. Nova, anything else?")
    assert back.arbitration.granted is None and back.arbitration.reason == "loop brake"
    assert back.decisions["B"].action is Action.SPEAK  # B's own gate alone would answer


def _bid(seat: str, **kw: Any) -> Bid:
    base: dict[str, Any] = {
        "action": Action.SPEAK,
        "suggested": Action.SPEAK,
        "p_speak": 0.5,
        "addressed": False,
        "named_at": None,
        "role": None,
    }
    return Bid(seat, **(base | kw))


def test_policies_for_several_named_agents() -> None:
    bids = [
        _bid("a", addressed=True, named_at=1),
        _bid("b", addressed=True, named_at=0),
        _bid("c", p_speak=0.9),
    ]
    first = arbitrate(bids, "first-named")
    assert first.granted == "b" and first.queued == ()
    assert first.actions == {"a": Action.SILENT, "b": Action.SPEAK, "c": Action.SILENT}
    turn = arbitrate(bids, "in-turn")
    assert turn.granted == "b" and turn.queued == ("a",)
    held = arbitrate(bids, "in-turn", floor_holder="A")
    assert held.granted is None and "A holds the floor" in held.reason
    # a group question: the strongest claim, lowered by the seat's share of recent floors
    group = [_bid("x", p_speak=0.6, share=1.0), _bid("y", p_speak=0.5)]
    assert arbitrate(group).granted == "y"
    assert arbitrate([_bid("x", p_speak=0.6), _bid("y", p_speak=0.5)]).granted == "x"
    # the talk is with a seat (continuity): it answers, nobody cuts in; if it stays silent,
    # nobody answers; a seat the words address still comes first
    talk = arbitrate([_bid("x", p_speak=0.9), _bid("y", p_speak=0.4)], partner="y")
    assert talk.granted == "y" and talk.reasons["x"] == "the talk is with y"
    quiet = arbitrate([_bid("x"), _bid("y", action=Action.SILENT)], partner="y")
    assert quiet.granted is None and quiet.actions["x"] is Action.SILENT
    named = arbitrate([_bid("x", addressed=True, named_at=0), _bid("y")], partner="y")
    assert named.granted == "x"
    # an observer's "would speak" is logged as wanted, never granted
    obs = arbitrate([_bid("o", action=Action.SILENT, p_speak=0.99)])
    assert obs.granted is None and obs.wanted == ("o",)


def test_in_turn_answers_follow(meeting: Conversation, dep: Deployment) -> None:
    people = [p for p in meeting.participants if p.id not in SEATS]
    room = AgentRoom.start(
        people, [SeatSpec("B", "Nova"), SeatSpec("C", "Quill")], dep.model, policy="in-turn"
    )
    for u in _lines(meeting)[:20]:
        if u.speaker not in SEATS:
            room.utterance(u)
    rd = room.utterance(Utterance("A", "Quill, Nova, any thoughts on the design?"))
    assert rd.arbitration.granted == "C" and rd.arbitration.queued == ("B",), rd.to_dict()
    after = room.agent_said("C", "I like the rounded case.")
    assert after.arbitration.granted == "B" and after.arbitration.reason == "B answers in turn"
    room.set_policy("first-named")
    rd = room.utterance(Utterance("A", "Quill, Nova, any thoughts on the design?"))
    assert rd.arbitration.granted == "C" and rd.arbitration.queued == ()
    # while a person is still speaking, or an agent is, no agent starts
    room.interim("D", "well I think")
    rd = room.utterance(Utterance("A", "Quill, Nova, any thoughts on the design?"))
    assert rd.arbitration.granted is None and rd.arbitration.reason == "D holds the floor"
    room.utterance(Utterance("D", "well I think we should wait for the prototype."))
    room.agent_speech("B", True)
    rd = room.utterance(Utterance("A", "Quill, what do you think?"))
    assert rd.arbitration.granted is None and rd.arbitration.reason == "B holds the floor"


def test_bad_input_names_the_value(meeting: Conversation, dep: Deployment) -> None:
    people = [p for p in meeting.participants if p.id not in SEATS]
    with pytest.raises(SeatError, match="'x' given twice"):
        AgentRoom.start(people, [SeatSpec("x"), SeatSpec("x")], dep.model)
    with pytest.raises(SeatError, match="names 'A', a person"):
        AgentRoom.start(people, [SeatSpec("A")], dep.model)
    with pytest.raises(SeatError, match=r"unknown value 'loudest'.*first-named, in-turn"):
        AgentRoom.start(people, [SeatSpec("x")], dep.model, policy="loudest")
    room = AgentRoom.start(people, [SeatSpec("B"), SeatSpec("C", role="observer")], dep.model)
    before = json.dumps(room.to_dict(), sort_keys=True)
    with pytest.raises(SeatError, match="role 'boss' is unknown"):
        room.change_seat("B", role="boss")
    with pytest.raises(SeatError, match=r"focus.ignored: 'Zed' is not a participant"):
        room.change_seat("B", ignored=["Zed"])
    with pytest.raises(SeatError, match="seat 'B' exists already"):
        room.add_seat(SeatSpec("B"))
    with pytest.raises(SeatError, match=r"focus.only: 'Zed' is not a participant"):
        room.add_seat(SeatSpec("Lex", only=("Zed",)))
    with pytest.raises(SeatError, match="'Q' is not in the room; seats: B, C"):
        room.remove_seat("Q")
    assert json.dumps(room.to_dict(), sort_keys=True) == before
    room.agent_speech("B", True)
    with pytest.raises(SeatError, match="'B' holds the floor"):
        room.remove_seat("B")
    assert "B" in room.seats


def test_seats_at_run_time_and_snapshot(meeting: Conversation, dep: Deployment) -> None:
    lines = _lines(meeting)
    room = _room(meeting, dep)
    for u in lines[:100]:
        room.utterance(u)
    room.add_seat(SeatSpec("Nova", role="observer"))
    # the new seat heard the meeting so far
    assert room.seats["Nova"].live.engine.state.n_utterances == 100
    room.change_seat("C", role="assistant")
    room.change_seat("B", role="observer")
    copy = AgentRoom.from_dict(json.loads(json.dumps(room.to_dict())), dep.model)
    for u in lines[100:200]:
        a, b = room.utterance(u), copy.utterance(u)
        assert a.arbitration.to_dict() == b.arbitration.to_dict()
    # the observer's decisions, what it would have done, survive the snapshot
    assert room.log == copy.log and any(e["would"] == "SPEAK" for e in room.log)
    room.remove_seat("Nova")
    assert list(room.seats) == ["B", "C"]


# ----------------------------------------------------------------------------- serve


def test_serve_rooms_decide_as_the_library_and_persist(
    meeting: Conversation, dep: Deployment, tmp_path: Path
) -> None:
    """A real ``polylogue serve`` process: a room with seats gives the library's
    arbitrations, seats change at run time, bad input is a 400 naming the value with the room
    unchanged, and a restarted server continues the stored room."""
    lines = _lines(meeting)[:120]
    people = [
        {"id": p.id, "name": p.name, "aliases": list(p.aliases)}
        for p in meeting.participants
        if p.id not in SEATS
    ]
    seats = [{"id": s} for s in SEATS]
    want = [rd.arbitration.to_dict() for rd in _replay(_room(meeting, dep), lines)]
    state = str(tmp_path / "s.sqlite")
    with polylogue_serve("--state", state) as url:
        bad: list[tuple[dict[str, Any], list[str]]] = [
            ({"seats": [{"id": "x"}, {"id": "x"}]}, ["'x' given twice"]),
            ({"seats": [{"id": "A"}]}, ["'A'", "a person", "people: A, D"]),
            ({"seats": seats, "policy": "loudest"}, ["'loudest'", "first-named, in-turn"]),
            ({"seats": [{"id": "x", "role": "boss"}]}, ["'boss'", "observer"]),
        ]
        for extra, words in bad:
            r = httpx.post(f"{url}/v1/rooms", json={"people": people, **extra})
            assert r.status_code == 400 and all(w in r.json()["error"] for w in words), r.text
        r = httpx.post(f"{url}/v1/rooms", json={"people": people, "seats": seats})
        assert r.status_code == 201, r.text
        rid = r.json()["room_id"]
        events = [
            {
                "type": "utterance",
                "speaker": u.speaker,
                "text": u.text,
                "start": u.start,
                "end": u.end,
            }
            for u in lines
        ]
        got = httpx.post(f"{url}/v1/rooms/{rid}/events", json=events, timeout=60).json()
        assert [g["decision"]["arbitration"] for g in got["results"]] == want

        def send(e: dict[str, Any]) -> httpx.Response:
            return httpx.post(f"{url}/v1/rooms/{rid}/events", json=e)

        before = httpx.get(f"{url}/v1/rooms/{rid}").json()
        for e, words in (
            ({"type": "add_seat", "seat": {"id": "B"}}, ["'B' exists already"]),
            ({"type": "add_seat", "seat": {"id": "Zed", "name": "A"}}, ["names 'A'"]),
            ({"type": "floor_policy", "policy": "loudest"}, ["'loudest'", "in-turn"]),
            ({"type": "remove_seat", "seat": "Q"}, ["'Q'", "seats: B, C"]),
            ({"type": "change_seat", "seat": "B", "role": "boss"}, ["'boss'"]),
            ({"type": "shout"}, ["'shout'", "utterance"]),
        ):
            r = send(e)
            assert r.status_code == 400 and all(
                w in r.json()["results"][0]["error"] for w in words
            ), r.text
        assert httpx.get(f"{url}/v1/rooms/{rid}").json() == before
        assert send({"type": "agent_speech", "seat": "B", "speaking": True}).status_code == 200
        r = send({"type": "remove_seat", "seat": "B"})
        assert r.status_code == 400 and "'B' holds the floor" in r.text
        assert send({"type": "agent_said", "seat": "B", "text": "That is all from me."}).is_success
        r = send({"type": "add_seat", "seat": {"id": "Nova", "role": "observer"}})
        assert [s["id"] for s in r.json()["results"][0]["room"]["seats"]] == ["B", "C", "Nova"]
        assert send({"type": "floor_policy", "policy": "in-turn"}).is_success
    with polylogue_serve("--state", state) as url:
        shown = httpx.get(f"{url}/v1/rooms/{rid}").json()
        assert shown["policy"] == "in-turn"
        assert [s["role"] for s in shown["seats"]] == [None, None, "observer"]
        r = httpx.post(
            f"{url}/v1/rooms/{rid}/events",
            json={"type": "utterance", "speaker": "A", "text": "Okay, what do we do next?"},
        )
        assert r.status_code == 200 and set(r.json()["results"][0]["decision"]["seats"]) == {
            "B",
            "C",
            "Nova",
        }


def test_serve_room_stream_decides_as_the_library_and_is_durable(
    meeting: Conversation, dep: Deployment, tmp_path: Path
) -> None:
    """``WS /v1/rooms/{id}/stream`` on a real server: one result per message, the library's
    arbitrations, a bad event or frame answered with an error and the socket open and the
    room unchanged, a control over the socket stored (a restarted server has it and goes on
    from the stored room), a wrong token and an unknown room refused with a close code."""
    from websockets.sync.client import connect

    lines = _lines(meeting)[:60]
    people = [
        {"id": p.id, "name": p.name, "aliases": list(p.aliases)}
        for p in meeting.participants
        if p.id not in SEATS
    ]
    library = _room(meeting, dep)
    want = [rd.arbitration.to_dict() for rd in _replay(library, lines[:45])]
    state = str(tmp_path / "s.sqlite")
    events = [
        {"type": "utterance", "speaker": u.speaker, "text": u.text, "start": u.start, "end": u.end}
        for u in lines
    ]
    with polylogue_serve("--state", state, token=TOKEN) as url:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        r = httpx.post(
            f"{url}/v1/rooms",
            json={"people": people, "seats": [{"id": s} for s in SEATS]},
            headers=auth,
        )
        rid = r.json()["room_id"]
        ws_url = url.replace("http", "ws") + f"/v1/rooms/{rid}/stream?token={TOKEN}"
        with connect(ws_url) as ws:
            got = []
            for e in events[:30]:
                ws.send(json.dumps(e))
                got.append(json.loads(ws.recv()))
            before = httpx.get(f"{url}/v1/rooms/{rid}", headers=auth).json()
            for bad, words in (
                ({"type": "remove_seat", "seat": "Q"}, ["'Q'", "seats: B, C"]),
                ({"type": "utterance", "speaker": "A"}, ["missing text"]),
            ):
                ws.send(json.dumps(bad))
                r = json.loads(ws.recv())
                assert r["ok"] is False and all(w in r["error"] for w in words), r
            ws.send("{not json")
            assert "not JSON" in json.loads(ws.recv())["error"]
            assert httpx.get(f"{url}/v1/rooms/{rid}", headers=auth).json() == before
            # a list in one message, answered as the HTTP route answers it
            ws.send(json.dumps(events[30:45]))
            got += json.loads(ws.recv())["results"]
            ws.send(json.dumps({"type": "add_seat", "seat": {"id": "Nova", "role": "observer"}}))
            assert [s["id"] for s in json.loads(ws.recv())["room"]["seats"]][-1] == "Nova"
        assert [g["decision"]["arbitration"] for g in got] == want[:45]
        with pytest.raises(Exception, match="4401"), connect(ws_url.replace(TOKEN, "x" * 24)) as ws:
            ws.send(json.dumps(events[0]))
            ws.recv()
        gone = url.replace("http", "ws") + f"/v1/rooms/nosuch/stream?token={TOKEN}"
        with pytest.raises(Exception, match="4404"), connect(gone) as ws:
            ws.send(json.dumps(events[0]))
            ws.recv()
    library.add_seat(SeatSpec("Nova", role="observer"))
    with polylogue_serve("--state", state, token=TOKEN) as url:
        ws_url = url.replace("http", "ws") + f"/v1/rooms/{rid}/stream?token={TOKEN}"
        with connect(ws_url) as ws:
            for e, u in zip(events[45:], lines[45:], strict=True):
                ws.send(json.dumps(e))
                r = json.loads(ws.recv())
                assert r["decision"]["arbitration"] == library.utterance(u).arbitration.to_dict()
                assert set(r["decision"]["seats"]) == {"B", "C", "Nova"}


def test_the_worked_example_runs_offline(tmp_path: Path) -> None:
    """examples/agent_seats.py against a real server: the assistant answers its name, the
    facilitator named first wins over the assistant named second, the observer only logs."""
    script = Path(__file__).resolve().parents[1] / "examples" / "agent_seats.py"
    with polylogue_serve("--state", str(tmp_path / "s.sqlite")) as url:
        out = subprocess.run(
            [sys.executable, str(script), "--url", url],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
    blocks = out.split("\n\n")[0].split("\n")
    asked = blocks.index("Priya: Ada, can you pull up the original delivery date?")
    assert blocks[asked + 1].endswith("granted: Ada")
    both = blocks.index("Priya: Mo, Ada, any ideas before we wrap up?")
    assert blocks[both + 1] == "    wanted: Ada, Mo; granted: Mo"
    assert "[Scribe]" not in out and '"seat": "Scribe"' in out


# ----------------------------------------------------------------------------- adapters


def _acted_on_the_floor(rows: list[dict[str, Any]]) -> None:
    """Every live agent did what the floor gave it: at most one answer per line."""
    for r in rows:
        floor = {sid: seat["action"] for sid, seat in r["arbitration"]["seats"].items()}
        assert r["actions"] == {sid: floor[sid] for sid in r["actions"]}, r
        assert sum(a == "speak" for a in r["actions"].values()) <= 1


def test_pipecat_and_livekit_sharing_one_floor_live_decide_as_the_library(
    meeting: Conversation, dep: Deployment
) -> None:
    """Two real Pipecat pipelines (one gate per agent seat), and two LiveKit
    ``MultiPartySession``s each hearing the room through its own ``MultiSpeakerAdapter``,
    sharing one floor: every gate or session waits at each line for the other and acts on
    the arbitrated action, the same arbitration at every line as the library's room (untimed
    lines: Pipecat's bot-speaking frames carry no times of their own)."""
    from polylogue.adapters.pipecat import replay_room

    lines = [Utterance(u.speaker, u.text) for u in meeting.utterances[:80]]
    people = [p for p in meeting.participants if p.id not in SEATS]
    specs = [
        SeatSpec(p.id, p.name, p.aliases, role="facilitator" if p.id == "B" else None)
        for p in meeting.participants
        if p.id in SEATS
    ]
    room = AgentRoom.start(people, specs, dep.model)
    want = [room.utterance(u).arbitration.to_dict() for u in lines]
    got = asyncio.run(replay_room(lines, specs, people, model=dep.model))
    assert [g["arbitration"] for g in got] == want
    assert sum(w["granted"] is not None for w in want) > 5
    # the gates' own rules disagreed with the floor somewhere, and the gates followed the floor
    assert any(len(w["wanted"]) > 1 for w in want)
    _acted_on_the_floor(got)
    from polylogue.adapters.livekit import replay_room as livekit_room

    got = asyncio.run(livekit_room(lines, specs, people, model=dep.model))
    assert [g["arbitration"] for g in got] == want
    _acted_on_the_floor(got)


def test_livekit_gate_reply_on_a_shared_floor(meeting: Conversation, dep: Deployment) -> None:
    """Two LiveKit turn detectors with ``gate_reply`` on one floor: each line is answered by
    the agent the library's room grants it, the other gets ``StopResponse`` (lines both
    agents' own rules would answer included)."""
    from livekit.agents import StopResponse, llm

    from polylogue.adapters.livekit import PolylogueTurnDetector, gate_reply
    from polylogue.adapters.room import SharedFloor

    people = [p for p in meeting.participants if p.id not in SEATS]
    specs = [SeatSpec(p.id, p.name, p.aliases) for p in meeting.participants if p.id in SEATS]
    floor = SharedFloor(people, model=dep.model, timeout_s=60.0)
    everyone = [*people, *(s.participant() for s in specs)]
    dets = {s.id: PolylogueTurnDetector(s.id, everyone, floor=floor, seat=s) for s in specs}
    ctxs = {sid: llm.ChatContext() for sid in dets}
    room = AgentRoom.start(people, specs, dep.model)

    async def ask(sid: str, u: Utterance) -> bool:
        msg = ctxs[sid].add_message(role="user", content=u.text, extra={"speaker": u.speaker})
        try:
            await gate_reply(dets[sid], ctxs[sid], msg)
        except StopResponse:
            return False
        return True

    async def run() -> None:
        both = 0
        # untimed: a chat context's messages carry no times
        for u in [Utterance(u.speaker, u.text) for u in meeting.utterances[:150]]:
            want = room.utterance(u).arbitration
            if u.speaker in dets:
                ctxs[u.speaker].add_message(role="assistant", content=u.text)
            others = [sid for sid in dets if sid != u.speaker]
            answered = await asyncio.gather(*(ask(sid, u) for sid in others))
            got = [sid for sid, a in zip(others, answered, strict=True) if a]
            assert got == ([want.granted] if want.granted in others else []), (
                u,
                want.reason,
                floor.decisions[-1].arbitration.reason,
            )
            both += len(want.wanted) > 1
        assert both > 0

    asyncio.run(run())


def test_a_shared_floor_goes_on_without_a_seat_that_does_not_report(
    meeting: Conversation, dep: Deployment
) -> None:
    """A seat whose gate never decides on a line (dropped, stuck) holds the others up only
    until the floor's timeout: the line is arbitrated without it, and its late report gets
    no floor."""
    from polylogue.adapters.room import Heard, SharedFloor

    people = [p for p in meeting.participants if p.id not in SEATS]
    specs = [SeatSpec(s) for s in SEATS]
    floor = SharedFloor(people, model=dep.model, timeout_s=0.2)
    everyone = [*people, *(s.participant() for s in specs)]
    lives = {s.id: LiveConversation.start(s.id, everyone, deployment=dep) for s in specs}
    for s in specs:
        floor.join(s, lives[s.id])
    with pytest.raises(SeatError, match="'B' exists already"):
        floor.join(specs[0], lives["B"])
    u = Utterance("A", "Okay, so what do we need to decide today?", 1.0, 3.0)
    heard = Heard("A", "A", u.text, u.start, u.end)
    mine = lives["B"].utterance(u)

    async def run() -> None:
        got = await floor.decide("B", heard, mine)
        assert len(floor.decisions) == 1 and got.action in (mine.action, Action.SILENT)
        late = await floor.decide("C", heard, lives["C"].utterance(u))
        assert late.action is not Action.SPEAK
        assert late.reason == "floor: arbitrated without this seat"
        assert len(floor.decisions) == 1  # the line was arbitrated once

    asyncio.run(run())
