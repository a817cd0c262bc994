"""A LiveKit agent that hears everyone in a multi-party room and speaks only on its turn.

Run it as a LiveKit worker (needs a LiveKit server, and your STT/LLM/TTS plugins in
``make_plugins`` below)::

    python examples/livekit_agent.py dev

or, offline, replay a transcript through LiveKit's own STT objects (a ``MultiSpeakerAdapter``
over a diarising STT that "recognises" the transcript) and polylogue's multi-party session;
``--json`` prints the same lines (``index``, ``decision``, ``p_speak``) as
``polylogue decide FILE --as NAME --json``::

    python examples/livekit_agent.py --replay examples/standup.jsonl --as Dave --json
    python examples/livekit_agent.py --replay call.vtt --as Dave --domain meeting \
        --role assistant --alias "Dave=David,Dai"

Needs ``pip install 'polylogue[livekit]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from typing import Any

from polylogue.adapters.room import add_replay_options


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


def replay(args: argparse.Namespace) -> None:
    from polylogue.adapters.livekit import replay_transcript
    from polylogue.adapters.room import replay_input
    from polylogue.errors import PolylogueInputError

    try:  # a bad file, name or option: one line and exit status 2, as for `polylogue decide`
        run = replay_input(
            args.replay, args.agent, domain=args.domain, role=args.role, aliases=args.alias
        )
    except (PolylogueInputError, OSError) as e:
        msg = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) else str(e)
        print(f"error: {msg}", file=sys.stderr)
        raise SystemExit(2) from None
    rows = asyncio.run(
        replay_transcript(run.utterances, args.agent, run.participants, **run.options)
    )
    for row in rows:
        if args.json:
            print(json.dumps(row))
        else:
            p = "" if row["p_speak"] is None else f"P(speak)={row['p_speak']:.2f} "
            print(f"{row['speaker']:>8}: {row['text'][:60]:60s} {p}{row['decision'] or ''}")


def replay_arguments() -> argparse.ArgumentParser:
    """The offline replay's options (``decide``'s names); without --replay: a LiveKit worker."""
    ap = argparse.ArgumentParser(
        description="A LiveKit agent for a multi-party room. With --replay: decide offline "
        "over a transcript, through LiveKit's STT objects. Without: run as a LiveKit worker "
        "(`python examples/livekit_agent.py dev`)."
    )
    ap.add_argument("--replay", metavar="FILE", help="a transcript file to replay offline")
    ap.add_argument("--as", dest="agent", help="the participant the agent is (with --replay)")
    ap.add_argument("--json", action="store_true", help="one JSON line per utterance")
    add_replay_options(ap)
    return ap


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    if {"--replay", "-h", "--help"} & set(sys.argv[1:]):
        parsed = replay_arguments().parse_args()
        if parsed.replay is None or parsed.agent is None:
            replay_arguments().error("--replay FILE and --as NAME go together")
        replay(parsed)
    else:
        worker()
