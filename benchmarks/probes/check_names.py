"""Check that the probes' names are absent from the shared corpora's speaker names.

Collects every word of the speaker and character names of the shared corpora (Friends, both
the character-mining JSON and the R package's CSV; Earnings-21 speaker metadata; ICSI
(QMSum) speakers; MeetingToM and AMI participant codes) and every word of the probes' roster
names, ids and aliases, and prints the probe words found in both. Names that are everyday
words (Will, Mark, ...) are listed apart: the probes use them as words.

    python benchmarks/probes/check_names.py DATA_ROOT [PROBE.jsonl ...]
    python benchmarks/probes/check_names.py DATA_ROOT --words nova ada ...
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path

WORD = re.compile(r"[^\W\d_]+")
# Roster names the probes use as everyday words ("i will", "mark it", "we may").
COMMON_WORDS = frozenset(
    {"will", "mark", "bill", "may", "hope", "grace", "rose", "faith", "sky", "summer", "frank",
     "sunny", "dawn", "joy", "june"}
)  # fmt: skip


def _words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text)}


def corpus_speaker_words(root: Path) -> dict[str, set[str]]:
    """Each corpus's set of lower-cased words of its speaker names."""
    out: dict[str, set[str]] = {}
    friends: set[str] = set()
    for f in sorted((root / "friends" / "character-mining" / "json").glob("*.json")):
        for ep in json.loads(f.read_text())["episodes"]:
            for scene in ep["scenes"]:
                for u in scene["utterances"]:
                    for s in u["speakers"]:
                        friends |= _words(s)
    rcsv = root / "friends" / "friends-r-package" / "derived_csv" / "friends.csv"
    with rcsv.open(newline="") as fh:
        for row in csv.DictReader(fh):
            friends |= _words(row["speaker"] or "")
    out["friends"] = friends
    with (root / "earnings21" / "speaker-metadata.csv").open(newline="") as fh:
        out["earnings21"] = set().union(*(_words(r["speaker_name"]) for r in csv.DictReader(fh)))
    icsi: set[str] = set()
    for f in (root / "icsi-qmsum" / "data").rglob("*.json"):
        for t in json.loads(f.read_text()).get("meeting_transcripts", []):
            icsi |= _words(t["speaker"])
    out["icsi"] = icsi
    tom: set[str] = set()
    for f in (root / "meetingtom").glob("*.jsonl"):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            tom |= _words(str(rec.get("target_agent", "")))
    out["meetingtom"] = tom
    return out


def probe_words(paths: Iterable[Path]) -> set[str]:
    words: set[str] = set()
    for p in paths:
        for line in p.read_text().splitlines():
            for part in json.loads(line)["participants"]:
                for text in (part["id"], part.get("name", ""), *part.get("aliases", [])):
                    words |= _words(text.replace("_", " "))
    return words


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    if argv[1:2] == ["--words"]:
        words = {w.lower() for w in argv[2:]}
    else:
        words = probe_words(Path(a) for a in argv[1:])
    corpora = corpus_speaker_words(root)
    hits = {w: sorted(c for c, ws in corpora.items() if w in ws) for w in sorted(words)}
    hits = {w: cs for w, cs in hits.items() if cs}
    bad = {w: cs for w, cs in hits.items() if w not in COMMON_WORDS}
    print(f"{len(words)} name words checked against", {c: len(ws) for c, ws in corpora.items()})
    for w, cs in hits.items():
        tag = "exempt (everyday word)" if w in COMMON_WORDS else "COLLISION"
        print(f"  {w}: {', '.join(cs)} - {tag}")
    print(f"{len(bad)} collisions")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
