"""Write ``corpus.jsonl``: conformance scenarios cut from real lines of the shared corpora.

    python tests/scenarios/corpus_lines.py BENCH_DIR

``BENCH_DIR`` holds the benchmarks ``polylogue build -c CORPUS -o BENCH_DIR/CORPUS`` wrote for
ami, friends, icsi and earnings21 (the default build options). Each scenario is the last
lines before one decision point (point ids below, chosen by reading them), the point's target
as the agent and the people present at the pause as the roster. The address verdict of each
pick is the reader's, not the benchmark's, and every pick of a line that names the agent is
paired with a bystander of the same moment (someone present who is neither the speaker, the
one addressed nor the last speaker): the same words, addressed to someone else.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from polylogue.conversation import Participant
from polylogue.turntaking.dataset import load_benchmark
from polylogue.turntaking.types import DecisionPoint

HERE = Path(__file__).resolve().parent
KIND = {"ami": "meeting", "icsi": "meeting", "friends": "tv", "earnings21": "call"}
DOMAIN = {"ami": "meeting", "icsi": "meeting", "friends": "tv", "earnings21": "earnings"}
#: Context lines before the decision point's own line.
CONTEXT = 5
#: Earlier lines of a call are cut to their last characters (prepared remarks run for pages).
MAX_CONTEXT_CHARS = 400

# (point id, shape, paired bystander?) -- point ids are "conversation:index:target".
ADDRESSED: list[tuple[str, str, bool]] = [
    # Friends: a character named as a vocative, and the line puts the turn to them.
    ("friends_s10e18c06:7:Rachel Green", "vocative-start", True),
    ("friends_s07e16c10:5:Rachel Green", "vocative-start", True),
    ("friends_s01e09c08:19:Phoebe Buffay", "vocative-middle", True),
    ("friends_s02e01c05:1:Phoebe Buffay", "vocative-alias", True),
    ("friends_s07e23c03:19:Joey Tribbiani", "vocative-middle", True),
    ("friends_s07e05c08:10:Ross Geller", "vocative-after-greeting", True),
    ("friends_s04e14c02:9:Rachel Green", "vocative-start", True),
    ("friends_s04e06c02:36:Joey Tribbiani", "vocative-alias", True),
    ("friends_s02e08c03:26:Julie", "vocative-after-filler", True),
    ("friends_s08e02c06:1:Joey Tribbiani", "vocative-middle", True),
    ("friends_s08e20c08:8:Joey Tribbiani", "vocative-after-filler", True),
    ("friends_s06e21c09:14:Ross Geller", "vocative-start", True),
    ("friends_s10e14c05:28:Rachel Green", "vocative-alias", True),
    ("friends_s02e11c06:33:Monica Geller", "vocative-start", True),
    ("friends_s08e14c13:8:Phoebe Buffay", "vocative-after-filler", True),
    ("friends_s10e17c04:16:Phoebe Buffay", "vocative-start", True),
    ("friends_s04e24c03:4:Joey Tribbiani", "vocative-start", True),
    ("friends_s01e12c04:13:Ross Geller", "vocative-end", True),
    ("friends_s10e11c09:39:Ross Geller", "vocative-middle", True),
    ("friends_s01e21c01:7:Ross Geller", "vocative-middle", True),
    # Earnings-21: management and analysts name each other.
    ("earnings21_4346923:49:11", "vocative-after-greeting", True),
    ("earnings21_4360366:28:4", "vocative-after-thanks", True),
    ("earnings21_4384964:16:7", "vocative-middle", True),
    ("earnings21_4360674:24:5", "vocative-after-filler", True),
    ("earnings21_4359971:22:5", "vocative-end", True),
    ("earnings21_4366302:34:5", "vocative-start", True),
    ("earnings21_4360366:37:10", "vocative-end", True),
    ("earnings21_4397800:12:5", "vocative-after-greeting", False),  # bystander "Cherry"
    ("earnings21_4364366:71:2", "vocative-start", True),
    ("earnings21_4346923:15:7", "vocative-start", True),
    ("earnings21_4365948:8:4", "vocative-end", True),
    # AMI (annotated addressee) and ICSI: a "you" question right after the agent spoke.
    ("IS1001a:38:B", "follow-up-you", False),
    ("TS3005a:204:D", "follow-up-you", False),
    ("IS1008a:245:A", "follow-up-you", False),
    ("IS1001c:534:C", "follow-up-you", False),
    ("IS1003b:640:C", "follow-up-you", False),
    ("IS1008d:245:D", "follow-up-you", False),
    ("IS1008c:100:C", "follow-up-you", False),
    ("TS3005b:615:D", "follow-up-you", False),
    ("Bro017:414:PhD E", "follow-up-you", False),
    ("Bro016:220:PhD B", "follow-up-you", False),
    ("Buw001:1098:Professor A", "follow-up-you", False),
    ("Bro003:1000:Grad C", "follow-up-you", False),
    ("Bmr003:456:Postdoc E", "follow-up-you", False),
    ("Bed013:795:Grad D", "follow-up-you", False),
]

NOT_ADDRESSED: list[tuple[str, str]] = [
    # Friends: the agent is talked about, not to.
    ("friends_s05e09c12:23:Monica Geller", "third-person"),
    ("friends_s05e08c06:7:Joey Tribbiani", "third-person"),
    ("friends_s04e24c20:27:Monica Geller", "third-person"),
    ("friends_s06e02c01:10:Rachel Green", "third-person"),
    ("friends_s01e11c09:24:Phoebe Buffay", "third-person"),
    ("friends_s02e16c14:19:Phoebe Buffay", "third-person"),
    ("friends_s01e07c10:17:Ross Geller", "third-person"),
    ("friends_s10e04c03:144:Rachel Green", "third-person"),
    ("friends_s03e05c11:7:Chandler Bing", "third-person"),
    ("friends_s06e22c07:10:Paul Stevens", "third-person"),
    # AMI and ICSI: a "you" question put to the one who just spoke (not the agent).
    ("ES2011a:134:D", "question-to-previous-speaker"),
    ("TS3012d:221:D", "question-to-previous-speaker"),
    ("IS1004b:436:D", "question-to-previous-speaker"),
    ("TS3009d:711:C", "question-to-previous-speaker"),
    ("ES2003d:703:D", "question-to-previous-speaker"),
    ("Bed014:643:Professor C", "question-to-previous-speaker"),
    ("Bro025:407:PhD E", "question-to-previous-speaker"),
    ("Buw001:1098:PhD B", "question-to-previous-speaker"),
    ("Bmr025:193:PhD G", "question-to-previous-speaker"),
]


def _corpus_of(point_id: str) -> str:
    if point_id.startswith("friends_"):
        return "friends"
    if point_id.startswith("earnings21_"):
        return "earnings21"
    return "icsi" if point_id[:1] == "B" else "ami"


def _names(p: Participant) -> list[str]:
    return [x for x in (p.name, *p.aliases) if x]


def _named(text: str, p: Participant) -> bool:
    return any(re.search(rf"\b{re.escape(x)}\b", text, re.I) for x in _names(p))


def _participant(p: Participant) -> dict:
    out: dict = {"id": p.id}
    if p.name:
        out["name"] = p.name
    if p.role:
        out["role"] = p.role
    if p.aliases:
        out["aliases"] = list(p.aliases)
    return out


def _scenario(point: DecisionPoint, agent: Participant, addressed: bool, shape: str) -> dict:
    corpus = point.input.corpus
    ctx = list(point.input.context)[-(CONTEXT + 1) :]
    first = point.index - len(ctx) + 1
    lines = []
    for i, u in enumerate(ctx):
        text = u.text
        if i < len(ctx) - 1 and len(text) > MAX_CONTEXT_CHARS:
            text = "..." + text[-MAX_CONTEXT_CHARS:].split(" ", 1)[-1]
        lines.append({"speaker": u.speaker, "text": text})
    speakers = {u["speaker"] for u in lines}
    roster = {p.id: p for p in point.input.present}
    roster.setdefault(agent.id, agent)
    people = [roster[k] for k in sorted(roster)]
    missing = speakers - set(roster)
    people += [Participant(s) for s in sorted(missing)]
    slug = re.sub(
        r"[^a-z0-9]+", "-", f"{point.input.conversation_id}-{point.index}-{agent.id}".lower()
    )
    return {
        "id": slug.strip("-"),
        "kind": KIND[corpus],
        "domain": DOMAIN[corpus],
        "source": {
            "corpus": corpus,
            "conversation": point.input.conversation_id,
            "utterances": [first, point.index],
        },
        "agent": agent.id,
        "participants": [_participant(p) for p in people],
        "lines": lines,
        "addressed": addressed,
        "shape": shape,
    }


def _bystander(point: DecisionPoint) -> Participant | None:
    ctx = point.input.context
    cur = ctx[-1]
    recent = {u.speaker for u in ctx[-3:]}
    spoke = [u.speaker for u in ctx[-(CONTEXT + 1) :]]
    for p in sorted(point.input.present, key=lambda q: (q.id not in spoke, q.id)):
        if p.id in recent or p.id == point.input.target.id or _named(cur.text, p):
            continue
        if not _names(p):  # nameless roster entries say nothing about the words
            continue
        return p
    return None


def main() -> None:
    bench = Path(sys.argv[1])
    wanted = {pid for pid, *_ in ADDRESSED} | {pid for pid, _ in NOT_ADDRESSED}
    found: dict[str, DecisionPoint] = {}
    for corpus in ("friends", "earnings21", "ami", "icsi"):
        b = load_benchmark(bench / corpus)
        for split in ("train", "validation", "test"):
            for p in b.points(split):
                if p.point_id in wanted:
                    found[p.point_id] = p
    missing = sorted(wanted - set(found))
    if missing:
        raise SystemExit(f"points not in the builds: {', '.join(missing)}")
    rows = []
    for pid, shape, pair in ADDRESSED:
        p = found[pid]
        rows.append(_scenario(p, p.input.target, True, shape))
        if pair:
            other = _bystander(p)
            if other is not None:
                rows.append(_scenario(p, other, False, "addressed-to-another"))
    for pid, shape in NOT_ADDRESSED:
        p = found[pid]
        rows.append(_scenario(p, p.input.target, False, shape))
    out = HERE / "corpus.jsonl"
    out.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    n = sum(r["addressed"] for r in rows)
    print(f"wrote {out}: {n} addressed, {len(rows) - n} not addressed")


if __name__ == "__main__":
    main()
