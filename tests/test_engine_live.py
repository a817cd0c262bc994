"""The live policy (LiveConversation), the incremental name index, bounded streaming state,
snapshots, agent-name resolution and the barge-in model, on real AMI and Friends talk."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from polylogue.conversation import Conversation, Participant, Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.bargein import interjection_words, lexical_backchannel, load_barge_in_model
from polylogue.engine.deployment import Deployment, Thresholds, choose_action
from polylogue.engine.engine import TurnTakingEngine
from polylogue.engine.features import state_from_dict, state_to_dict
from polylogue.engine.live import Action, AgentState, EventError, LiveConversation, Policy
from polylogue.engine.model import load_model
from polylogue.training.engine_models.bargein import (
    dialogue_act_meetings,
    held_out_meeting,
    meeting_overlaps,
)
from polylogue.turntaking.cues import build_matchers, utterance_cues

POLYLOGUE = str(Path(sys.executable).parent / "polylogue")


@pytest.fixture(scope="module")
def model():
    return load_model()


@pytest.fixture(scope="module")
def friends() -> Conversation:
    # A scene long enough to exercise names, vocatives and several speakers.
    return next(c for c in load_corpus("friends") if len(c.utterances) >= 40)


@pytest.fixture(scope="module")
def ami() -> Conversation:
    return next(iter(load_corpus("ami")))


def _live(
    model,
    agent: str,
    people=(),
    roster: bool = True,
    threshold: float | None = None,
    operating_point: str | None = None,
    **policy,
) -> LiveConversation:
    dep = Deployment.resolve(model=model, threshold=threshold, operating_point=operating_point)
    return LiveConversation.start(agent, people, Policy(**policy), dep, roster_known=roster)


def _actions(live: LiveConversation, utts) -> list[tuple[str | None, float | None]]:
    out = []
    for u in utts:
        d = live.utterance(Utterance(u.speaker, u.text, u.start, u.end))
        out.append((None if d.action is None else d.action.value, d.p_speak))
    return out


# ----------------------------------------------------------------------------- names


def test_incremental_name_index_matches_batch_matchers(model, friends: Conversation) -> None:
    """Cues from the incrementally built index equal cues from build_matchers on the roster."""
    engine = TurnTakingEngine(model)
    for p in friends.participants:  # one at a time, as a stream meets them
        engine.add_participants([p])
    batch = build_matchers(friends.participants, cased=True)
    engine.state._set_cased(True)
    last: dict[str, int] = {}
    checked = 0
    for i, u in enumerate(friends.utterances):
        engine.observe(Utterance(u.speaker, u.text))
        last[u.speaker] = i
        want = utterance_cues(
            Utterance(u.speaker, u.text),
            batch,
            present=[p.id for p in friends.participants if p.role != "group"],
            last_spoke=dict(engine.state.last_index),
        )
        got = engine.state.cues(engine.state.last)
        assert (got.addressed, got.referenced) == (want.addressed, want.referenced), u.text
        checked += bool(want.addressed or want.referenced)
    assert checked >= 3


def test_thousand_speakers_compile_only_mentioned_names(model) -> None:
    """A new speaker costs no regex compiles; only names that occur in the words are compiled."""
    live = _live(model, "Dave", roster=False)
    for i in range(1000):
        d = live.utterance(Utterance(f"Guest{i}", f"Dave, can you check? {i}"))
        assert d.action is Action.SPEAK or d.action is Action.SILENT
    index = live.engine.state._names
    assert len(index._compiled) <= 2  # Dave (and nobody else is ever named)
    assert d.engine is not None and d.engine.cues["people_present"] == 1001
    assert "addressed by name" in d.engine.cues["active"]


def test_everyone_present_fast_path_equals_the_roster_pass(model, friends, ami) -> None:
    """present=None (counters) gives the features of present=every participant (a pass)."""
    import numpy as np

    for conv in (friends, ami):  # Friends has a group pseudo-speaker ("ALL")
        engine = TurnTakingEngine(model, conv.participants)
        targets = [p.id for p in conv.participants if p.role != "group"]
        for u in conv.utterances[:80]:
            engine.observe(Utterance(u.speaker, u.text, u.start, u.end))
            for t in targets:
                fast = engine.state.features(t, None)
                slow = engine.state.features(t, list(engine.participants))
                np.testing.assert_array_equal(fast, slow)


# ----------------------------------------------------------------------------- bounded state


def test_streaming_state_stays_bounded(model, ami: Conversation) -> None:
    engine = TurnTakingEngine(model, ami.participants)
    utts = ami.utterances
    for u in itertools.islice(itertools.cycle(utts), 3 * len(utts)):
        engine.observe(Utterance(u.speaker, u.text, None, None))
    s = engine.state
    assert s.n_utterances == 3 * len(utts)
    assert len(s.window) == 2 and len(s.last_utt) <= 4
    assert len(s.turn_speakers) <= 8 and len(s.recent) <= 20 and len(s._cue_cache) <= 8
    assert not hasattr(s, "utts")


def test_snapshot_restores_exactly(model, ami: Conversation) -> None:
    """A JSON snapshot taken mid-meeting continues with identical features and decisions."""
    half = len(ami.utterances) // 2
    a = _live(model, "B", ami.participants)
    _actions(a, ami.utterances[:half])
    snap = json.loads(json.dumps(a.to_dict()))
    b = LiveConversation.from_dict(snap, a.deployment)
    rest = ami.utterances[half : half + 80]
    assert _actions(a, rest) == _actions(b, rest)
    # The state snapshot alone round-trips too.
    s = state_from_dict(state_to_dict(a.engine.state), model.yield_model, model.relation_model)
    assert state_to_dict(s) == state_to_dict(a.engine.state)


# ----------------------------------------------------------------------------- live policy


def test_interims_never_change_decisions(model, ami: Conversation) -> None:
    utts = ami.utterances[:120]
    plain = _live(model, "C", ami.participants)
    noisy = _live(model, "C", ami.participants)
    want = _actions(plain, utts)
    got = []
    for u in utts:
        words = u.text.split()
        for k in range(1, len(words)):  # growing partial transcripts, then the final
            noisy.interim_utterance(u.speaker, " ".join(words[:k]) + " uh")
        d = noisy.utterance(Utterance(u.speaker, u.text, u.start, u.end))
        got.append((None if d.action is None else d.action.value, d.p_speak))
    assert got == want
    assert noisy.interim == {}


def test_decision_point_gate_and_agents_own_speech(model, ami: Conversation) -> None:
    live = _live(model, "A", ami.participants)
    d = live.utterance(Utterance("B", "mm-hmm"))
    assert d.action is None and d.reason == "backchannel or too short"
    d = live.utterance(Utterance("A", "I think the remote should be yellow."))
    assert d.action is None and d.reason == "target is speaking"
    d = live.utterance(Utterance("B", "Why yellow? What do you think about the buttons?"))
    assert d.action is not None and d.p_speak is not None


def test_addressed_only_speaks_only_when_addressed(model, friends: Conversation) -> None:
    agent = friends.participants[0].id
    pro = _actions(_live(model, agent, roster=False, threshold=0.05), friends.utterances)
    live = _live(model, agent, roster=False, operating_point="addressed-only", threshold=0.05)
    addressed = []
    for u in friends.utterances:
        d = live.utterance(Utterance(u.speaker, u.text))
        if d.action is Action.SPEAK:
            assert d.engine is not None and d.engine.addressed
        addressed.append(d.action)
    assert sum(a == "SPEAK" for a, _ in pro) > sum(a is Action.SPEAK for a in addressed)


def test_cooldown_and_per_state_thresholds(model, ami: Conversation) -> None:
    utts = [replace(u, addressees=None) for u in ami.utterances[:200]]
    free = _live(model, "D", ami.participants, threshold=0.02)
    n_free = sum(a == "SPEAK" for a, _ in _actions(free, utts))
    cool = _live(model, "D", ami.participants, threshold=0.02, cooldown_s=60.0)
    acts = []
    for u in utts:
        d = cool.utterance(u)
        acts.append(d)
    speaks = [d for d in acts if d.action is Action.SPEAK and not d.engine.addressed]  # type: ignore[union-attr]
    assert any(d.reason.startswith("cooldown") for d in acts)
    assert len(speaks) < n_free
    # Just after the agent spoke, a threshold of 1.0 keeps it silent; later the idle one holds.
    live = _live(model, "D", ami.participants, threshold=0.0, threshold_just_spoke=1.0)
    live.agent_speech(True, time=10.0)
    live.agent_speech(False, time=12.0, text="I can take the market research.")
    d = live.utterance(Utterance("A", "Okay, and what about the cost of it?", 12.5, 13.5))
    assert d.agent_state is AgentState.JUST_SPOKE and d.action is Action.SILENT
    d = live.utterance(Utterance("B", "Right, so let's move on to the next point.", 30.0, 32.0))
    assert d.agent_state is AgentState.IDLE and d.action is Action.SPEAK


def test_shared_first_name_label_goes_to_the_latest_speaker(model) -> None:
    live = _live(model, "Dave", roster=False)
    live.utterance(Utterance("Bob Smith", "I pushed the fix this morning."))
    live.utterance(Utterance("Bob Jones", "Great, I will test it after lunch."))
    d = live.utterance(Utterance("bob", "Dave, can you review it?"))
    assert d.speaker == "Bob Jones"
    assert live.speaker_id("Bob Smith") == "Bob Smith"


def test_join_leave_reset(model, ami: Conversation) -> None:
    live = _live(model, "A", ami.participants)
    live.leave("A")
    d = live.utterance(Utterance("B", "So what do you think about the design?"))
    assert d.action is None and d.reason == "agent not present"
    live.join([Participant("A", role="industrial designer", aliases=("ID",))])
    d = live.utterance(Utterance("B", "So what do you think about the design?"))
    assert d.action is not None
    with pytest.raises(EventError):
        live.leave("Zed")
    live.reset()
    assert live.index == 0 and live.engine.state.n_utterances == 0
    assert set(live.present) == {"A", "B", "C", "D"}


def test_barge_in_while_agent_speaks(model, ami: Conversation) -> None:
    live = _live(model, "A", ami.participants)
    live.agent_speech(True, time=100.0)
    assert live.interim_utterance("B", "mm-hmm", time=101.0).yield_floor is False  # type: ignore[union-attr]
    d = live.utterance(Utterance("B", "Sorry, can I just ask what that costs?", 101.0, 103.0))
    assert d.barge_in is not None and d.barge_in.to_dict()["action"] in ("yield", "continue")


# ----------------------------------------------------------------------------- agent name


def _stream(friends: Conversation) -> str:
    return "".join(f"{u.speaker}: {u.text}\n" for u in friends.utterances)


def test_stream_resolves_first_name_like_full_name(friends: Conversation) -> None:
    """--as Monica on a stream where she is "Monica Geller" decides for her, not a phantom."""
    full = friends.utterances[0].speaker  # e.g. "Monica Geller"
    first = full.split()[0].lower()
    runs = {}
    for who in (full, first):
        r = subprocess.run(
            [POLYLOGUE, "decide", "-", "--as", who, "--json"],
            input=_stream(friends),
            capture_output=True,
            text=True,
            check=True,
        )
        runs[who] = [
            (j["decision"], j["p_speak"]) for j in map(json.loads, r.stdout.split("\n")[:-1])
        ]
        assert "warning" not in r.stderr
    assert runs[full] == runs[first]
    assert any(d == "SPEAK" for d, _ in runs[first])


def test_stream_warns_once_for_an_absent_agent(friends: Conversation) -> None:
    r = subprocess.run(
        [POLYLOGUE, "decide", "-", "--as", "Gunther", "--json"],
        input=_stream(friends),
        capture_output=True,
        text=True,
        check=True,
    )
    assert r.stderr.count("'Gunther' has not appeared") == 1


# ----------------------------------------------------------------------------- barge-in model


def _barge(o):  # type: ignore[no-untyped-def]
    return load_barge_in_model().decide(o.text, o.speaking_s)


def test_barge_in_model_beats_baselines_on_held_out_ami(data_root) -> None:
    root = data_root / "ami" / "ami_public_manual_1.6.2"
    held = [m for m in dialogue_act_meetings(root) if held_out_meeting(m)][:6]
    overlaps = [o for m in held for o in meeting_overlaps(root, m)]
    assert len(overlaps) > 500
    model = load_barge_in_model()
    assert not set(held) - set(model.metadata["held_out_meetings"])  # never trained on
    y = [o.yielded for o in overlaps]
    model_right = [m.yield_floor == t for m, t in zip(map(_barge, overlaps), y, strict=True)]
    lexical_right = [
        (not lexical_backchannel(interjection_words(o.text))) == t
        for o, t in zip(overlaps, y, strict=True)
    ]
    # Better than yielding on any speech and than the lexical backchannel list.
    assert sum(model_right) > sum(y) and sum(model_right) > sum(lexical_right)
    assert 0.05 < sum(y) / len(y) < 0.8  # real overlaps: both outcomes occur


def test_backchannel_follows_the_deployment_rule(model, ami: Conversation) -> None:
    """BACKCHANNEL exactly where the one three-outcome rule says so, from the deployment."""
    utts = [replace(u, addressees=None) for u in ami.utterances[:200]]
    # A point that never suggests one: P(backchannel) is still reported on every decision.
    never = _live(model, "D", ami.participants)
    never.deployment = replace(never.deployment, thresholds=Thresholds(0.3, backchannel=2.0))
    p_back = []
    for u in utts:
        d = never.utterance(u)
        assert d.action is not Action.BACKCHANNEL
        if d.engine is None:
            continue
        row = d.to_dict()
        assert 0.0 <= row["p_backchannel"] <= 1.0 - row["p_speak"] + 1e-9
        p_back.append(d.engine.p_backchannel)
    assert len(set(p_back)) > 5, "P(backchannel) does not vary over 200 AMI acts"
    rule = Thresholds(0.3, backchannel=float(np.quantile(p_back, 0.9)), backchannel_margin=0.7)
    live = _live(model, "D", ami.participants)
    live.deployment = replace(live.deployment, thresholds=rule)
    acts = [live.utterance(u) for u in utts]
    decided = [d for d in acts if d.engine is not None and d.action is not None]
    back = [d for d in decided if d.action is Action.BACKCHANNEL]
    assert back, "no backchannel at the 90th percentile of P(backchannel)"
    for d in decided:
        assert d.engine is not None
        want = choose_action(d.engine.p_speak, d.engine.p_backchannel, rule, d.engine.addressed)
        assert d.suggested is want
        if d.action is Action.BACKCHANNEL:
            assert d.engine.p_backchannel >= rule.backchannel
            assert d.engine.p_backchannel >= rule.backchannel_margin * d.engine.p_speak
