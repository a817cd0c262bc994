"""Compare two roots of run folders (one made by the code before a change, one after).

For every run folder under BEFORE (turn-taking: ``predictions.jsonl`` + ``metrics.json``;
MeetingToM: ``predictions.jsonl``) the folder of the same name under AFTER must hold the same
records and metrics, ignoring what differs between any two runs of the same code: latency,
timestamps, versions, the command line, the git commit and whether an answer came from the
response cache. Prints one line per run folder and exits 1 if any differs or is missing.

Usage: ``python scripts/compare_runs.py BEFORE AFTER``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

VOLATILE = {
    "latency_s",
    "cached",
    "created",
    "started",
    "finished",
    "resumed_at",
    "git_commit",
    "command",
    "versions",
    "session",
}


def stable(value: Any) -> Any:
    """``value`` without the keys in :data:`VOLATILE`, at any depth."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def records(folder: Path) -> list[Any]:
    lines = (folder / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return [stable(json.loads(line)) for line in lines if line.strip()]


def compare(before: Path, after: Path) -> list[str]:
    """One line per run folder; a line starting with DIFF or MISSING is a failure."""
    out = []
    for run in sorted(p.parent for p in before.rglob("predictions.jsonl")):
        name = run.relative_to(before)
        other = after / name
        if not (other / "predictions.jsonl").is_file():
            out.append(f"MISSING {name}")
            continue
        same_rows = records(run) == records(other)
        metrics = run / "metrics.json"
        same_metrics = not metrics.is_file() or stable(json.loads(metrics.read_text())) == stable(
            json.loads((other / "metrics.json").read_text())
        )
        verdict = "same" if same_rows and same_metrics else "DIFF"
        detail = f"{len(records(run))} records" + ("" if same_rows else " (records differ)")
        if metrics.is_file():
            detail += ", metrics " + ("identical" if same_metrics else "differ")
        out.append(f"{verdict} {name}: {detail}" if verdict == "same" else f"DIFF {name}: {detail}")
    return out


def main() -> int:
    before, after = Path(sys.argv[1]), Path(sys.argv[2])
    lines = compare(before, after)
    print("\n".join(lines))
    bad = [x for x in lines if not x.startswith("same")]
    print(f"{len(lines) - len(bad)} of {len(lines)} run folders identical")
    return 1 if bad or not lines else 0


if __name__ == "__main__":
    sys.exit(main())
