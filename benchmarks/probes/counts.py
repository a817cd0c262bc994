"""Print the count tables of benchmarks/probes/README.md from the probe files.

    python benchmarks/probes/counts.py          # the first test probe and the development probe
    python benchmarks/probes/counts.py test2    # the second test probe

tests/test_address_probes.py checks that the README's tables equal these counts.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBES = {"test": HERE / "address_test.jsonl", "dev": HERE / "address_dev.jsonl"}
SECOND = {"test2": HERE / "address_test2.jsonl"}

#: The shapes in the order the README explains them: first those that address the agent.
SHAPES = (
    "vocative-start",
    "vocative-verb",
    "vocative-middle",
    "vocative-end",
    "vocative-after-thanks",
    "follow-up-you",
    "vocative-after-greeting",
    "vocative-alone",
    "vocative-alias",
    "near-miss",
    "two-person-unnamed",
    "addressed-to-another",
    "third-person",
    "common-word",
    "generic-you",
    "group",
    "near-miss-other",
    "aside",
    "between-others",
)


def load(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def tables(files: dict[str, Path] = PROBES) -> str:
    """The README's count tables for `files` ({column name: probe file}), one column (and a
    two-person column per shape) for each."""
    probes = {name: load(path) for name, path in files.items()}
    names = list(probes)
    out = [
        "| shape | addressed | " + " | ".join(f"{n} | {n} two-person" for n in names) + " |",
        "|---|---|" + "---:|---:|" * len(names),
    ]
    for shape in SHAPES:
        cells: list[str] = []
        verdicts: set[bool] = set()
        for recs in probes.values():
            of = [r for r in recs if r["shape"] == shape]
            verdicts |= {bool(r["addressed"]) for r in of}
            cells += [str(len(of)), str(sum(bool(r["two_person"]) for r in of))]
        verdict = "/".join("yes" if v else "no" for v in sorted(verdicts, reverse=True))
        out.append(f"| {shape} | {verdict} | {' | '.join(cells)} |")
    totals = [str(f(recs)) for recs in probes.values() for f in (len, _two)]
    out.append(f"| **all** | | {' | '.join(totals)} |")
    for field, values in (
        ("kind", ("meeting", "call", "chat-call")),
        ("domain", ("meeting", "tv", "earnings")),
        ("addressed", (True, False)),
        ("two_person", (True, False)),
    ):
        out += ["", f"| {field} | {' | '.join(names)} |", "|---|" + "---:|" * len(names)]
        for value in values:
            counts = [str(Counter(r[field] for r in recs)[value]) for recs in probes.values()]
            label = ("yes" if value else "no") if isinstance(value, bool) else value
            out.append(f"| {label} | {' | '.join(counts)} |")
    return "\n".join(out)


def _two(recs: list[dict[str, object]]) -> int:
    return sum(bool(r["two_person"]) for r in recs)


if __name__ == "__main__":
    print(tables(SECOND if sys.argv[1:] == ["test2"] else PROBES))
