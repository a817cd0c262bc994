"""A LiveKit agent that hears everyone in a multi-party room and speaks only on its turn.

Run it as a LiveKit worker (needs a LiveKit server, and your STT/LLM/TTS plugins in
``make_plugins`` below)::

    python examples/livekit_agent.py dev

or, offline, replay a transcript through LiveKit's own STT objects (a ``MultiSpeakerAdapter``
over a diarising STT that "recognises" the transcript) and polylogue's multi-party session;
``--json`` prints the same lines (``index``, ``decision``, ``p_speak``) as
``polylogue decide FILE --as NAME --json``::

    python examples/livekit_agent.py --replay examples/standup.jsonl --as Dave --json

Needs ``pip install 'polylogue[livekit]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from typing import Any


def make_plugins() -> dict[str, Any]:  # pragma: no cover - your provider's plugins
    """Your STT, LLM and TTS, e.g. ``deepgram.STT()``, ``openai.LLM()``, ``cartesia.TTS()``."""
    raise SystemExit("edit make_plugins() in examples/livekit_agent.py: STT, LLM and TTS plugins")


def worker() -> None:  # pragma: no cover - needs a LiveKit server
    from livekit.agents import Agent, AgentServer, AgentSession, JobContext, cli, room_io

    from polylogue.adapters.livekit import MultiPartySession

    server = AgentServer()

    @server.rtc_session()
    async def entrypoint(ctx: JobContext) -> None:
        plugins = make_plugins()
        await ctx.connect()
        session = AgentSession(llm=plugins["llm"], tts=plugins["tts"])
        # polylogue listens to every participant; LiveKit's own input (one participant) is off.
        room = MultiPartySession("Dave", session=session)
        await session.start(
            agent=Agent(instructions="You are Dave, in a team meeting. Be brief."),
            room=ctx.room,
            room_options=room_io.RoomOptions(audio_input=False),
        )
        room.start(ctx.room, plugins["stt"])  # one STT stream per participant track

    cli.run_app(server)


def replay(path: str, agent: str, as_json: bool) -> None:
    from polylogue.adapters.livekit import replay_transcript
    from polylogue.adapters.room import check_replay_agent
    from polylogue.corpora.transcripts import declared_domain, read_transcript
    from polylogue.engine.deployment import Deployment
    from polylogue.errors import PolylogueInputError

    try:  # a bad file or name: one line and exit status 2, as for `polylogue decide`
        conv = read_transcript(path)
        check_replay_agent(conv.participants, agent, str(path))
    except (PolylogueInputError, OSError) as e:
        msg = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) else str(e)
        print(f"error: {msg}", file=sys.stderr)
        raise SystemExit(2) from None
    people = conv.participants if conv.roster_known else ()
    # The transcript header's domain, else the default (meeting), as `polylogue decide`.
    dep = Deployment.resolve().with_declared_domain(declared_domain(conv))
    rows = asyncio.run(replay_transcript(conv.utterances, agent, people, deployment=dep))
    for row in rows:
        if as_json:
            print(json.dumps(row))
        else:
            p = "" if row["p_speak"] is None else f"P(speak)={row['p_speak']:.2f} "
            print(f"{row['speaker']:>8}: {row['text'][:60]:60s} {p}{row['decision'] or ''}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    if "--replay" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--replay", required=True)
        ap.add_argument("--as", dest="agent", required=True)
        ap.add_argument("--json", action="store_true")
        args = ap.parse_args()
        replay(args.replay, args.agent, args.json)
    else:
        worker()
