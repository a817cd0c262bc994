"""Counts of a benchmark (Table 1, outcomes, fine categories) and a readable view of one point."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polylogue.conversation import Conversation, Utterance
from polylogue.turntaking.splits import (
    SPLITS,
)
from polylogue.turntaking.types import (
    CATEGORIES,
    OUTCOMES,
    PAPER_CATEGORIES,
    DecisionGold,
    DecisionPoint,
    Outcome,
)


def table1(points: Sequence[DecisionPoint], scheme: str = "ours") -> list[dict[str, Any]]:
    """Rows in the layout of the paper's Table 1: corpus, Total, categories (+ SPEAK %).

    ``scheme="ours"``: I1, I2, S1, S2, S3, SA (this benchmark's definitions).
    ``scheme="paper"``: the authors' released four-way mapping (``gold.paper_category``).
    """
    cats = [c.value for c in (CATEGORIES if scheme == "ours" else PAPER_CATEGORIES)]
    rows: list[dict[str, Any]] = []
    by_corpus: dict[str, Counter[str]] = {}
    for p in points:
        key = p.gold.category.value if scheme == "ours" else _paper_cat(p.gold)
        by_corpus.setdefault(p.input.corpus, Counter())[key] += 1
    total: Counter[str] = Counter()
    for corpus in sorted(by_corpus):
        c = by_corpus[corpus]
        total.update(c)
        rows.append(_row(corpus, c, cats))
    if len(by_corpus) > 1:
        rows.append(_row("Total", total, cats))
    return rows


def _paper_cat(g: DecisionGold) -> str:
    return g.paper_category or g.category.four_way.value


def _row(name: str, c: Counter[str], cats: Sequence[str]) -> dict[str, Any]:
    n = sum(c.values())
    speak = c["I1"] + c["I2"]
    return {
        "dataset": name,
        "total": n,
        **{cat: c[cat] for cat in cats},
        "speak_pct": round(100 * speak / n, 2) if n else 0.0,
    }


def outcome_table(points: Sequence[DecisionPoint]) -> list[dict[str, Any]]:
    """Per corpus: points per outcome (TAKE_FLOOR, BACKCHANNEL, SILENT)."""
    by_corpus: dict[str, Counter[str]] = {}
    for p in points:
        by_corpus.setdefault(p.input.corpus, Counter())[p.gold.floor_outcome.value] += 1
    return [
        {"dataset": corpus, "total": sum(c.values()), **{o.value: c[o.value] for o in OUTCOMES}}
        for corpus, c in sorted(by_corpus.items())
    ]


def _markdown_table(rows: list[dict[str, Any]], cats: Sequence[str]) -> list[str]:
    lines = [
        "| Dataset | Total | " + " | ".join(cats) + " | SPEAK % |",
        "|---|---:|" + "---:|" * len(cats) + "---:|",
    ]
    for r in rows:
        cells = " | ".join(f"{r[c]:,}" for c in cats)
        lines.append(f"| {r['dataset']} | {r['total']:,} | {cells} | {r['speak_pct']:.1f} |")
    return lines


def stats_markdown(points: Sequence[DecisionPoint]) -> str:
    lines = [
        "Decision points per corpus and category (natural class ratios; Table 1 layout).",
        "SA = silent although individually addressed. 'Paper mapping' = the authors' released",
        "four-way categories (their S2 includes targets who spoke in the last two turns).",
        "",
    ]
    ours = [c.value for c in CATEGORIES]
    paper = [c.value for c in PAPER_CATEGORIES]
    for title, subset in [("All splits", list(points))] + [
        (s, [p for p in points if p.split == s]) for s in SPLITS
    ]:
        if not subset:
            continue
        lines += [f"### {title}", ""]
        lines += _markdown_table(table1(subset, "ours"), ours)
        lines += ["", f"Paper mapping, {title.lower()}:", ""]
        lines += _markdown_table(table1(subset, "paper"), paper)
        lines.append("")
    lines += [
        "### Outcomes, all splits (SPEAK = TAKE_FLOOR; a backchannel is SILENT for the floor)",
        "",
        "| Dataset | Total | " + " | ".join(o.value for o in OUTCOMES) + " |",
        "|---|---:|" + "---:|" * len(OUTCOMES),
    ]
    for r in outcome_table(points):
        lines.append(
            f"| {r['dataset']} | {r['total']:,} | "
            + " | ".join(f"{r[o.value]:,}" for o in OUTCOMES)
            + " |"
        )
    lines.append("")
    lines += fine_table_markdown(points)
    return "\n".join(lines)


FINE_CATEGORIES = ("I1", "I2", "I3", "S1", "S2", "S3", "S4", "S5")


def fine_table_markdown(points: Sequence[DecisionPoint]) -> list[str]:
    """The authors' 8-way scheme (docs/benchmark.md), all splits."""
    by_corpus: dict[str, Counter[str]] = {}
    for p in points:
        by_corpus.setdefault(p.input.corpus, Counter())[p.gold.fine_category] += 1
    lines = [
        "### Fine categories (the authors' 8-way scheme), all splits",
        "",
        "| Dataset | " + " | ".join(FINE_CATEGORIES) + " |",
        "|---|" + "---:|" * len(FINE_CATEGORIES),
    ]
    for corpus in sorted(by_corpus):
        c = by_corpus[corpus]
        lines.append(f"| {corpus} | " + " | ".join(f"{c[k]:,}" for k in FINE_CATEGORIES) + " |")
    lines.append("")
    return lines


def write_stats_csv(points: Sequence[DecisionPoint], path: Path) -> None:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        cats = [c.value for c in CATEGORIES]
        w.writerow(["scheme", "split", "dataset", "total", *cats, "speak_pct"])
        for scheme in ("ours", "paper"):
            for split in ("all", *SPLITS):
                subset = points if split == "all" else [p for p in points if p.split == split]
                for r in table1(subset, scheme):
                    w.writerow(
                        [
                            scheme,
                            split,
                            r["dataset"],
                            r["total"],
                            *(r.get(c, "") for c in cats),
                            r["speak_pct"],
                        ]
                    )


def acknowledgement(p: DecisionPoint, conversation: Conversation) -> Utterance | None:
    """The target's acknowledgement after a BACKCHANNEL point: its first utterance after the
    pause in ``conversation`` (the full one the point was cut from); None for other points."""
    if p.gold.outcome is not Outcome.BACKCHANNEL:
        return None
    target, cur = p.input.target.id, p.input.current
    seen = {(u.speaker, u.text, u.start) for u in p.input.context}
    utts = conversation.utterances
    if cur.start is None:  # untimed: what follows the current utterance in order
        pos = len(p.input.context)
        return next((u for u in utts[pos:] if u.speaker == target), None)
    after = [
        u
        for u in utts
        if u.speaker == target
        and u.start is not None
        and u.start >= cur.start
        and (u.speaker, u.text, u.start) not in seen
    ]
    return min(after, key=lambda u: u.start or 0.0, default=None)


def render_point(
    p: DecisionPoint,
    max_context: int = 8,
    show_gold: bool = True,
    acknowledged: Utterance | None = None,
) -> str:
    """A readable view of one decision point (for ``polylogue inspect``); ``acknowledged``:
    the target's acknowledgement at a BACKCHANNEL point (:func:`acknowledgement`)."""
    names = {q.id: q.display_name for q in p.input.present}
    target = p.input.target
    lines = [
        f"{p.point_id}  [{p.input.corpus}/{p.split or '-'}]  target: {target.display_name}"
        + (f" ({target.role})" if target.role else ""),
        "present: "
        + ", ".join(
            f"{q.display_name}" + (f" ({q.role})" if q.role else "") for q in p.input.present
        ),
    ]
    hist = p.input.history
    skipped = len(hist) - max_context
    if skipped > 0:
        lines.append(f"  ... {skipped} earlier utterances ...")
    for u in hist[-max_context:]:
        mark = "*" if u.speaker == target.id else " "
        lines.append(f" {mark} {names.get(u.speaker, u.speaker)}: {u.text}")
    cur = p.input.current
    lines.append(f" > {names.get(cur.speaker, cur.speaker)}: {cur.text}")
    lines.append("   [pause]")
    if show_gold:
        g = p.gold
        ev = g.address_evidence or g.reference_evidence or "-"
        pause = "" if g.pause_s is None else f"  pause {g.pause_s:.2f} s at {g.pause_time:.2f}"
        lines.append(
            f"gold: {g.label.value} ({g.floor_outcome.value})  category {g.category.value} "
            f"(paper {_paper_cat(g)}, fine {g.fine_category}, evidence {ev})"
            f"  next: {names.get(g.next_speaker or '', g.next_speaker)}{pause}"
        )
        if acknowledged is not None:
            lines.append(f"acknowledged: {names.get(target.id, target.id)}: {acknowledged.text}")
    return "\n".join(lines)
