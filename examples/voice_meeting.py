"""A voice meeting end to end, offline: a transcript spoken by test voices, heard through
Silero VAD and a speech recognizer per participant, decided on by polylogue's Pipecat gate,
the agent's lines, replies and backchannels spoken by its own voice.

    python examples/voice_meeting.py examples/standup.jsonl --as dave --out build/voice

writes ``build/voice/meeting.wav`` (every voice and the agent's, mixed: listen to it) and
``build/voice/decisions.jsonl`` (one line per recognised segment: ``speaker``, ``reference``,
``recognised``, ``action``, ``p_speak``, ``reason``, ``latency_ms`` from the end of the speech
to the decision and its parts ``vad_wait_ms``, ``recognition_ms``, ``decision_ms``).

The recognizer is the best installed unless ``--recognizer`` says (``whisper``: the bundled
Whisper tiny.en; ``whisper:MODEL``: a model name or CTranslate2 folder; ``pocketsphinx``); the
voices likewise (``--voices piper`` or ``espeak``; ``--piper-model FILE.onnx``, repeatable,
adds piper voices a user has). Both are named on standard error. ``--snr``, ``--bleed`` and
``--overlap`` put the meeting in a noisier room; ``--barge-in S`` has people start S seconds
into the agent's replies, and the agent stops or goes on by the shipped barge-in model
(``barge_ins.jsonl``). The deployment's controls are those of
``polylogue decide`` (``--role``, ``--operating-point``, ``--domain``, ``--audience``,
``--ignore``, ``--only``, ``--alias``), with the same errors.

Bad input (an unreadable transcript, a bad option, a missing voice or recognizer, a line in a
script the voices cannot speak, a voice failing on a line) is one line naming it and exit
status 2; nothing is written in ``--out`` unless the meeting ran to its end.

Needs ``pip install 'polylogue[voice]'`` (and Debian's ``espeak-ng`` for the espeak-ng voices).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("transcript", help="a transcript file (any format `polylogue decide` reads)")
    ap.add_argument("--as", dest="agent", required=True, help="the participant the agent is")
    ap.add_argument("--out", required=True, help="folder for meeting.wav and decisions.jsonl")
    ap.add_argument("--role", help="observer, assistant or facilitator")
    ap.add_argument("--domain", help="meeting, tv, earnings or chat (default: the transcript's)")
    ap.add_argument("--operating-point", help="matched, polite, balanced or addressed-only")
    ap.add_argument("--audience", default="group", help="group or adaptive (as `decide`)")
    ap.add_argument("--ignore", action="append", default=[], help="context-only participant")
    ap.add_argument("--only", action="append", default=[], help="answer only this participant")
    ap.add_argument(
        "--alias",
        action="append",
        default=[],
        metavar="NAME=ALIAS[,ALIAS...]",
        help="what people call the speaker labelled NAME (repeatable)",
    )
    ap.add_argument(
        "--recognizer",
        help="whisper, whisper:MODEL (a name or CTranslate2 folder) or pocketsphinx "
        "(default: the best installed)",
    )
    ap.add_argument("--voices", choices=("piper", "espeak"), help="default: the best installed")
    ap.add_argument(
        "--piper-model", action="append", default=[], help="a piper .onnx voice (repeatable)"
    )
    ap.add_argument("--snr", type=float, help="background noise at this SNR in dB")
    ap.add_argument("--bleed", type=float, help="the others' speech in each microphone, dB below")
    ap.add_argument(
        "--overlap", type=float, default=0.0, help="seconds a next speaker starts early"
    )
    ap.add_argument(
        "--barge-in",
        type=float,
        help="people start this many seconds into each of the agent's replies (the agent "
        "stops or goes on by the barge-in model; logged in barge_ins.jsonl)",
    )
    ap.add_argument("--no-hints", action="store_true", help="no roster names for the recognizer")
    ap.add_argument(
        "--word-confidence",
        action="store_true",
        help="Whisper's word confidences reach the address verdict: a word it was unsure of "
        "may match a roster name at a looser sound distance",
    )
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
    return ap


def _fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def main() -> None:
    args = _parser().parse_args()

    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level=args.log_level.upper())

    try:
        from polylogue.adapters import voice
        from polylogue.adapters.voice import meeting
        from polylogue.adapters.voice.synthesis import piper_voices
    except ImportError as e:
        _fail(str(e))
    import typer

    from polylogue.adapters import start_live
    from polylogue.adapters.room import check_replay_agent
    from polylogue.cli.decide import _RoomFocus, check_focus_names, resolve_deployment
    from polylogue.corpora.transcripts import (
        parse_alias,
        read_transcript,
        transcript_domain,
        with_aliases,
    )
    from polylogue.engine.live import NameBook
    from polylogue.errors import PolylogueInputError

    # `polylogue decide`'s own parsing and checks: the same errors, as one line, exit 2
    focus = _RoomFocus(args.audience, tuple(args.ignore), tuple(args.only))
    try:
        specs = [parse_alias(a) for a in args.alias]
        deployment = resolve_deployment(None, args.domain, args.operating_point, None, args.role)
        conv = read_transcript(args.transcript, domain=args.domain)
        deployment = deployment.with_declared_domain(*transcript_domain(conv))
        people = with_aliases(conv.participants, specs, args.transcript)
        check_replay_agent(people, args.agent, str(args.transcript))
        for flag, names in (("--ignore", focus.ignore), ("--only", focus.only)):
            if any(n.strip().casefold() == args.agent.casefold() for n in names):
                raise typer.BadParameter(
                    f"{args.agent!r} is the participant decided for", param_hint=flag
                )
        book = NameBook()
        for p in people:
            book.add(p)
        check_focus_names(book, people, args.agent, focus, args.transcript)
        live, _ = start_live(args.agent, people, deployment=deployment)
        focus.start(live, str(args.transcript))
    except typer.BadParameter as e:
        _fail(e.format_message())
    except (PolylogueInputError, OSError) as e:
        _fail(f"{e.filename}: {e.strerror}" if isinstance(e, OSError) else str(e))
    conv = dataclasses.replace(conv, participants=people)
    room = voice.Room(args.snr, args.bleed, args.overlap, barge_in_s=args.barge_in)
    if args.voices == "espeak" or (args.voices is None and not args.piper_model):
        voices: object = args.voices
    else:
        try:
            voices = piper_voices(args.piper_model)
        except voice.VoiceUnavailable as e:
            _fail(str(e))
    kwargs = {} if args.vad_stop_secs is None else {"vad_stop_secs": args.vad_stop_secs}

    def said(r: voice.Recognizer) -> None:
        print(f"recognizer: {r.name}", file=sys.stderr)

    try:
        result = asyncio.run(
            meeting.run_voice_meeting(
                conv,
                args.agent,
                hints=not args.no_hints,
                reply=args.reply or None,
                deployment=deployment,
                recognizer=args.recognizer,
                voices=voices,  # type: ignore[arg-type]
                room=room,
                audience=focus.audience,
                ignore=focus.ignore,
                only=focus.only,
                espeak_timeout_s=args.espeak_timeout,
                on_recognizer=said,
                word_confidence=args.word_confidence,
                **kwargs,
            )
        )
    # nothing to speak; a voice or recognizer missing; a voice failed, hung or wrote no audio
    except (ValueError, voice.VoiceUnavailable, voice.VoiceError) as e:
        _fail(f"{args.transcript}: {e}")
    print(f"voices: {'; '.join(result.voices)}", file=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # written beside and renamed into place: an interrupted write leaves no half file
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        result.write_wav(Path(tmp) / "meeting.wav")
        with open(Path(tmp) / "decisions.jsonl", "w", encoding="utf-8") as f:
            for row in result.rows:
                f.write(json.dumps(row.to_dict()) + "\n")
        written = ["meeting.wav", "decisions.jsonl"]
        if result.barge_ins:
            with open(Path(tmp) / "barge_ins.jsonl", "w", encoding="utf-8") as f:
                for b in result.barge_ins:
                    f.write(json.dumps(b) + "\n")
            written.append("barge_ins.jsonl")
        for name in written:
            os.replace(Path(tmp) / name, out / name)
    for row in result.rows:
        print(
            f"{row.speaker:>8}: {row.recognised[:50]:50s} {row.action or '-':11s} "
            f"{row.latency_ms:6.0f} ms"
        )
    for text, start in result.agent_said:
        print(f"{'(agent)':>8}: {text[:50]:50s} at {start:.1f} s")
    for b in result.barge_ins:
        print(f"{b['speaker']:>8}: {b['heard'][:50]:50s} barge-in: agent {b['action']}s")
    print(f"wrote {out / 'meeting.wav'} and {out / 'decisions.jsonl'}", file=sys.stderr)


if __name__ == "__main__":
    main()
