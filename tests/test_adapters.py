"""The LiveKit and Pipecat adapters against the real installed frameworks, on AMI talk."""

from __future__ import annotations

import asyncio

import pytest

from polylogue.conversation import Conversation, Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.deployment import Deployment
from polylogue.engine.live import LiveConversation, Policy

pytestmark = pytest.mark.slow

N = 60


@pytest.fixture(scope="module")
def ami() -> Conversation:
    return next(iter(load_corpus("ami")))


def _local(conv: Conversation, agent: str = "B") -> list:
    live = LiveConversation.start(agent, conv.participants, Policy())
    return [live.utterance(Utterance(u.speaker, u.text)) for u in conv.utterances[:N]]


# ----------------------------------------------------------------------------- LiveKit

livekit_agents = pytest.importorskip("livekit.agents")


def test_livekit_turn_detector_reads_speakers_from_the_chat_context(ami: Conversation) -> None:
    from livekit.agents import llm

    from polylogue.adapters.livekit import PolylogueTurnDetector

    det = PolylogueTurnDetector(agent_name="B", participants=ami.participants)
    assert asyncio.run(det.supports_language("en")) and not asyncio.run(det.supports_language("fr"))
    assert asyncio.run(det.unlikely_threshold("en")) == det.live.deployment.take_floor_threshold
    want = _local(ami)
    ctx = llm.ChatContext()
    got = []
    for u in ami.utterances[:N]:
        if u.speaker == "B":  # the agent's own words are assistant messages
            ctx.add_message(role="assistant", content=u.text)
            got.append(None)
            continue
        # LiveKit asks again and again while the transcript grows: partials never stick.
        words = u.text.split()
        for k in range(1, len(words)):
            partial = ctx.copy()
            partial.add_message(
                role="user", content=" ".join(words[:k]), extra={"speaker": u.speaker}
            )
            asyncio.run(det.predict_end_of_turn(partial))
        probe = ctx.copy()
        probe.add_message(role="user", content=u.text, extra={"speaker": u.speaker})
        got.append(asyncio.run(det.predict_end_of_turn(probe)))
        ctx.add_message(role="user", content=u.text, extra={"speaker": u.speaker})
    expected = [
        None if u.speaker == "B" else (0.0 if d.action is None else d.p_speak)
        for u, d in zip(ami.utterances[:N], want, strict=True)
    ]
    assert got == pytest.approx(expected)
    assert any(p is not None and p >= det.live.deployment.take_floor_threshold for p in got)


def test_livekit_reply_gate_stops_the_response_when_silent(ami: Conversation) -> None:
    from livekit.agents import Agent, AgentSession, StopResponse, llm

    from polylogue.adapters.livekit import PolylogueTurnDetector, gate_reply, message_speaker

    det = PolylogueTurnDetector(agent_name="B", participants=ami.participants)

    async def make_session():  # type: ignore[no-untyped-def]
        # LiveKit accepts it as its turn detector (turn_handling={"turn_detection": ...}).
        return AgentSession(turn_handling={"turn_detection": det})

    session = asyncio.run(make_session())
    assert session is not None

    class Assistant(Agent):
        async def on_user_turn_completed(self, turn_ctx, new_message):  # type: ignore[no-untyped-def]
            await gate_reply(det, turn_ctx, new_message)

    agent = Assistant(instructions="You are B, the project manager.")
    want = _local(ami)
    ctx = llm.ChatContext()
    stopped = answered = 0
    for u, d in zip(ami.utterances[:N], want, strict=True):
        if u.speaker == "B":
            ctx.add_message(role="assistant", content=u.text)
            continue
        msg = llm.ChatMessage(role="user", content=[f"{u.speaker}: {u.text}"])
        assert message_speaker(msg) == (u.speaker, u.text)
        if d.action is not None and d.action.value == "SPEAK":
            asyncio.run(agent.on_user_turn_completed(ctx, msg))
            answered += 1
        else:
            with pytest.raises(StopResponse):
                asyncio.run(agent.on_user_turn_completed(ctx, msg))
            stopped += 1
        ctx.insert(msg)
    assert answered and stopped


# ----------------------------------------------------------------------------- Pipecat

pipecat = pytest.importorskip("pipecat")


def test_pipecat_gate_in_a_real_pipeline(ami: Conversation) -> None:
    from pipecat.frames.frames import (
        BotStartedSpeakingFrame,
        BotStoppedSpeakingFrame,
        InterimTranscriptionFrame,
        LLMMessagesAppendFrame,
        TranscriptionFrame,
    )
    from pipecat.tests.utils import run_test

    from polylogue.adapters.pipecat import PolylogueGate

    # A lower threshold than the model's (v2: 0.24), so that these 60 untimed acts, where the
    # bot's own turns carry no words, contain pauses it speaks at as well as pauses it holds.
    gate = PolylogueGate(
        agent_name="B",
        participants=ami.participants,
        deployment=Deployment.resolve(threshold=0.1),
    )
    barge_ins = []

    @gate.event_handler("on_barge_in")
    async def on_barge_in(_gate, decision):  # type: ignore[no-untyped-def]
        barge_ins.append(decision)

    frames = []
    for u in ami.utterances[:N]:
        if u.speaker == "B":  # the bot talks: its speech is tracked, its words are not STT
            frames += [BotStartedSpeakingFrame(), BotStoppedSpeakingFrame()]
            continue
        words = u.text.split()
        frames += [InterimTranscriptionFrame(" ".join(words[:k]), u.speaker, "t") for k in (1, 2)]
        frames.append(TranscriptionFrame(u.text, u.speaker, "t"))
    frames += [BotStartedSpeakingFrame(), InterimTranscriptionFrame("mm-hmm", "A", "t")]
    down, _ = asyncio.run(run_test(gate, frames_to_send=frames))

    want = [d for u, d in zip(ami.utterances[:N], _local(ami), strict=True) if u.speaker != "B"]
    # The bot's own turns are observed as agent speech without words here, so compare the
    # gate with its own record and the words that reached the LLM side with its decisions.
    assert len(gate.decisions) == len(want)
    passed = [f for f in down if isinstance(f, TranscriptionFrame)]
    held = [f for f in down if isinstance(f, LLMMessagesAppendFrame)]
    speak = [d for d in gate.decisions if d["action"] == "SPEAK"]
    assert len(passed) == len(speak) and len(held) == len(gate.decisions) - len(speak)
    assert passed and held
    assert all(m.run_llm is False for m in held)
    assert held[0].messages[0]["content"].split(": ", 1)[0] in {"A", "C", "D"}
    assert barge_ins and barge_ins[-1].yield_floor is False  # "mm-hmm" while the bot speaks
