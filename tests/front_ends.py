"""One conversation through every front end, for tests that compare them: ``polylogue decide``
on a file and on stdin, a ``serve`` session, the LiveKit turn detector and a real Pipecat
pipeline. Each returns one row per utterance in ``decide --json``'s field names (``index``,
``decision``, ``suggested`` where the front end reports it), the agent's own lines included
where the front end has a row for them."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Sequence
from typing import Any

import click
import httpx
from cli_run import polylogue_process
from click.testing import CliRunner

from polylogue.conversation import Participant, Utterance
from polylogue.engine.deployment import Deployment


def transcript_jsonl(
    lines: Sequence[Utterance],
    participants: Sequence[Participant] = (),
    header: dict[str, Any] | None = None,
) -> str:
    """The JSONL transcript ``decide`` reads: a header with the roster (when given), then one
    line per utterance (speaker and text; times when the utterance has them)."""
    rows: list[dict[str, Any]] = []
    if participants or header:
        head = dict(header or {})
        if participants:
            head["participants"] = [participant_json(p) for p in participants]
        rows.append(head)
    for u in lines:
        row: dict[str, Any] = {"speaker": u.speaker, "text": u.text}
        if u.start is not None:
            row["start"] = u.start
        if u.end is not None:
            row["end"] = u.end
        rows.append(row)
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def participant_json(p: Participant) -> dict[str, Any]:
    """A roster entry as transcript headers and ``serve`` sessions take it."""
    out: dict[str, Any] = {"id": p.id}
    if p.name:
        out["name"] = p.name
    if p.role:
        out["role"] = p.role
    if p.aliases:
        out["aliases"] = list(p.aliases)
    return out


def cli_options(options: dict[str, Any]) -> list[str]:
    """``decide`` flags for deployment options (``domain``, ``operating_point``, ``role``...)."""
    out: list[str] = []
    for key, value in options.items():
        if value is not None:
            out += [f"--{key.replace('_', '-')}", str(value)]
    return out


def decide_rows(args: Sequence[str], stdin: str | None = None, process: bool = False) -> list[dict]:
    """``polylogue decide ... --json`` rows: a real process with ``process``, else the
    command in this process (the click command built once: rebuilding the whole command
    group, as the console script's ``main`` does, costs more than the decisions)."""
    if process:
        proc = polylogue_process(list(args), stdin)
        assert proc.returncode == 0, proc.stderr.decode()
        out = proc.stdout.decode()
    else:
        result = CliRunner().invoke(_command(), list(args), input=stdin, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        out = result.stdout
    return [json.loads(x) for x in out.splitlines() if x.strip()]


@functools.cache
def _command() -> click.Command:
    import typer

    from polylogue.cli import app

    return typer.main.get_command(app)


def actions_of(rows: Sequence[dict]) -> list[tuple[int, str | None]]:
    return [(r["index"], r["decision"]) for r in rows]


def served_rows(
    client: httpx.Client,
    url: str,
    agent: str,
    lines: Sequence[Utterance],
    participants: Sequence[Participant] = (),
    options: dict[str, Any] | None = None,
) -> list[dict]:
    """One ``serve`` session fed ``lines`` as utterance events; one row per utterance (the
    agent's own lines included, with no decision)."""
    body: dict[str, Any] = {"agent": agent, "deployment": options or {}}
    if participants:
        body["participants"] = [participant_json(p) for p in participants]
    r = client.post(f"{url}/v1/sessions", json=body)
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    events = [
        {"type": "utterance", "seq": i, "speaker": u.speaker, "text": u.text}
        for i, u in enumerate(lines)
    ]
    res = client.post(f"{url}/v1/sessions/{sid}/events", json=events, timeout=60)
    assert res.status_code == 200, res.text
    rows = []
    for i, x in enumerate(res.json()["results"]):
        assert x["ok"], x
        d = x.get("decision") or {}
        rows.append(
            {
                "index": i,
                "decision": d.get("action"),
                "suggested": d.get("suggested"),
                "reason_code": d.get("reason_code"),
            }
        )
    client.delete(f"{url}/v1/sessions/{sid}")
    return rows


def livekit_rows(
    lines: Sequence[Utterance],
    agent: str,
    deployment: Deployment,
    participants: Sequence[Participant] = (),
) -> list[dict]:
    """The LiveKit turn detector's decisions: the humans' lines as user messages (speaker in
    ``extra``), the agent's as assistant messages (no row)."""
    from livekit.agents import llm

    from polylogue.adapters.livekit import PolylogueTurnDetector

    det = PolylogueTurnDetector(agent_name=agent, participants=participants, deployment=deployment)
    ctx = llm.ChatContext()
    rows = []
    for i, u in enumerate(lines):
        if det.live.speaker_id(u.speaker) == det.live.agent.pid:
            ctx.add_message(role="assistant", content=u.text)
            continue
        msg = ctx.add_message(role="user", content=u.text, extra={"speaker": u.speaker})
        d = det.decide(ctx, msg)
        rows.append(
            {
                "index": i,
                "decision": None if d.action is None else d.action.value,
                "suggested": None if d.suggested is None else d.suggested.value,
                "reason_code": None if d.reason_code is None else d.reason_code.value,
            }
        )
    return rows


def pipecat_rows(
    lines: Sequence[Utterance],
    agent: str,
    deployment: Deployment,
    participants: Sequence[Participant] = (),
) -> list[dict]:
    """A real Pipecat pipeline (gate and tap): the humans' lines as transcription frames, the
    agent's as bot-speaking frames around their TTS text (no row)."""
    from polylogue.adapters.pipecat import replay_transcript

    rows = asyncio.run(replay_transcript(lines, agent, participants, deployment=deployment))
    agent_rows = {
        i for i, u in enumerate(lines) if u.speaker == agent or _names_agent(u, agent, participants)
    }
    return [r for r in rows if r["index"] not in agent_rows]


def _names_agent(u: Utterance, agent: str, participants: Sequence[Participant]) -> bool:
    for p in participants:
        if p.id == agent or p.name == agent or agent in p.aliases:
            return u.speaker in (p.id, p.name, *p.aliases)
    return False
