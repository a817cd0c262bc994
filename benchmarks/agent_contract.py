"""The agent contract measured: every role and operating point, both renderings, four corpora.

    nice .venv/bin/python benchmarks/agent_contract.py BENCH/ami BENCH/friends BENCH/icsi \
        BENCH/earnings21 [--split test] [--json docs/results/agent_contract.json] \
        [--markdown out.md]

``BENCH/CORPUS`` is a benchmark ``polylogue build -c CORPUS -o BENCH/CORPUS`` wrote (default
options; build them once under /tmp, they are not part of the repository). For each corpus,
in each rendering of its words (``original``; ``recognizer``: ``polylogue.rendering``, lower
case and no punctuation, as streaming speech-to-text writes), the corpus's deployment domain
is applied with every role and point (the same ``Deployment.resolve`` and ``choose`` that
``decide``, ``serve`` and the adapters use) to the shipped model's probabilities on the words
of that rendering. Per role and point:

* speak ratio: predicted SPEAK rate / real TAKE_FLOOR rate (1.0: speaks as often as people);
* precision: the share of its SPEAKs where the person did take the floor;
* I1 recall: SPEAK among the points where the target was individually addressed and answered;
* recall of an address in the words: SPEAK among the points whose gold address is a spoken
  name or role ("Dave, ...", "marketing expert, ..."; gold evidence ``vocative`` or
  ``role``), answered or not;
* false speaking when not addressed: SPEAK among the points whose target nobody addressed;
* false interjections per 10 minutes of one listener's conversation (timed corpora);
* false interruptions (SPEAK among the pauses where the person stayed silent), missed turns
  (SILENT among their floor takes), and the backchannel suggestions' rate ratio and precision.

Beside them, the same figures for the previous-speaker rule (speak iff the target held the
floor just before) and the explicit-address rule (speak iff the words address the target),
on the same rendering. The observer never speaks; what it would do is the ``matched`` row.

Last, the run-time role check: for every pair of roles (none, observer, assistant,
facilitator), a deployment created with one and switched to the other
(``Deployment.with_role``) against one created with the second: thresholds, point, address
gate and whether it speaks must be equal.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _agent_common import render_points, score_split

from polylogue.engine.deployment import ROLES, Action, Deployment
from polylogue.engine.model import domain_of_corpus
from polylogue.evaluation.metrics import agent_metrics, backchannel_metrics, listener_minutes
from polylogue.models.baselines import ExplicitAddressBaseline
from polylogue.rendering import RENDERINGS
from polylogue.turntaking.dataset import load_benchmark
from polylogue.turntaking.types import Decision, DecisionPoint

#: The roles and points measured, as deployment options (no role: the point itself).
CONFIGS: dict[str, dict[str, str]] = {
    "matched (default)": {"operating_point": "matched"},
    "balanced": {"operating_point": "balanced"},
    "polite": {"operating_point": "polite"},
    "addressed-only": {"operating_point": "addressed-only"},
    "assistant": {"role": "assistant"},
    "facilitator": {"role": "facilitator"},
}
#: Gold address evidence that is in the words themselves.
WORD_EVIDENCE = ("vocative", "role")
#: Issue targets: recall of an address in the words, and the assistant's false speaking.
ADDRESS_RECALL = 0.95
ASSISTANT_FALSE_SPEAKING = 0.10


def figures(
    speak: np.ndarray,
    took: np.ndarray,
    categories: Sequence[str],
    in_words: np.ndarray,
    not_addressed: np.ndarray,
    minutes: float | None,
) -> dict[str, Any]:
    m = agent_metrics(took, speak, categories, minutes)
    return {
        "speak_ratio": m["speak_ratio"],
        "precision": m["precision"],
        "false_interruption_rate": m["false_interruption_rate"],
        "missed_turn_rate": m["missed_turn_rate"],
        "i1_recall": m["i1_recall"],
        "n_I1": m["n_I1"],
        "address_in_words_recall": float(speak[in_words].mean()) if in_words.any() else None,
        "n_address_in_words": int(in_words.sum()),
        "false_speaking_not_addressed": (
            float(speak[not_addressed].mean()) if not_addressed.any() else None
        ),
        "false_interjections_per_10min": m.get("false_interjections_per_10min"),
    }


def evaluate(
    points: Sequence[DecisionPoint], rendering: str, address: str = "model"
) -> dict[str, Any]:
    pts = render_points(points, rendering)
    s = score_split(pts, address=address)
    minutes = listener_minutes(
        [p.input.conversation_id for p in pts],
        [p.input.target.id for p in pts],
        [p.gold.pause_time for p in pts],
    )
    in_words = np.asarray(
        [p.gold.addressed and p.gold.address_evidence in WORD_EVIDENCE for p in pts], dtype=bool
    )
    not_addressed = np.asarray([not p.gold.addressed for p in pts], dtype=bool)

    def row(speak: np.ndarray) -> dict[str, Any]:
        return figures(speak, s.took_floor, s.categories, in_words, not_addressed, minutes)

    model: dict[str, Any] = {}
    for name, options in CONFIGS.items():
        dep = Deployment.resolve(
            model=s.model,
            domain=s.domain,
            operating_point=options.get("operating_point"),
            role=options.get("role"),
        )
        acts = s.actions(dep) if dep.speaks else [Action.SILENT] * len(pts)
        speak = np.asarray([a is Action.SPEAK for a in acts], dtype=bool)
        back = np.asarray([a is Action.BACKCHANNEL for a in acts], dtype=bool)
        model[name] = {
            "operating_point": dep.operating_point,
            "take_floor_threshold": dep.take_floor_threshold,
            **row(speak),
            "backchannel": backchannel_metrics(s.backchanneled, back),
        }
    explicit = np.asarray(
        [
            q.decision is Decision.SPEAK
            for q in ExplicitAddressBaseline().predict([p.input for p in pts])
        ],
        dtype=bool,
    )
    return {
        "rendering": rendering,
        "real_take_floor_rate": float(s.took_floor.mean()),
        "model": model,
        "baselines": {
            "previous-speaker": row(s.previous_speaker),
            "explicit-address": row(explicit),
        },
    }


def role_transitions(domains: Sequence[str | None]) -> dict[str, Any]:
    """Created with one role and switched to another, against created with the second."""
    roles: list[str | None] = [None, *ROLES]
    checked, differ = 0, []
    for domain in domains:
        for first in roles:
            start = Deployment.resolve(domain=domain, role=first)
            for second in roles:
                got, want = start.with_role(second), Deployment.resolve(domain=domain, role=second)
                checked += 1
                keys = ("operating_point", "thresholds", "addressed_only", "speaks", "role")
                if any(getattr(got, k) != getattr(want, k) for k in keys):
                    differ.append(
                        {
                            "domain": domain,
                            "from": first,
                            "to": second,
                            "got": got.operating_point,
                            "want": want.operating_point,
                        }
                    )
    return {"checked": checked, "equal": checked - len(differ), "differ": differ}


def _p(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def _n(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def markdown(results: Sequence[dict[str, Any]], split: str, command: str) -> str:
    lines = [
        f"Split `{split}`, natural class ratios; regenerate with `{command}`. Speak ratio = "
        "predicted SPEAK rate / real TAKE_FLOOR rate; the other rates in %; BC: backchannel "
        "suggestions (rate against the real BACKCHANNEL rate, precision).",
        "",
    ]
    head = (
        "| who (point, floor thr.) | speak ratio | precision | false interr. | missed turns "
        "| I1 recall (n) | address in words: recall (n) | false speaking, not addressed "
        "| false interj./10 min | BC rate ratio | BC precision |"
    )
    for r in results:
        lines += [
            f"**{r['corpus']}** ({r['domain']}; {r['points']:,} points)",
            "",
        ]
        for e in r["renderings"]:
            lines += [f"*{e['rendering']} rendering*", "", head, "|---|" + "---:|" * 10]
            rows = [
                (f"{k} ({m['operating_point']}, {m['take_floor_threshold']:.2f})", m)
                for k, m in e["model"].items()
            ]
            rows += [(f"baseline: {k}", m) for k, m in e["baselines"].items()]
            for who, m in rows:
                bc = m.get("backchannel") or {}
                lines.append(
                    f"| {who} | {_n(m['speak_ratio'])} | {_p(m['precision'])} "
                    f"| {_p(m['false_interruption_rate'])} | {_p(m['missed_turn_rate'])} "
                    f"| {_p(m['i1_recall'])} ({m['n_I1']}) "
                    f"| {_p(m['address_in_words_recall'])} ({m['n_address_in_words']}) "
                    f"| {_p(m['false_speaking_not_addressed'])} "
                    f"| {_n(m['false_interjections_per_10min'], 1)} "
                    f"| {_n(bc.get('rate_ratio'))} | {_p(bc.get('precision'))} |"
                )
            lines.append("")
    return "\n".join(lines)


def summary(results: Sequence[dict[str, Any]], split: str, command: str) -> str:
    """One row per corpus and rendering: the default point, the assistant, both baselines."""
    lines = [
        f"Split `{split}`; regenerate with `{command}` (its `summary` part). Rates in %; "
        "address recall: SPEAK where the gold address is a spoken name or role.",
        "",
        "| corpus | rendering | default: speak ratio | default: precision | default: I1 recall "
        "| default: address recall | assistant: address recall "
        "| assistant: false speaking, not addressed | previous-speaker: precision "
        "| explicit-address: precision |",
        "|---|---|" + "---:|" * 8,
    ]
    for r in results:
        for e in r["renderings"]:
            d, a = e["model"]["matched (default)"], e["model"]["assistant"]
            b = e["baselines"]
            lines.append(
                f"| {r['corpus']} | {e['rendering']} | {_n(d['speak_ratio'])} "
                f"| {_p(d['precision'])} | {_p(d['i1_recall'])} "
                f"| {_p(d['address_in_words_recall'])} | {_p(a['address_in_words_recall'])} "
                f"| {_p(a['false_speaking_not_addressed'])} "
                f"| {_p(b['previous-speaker']['precision'])} "
                f"| {_p(b['explicit-address']['precision'])} |"
            )
    return "\n".join(lines) + "\n"


def targets(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's targets per corpus and rendering: address recall of every speaking point,
    and the assistant's false speaking."""
    out = []
    for r in results:
        for e in r["renderings"]:
            for name, m in e["model"].items():
                v = m["address_in_words_recall"]
                if v is not None:
                    out.append(
                        {
                            "corpus": r["corpus"],
                            "rendering": e["rendering"],
                            "who": name,
                            "target": f"address-in-words recall >= {ADDRESS_RECALL}",
                            "value": v,
                            "met": v >= ADDRESS_RECALL,
                        }
                    )
            v = e["model"]["assistant"]["false_speaking_not_addressed"]
            out.append(
                {
                    "corpus": r["corpus"],
                    "rendering": e["rendering"],
                    "who": "assistant",
                    "target": f"false speaking when not addressed <= {ASSISTANT_FALSE_SPEAKING}",
                    "value": v,
                    "met": v is not None and v <= ASSISTANT_FALSE_SPEAKING,
                }
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("benchmarks", nargs="+", type=Path, help="benchmark folders (polylogue build)")
    ap.add_argument("--split", default="test")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    ap.add_argument(
        "--address",
        choices=("model", "rules"),
        default="model",
        help="who reads the names: the shipped address model (default) or the rulebook alone",
    )
    args = ap.parse_args()
    t0 = time.perf_counter()
    results: list[dict[str, Any]] = []
    for folder in args.benchmarks:
        points = list(load_benchmark(folder).points(args.split))
        if not points:
            raise SystemExit(f"{folder}: no {args.split} points")
        corpus = points[0].input.corpus
        started = time.perf_counter()
        results.append(
            {
                "corpus": corpus,
                "domain": domain_of_corpus(corpus),
                "points": len(points),
                "renderings": [evaluate(points, r, args.address) for r in RENDERINGS],
            }
        )
        print(f"{corpus}: {len(points):,} points, {time.perf_counter() - started:.0f} s")
    domains: set[str | None] = {r["domain"] for r in results}
    transitions = role_transitions(sorted(domains, key=str))
    command = "nice python benchmarks/agent_contract.py BENCH/{ami,friends,icsi,earnings21}"
    md = markdown(results, args.split, command)
    md += "\n### Summary\n\n" + summary(results, args.split, command)
    checks = targets(results)
    md += "\n" + (
        f"Run-time role = creation role: {transitions['equal']} of {transitions['checked']} "
        "transitions (none/observer/assistant/facilitator, each corpus's domain).\n"
    )
    missed = [t for t in checks if not t["met"]]
    md += f"Targets met: {len(checks) - len(missed)} of {len(checks)}.\n"
    for t in missed:
        where = f"{t['corpus']} {t['rendering']} {t['who']}"
        md += f"- not met: {where}: {t['target']} ({_n(t['value'])})\n"
    print(md)
    elapsed = time.perf_counter() - t0
    print(f"{elapsed:.0f} s in all")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "split": args.split,
                    "results": results,
                    "role_transitions": transitions,
                    "targets": checks,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    if args.markdown:
        args.markdown.write_text(md, encoding="utf-8")


if __name__ == "__main__":
    main()
