"""What each agent role does on held-out decision points (quoted in docs/agents.md).

    .venv/bin/python benchmarks/agent_roles.py build/bench-ami build/bench-icsi \
        build/bench-friends build/bench-earnings21 [--split test] [--json out.json]

For every corpus and every role (``observer``, ``assistant``, ``facilitator``, and no role =
the product default), the deployment of that corpus's domain
(``Deployment.resolve(domain=..., role=...)``) is applied to the shipped model's probabilities
at every decision point of the split, with the one rule the live conversation applies
(``Deployment.choose``; the live policy's defaults add nothing to it). Printed per role:

* speak ratio: the share of pauses where the agent takes the floor (next to the real TAKE_FLOOR
  rate: how often the target person did);
* precision: of the pauses it speaks at, the share where the person really took the floor;
* I1 recall: of the pauses where the target was individually addressed and answered, the share
  it speaks at;
* backchannel ratio: the share of pauses it says "mm-hmm" at.

Next to them, the simplest baseline: speak iff the target held the floor just before the
current speaker (``baseline:previous-speaker``). The observer also shows what it would have
done (its suggested actions: the product default's).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from _agent_common import score_split

from polylogue.engine.deployment import ROLES, Action, Deployment
from polylogue.turntaking.dataset import load_benchmark

ROLE_ORDER: tuple[str | None, ...] = (None, *ROLES)


def rates(speak: np.ndarray, back: np.ndarray, take: np.ndarray, i1: np.ndarray) -> dict[str, Any]:
    n_speak = int(speak.sum())
    return {
        "speak_ratio": float(speak.mean()) if len(speak) else None,
        "precision": float(take[speak].mean()) if n_speak else None,
        "i1_recall": float(speak[i1].mean()) if i1.any() else None,
        "backchannel_ratio": float(back.mean()) if len(back) else None,
        "speaks": n_speak,
    }


def corpus_figures(folder: Path, split: str) -> dict[str, Any]:
    points = load_benchmark(folder).points(split)
    if not points:
        raise SystemExit(f"{folder}: no {split} points")
    s = score_split(points)
    take, i1 = s.took_floor, s.i1
    rows: dict[str, Any] = {}
    for role in ROLE_ORDER:
        dep = Deployment.resolve(domain=s.domain, role=role, model=s.model)
        suggested = s.actions(dep)
        acts = suggested if dep.speaks else [Action.SILENT] * len(suggested)
        speak = np.asarray([a is Action.SPEAK for a in acts], dtype=bool)
        back = np.asarray([a is Action.BACKCHANNEL for a in acts], dtype=bool)
        entry = {
            "operating_point": dep.operating_point,
            "take_floor_threshold": dep.take_floor_threshold,
            **rates(speak, back, take, i1),
        }
        if not dep.speaks:
            s_speak = np.asarray([a is Action.SPEAK for a in suggested], dtype=bool)
            s_back = np.asarray([a is Action.BACKCHANNEL for a in suggested], dtype=bool)
            entry["suggested"] = rates(s_speak, s_back, take, i1)
        rows[role or "default"] = entry
    prev = s.previous_speaker
    return {
        "corpus": s.corpus,
        "domain": s.domain,
        "points": len(points),
        "i1_points": int(i1.sum()),
        "real_take_floor_rate": float(take.mean()),
        "roles": rows,
        "baseline:previous-speaker": rates(prev, np.zeros_like(prev), take, i1),
    }


def pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def markdown(results: list[dict[str, Any]], split: str) -> str:
    lines = [
        f"Split `{split}`; speak ratio, precision, I1 recall and backchannel ratio in %.",
        "",
        "| corpus (domain) | role (point, threshold) | speak ratio | precision | I1 recall "
        "| backchannel ratio |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in results:
        head = f"{r['corpus']} ({r['domain']}; {r['points']:,} points, {r['i1_points']} I1)"
        real = f"real rate {pct(r['real_take_floor_rate'])}"
        for name, e in r["roles"].items():
            label = f"{name} ({e['operating_point']}, {e['take_floor_threshold']:.2f})"
            lines.append(
                f"| {head} | {label} | {pct(e['speak_ratio'])} | {pct(e['precision'])} "
                f"| {pct(e['i1_recall'])} | {pct(e['backchannel_ratio'])} |"
            )
            if "suggested" in e:
                s = e["suggested"]
                lines.append(
                    f"| {head} | {name}, would have done | {pct(s['speak_ratio'])} "
                    f"| {pct(s['precision'])} | {pct(s['i1_recall'])} "
                    f"| {pct(s['backchannel_ratio'])} |"
                )
        b = r["baseline:previous-speaker"]
        lines.append(
            f"| {head} | baseline:previous-speaker ({real}) | {pct(b['speak_ratio'])} "
            f"| {pct(b['precision'])} | {pct(b['i1_recall'])} | - |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("benchmarks", nargs="+", type=Path)
    ap.add_argument("--split", default="test")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    results = [corpus_figures(b, args.split) for b in args.benchmarks]
    print(markdown(results, args.split))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
