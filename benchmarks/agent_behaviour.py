"""What an agent on the shipped model does at each operating point (docs/model-card.md).

    .venv/bin/python benchmarks/agent_behaviour.py build/bench-ami build/bench-friends \
        build/bench-earnings21 build/bench-icsi [--split test] [--model-dir DIR] \
        [--json out.json] [--markdown out.md]

Per corpus (natural class ratios; each corpus at its own deployment domain's thresholds, read
from ``model.json`` through :class:`polylogue.engine.deployment.Deployment`, the same code path
``decide``, ``serve`` and the adapters use), for the model at every operating point and for the
previous-speaker and explicit-address baselines:

* speak ratio (predicted SPEAK rate / real TAKE_FLOOR rate), precision, false-interruption rate,
  missed-turn rate, I1 (explicitly addressed) recall, and false interjections and missed I1
  turns per 10 minutes of one listener's conversation (timed corpora);
* backchannel suggestions: rate against the real BACKCHANNEL rate, precision, recall;
* the model's precision at the previous-speaker rule's own speak rate against the rule's
  precision (the honest comparison of the model itself: same number of SPEAKs);
* the issue-23 targets at the product default (``matched``), with pass/fail.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _agent_common import score_split

from polylogue.engine.deployment import (
    DEFAULT_OPERATING_POINT,
    OPERATING_POINTS,
    Action,
    Deployment,
)
from polylogue.evaluation.metrics import agent_metrics, backchannel_metrics, listener_minutes
from polylogue.models.baselines import ExplicitAddressBaseline
from polylogue.turntaking.dataset import load_benchmark
from polylogue.turntaking.types import Decision, DecisionPoint

#: Issue 23's targets at the product default.
SPEAK_RATIO = (0.8, 1.25)
I1_RECALL = {"friends": 0.90, "earnings21": 0.90}
BACKCHANNEL = {"ami": (0.5, 2.0, 0.30), "icsi": (0.5, 2.0, 0.30)}


def precision_at_rate(y: np.ndarray, p: np.ndarray, rate: float) -> float | None:
    """Precision of the top ``rate`` share of points by P(speak) (ties broken by order)."""
    k = round(rate * len(p))
    if k == 0:
        return None
    top = np.argsort(-p, kind="stable")[:k]
    return float(y[top].mean())


def evaluate_corpus(
    points: Sequence[DecisionPoint], model_dir: Path | None = None
) -> dict[str, Any]:
    s = score_split(points, model_dir)
    y = s.took_floor
    minutes = listener_minutes(
        [p.input.conversation_id for p in points],
        [p.input.target.id for p in points],
        [p.gold.pause_time for p in points],
    )
    rows: dict[str, Any] = {}
    for point in OPERATING_POINTS:
        dep = Deployment.resolve(model=s.model, domain=s.domain, operating_point=point)
        acts = s.actions(dep)
        speak = np.asarray([a is Action.SPEAK for a in acts])
        back = np.asarray([a is Action.BACKCHANNEL for a in acts])
        rows[point] = {
            "thresholds": dep.thresholds.to_dict(),
            **agent_metrics(y, speak, s.categories, minutes),
            "backchannel": backchannel_metrics(s.backchanneled, back),
        }
    prev = s.previous_speaker
    explicit = np.asarray(
        [
            q.decision is Decision.SPEAK
            for q in ExplicitAddressBaseline().predict([p.input for p in points])
        ]
    )
    baselines = {
        "previous-speaker": agent_metrics(y, prev, s.categories, minutes),
        "explicit-address": agent_metrics(y, explicit, s.categories, minutes),
    }
    return {
        "corpus": s.corpus,
        "domain": s.domain,
        "n": len(points),
        "groups": len({p.group for p in points}),
        "model": rows,
        "baselines": baselines,
        "at_rule_rate": {
            "rule_speak_rate": float(prev.mean()),
            "model_precision": precision_at_rate(y, s.take_floor, float(prev.mean())),
            "rule_precision": float(y[prev].mean()) if prev.any() else None,
        },
    }


def targets(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in results:
        d = r["model"][DEFAULT_OPERATING_POINT]
        ratio = d["speak_ratio"]
        out.append(
            {
                "corpus": r["corpus"],
                "target": f"speak ratio in {SPEAK_RATIO[0]}-{SPEAK_RATIO[1]}",
                "value": ratio,
                "met": bool(ratio is not None and SPEAK_RATIO[0] <= ratio <= SPEAK_RATIO[1]),
            }
        )
        if r["corpus"] in I1_RECALL and d["n_I1"]:
            want = I1_RECALL[r["corpus"]]
            out.append(
                {
                    "corpus": r["corpus"],
                    "target": f"I1 recall >= {want:.2f} (n={d['n_I1']})",
                    "value": d["i1_recall"],
                    "met": bool(d["i1_recall"] is not None and d["i1_recall"] >= want),
                }
            )
        if r["corpus"] in BACKCHANNEL:
            lo, hi, prec = BACKCHANNEL[r["corpus"]]
            b = d["backchannel"]
            ok = (
                b["rate_ratio"] is not None
                and lo <= b["rate_ratio"] <= hi
                and b["precision"] is not None
                and b["precision"] >= prec
            )
            out.append(
                {
                    "corpus": r["corpus"],
                    "target": f"backchannel rate {lo}-{hi}x real, precision >= {prec:.2f}",
                    "value": [b["rate_ratio"], b["precision"]],
                    "met": bool(ok),
                }
            )
    return out


def _n(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _p(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def markdown(results: Sequence[dict[str, Any]], split: str) -> str:
    head = (
        "| corpus | who | floor thr. | speak ratio | precision | false interr. | missed turns "
        "| I1 recall (n) | false interj./10 min | missed I1/10 min | BC rate ratio | BC precision |"
    )
    lines = [f"### Agent behaviour on {split} (natural class ratios)", "", head, "|" + "---|" * 12]
    for r in results:
        for name, m in [*r["model"].items(), *r["baselines"].items()]:
            who = f"model @ {name}" if name in r["model"] else f"baseline: {name}"
            b = m.get("backchannel") or {}
            thr = _n(m["thresholds"]["take_floor"]) if "thresholds" in m else "–"
            lines.append(
                f"| {r['corpus']} | {who} | {thr} | {_n(m['speak_ratio'])} | "
                f"{_p(m['precision'])} | {_p(m['false_interruption_rate'])} | "
                f"{_p(m['missed_turn_rate'])} | {_p(m['i1_recall'])} ({m['n_I1']}) | "
                f"{_n(m.get('false_interjections_per_10min'), 1)} | "
                f"{_n(m.get('missed_addressed_per_10min'), 1)} | "
                f"{_n(b.get('rate_ratio'))} | {_p(b.get('precision'))} |"
            )
    lines += [
        "",
        "Precision at the previous-speaker rule's own speak rate (same number of SPEAKs):",
        "",
        "| corpus | rule speak rate | model precision | rule precision |",
        "|---|---:|---:|---:|",
    ]
    for r in results:
        a = r["at_rule_rate"]
        lines.append(
            f"| {r['corpus']} | {_p(a['rule_speak_rate'])} | {_p(a['model_precision'])} | "
            f"{_p(a['rule_precision'])} |"
        )
    lines += ["", f"Targets at the product default ({DEFAULT_OPERATING_POINT}):", ""]
    lines += ["| corpus | target | value | met |", "|---|---|---|---|"]
    for t in targets(results):
        v = t["value"]
        shown = ", ".join(_n(x) for x in v) if isinstance(v, list) else _n(v)
        lines.append(
            f"| {t['corpus']} | {t['target']} | {shown} | {'yes' if t['met'] else '**no**'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("benchmarks", nargs="+", type=Path, help="benchmark folders (polylogue build)")
    ap.add_argument("--split", default="test")
    ap.add_argument("--model-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args()
    results = []
    for folder in args.benchmarks:
        points = list(load_benchmark(folder).points(args.split))
        if points:
            results.append(evaluate_corpus(points, args.model_dir))
    md = markdown(results, args.split)
    print(md)
    if args.json:
        args.json.write_text(
            json.dumps({"results": results, "targets": targets(results)}, indent=2)
        )
    if args.markdown:
        args.markdown.write_text(md, encoding="utf-8")


if __name__ == "__main__":
    main()
