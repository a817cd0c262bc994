"""A LiveKit agent that only answers when it is its turn in a multi-party room.

Run it as a LiveKit worker (needs a LiveKit server and your STT/LLM/TTS plugins)::

    python examples/livekit_agent.py dev

or, offline, replay a transcript through the same detector and reply gate with LiveKit's own
chat context objects::

    python examples/livekit_agent.py --replay examples/standup.jsonl --as Dave

Speakers: tag each user message with ``extra={"speaker": identity}`` (e.g. from the STT's
diarisation or the LiveKit participant identity), or prefix the text with ``"Name: "``.
Needs `pip install 'polylogue[livekit]'`.
"""

from __future__ import annotations

import asyncio
import sys

from livekit.agents import Agent, StopResponse, llm

from polylogue.adapters.livekit import PolylogueTurnDetector, gate_reply


class MeetingAssistant(Agent):
    """Answers only when polylogue says SPEAK; otherwise the turn stays in context, unanswered."""

    def __init__(self, detector: PolylogueTurnDetector) -> None:
        super().__init__(instructions="You take part in a team meeting. Be brief.")
        self.detector = detector

    async def on_user_turn_completed(
        self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage
    ) -> None:
        await gate_reply(self.detector, turn_ctx, new_message)


def replay(path: str, agent_name: str) -> None:
    from polylogue.corpora.transcripts import read_transcript

    conv = read_transcript(path)
    detector = PolylogueTurnDetector(agent_name=agent_name, participants=conv.participants)
    assistant = MeetingAssistant(detector)
    ctx = llm.ChatContext()
    for u in conv.utterances:
        if u.speaker == detector.live.agent.pid:
            ctx.add_message(role="assistant", content=u.text)
            print(f"{u.speaker:>6}: {u.text[:70]}")
            continue
        msg = llm.ChatMessage(role="user", content=[u.text], extra={"speaker": u.speaker})
        probe = ctx.copy()
        probe.insert(msg)
        p = asyncio.run(detector.predict_end_of_turn(probe))
        try:
            asyncio.run(assistant.on_user_turn_completed(ctx, msg))
            verdict = "reply"
        except StopResponse:
            verdict = "stay silent"
        ctx.insert(msg)
        print(f"{u.speaker:>6}: {u.text[:70]:70s} P(speak)={p:.2f} -> {verdict}")


def worker() -> None:  # pragma: no cover - needs a LiveKit server
    from livekit.agents import AgentServer, AgentSession, JobContext, cli

    server = AgentServer()

    @server.rtc_session()
    async def entrypoint(ctx: JobContext) -> None:
        detector = PolylogueTurnDetector(agent_name="assistant")
        session = AgentSession(turn_handling={"turn_detection": detector})  # + stt/llm/tts
        await session.start(agent=MeetingAssistant(detector), room=ctx.room)

    cli.run_app(server)


if __name__ == "__main__":
    if "--replay" in sys.argv:
        args = sys.argv[1:]
        replay(args[args.index("--replay") + 1], args[args.index("--as") + 1])
    else:
        worker()
