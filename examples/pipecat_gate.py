"""Polylogue's multi-party gate in a real Pipecat pipeline.

In a voice bot the gate sits between speech-to-text and the user context aggregator, its tap
after the output transport, and the barge-in strategy decides what interrupts the bot::

    gate = PolylogueGate(agent_name="Dave", participants=roster)
    user_params = LLMUserAggregatorParams(
        user_turn_strategies=UserTurnStrategies(start=[BargeInTurnStartStrategy(gate)]))
    user, assistant = LLMContextAggregatorPair(context, user_params=user_params)
    Pipeline([transport.input(), stt, gate, user, llm, tts, transport.output(),
              gate.agent_speech_tap(), assistant])

Offline, replay a transcript through a real ``Pipeline`` (``PipelineWorker``,
``WorkerRunner``): humans' lines as ``TranscriptionFrame`` s keyed by ``user_id``, the bot's
lines as bot-speaking frames around their ``TTSTextFrame``. ``--json`` prints the same lines
(``index``, ``decision``, ``p_speak``) as ``polylogue decide FILE --as NAME --json``::

    python examples/pipecat_gate.py --replay examples/standup.jsonl --as Dave --json
    python examples/pipecat_gate.py --replay call.vtt --as Dave --domain meeting \
        --role assistant --alias "Dave=David,Dai"

Needs ``pip install 'polylogue[pipecat]'``; runs offline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from loguru import logger

from polylogue.adapters.room import add_replay_options


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replay", required=True, help="a transcript file")
    ap.add_argument("--as", dest="agent", required=True, help="the participant the bot is")
    ap.add_argument("--json", action="store_true", help="one JSON line per utterance")
    ap.add_argument("--log-level", default="WARNING", help="Pipecat's log level (DEBUG: all)")
    add_replay_options(ap)
    args = ap.parse_args()
    # Pipecat logs every frame hop at DEBUG through loguru; a replay needs warnings only.
    logger.remove()
    logger.add(sys.stderr, level=args.log_level.upper())

    from polylogue.adapters.pipecat import replay_transcript
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


if __name__ == "__main__":
    main()
