"""Is the agent addressed? The address verdict and the agent's actions on written probes.

    .venv/bin/python benchmarks/address_probe.py benchmarks/probes/address_dev.jsonl \
        [benchmarks/probes/address_test.jsonl] [--json out.json]

Each probe line is a short conversation in a speech recognizer's style (lower case, no
punctuation) ending at a decision point, with whom its last line addresses (the format is in
``benchmarks/probes/README.md``). Every scenario runs through a real
:class:`polylogue.engine.live.LiveConversation` (what ``decide``, ``serve`` and both adapters
run) for the ``assistant`` role, the default operating point and ``polite``, once with the
shipped address model and once with the rulebook alone (``address_model=None``: the verdict
as it was before the model). Printed per probe and reading:

* **verdict recall**: the agent is among the verdict's addressees where the probe says it is
  addressed; **verdict false address**: it is among them where the probe says it is not;
* per role/point: **recall** = SPEAK where addressed; **false speaking** = SPEAK where not
  addressed (for the default and ``polite`` this also counts an open floor taken, which they
  may do; the assistant may not);
* **two-person** scenarios apart, also with ``--audience adaptive``;
* **names heard by sound**: of the scenarios whose last line spells a roster name as a
  recognizer misheard it, the share where the verdict finds the right person; and **false
  merges**: verdict entries (addressed or mentioned) of a participant whose name is not
  spelt in the words and who is not the one the line is about, over all scenarios;
* the simplest baseline beside it: **previous speaker** (SPEAK when the agent held the turn
  before the last speaker's) and **name in the words** (SPEAK when any of the agent's names is
  spelt in the last line);
* the verdict's time per utterance (p50, p99 over every line, one core).

Never tune on the test probe: run it only to report (see the probes' README).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polylogue.conversation import Participant, Utterance
from polylogue.engine.deployment import Action, Deployment
from polylogue.engine.live import LiveConversation
from polylogue.turntaking.address import NameTerms, PriorTurn, address_verdict, words_of
from polylogue.turntaking.cues import participant_terms

CONFIGS: dict[str, dict[str, Any]] = {
    "assistant": {"role": "assistant"},
    "default": {},
    "polite": {"operating_point": "polite"},
}
READINGS = ("model", "rules")


@dataclass(frozen=True)
class Scenario:
    id: str
    domain: str
    agent: str
    participants: tuple[Participant, ...]
    lines: tuple[Utterance, ...]
    addressed: bool
    addressees: tuple[str, ...]
    shape: str
    two_person: bool
    misheard: dict[str, str] | None


def read_probe(path: Path) -> list[Scenario]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            out.append(
                Scenario(
                    id=r["id"],
                    domain=r.get("domain") or "meeting",
                    agent=r["agent"],
                    participants=tuple(
                        Participant(
                            p["id"], p.get("name"), p.get("role"), tuple(p.get("aliases", ()))
                        )
                        for p in r["participants"]
                    ),
                    lines=tuple(Utterance(x["speaker"], x["text"]) for x in r["lines"]),
                    addressed=bool(r["addressed"]),
                    addressees=tuple(r.get("addressees") or ()),
                    shape=r.get("shape", ""),
                    two_person=bool(r.get("two_person")),
                    misheard=r.get("misheard"),
                )
            )
        except (KeyError, TypeError, ValueError) as e:
            raise SystemExit(f"{path}:{n}: not a probe record ({e})") from None
    return out


@dataclass
class Run:
    """One scenario through one live conversation: the last line's action and verdict."""

    action: Action | None
    addressed: tuple[str, ...]
    mentioned: tuple[str, ...]
    #: Participants the verdict found by a name in the words (not by "you" or the room).
    by_name: tuple[str, ...] = ()


_DEPLOYMENTS: dict[tuple[str, str], Deployment] = {}


def _deployment(domain: str, config: str) -> Deployment:
    key = (domain, config)
    if key not in _DEPLOYMENTS:
        _DEPLOYMENTS[key] = Deployment.resolve(domain=domain, **CONFIGS[config])
    return _DEPLOYMENTS[key]


def run(s: Scenario, config: str, reading: str, audience: str = "group") -> Run:
    live = LiveConversation.start(s.agent, s.participants, deployment=_deployment(s.domain, config))
    live.set_audience(audience)
    live.engine.state.address_model = "shipped" if reading == "model" else None
    d = None
    for u in s.lines:
        d = live.utterance(u)
    assert d is not None
    v = live.engine.state.verdict()
    named = tuple(a.pid for a in (*v.addressed, *v.mentioned) if a.kind not in _NOT_BY_NAME)
    return Run(d.action, v.addressees, tuple(a.pid for a in v.mentioned), named)


#: Verdict kinds that name nobody: a false merge is only counted among the others.
_NOT_BY_NAME = frozenset({"earlier-in-turn", "follow-up", "you-after", "dyad-question"})


def _spelt(p: Participant, words: Sequence[str]) -> bool:
    """Is one of ``p``'s names or roles spelt in the words (a possessive too)?"""
    text = " " + " ".join(w[:-2] if w.endswith("'s") else w for w in words) + " "
    names, roles = participant_terms(p)
    return any(f" {' '.join(words_of(t))} " in text for t in (*names, *roles) if words_of(t))


def previous_speaker_speaks(s: Scenario) -> bool:
    """The previous-speaker rule: the agent held the turn before the last speaker's."""
    last = s.lines[-1].speaker
    for u in reversed(s.lines[:-1]):
        if u.speaker != last:
            return u.speaker == s.agent
    return False


def rate(hits: int, n: int) -> float | None:
    return None if n == 0 else round(hits / n, 3)


def rates(speak: Sequence[bool], scenarios: Sequence[Scenario]) -> dict[str, float | None]:
    """Recall where addressed, false speaking where not, the speak rate and precision."""
    pairs = list(zip(speak, scenarios, strict=True))
    hit = sum(k for k, s in pairs if s.addressed)
    false = sum(k for k, s in pairs if not s.addressed)
    return {
        "recall": rate(hit, sum(s.addressed for s in scenarios)),
        "false_speaking": rate(false, sum(not s.addressed for s in scenarios)),
        "speak_rate": rate(sum(speak), len(scenarios)),
        "precision": rate(hit, sum(speak)),
    }


def evaluate(
    scenarios: Sequence[Scenario], readings: Sequence[str] = READINGS, latency: bool = True
) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(scenarios), "addressed": sum(s.addressed for s in scenarios)}
    for reading in readings:
        runs = {c: [run(s, c, reading) for s in scenarios] for c in CONFIGS}
        verdicts = runs["assistant"]
        r: dict[str, Any] = {}
        agent_in = rates(
            [s.agent in v.addressed for s, v in zip(scenarios, verdicts, strict=True)], scenarios
        )
        r["verdict_recall"] = agent_in["recall"]
        r["verdict_false_address"] = agent_in["false_speaking"]
        for c in CONFIGS:
            r[c] = rates([x.action is Action.SPEAK for x in runs[c]], scenarios)
        two = [s for s in scenarios if s.two_person]
        for audience in ("group", "adaptive"):
            acts = [run(s, "assistant", reading, audience).action is Action.SPEAK for s in two]
            r[f"two_person_{audience}"] = {"n": len(two), **rates(acts, two)}
        heard = [
            (s, v) for s, v in zip(scenarios, verdicts, strict=True) if s.misheard and s.addressed
        ]
        r["misheard_found"] = rate(sum(s.agent in v.addressed for s, v in heard), len(heard))
        r["misheard_n"] = len(heard)
        merges = 0
        for s, v in zip(scenarios, verdicts, strict=True):
            words = words_of(s.lines[-1].text)
            people = {p.id: p for p in s.participants}
            for pid in v.by_name:
                if pid in people and not _spelt(people[pid], words) and pid not in s.addressees:
                    merges += 1
        r["false_merges"] = merges
        r["false_merge_rate"] = rate(merges, len(scenarios))
        by_shape: dict[str, list[bool]] = defaultdict(list)
        for s, x in zip(scenarios, runs["assistant"], strict=True):
            by_shape[f"{'+' if s.addressed else '-'}{s.shape}"].append(
                (x.action is Action.SPEAK) == s.addressed
            )
        r["assistant_right_by_shape"] = {
            k: f"{sum(v)}/{len(v)}" for k, v in sorted(by_shape.items())
        }
        out[reading] = r
    out["previous_speaker"] = rates([previous_speaker_speaks(s) for s in scenarios], scenarios)
    out["name_in_words"] = rates(
        [
            _spelt(next(p for p in s.participants if p.id == s.agent), words_of(s.lines[-1].text))
            for s in scenarios
        ],
        scenarios,
    )
    if latency:
        out["verdict_latency_ms"] = verdict_latency(scenarios)
    return out


def verdict_latency(scenarios: Sequence[Scenario]) -> dict[str, float]:
    """The verdict's time per utterance over every line of the probe (model on)."""
    from polylogue.turntaking.address_model import load_address_model

    load_address_model()  # loaded once, outside the timing
    times, cpu = [], []
    for s in scenarios:
        names = NameTerms(s.participants)
        prev: str | None = None
        for u in s.lines:
            t0, c0 = time.perf_counter(), time.thread_time()
            address_verdict(
                u.text, u.speaker, names, PriorTurn(speaker=prev, people=len(s.participants))
            )
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.thread_time() - c0) * 1000)
            prev = u.speaker
    times.sort()
    cpu.sort()
    # CPU time leaves out the waits for a core that inflate wall time on a busy machine.
    return {
        "p50": round(statistics.median(times), 3),
        "p99": round(times[int(0.99 * (len(times) - 1))], 3),
        "cpu_p50": round(statistics.median(cpu), 3),
        "cpu_p99": round(cpu[int(0.99 * (len(cpu) - 1))], 3),
        "n": len(times),
        "load_average": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("probes", nargs="+", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--readings", nargs="+", choices=READINGS, default=list(READINGS))
    ap.add_argument("--no-latency", action="store_true", help="skip the verdict's timing")
    args = ap.parse_args(argv)
    results = {}
    for path in args.probes:
        scenarios = read_probe(path)
        results[path.name] = evaluate(scenarios, args.readings, not args.no_latency)
        print(f"== {path.name}")
        print(json.dumps(results[path.name], indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
