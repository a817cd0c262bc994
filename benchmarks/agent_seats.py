"""Several agents in one room: the test meetings of real corpora replayed with two or three
of their participants played as agent seats (:mod:`polylogue.engine.seats`).

In each test conversation the most talkative participant stays a person (the chair) and the
next ``k`` most talkative become agent seats (plain seats: no role, the product operating
point); conversations with fewer than ``k + 1`` speakers are skipped. Every real line of a
seat's participant is what that agent says when it speaks (it enters every other seat's
conversation as that agent's utterance); every other line is a person's. At each pause the
room gives every seat's own decision (**independent gates**, the baseline: each agent's own
``LiveConversation``), the **previous-speaker rule** over them (a second baseline: only the
seat whose participant spoke the line before may speak, whatever the words say) and the
arbitrated floor (**one floor**). Counted:

* ``2+ at once``: pauses where two or more agents take the floor;
* ``wrong agent``: of the pauses where the words address exactly one seat, the share another
  seat answers (takes the floor);
* group questions: a person's line with a question mark in the original text that addresses
  nobody; the share answered by exactly one agent (and by two or more), against the real
  room (the next line by another speaker is a seat's participant's);
* ``wrong agent (labels)``: the same, where the corpus's own addressee label (AMI's dialogue
  annotation, a few Friends lines) names exactly one seat's participant; ``(answered)``: only
  the labelled lines the named participant answered in the real meeting (the next other
  speaker), so that a label naming someone who never took the turn does not count; ``real``:
  the labelled lines where another seat's participant took the next turn in the real meeting
  (how often the room itself "answers by another" by this measure);
* ``past brake``: pauses after an agent's line that ends a run of ``brake`` or more agent
  turns with no person between them (real lines), where an agent still takes the floor;
* time: all seats' decisions at one pause, and the arbitration on top (p50, ms).

Run with the load average printed: timings on a shared machine are noisy.

    python benchmarks/agent_seats.py DIR/ami DIR/icsi DIR/friends --seats 2 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from polylogue.conversation import Conversation, Utterance
from polylogue.engine.deployment import Action, Deployment
from polylogue.engine.model import domain_of_corpus
from polylogue.engine.seats import DEFAULT_BRAKE, AgentRoom, RoomDecision, SeatError, SeatSpec
from polylogue.rendering import RENDERINGS, render_conversation
from polylogue.turntaking.dataset.load import Benchmark


def test_conversations(folder: Path, split: str) -> tuple[str, list[Conversation]]:
    bench = Benchmark(folder)
    table = pq.read_table(folder / f"{split}.parquet", columns=["conversation_id"])
    ids = sorted({str(x) for x in table.column("conversation_id").to_pylist()})
    convs = bench.conversations
    first = convs[ids[0]]
    return first.corpus, [convs[i] for i in ids]


def seats_of(conv: Conversation, k: int) -> list[str] | None:
    """The 2nd to (k+1)th most talkative participants (the most talkative stays a person)."""
    counts = Counter(u.speaker for u in conv.utterances)
    order = [s for s, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    known = {p.id for p in conv.participants}
    order = [s for s in order if s in known]
    if len(order) < k + 1:
        return None
    return order[1 : k + 1]


def _speak(actions: dict[str, Action | None]) -> list[str]:
    return [s for s, a in actions.items() if a is Action.SPEAK]


def replay(
    conv: Conversation,
    rendered: Conversation,
    seat_ids: list[str],
    dep: Deployment,
    domain: str | None,
    brake: int,
    tally: Counter[str],
    times: dict[str, list[float]],
) -> None:
    people = [p for p in conv.participants if p.id not in seat_ids]
    seats = [SeatSpec(p.id, p.name, p.aliases) for p in conv.participants if p.id in seat_ids]
    room = AgentRoom.start(people, seats, model=dep.model, brake=brake, domain=domain)
    orig, said = conv.utterances, rendered.utterances
    before: str | None = None  # the speaker of the line before another speaker's
    last: str | None = None
    for i, (o, u) in enumerate(zip(orig, said, strict=True)):
        rd: RoomDecision = room.utterance(Utterance(u.speaker, u.text, u.start, u.end))
        if u.speaker != last:
            before, last = last, u.speaker
        if all(d.action is None for d in rd.decisions.values()):
            continue
        tally["pauses"] += 1
        times["decide"].append(rd.decide_s)
        times["arbitrate"].append(rd.arbitrate_s)
        indep = _speak({s: d.action for s, d in rd.decisions.items()})
        arb = _speak(rd.arbitration.actions)
        # The previous-speaker rule: the line is for whoever spoke before it.
        prev = [s for s in indep if s == before]
        tally["collide_indep"] += len(indep) >= 2
        tally["collide_arb"] += len(arb) >= 2
        addressed = [
            s for s, d in rd.decisions.items() if d.engine is not None and d.engine.addressed
        ]
        if len(addressed) == 1 and u.speaker not in seat_ids:
            tally["addr_one"] += 1
            tally["wrong_indep"] += any(s != addressed[0] for s in indep)
            tally["wrong_prev"] += any(s != addressed[0] for s in prev)
            tally["wrong_arb"] += any(s != addressed[0] for s in arb)
        gold = o.addressees or ()
        if len(gold) == 1 and gold[0] in seat_ids and u.speaker not in seat_ids:
            # the corpus's own addressee label: a line to exactly one seat's participant
            tally["gold_one"] += 1
            nxt = next((w.speaker for w in orig[i + 1 :] if w.speaker != o.speaker), None)
            answered = nxt == gold[0]
            for name, who in (("indep", indep), ("prev", prev), ("arb", arb)):
                wrong = any(s != gold[0] for s in who)
                tally[f"gold_wrong_{name}"] += wrong
                tally[f"gold_answered_wrong_{name}"] += wrong and answered
            tally["gold_answered"] += answered
            # the real room: another seat's participant took the next turn
            tally["gold_wrong_real"] += nxt in seat_ids and nxt != gold[0]
        if u.speaker in seat_ids and room.agent_run >= brake:
            tally["at_brake"] += 1
            tally["past_brake_indep"] += bool(indep)
            tally["past_brake_arb"] += bool(arb)
        engine = next((d.engine for d in rd.decisions.values() if d.engine is not None), None)
        group = (
            u.speaker not in seat_ids
            and "?" in o.text
            and engine is not None
            and not engine.address.addressed
        )
        if group:
            tally["group_q"] += 1
            nxt = next((w.speaker for w in orig[i + 1 :] if w.speaker != o.speaker), None)
            tally["group_real_one"] += nxt in seat_ids
            tally["group_indep_one"] += len(indep) == 1
            tally["group_indep_many"] += len(indep) >= 2
            tally["group_prev_one"] += len(prev) == 1
            tally["group_arb_one"] += len(arb) == 1


def _pct(a: int, b: int) -> str:
    return "n/a" if not b else f"{100 * a / b:.1f}%"


def _three(c: Counter[str], key: str, of: str) -> str:
    """Gates / previous-speaker rule / floor shares of ``c[of]``."""
    shares = " / ".join(_pct(c[f"{key}_{n}"], c[of]) for n in ("indep", "prev", "arb"))
    return f"{shares} (of {c[of]})"


def _ms(xs: list[float]) -> float:
    return round(1000 * statistics.median(xs), 3) if xs else float("nan")


def run(folder: Path, split: str, k: int, rendering: str, brake: int) -> dict[str, Any]:
    corpus, convs = test_conversations(folder, split)
    domain = domain_of_corpus(corpus)
    dep = Deployment.resolve(domain=domain)
    tally: Counter[str] = Counter()
    times: dict[str, list[float]] = {"decide": [], "arbitrate": []}
    used = 0
    for conv in convs:
        seat_ids = seats_of(conv, k)
        if seat_ids is None:
            continue
        try:
            replay(
                conv,
                render_conversation(conv, rendering),
                seat_ids,
                dep,
                domain,
                brake,
                tally,
                times,
            )
        except SeatError:
            # A seat that shares a name with a person (two "Joey"s): a room refuses it.
            tally["skipped_name_clash"] += 1
            continue
        used += 1
    return {
        "corpus": corpus,
        "split": split,
        "seats": k,
        "rendering": rendering,
        "conversations": used,
        "counts": dict(tally),
        "decide_ms_p50": _ms(times["decide"]),
        "arbitrate_ms_p50": _ms(times["arbitrate"]),
    }


def markdown(results: list[dict[str, Any]], brake: int) -> str:
    head = (
        "| corpus | seats | rendering | convs | pauses | 2+ at once: gates / floor "
        "| wrong agent: gates / prev / floor | group q "
        "| one agent: real / gates / prev / floor | 2+ agents: gates "
        "| past brake: gates / floor | wrong agent (labels): real / gates / prev / floor "
        "| (labels, answered): gates / prev / floor | decide ms p50 | arbitrate ms p50 |"
    )
    lines = [head, "|" + "---|" * 15]
    for r in results:
        c = Counter(r["counts"])
        lines.append(
            f"| {r['corpus']} | {r['seats']} | {r['rendering']} | {r['conversations']} "
            f"| {c['pauses']} | {c['collide_indep']} / {c['collide_arb']} "
            f"| {_three(c, 'wrong', 'addr_one')} | {c['group_q']} "
            f"| {_pct(c['group_real_one'], c['group_q'])} / "
            f"{_pct(c['group_indep_one'], c['group_q'])} / "
            f"{_pct(c['group_prev_one'], c['group_q'])} / {_pct(c['group_arb_one'], c['group_q'])}"
            f" | {_pct(c['group_indep_many'], c['group_q'])} "
            f"| {c['past_brake_indep']} / {c['past_brake_arb']} (of {c['at_brake']}) "
            f"| {_pct(c['gold_wrong_real'], c['gold_one'])} / "
            f"{_three(c, 'gold_wrong', 'gold_one')} "
            f"| {_three(c, 'gold_answered_wrong', 'gold_answered')} "
            f"| {r['decide_ms_p50']} | {r['arbitrate_ms_p50']} |"
        )
    splits = ", ".join(sorted({r["split"] for r in results}))
    return "\n".join(lines) + f"\n\nSplit: {splits}. Loop brake after {brake} agent turns.\n"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("benchmarks", nargs="+", type=Path, help="benchmark folders (polylogue build)")
    ap.add_argument("--split", default="test")
    ap.add_argument("--seats", nargs="+", type=int, default=[2, 3])
    ap.add_argument("--renderings", nargs="+", choices=RENDERINGS, default=list(RENDERINGS))
    ap.add_argument("--brake", type=int, default=DEFAULT_BRAKE)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    load = os.getloadavg()
    results = []
    for folder in args.benchmarks:
        for k in args.seats:
            for rendering in args.renderings:
                results.append(run(folder, args.split, k, rendering, args.brake))
                print(json.dumps(results[-1]), flush=True)
    print()
    print(markdown(results, args.brake))
    end = os.getloadavg()
    print(f"load average at start {load[0]:.2f}, at end {end[0]:.2f} (1 min)")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "load": [load, end]}, indent=2))


if __name__ == "__main__":
    main()
