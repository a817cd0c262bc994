"""A voice meeting end to end, offline: a transcript spoken by synthetic voices, heard through
Silero VAD and a pocketsphinx recognizer per participant, decided on by polylogue's Pipecat
gate, the agent's lines, replies and backchannels spoken by espeak-ng.

    python examples/voice_meeting.py examples/standup.jsonl --as dave --out build/voice

writes ``build/voice/meeting.wav`` (every voice and the agent's, mixed: listen to it) and
``build/voice/decisions.jsonl`` (one line per recognised segment: ``speaker``, ``reference``,
``recognised``, ``action``, ``p_speak``, ``reason``, ``latency_ms`` from the end of the speech
to the decision and its parts ``vad_wait_ms``, ``recognition_ms``, ``decision_ms``).

Each human line is spoken by its participant's espeak-ng voice into that participant's own
track, one line at a time; the audio is fed as fast as the pipeline takes it, the VAD counting
audio time. The agent's own lines in the transcript are spoken at their place; a SPEAK is
answered with the agent's next line when it comes next, else with ``--reply``.

Each line reaches espeak-ng on its standard input, never on its command line (a line starting
with ``-`` is spoken like any other), and each espeak-ng run is bounded by
``--espeak-timeout``: espeak-ng failing, hanging or writing something that is not WAV audio
stops the example with an error naming the line (exit status 2).

Needs ``pip install 'polylogue[voice]'`` and the ``espeak-ng`` program (Debian: ``apt-get
install espeak-ng``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("transcript", help="a transcript file (any format `polylogue decide` reads)")
    ap.add_argument("--as", dest="agent", required=True, help="the participant the agent is")
    ap.add_argument("--out", required=True, help="folder for meeting.wav and decisions.jsonl")
    ap.add_argument("--role", help="observer, assistant or facilitator")
    ap.add_argument("--domain", help="the deployment's domain (default: the transcript's)")
    ap.add_argument("--operating-point", help="the deployment's operating point")
    ap.add_argument("--no-hints", action="store_true", help="no roster names for the recognizer")
    ap.add_argument(
        "--reply",
        default="Okay, I can take that.",
        help="what the agent says to a SPEAK when its own line does not come next ('' : nothing)",
    )
    ap.add_argument("--vad-stop-secs", type=float, default=None, help="VAD end-of-speech wait")
    ap.add_argument(
        "--espeak-timeout",
        type=float,
        default=30.0,
        help="seconds one espeak-ng run may take before the meeting stops with an error",
    )
    ap.add_argument("--log-level", default="ERROR", help="Pipecat's log level")
    args = ap.parse_args()

    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level=args.log_level.upper())

    try:
        from polylogue.adapters import voice
    except ImportError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    from polylogue.adapters.room import check_replay_agent
    from polylogue.corpora.transcripts import read_transcript
    from polylogue.engine.deployment import Deployment
    from polylogue.errors import PolylogueInputError

    try:  # bad input: one line and exit status 2, as for `polylogue decide`
        conv = read_transcript(args.transcript, domain=args.domain)
        check_replay_agent(conv.participants, args.agent, str(args.transcript))
        deployment = Deployment.resolve(
            domain=conv.domain, operating_point=args.operating_point, role=args.role
        )
    except (PolylogueInputError, OSError) as e:
        msg = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) else str(e)
        print(f"error: {msg}", file=sys.stderr)
        raise SystemExit(2) from None
    if voice.espeak_path() is None:
        print(
            "error: the espeak-ng program is not installed (apt-get install espeak-ng)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    kwargs = {} if args.vad_stop_secs is None else {"vad_stop_secs": args.vad_stop_secs}
    try:
        meeting = asyncio.run(
            voice.run_voice_meeting(
                conv,
                args.agent,
                hints=not args.no_hints,
                reply=args.reply or None,
                deployment=deployment,
                espeak_timeout_s=args.espeak_timeout,
                **kwargs,
            )
        )
    # nothing to speak; no espeak-ng; espeak-ng failed, hung or wrote no audio on a line
    except (ValueError, voice.VoiceUnavailable, voice.VoiceError) as e:
        print(f"error: {args.transcript}: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meeting.write_wav(out / "meeting.wav")
    with open(out / "decisions.jsonl", "w", encoding="utf-8") as f:
        for row in meeting.rows:
            f.write(json.dumps(row.to_dict()) + "\n")
    for row in meeting.rows:
        print(
            f"{row.speaker:>8}: {row.recognised[:50]:50s} {row.action or '-':11s} "
            f"{row.latency_ms:6.0f} ms"
        )
    for text, start in meeting.agent_said:
        print(f"{'(agent)':>8}: {text[:50]:50s} at {start:.1f} s")
    print(f"wrote {out / 'meeting.wav'} and {out / 'decisions.jsonl'}", file=sys.stderr)


if __name__ == "__main__":
    main()
