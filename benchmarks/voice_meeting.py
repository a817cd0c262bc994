"""A voice meeting end to end: what real recognition does to the agent's decisions.

On short excerpts of shared meetings (AMI, ICSI, two Friends scenes) and two written scenarios
where the agent is addressed by name, each excerpt is spoken by espeak-ng (one voice per
participant, one track each) through Silero VAD → pocketsphinx STT → the Pipecat gate →
espeak-ng TTS (``polylogue.adapters.voice.run_voice_meeting``), once with the roster's names
as recognizer hints and once without. Measured:

* the recognizer's word error rate (WER) on the synthetic voices, against the recognizer
  rendering of the reference (lower case, no punctuation), with and without hints;
* name recall: of the roster names in the reference lines, the share found in the recognised
  text (and names recognised that were not said);
* the agent's address recall (of the human lines that name the agent or that the corpus
  annotates as addressed to it, the share after which it SPEAKs) and false speaking (of the
  other human lines, the share after which it SPEAKs), through real recognition against the
  same transcript decided as text (``original``) and as its recognizer rendering
  (``polylogue.rendering``), both through the same gate (Pipecat replay); beside them the
  explicit-address rule (speak iff the agent's name is in the words) and the previous-speaker
  rule (speak iff the agent spoke just before);
* end-of-speech → decision latency (p50/p95) and its parts: the VAD's end-of-speech wait
  (audio time), recognition and decision (wall time on this machine).

    python benchmarks/voice_meeting.py --out build/voice-bench.json

A voice line counts as SPEAK when any of its recognised segments got SPEAK (the agent acts on
each segment the VAD cuts). Needs the voice extra and the espeak-ng program.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.conversation import Conversation, Participant, Utterance
from polylogue.corpora.transcripts import read_transcript
from polylogue.rendering import recognizer_text, render_conversation

ROOT = Path(__file__).resolve().parents[1]

#: A written design review: the agent (Priya) is named at the start, the end and the middle.
REVIEW = [
    ("marcus", "Okay, let's start. The prototype is ready for testing.", ()),
    ("elena", "Great. I ran the first tests yesterday and the battery life looks good.", ()),
    ("marcus", "Priya, can you share the test results with the team?", ("priya",)),
    ("priya", "Sure, I will send them after the meeting.", ()),
    ("elena", "The screen is still too dim outside.", ()),
    ("marcus", "Do we have a fix for that?", ()),
    ("elena", "We could use a brighter panel, but it costs more.", ()),
    ("marcus", "What do you think about the cost, Priya?", ("priya",)),
    ("priya", "I think we can afford it if we drop the second camera.", ()),
    ("elena", "Marcus, should we ask the client first?", ("marcus",)),
    ("marcus", "Yes, I will call them tomorrow.", ()),
]
#: A written planning call: the agent (Anouk, a name missing from the recognizer's dictionary)
#: is asked four times, twice by name first and twice by name last.
PLANNING = [
    ("tom", "Thanks for joining. We need to plan the launch for next month.", ()),
    ("grace", "The website is almost done, we only need the pricing page.", ()),
    ("tom", "Anouk, when can you finish the pricing page?", ("anouk",)),
    ("anouk", "I can finish it by Wednesday.", ()),
    ("grace", "Good. Tom, did legal approve the new terms?", ("tom",)),
    ("tom", "Not yet, they want one more week.", ()),
    ("grace", "Can you send me the draft, Anouk?", ("anouk",)),
    ("anouk", "Yes, I will send it today.", ()),
    ("tom", "We also need someone to write the press release.", ()),
    ("grace", "I can do that if nobody else wants it.", ()),
    ("tom", "Anouk, could you review it before it goes out?", ("anouk",)),
    ("anouk", "Sure, send it to me when it is ready.", ()),
    ("grace", "Is the launch still on the first, Anouk?", ("anouk",)),
    ("anouk", "Yes, the first of the month.", ()),
]
#: (name, corpus, conversation index, first line, lines, agent)
EXCERPTS = [
    ("ami ES2002a", "ami", 0, 6, 10, "A"),
    ("icsi Bdb001", "icsi", 0, 0, 8, "PhD D"),
    ("friends s01e01 scene 1", "friends", 0, 0, 8, "Joey Tribbiani"),
    ("friends s01e01 scene 2", "friends", 1, 0, 8, None),  # the agent: its 2nd speaker
]


def written(cid: str, lines: list[tuple[str, str, tuple[str, ...]]]) -> Conversation:
    ids = list(dict.fromkeys(who for who, _, _ in lines))
    people = tuple(Participant(p, p.capitalize()) for p in ids)
    utts = tuple(
        Utterance(who, text, addressees=to or None, id=f"{cid}-{i}")
        for i, (who, text, to) in enumerate(lines)
    )
    return Conversation(cid, "written", utts, people, roster_known=True)


def meetings() -> list[tuple[str, Conversation, str]]:
    from polylogue.corpora import load_corpus

    out: list[tuple[str, Conversation, str]] = []
    standup = read_transcript(ROOT / "examples" / "standup.jsonl")
    out.append(("written: standup (examples/standup.jsonl)", _cut(standup, 0, 10), "dave"))
    out.append(("written: design review", written("design-review", REVIEW), "priya"))
    out.append(("written: planning call", written("planning", PLANNING), "anouk"))
    for name, corpus, k, first, n, agent in EXCERPTS:
        it = iter(load_corpus(corpus))
        conv = next(c for i, c in enumerate(it) if i == k)
        conv = _cut(conv, first, n)
        who = agent or list(dict.fromkeys(u.speaker for u in conv.utterances))[1]
        out.append((name, conv, who))
    return out


def _cut(conv: Conversation, first: int, n: int) -> Conversation:
    utts = conv.utterances[first : first + n]
    speakers = {u.speaker for u in utts}
    people = tuple(p for p in conv.participants if p.id in speakers)
    return replace(conv, utterances=utts, participants=people, roster_known=True)


# ----------------------------------------------------------------------------- scoring


def words(text: str) -> list[str]:
    """The reference as a recognizer writes it, stage directions dropped."""
    text = re.sub(r"\([^)]*\)|\[[^\]]*\]", " ", recognizer_text(text))
    return re.findall(r"[a-z0-9']+", text)


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    d = list(range(len(hyp) + 1))
    for i in range(1, len(ref) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(hyp) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (ref[i - 1] != hyp[j - 1]))
    return d[len(hyp)]


def name_words(conv: Conversation, agent: str | None = None) -> set[str]:
    """The names people say: each participant's name, first name and aliases (or only the
    agent's)."""
    out: set[str] = set()
    for p in conv.participants:
        if agent is not None and p.id != agent:
            continue
        if p.id.upper() == "ALL":  # Friends' chorus line is no one's name
            continue
        for label in (p.name, *p.aliases):
            out.update(w for w in words(label or "") if len(w) > 2)
        if not p.name and re.fullmatch(r"[A-Za-z]{3,}", p.id):
            out.add(p.id.lower())
    return out


def addressed(conv: Conversation, agent: str, i: int) -> bool:
    u = conv.utterances[i]
    if u.addressees and agent in u.addressees:
        return True
    return bool(name_words(conv, agent) & set(words(u.text)))


@dataclass
class Counts:
    addressed: int = 0
    addressed_spoke: int = 0
    other: int = 0
    other_spoke: int = 0

    def add(self, is_addressed: bool, spoke: bool) -> None:
        if is_addressed:
            self.addressed += 1
            self.addressed_spoke += spoke
        else:
            self.other += 1
            self.other_spoke += spoke


def text_decisions(
    conv: Conversation, agent: str, rendering: str, deployment: Any
) -> dict[int, bool]:
    from polylogue.adapters.pipecat import replay_transcript

    conv = render_conversation(conv, rendering)
    rows = asyncio.run(
        replay_transcript(conv.utterances, agent, conv.participants, deployment=deployment)
    )
    return {r["index"]: r["decision"] == "SPEAK" for r in rows if r["decision"] is not None}


def voice_task(task: tuple[int, bool, str | None]) -> tuple[int, bool, dict[str, Any]]:
    """One excerpt through the voice pipeline (a worker process's job): its rows as dicts."""
    from loguru import logger

    from polylogue.adapters.voice import run_voice_meeting
    from polylogue.engine.deployment import Deployment

    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    k, hints, cache = task
    title, conv, agent = meetings()[k]
    agent_id = next(p.id for p in conv.participants if agent in (p.id, p.name))
    t0 = time.perf_counter()
    m = asyncio.run(
        run_voice_meeting(
            conv,
            agent_id,
            hints=hints,
            reply=None,
            deployment=Deployment.resolve(domain=conv.domain),  # as `polylogue decide` would
            recognition_cache=cache,
        )
    )
    wall = round(time.perf_counter() - t0, 1)
    print(f"{title}: {'hints' if hints else 'no hints'} done in {wall} s", file=sys.stderr)
    return (
        k,
        hints,
        {"rows": [r.to_dict() for r in m.rows], "added": sorted(m.added_words), "wall_s": wall},
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    from concurrent.futures import ProcessPoolExecutor

    from polylogue.engine.deployment import Deployment

    result: dict[str, Any] = {"meetings": []}
    systems = ["voice+hints", "voice", "text:original", "text:recognizer"]
    counts = {s: Counts() for s in [*systems, "rule:explicit-address", "rule:previous-speaker"]}
    rule_voice = {s: Counts() for s in ("voice+hints", "voice")}
    wer = {s: [0, 0] for s in ("voice+hints", "voice")}
    names = {s: [0, 0, 0] for s in ("voice+hints", "voice")}  # found, said, inserted
    lat: dict[str, list[float]] = {k: [] for k in ("total", "vad", "recognition", "decision")}
    rtf: list[float] = []
    timeouts = {s: 0 for s in ("voice+hints", "voice")}
    todo = [
        (k, hints, args.recognition_cache)
        for k in range(len(meetings()))
        for hints in (True, False)
    ]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        done = {(k, h): out for k, h, out in pool.map(voice_task, todo)}
    for k, (title, conv, agent) in enumerate(meetings()):
        agent_id = next(p.id for p in conv.participants if agent in (p.id, p.name))
        humans = [i for i, u in enumerate(conv.utterances) if u.speaker != agent_id]
        said = name_words(conv)
        row: dict[str, Any] = {"meeting": title, "agent": agent_id, "lines": len(humans)}
        deployment = Deployment.resolve(domain=conv.domain)  # as `polylogue decide` would
        row["domain"] = conv.domain
        for rendering in ("original", "recognizer"):
            dec = text_decisions(conv, agent_id, rendering, deployment)
            for i in humans:
                counts[f"text:{rendering}"].add(addressed(conv, agent_id, i), dec.get(i, False))
        for i in humans:
            named = bool(name_words(conv, agent_id) & set(words(conv.utterances[i].text)))
            counts["rule:explicit-address"].add(addressed(conv, agent_id, i), named)
            prev = conv.utterances[i - 1].speaker if i else None
            counts["rule:previous-speaker"].add(addressed(conv, agent_id, i), prev == agent_id)
        for system, hints in (("voice+hints", True), ("voice", False)):
            out = done[(k, hints)]
            row[f"{system} wall_s"] = out["wall_s"]
            heard: dict[int, list[str]] = {i: [] for i in humans}
            spoke: dict[int, bool] = {i: False for i in humans}
            for r in out["rows"]:
                timeouts[system] += r["reason"] == "decision timed out"
                for i in r["reference_index"][-1:]:
                    heard[i].append(r["recognised"])
                    spoke[i] = spoke[i] or r["action"] == "SPEAK"
                if system == "voice+hints":
                    lat["total"].append(r["latency_ms"])
                    lat["vad"].append(r["vad_wait_ms"])
                    lat["recognition"].append(r["recognition_ms"])
                    lat["decision"].append(r["decision_ms"])
                    if r["end"] > r["start"]:
                        rtf.append(r["recognition_ms"] / 1000 / (r["end"] - r["start"]))
            agent_names = name_words(conv, agent_id)
            for i in humans:
                ref, hyp = words(conv.utterances[i].text), " ".join(heard[i]).split()
                wer[system][0] += edit_distance(ref, hyp)
                wer[system][1] += len(ref)
                ref_names = [w for w in ref if w in said]
                names[system][0] += sum(1 for w in ref_names if w in hyp)
                names[system][1] += len(ref_names)
                names[system][2] += sum(1 for w in hyp if w in said and w not in ref)
                counts[system].add(addressed(conv, agent_id, i), spoke[i])
                rule_voice[system].add(addressed(conv, agent_id, i), bool(agent_names & set(hyp)))
            row[f"{system} dictionary additions"] = out["added"]
        result["meetings"].append(row)
    pct = lambda a, b: None if b == 0 else round(100 * a / b, 1)  # noqa: E731
    result["wer"] = {s: pct(*v) for s, v in wer.items()}
    result["words"] = wer["voice"][1]
    result["names"] = {
        s: {"recall": pct(v[0], v[1]), "said": v[1], "inserted": v[2]} for s, v in names.items()
    }
    result["address"] = {
        s: {
            "address_recall": pct(c.addressed_spoke, c.addressed),
            "addressed": c.addressed,
            "false_speaking": pct(c.other_spoke, c.other),
            "other": c.other,
        }
        for s, c in counts.items()
    }
    for s, c in rule_voice.items():
        result["address"][f"rule:explicit-address on {s}"] = {
            "address_recall": pct(c.addressed_spoke, c.addressed),
            "addressed": c.addressed,
            "false_speaking": pct(c.other_spoke, c.other),
            "other": c.other,
        }
    q = lambda xs, p: round(float(np.percentile(xs, p)), 0) if xs else None  # noqa: E731
    result["latency_ms"] = {k: {"p50": q(v, 50), "p95": q(v, 95)} for k, v in lat.items()}
    result["recognition_real_time_factor"] = {"p50": round(float(np.median(rtf)), 2)}
    result["decision_timeouts"] = timeouts
    return result


def markdown(res: dict[str, Any]) -> str:
    """The figures as the tables in docs/agents.md."""
    fmt = lambda x: "-" if x is None else f"{x}"  # noqa: E731
    a = res["address"]
    out = [
        "| system | address recall % | false speaking % |",
        "|---|---:|---:|",
    ]
    labels = {
        "text:original": "text as written (`original`)",
        "text:recognizer": "text, recognizer rendering",
        "voice+hints": "voice: pocketsphinx, roster hints",
        "voice": "voice: pocketsphinx, no hints",
        "rule:explicit-address": "explicit-address rule on the text",
        "rule:explicit-address on voice+hints": "explicit-address rule on the voice (hints)",
        "rule:explicit-address on voice": "explicit-address rule on the voice (no hints)",
        "rule:previous-speaker": "previous-speaker rule",
    }
    for key, label in labels.items():
        c = a[key]
        out.append(
            f"| {label} | {fmt(c['address_recall'])} ({c['addressed']}) "
            f"| {fmt(c['false_speaking'])} ({c['other']}) |"
        )
    out += [
        "",
        "| recognizer | WER % | name recall % (names said) | names inserted |",
        "|---|---:|---:|---:|",
    ]
    for key, label in (("voice+hints", "roster hints"), ("voice", "no hints")):
        n = res["names"][key]
        out.append(
            f"| pocketsphinx, {label} | {res['wer'][key]} | {n['recall']} ({n['said']}) "
            f"| {n['inserted']} |"
        )
    lat = res["latency_ms"]
    out += [
        "",
        "| end of speech → decision (ms) | p50 | p95 |",
        "|---|---:|---:|",
    ]
    for key, label in (
        ("total", "total"),
        ("vad", "VAD end-of-speech wait (audio time)"),
        ("recognition", "recognition (wall)"),
        ("decision", "decision (wall, from the transcription's push)"),
    ):
        out.append(f"| {label} | {fmt(lat[key]['p50'])} | {fmt(lat[key]['p95'])} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description="A voice meeting end to end (see the docstring).")
    ap.add_argument("--out", help="write the figures as JSON here")
    ap.add_argument(
        "--recognition-cache",
        help="keep recognitions here by audio: a rerun on the same audio reuses the words "
        "and the decode times measured when they were made (the decisions are remade)",
    )
    ap.add_argument("--jobs", type=int, default=3, help="excerpts run at once (processes)")
    ap.add_argument("--tables", help="print the tables of a saved --out file and stop")
    args = ap.parse_args()
    if args.tables:
        print(markdown(json.loads(Path(args.tables).read_text(encoding="utf-8"))))
        return
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    res = run(args)
    text = json.dumps(res, indent=1)
    print(text)
    print(markdown(res))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
