"""A voice meeting end to end: what real recognition does to the agent's decisions.

Eight scenes (the written standup, design review and planning call where the agent is named,
excerpts of AMI ES2002a, ICSI Bdb001, two Friends scenes and an Earnings-21 call; each line cut
to its first 30 words) are spoken by test voices, one per participant on their own track,
through Silero VAD → a recognizer per participant → the Pipecat gate → the agent's TTS
(``polylogue.adapters.voice.run_voice_meeting``), under each condition: recognizer (Whisper
tiny.en, the bundled one; pocketsphinx) × voice (piper, espeak-ng) × room (clean; pink noise at
10 dB SNR), always with the roster's names as hints. Measured per condition:

* the recognizer's word error rate (WER) against the recognizer rendering of the reference
  (lower case, no punctuation);
* name recall: of the roster names in the reference lines, the share found in the recognised
  text, and names recognised that were not said;
* the agent's address recall (of the human lines that name the agent or that the corpus
  annotates as addressed to it, the share after which it SPEAKs) and false speaking (of the
  other human lines, the share after which it SPEAKs), against the same transcript decided as
  text (``original``) and as its recognizer rendering (``polylogue.rendering``), both through
  the same gate (Pipecat replay); beside them the explicit-address rule (speak iff the agent's
  name is in the words) and the previous-speaker rule (speak iff the agent spoke just before);
* end-of-speech → decision latency (p50/p95) and its parts: the VAD's end-of-speech wait
  (audio time), recognition and decision (wall time on this machine; the load average is
  printed and saved).

    nice -n 5 python benchmarks/voice_meeting.py --out build/voice-bench.json \
        --recognition-cache build/recognition-cache

Options that change a run (each kept in ``--out`` as its own entry, the condition's name with
the options in brackets, beside the plain run; ``--tables`` prints them beside it):

* ``--vad-stop-secs S``: the VAD's stop time; the figures add segments per line and the share
  of lines cut in two or more (a pause inside a line longer than the stop time);
* ``--word-confidence``: Whisper gives word confidences and the words it was unsure of reach
  the address verdict (``Utterance.unsure``);
* ``--barge-in S``: the person after each of the agent's replies starts S seconds into it;
  the barge-in model's decisions (stop or continue) are counted against what the line is (a
  backchannel by the corpus's dialogue act or its words, else a real turn), beside the
  always-stop baseline.

Each condition's figures are saved in ``--out`` as soon as it finishes (``--conditions`` runs
some of them; a rerun keeps the others). A voice line counts as SPEAK when any of its recognised
segments got SPEAK (the agent acts on each segment the VAD cuts). Needs the voice extra (and
Debian's espeak-ng for the espeak-ng voices).
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
    ("ami ES2002a", "ami", 0, 6, 18, None),
    ("icsi Bdb001", "icsi", 0, 0, 20, "PhD D"),
    ("friends s01e01 scene 1", "friends", 0, 0, 16, None),
    ("friends s01e01 scene 2", "friends", 1, 0, 16, None),
    ("earnings-21 4320211", "earnings21", 0, 1, 14, "2"),  # the agent: the CEO, Brett
]
#: None: the agent is the participant the excerpt addresses most (by name or annotation).
#: Each line cut to this many words: an earnings call's prepared remarks run for minutes.
MAX_WORDS = 30


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
    out.append(("written: standup (examples/standup.jsonl)", _cut(standup, 0, 25), "dave"))
    out.append(("written: design review", written("design-review", REVIEW), "priya"))
    out.append(("written: planning call", written("planning", PLANNING), "anouk"))
    for name, corpus, k, first, n, agent in EXCERPTS:
        it = iter(load_corpus(corpus))
        conv = next(c for i, c in enumerate(it) if i == k)
        conv = _cut(conv, first, n)
        who = agent or _most_addressed(conv)
        out.append((name, conv, who))
    return out


def _most_addressed(conv: Conversation) -> str:
    speakers = list(dict.fromkeys(u.speaker for u in conv.utterances))
    n = {
        p: sum(addressed(conv, p, i) for i, u in enumerate(conv.utterances) if u.speaker != p)
        for p in speakers
    }
    return max(speakers, key=lambda p: n[p])  # the first speaker of the most addressed


def _cut(conv: Conversation, first: int, n: int) -> Conversation:
    utts = tuple(
        replace(u, text=" ".join(u.text.split()[:MAX_WORDS]))
        for u in conv.utterances[first : first + n]
    )
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


def backchannel(u: Utterance) -> bool:
    """The line is a backchannel: the corpus's dialogue act says so, or its words are only
    acknowledgements and fillers."""
    from polylogue.turntaking.cues import is_lexical_backchannel

    act = (u.dialogue_act or "").lower()
    return act in ("bck", "backchannel") or is_lexical_backchannel(u.text)


def text_decisions(
    conv: Conversation, agent: str, rendering: str, deployment: Any
) -> dict[int, bool]:
    from polylogue.adapters.pipecat import replay_transcript

    conv = render_conversation(conv, rendering)
    rows = asyncio.run(
        replay_transcript(conv.utterances, agent, conv.participants, deployment=deployment)
    )
    return {r["index"]: r["decision"] == "SPEAK" for r in rows if r["decision"] is not None}


#: recognizer × voice × room: the conditions, in the order run (the headline ones first)
CONDITIONS = [
    "whisper/piper/clean",
    "whisper/piper/snr10",
    "whisper/espeak/clean",
    "whisper/espeak/snr10",
    "pocketsphinx/espeak/clean",
    "pocketsphinx/piper/clean",
    "pocketsphinx/espeak/snr10",
    "pocketsphinx/piper/snr10",
]


@dataclass(frozen=True)
class Options:
    """What a run changes besides the condition (the defaults: the example's)."""

    vad_stop_secs: float | None = None
    barge_in: float | None = None
    word_confidence: bool = False

    def key(self, cond: str) -> str:
        """The condition's key in ``--out``: the condition, then the options that differ."""
        parts = []
        if self.vad_stop_secs is not None:
            parts.append(f"vad {self.vad_stop_secs:g}")
        if self.barge_in is not None:
            parts.append(f"barge-in {self.barge_in:g}")
        if self.word_confidence:
            parts.append("confidences")
        return cond + (f" [{', '.join(parts)}]" if parts else "")


def voice_task(
    task: tuple[str, int, str | None], options: Options = Options()
) -> tuple[str, int, dict[str, Any]]:
    """One scene under one condition through the voice pipeline: its rows as dicts."""
    from loguru import logger

    from polylogue.adapters.voice import Room, run_voice_meeting
    from polylogue.adapters.voice.meeting import VAD_STOP_S
    from polylogue.engine.deployment import Deployment

    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    cond, k, cache = task
    rec, voices, room = cond.split("/")
    title, conv, agent = meetings()[k]
    agent_id = next(p.id for p in conv.participants if agent in (p.id, p.name))
    t0 = time.perf_counter()
    m = asyncio.run(
        run_voice_meeting(
            conv,
            agent_id,
            hints=True,
            reply=None,
            recognizer=rec,
            voices=voices,
            room=Room(snr_db=10.0 if room == "snr10" else None, barge_in_s=options.barge_in),
            deployment=Deployment.resolve(domain=conv.domain),  # as `polylogue decide` would
            recognition_cache=cache,
            vad_stop_secs=options.vad_stop_secs or VAD_STOP_S,
            word_confidence=options.word_confidence,
        )
    )
    wall = round(time.perf_counter() - t0, 1)
    print(f"{cond} {title}: done in {wall} s", file=sys.stderr)
    return (
        cond,
        k,
        {
            "rows": [r.to_dict() for r in m.rows],
            "barge_ins": m.barge_ins,
            "recognizer": m.recognizer,
            "voices": m.voices,
            "wall_s": wall,
        },
    )


def _rate(c: Counts) -> dict[str, Any]:
    pct = lambda a, b: None if b == 0 else round(100 * a / b, 1)  # noqa: E731
    return {
        "address_recall": pct(c.addressed_spoke, c.addressed),
        "addressed": c.addressed,
        "false_speaking": pct(c.other_spoke, c.other),
        "other": c.other,
    }


def text_figures(scenes: list[tuple[str, Conversation, str]]) -> dict[str, Any]:
    """The same lines decided as text, and the two rules."""
    from polylogue.engine.deployment import Deployment

    counts = {
        s: Counts()
        for s in ("text:original", "text:recognizer", "rule:explicit-address",
                  "rule:previous-speaker")
    }  # fmt: skip
    lines = 0
    for _title, conv, agent in scenes:
        agent_id = next(p.id for p in conv.participants if agent in (p.id, p.name))
        humans = [i for i, u in enumerate(conv.utterances) if u.speaker != agent_id]
        lines += len(humans)
        deployment = Deployment.resolve(domain=conv.domain)
        for rendering in ("original", "recognizer"):
            dec = text_decisions(conv, agent_id, rendering, deployment)
            for i in humans:
                counts[f"text:{rendering}"].add(addressed(conv, agent_id, i), dec.get(i, False))
        for i in humans:
            named = bool(name_words(conv, agent_id) & set(words(conv.utterances[i].text)))
            counts["rule:explicit-address"].add(addressed(conv, agent_id, i), named)
            prev = conv.utterances[i - 1].speaker if i else None
            counts["rule:previous-speaker"].add(addressed(conv, agent_id, i), prev == agent_id)
    return {"human_lines": lines, "address": {s: _rate(c) for s, c in counts.items()}}


def condition_figures(
    scenes: list[tuple[str, Conversation, str]], outs: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    """WER, names, address and latency of one condition from its scenes' rows."""
    counts, rule = Counts(), Counts()
    wer = [0, 0]
    scene_wer: dict[str, list[int]] = {}  # per scene: where a run's WER comes from
    names = [0, 0, 0]  # found, said, inserted
    lat: dict[str, list[float]] = {k: [] for k in ("total", "vad", "recognition", "decision")}
    timeouts = 0
    segments: list[int] = []  # recognised segments per human line
    barge = {"backchannel": [0, 0], "turn": [0, 0]}  # [barge-ins, stopped]
    for k, (_title, conv, agent) in enumerate(scenes):
        agent_id = next(p.id for p in conv.participants if agent in (p.id, p.name))
        humans = [i for i, u in enumerate(conv.utterances) if u.speaker != agent_id]
        said = name_words(conv)
        heard: dict[int, list[str]] = {i: [] for i in humans}
        spoke: dict[int, bool] = {i: False for i in humans}
        for r in outs[k]["rows"]:
            timeouts += r["reason"] == "decision timed out"
            for i in r["reference_index"][-1:]:
                heard[i].append(r["recognised"])
                spoke[i] = spoke[i] or r["action"] == "SPEAK"
            lat["total"].append(r["latency_ms"])
            lat["vad"].append(r["vad_wait_ms"])
            lat["recognition"].append(r["recognition_ms"])
            lat["decision"].append(r["decision_ms"])
        agent_names = name_words(conv, agent_id)
        for b in outs[k].get("barge_ins", []):
            u = conv.utterances[b["index"]]
            kind = "backchannel" if backchannel(u) else "turn"
            barge[kind][0] += 1
            barge[kind][1] += b["action"] == "yield"
        for i in humans:
            segments.append(len(heard[i]))
            ref, hyp = words(conv.utterances[i].text), words(" ".join(heard[i]))
            wer[0] += edit_distance(ref, hyp)
            sw = scene_wer.setdefault(_title, [0, 0])
            sw[0] += edit_distance(ref, hyp)
            sw[1] += len(ref)
            wer[1] += len(ref)
            ref_names = [w for w in ref if w in said]
            names[0] += sum(1 for w in ref_names if w in hyp)
            names[1] += len(ref_names)
            names[2] += sum(1 for w in hyp if w in said and w not in ref)
            counts.add(addressed(conv, agent_id, i), spoke[i])
            rule.add(addressed(conv, agent_id, i), bool(agent_names & set(hyp)))
    q = lambda xs, p: round(float(np.percentile(xs, p))) if xs else None  # noqa: E731
    any_out = next(iter(outs.values()))
    return {
        "recognizer": any_out["recognizer"],
        "voices": any_out["voices"],
        "wer": round(100 * wer[0] / max(1, wer[1]), 1),
        "wer_by_scene": {t: round(100 * e / max(1, n), 1) for t, (e, n) in scene_wer.items()},
        "words": wer[1],
        "names": {
            "recall": round(names[0] / names[1], 3) if names[1] else None,
            "said": names[1],
            "inserted": names[2],
        },
        "address": _rate(counts),
        "rule:explicit-address": _rate(rule),
        "latency_ms": {k: {"p50": q(v, 50), "p95": q(v, 95)} for k, v in lat.items()},
        "decision_timeouts": timeouts,
        "segments_per_line": round(sum(segments) / max(1, len(segments)), 2),
        "lines_cut": round(100 * sum(n > 1 for n in segments) / max(1, len(segments)), 1),
        "barge_ins": {
            kind: {"barge_ins": n, "stopped": stopped} for kind, (n, stopped) in barge.items()
        },
        "wall_s": round(sum(o["wall_s"] for o in outs.values()), 1),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    import os

    scenes = meetings()
    out_path = Path(args.out) if args.out else None
    result: dict[str, Any] = {"conditions": {}}
    if out_path is not None and out_path.exists():
        result = json.loads(out_path.read_text(encoding="utf-8"))  # the others kept
        result.setdefault("conditions", {})
    result["scenes"] = [
        {"scene": t, "agent": a, "human_lines": sum(u.speaker != a for u in c.utterances)}
        for t, c, a in scenes
    ]
    result.update(text_figures(scenes))
    conditions = args.conditions.split(",") if args.conditions else CONDITIONS
    options = Options(args.vad_stop_secs, args.barge_in, args.word_confidence)
    for cond in conditions:
        if cond not in CONDITIONS:
            raise SystemExit(f"--conditions: unknown condition {cond!r} ({', '.join(CONDITIONS)})")
        before = os.getloadavg()
        # the machine is shared: its load is printed and kept beside the latencies
        print(
            f"{options.key(cond)}: load average {before[0]:.1f} {before[1]:.1f} "
            f"{before[2]:.1f} (1, 5, 15 min) on {os.cpu_count()} cores",
            file=sys.stderr,
        )
        outs = {}
        for k in range(len(scenes)):
            _c, _k, out = voice_task((cond, k, args.recognition_cache), options)
            outs[k] = out
        fig = condition_figures(scenes, outs)
        fig["load_average"] = [round(before[1], 1), round(os.getloadavg()[1], 1)]
        result["conditions"][options.key(cond)] = fig
        print(f"{options.key(cond)}: {json.dumps(fig)}", file=sys.stderr)
        if out_path is not None:  # each condition kept as soon as it is measured
            out_path.parent.mkdir(parents=True, exist_ok=True)
            out_path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


LABELS = {
    "whisper": "Whisper tiny.en",
    "pocketsphinx": "pocketsphinx",
    "piper": "piper",
    "espeak": "espeak-ng",
    "clean": "clean",
    "snr10": "10 dB SNR",
}


def markdown(res: dict[str, Any]) -> str:
    """The figures as the tables in docs/voice.md."""
    fmt = lambda x: "-" if x is None else f"{x}"  # noqa: E731
    ms = lambda x: "-" if x is None else f"{x:.0f}"  # noqa: E731
    conds = [c for c in CONDITIONS if c in res["conditions"]]

    def label(c: str) -> str:
        return ", ".join(LABELS[x] for x in c.split("/"))

    out = [
        "| recognizer, voice, room | WER % | name recall (names said) | names inserted |",
        "|---|---:|---:|---:|",
    ]
    for c in conds:
        f = res["conditions"][c]
        n = f["names"]
        out.append(
            f"| {label(c)} | {f['wer']} | {fmt(n['recall'])} ({n['said']}) | {n['inserted']} |"
        )
    a = res["address"]
    out += [
        "",
        "| the words | the agent: address recall % | false speaking % "
        "| explicit-address rule: address recall % | false speaking % |",
        "|---|---:|---:|---:|---:|",
    ]
    rates = lambda r: (  # noqa: E731
        f"{fmt(r['address_recall'])} ({r['addressed']}) | {fmt(r['false_speaking'])} ({r['other']})"
    )
    none = "- | -"
    rows = [("text as written (`original`)", rates(a["text:original"]), none)]
    rows.append(
        (
            "text, recognizer rendering",
            rates(a["text:recognizer"]),
            rates(a["rule:explicit-address"]),
        )
    )
    rows += [
        (
            f"voice: {label(c)}",
            rates(res["conditions"][c]["address"]),
            rates(res["conditions"][c]["rule:explicit-address"]),
        )
        for c in conds
    ]
    rows.append(
        ("previous-speaker rule in the agent's place", rates(a["rule:previous-speaker"]), none)
    )
    for name, agent, rule in rows:
        out.append(f"| {name} | {agent} | {rule} |")
    out += [
        "",
        "| end of speech → decision (ms), p50 / p95 | total | VAD wait (audio) | recognition "
        "| decision | load average |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in conds:
        f = res["conditions"][c]
        lat = f["latency_ms"]
        cell = lambda k, lat=lat: f"{ms(lat[k]['p50'])} / {ms(lat[k]['p95'])}"  # noqa: E731
        load = "–".join(str(x) for x in f.get("load_average", []))
        out.append(
            f"| {label(c)} | {cell('total')} | {cell('vad')} | {cell('recognition')} "
            f"| {cell('decision')} | {load} |"
        )
    return "\n".join(out + option_tables(res))


def precision(a: dict[str, Any]) -> str:
    """Of the lines after which the agent spoke, the share addressed to it (from the rates
    and their counts)."""
    if a["address_recall"] is None or a["false_speaking"] is None:
        return "-"
    right = a["address_recall"] * a["addressed"]
    spoke = right + a["false_speaking"] * a["other"]
    return "-" if spoke == 0 else f"{100 * right / spoke:.1f}"


def option_tables(res: dict[str, Any]) -> list[str]:
    """The runs with options (``--vad-stop-secs``, ``--word-confidence``, ``--barge-in``)
    beside the plain run of the same condition."""
    from polylogue.adapters.voice.meeting import VAD_STOP_S

    runs = res["conditions"]
    out: list[str] = []
    ms = lambda x: "-" if x is None else f"{x:.0f}"  # noqa: E731
    pct = lambda x: "-" if x is None else f"{x}"  # noqa: E731
    for cond in CONDITIONS:
        vad = [(VAD_STOP_S, cond)] if cond in runs else []
        vad += [
            (float(m.group(1)), k)
            for k in runs
            if (m := re.fullmatch(re.escape(cond) + r" \[vad ([0-9.]+)\]", k))
        ]
        if len(vad) > 1:
            out += [
                "",
                f"| VAD stop (s), {cond} | end of speech → decision p50 / p95 (ms) | VAD wait "
                "(audio) p50 / p95 (ms) | recognition p50 / p95 (ms) | segments per line "
                "| lines cut in two or more % | WER % | address recall % | false speaking % "
                "| load average |",
                "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for stop, k in sorted(vad):
                f = runs[k]
                lat, a = f["latency_ms"], f["address"]
                load = "–".join(str(x) for x in f.get("load_average", []))
                out.append(
                    f"| {stop:g} | {ms(lat['total']['p50'])} / {ms(lat['total']['p95'])} "
                    f"| {ms(lat['vad']['p50'])} / {ms(lat['vad']['p95'])} "
                    f"| {ms(lat['recognition']['p50'])} / {ms(lat['recognition']['p95'])} "
                    f"| {f.get('segments_per_line', '-')} | {f.get('lines_cut', '-')} "
                    f"| {f['wer']} | {pct(a['address_recall'])} | {pct(a['false_speaking'])} "
                    f"| {load} |"
                )
        conf = f"{cond} [confidences]"
        if cond in runs and conf in runs:
            out += [
                "",
                f"| {cond}: the verdict reads | WER % | name recall | address recall % "
                "| false speaking % | precision % |",
                "|---|---:|---:|---:|---:|---:|",
            ]
            for label, k in (("the words", cond), ("the words and their confidences", conf)):
                f = runs[k]
                a = f["address"]
                out.append(
                    f"| {label} | {f['wer']} | {f['names']['recall']} "
                    f"| {pct(a['address_recall'])} ({a['addressed']}) "
                    f"| {pct(a['false_speaking'])} ({a['other']}) | {precision(a)} |"
                )
        for k in runs:
            if not (k.startswith(cond + " [") and "barge-in" in k):
                continue
            b = runs[k]["barge_ins"]
            turn, back = b["turn"], b["backchannel"]
            right = turn["stopped"] + back["barge_ins"] - back["stopped"]
            n = turn["barge_ins"] + back["barge_ins"]
            out += [
                "",
                f"| {k}: who decides | barge-ins | on a real turn: stopped | on a backchannel: "
                "stopped | right decisions |",
                "|---|---:|---:|---:|---:|",
                f"| the barge-in model | {n} | {turn['stopped']} of {turn['barge_ins']} "
                f"| {back['stopped']} of {back['barge_ins']} | {right} of {n} |",
                f"| always stop | {n} | {turn['barge_ins']} of {turn['barge_ins']} "
                f"| {back['barge_ins']} of {back['barge_ins']} | {turn['barge_ins']} of {n} |",
            ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="A voice meeting end to end (see the docstring).")
    ap.add_argument("--out", help="write the figures as JSON here (kept per condition)")
    ap.add_argument(
        "--recognition-cache",
        help="keep recognitions here by audio: a rerun on the same audio reuses the words "
        "and the decode times measured when they were made (the decisions are remade)",
    )
    ap.add_argument("--conditions", help=f"comma-separated, of: {', '.join(CONDITIONS)}")
    ap.add_argument(
        "--vad-stop-secs",
        type=float,
        help="the VAD's stop time (default: the example's); kept as its own condition",
    )
    ap.add_argument(
        "--barge-in",
        type=float,
        metavar="S",
        help="the person after each reply starts S seconds into it (Room(barge_in_s=S)): the "
        "barge-in model's stop/continue decisions are counted against the line's kind",
    )
    ap.add_argument(
        "--word-confidence",
        action="store_true",
        help="Whisper gives word confidences and the unsure words reach the address verdict",
    )
    ap.add_argument("--tables", help="print the tables of a saved --out file and stop")
    args = ap.parse_args()
    if args.tables:
        print(markdown(json.loads(Path(args.tables).read_text(encoding="utf-8"))))
        return
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    res = run(args)
    print(markdown(res))


if __name__ == "__main__":
    main()
