"""Which Friends speakers are voices (never present, never a target), and what the rule changes.

    python benchmarks/voice_labels.py [--before OLD_BENCH --after NEW_BENCH]

Prints the speaker labels of the shared Friends seasons that
``polylogue.corpora.friends.is_voice_label`` marks as voices, with their utterance counts,
beside the word list it replaced (a label matching "tv", "radio", "machine", "tape",
"intercom", "commercial", "narrator", "voice", "announcer" or "recording"), and the labels
where the two disagree. With two Friends benchmark folders (``polylogue build -c friends``
before and after the change), also the decision points each holds per split, the points only
one of them has (targets that became voices), the points whose set of people present
changed, and the groups (episodes) that moved to another split: the splits are stratified by
category, so a few points less can move whole episodes.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

from polylogue.corpora import load_corpus
from polylogue.corpora.friends import is_voice_label
from polylogue.turntaking.dataset import load_benchmark
from polylogue.turntaking.splits import SPLITS

#: The word list the rule replaced (for the comparison only).
OLD_LIST = re.compile(
    r"\b(?:tv|radio|machine|tape|intercom|commercial|narrator|voice|announcer|recording)\b",
    re.IGNORECASE,
)


def compare_builds(before: Path, after: Path) -> None:
    old, new = load_benchmark(before), load_benchmark(after)
    a = {p.point_id: p for split in SPLITS for p in old.points(split)}
    b = {p.point_id: p for split in SPLITS for p in new.points(split)}
    changed = sum(
        1
        for k in a.keys() & b.keys()
        if {q.id for q in a[k].input.present} != {q.id for q in b[k].input.present}
    )
    print(f"\npoints: {len(a):,} before, {len(b):,} after")
    for what, keys in (("only before", a.keys() - b.keys()), ("only after", b.keys() - a.keys())):
        targets = Counter(k.rsplit(":", 1)[1] for k in keys)
        print(f"{what}: {len(keys):,} {dict(targets.most_common())}")
    print(f"people present changed: {changed:,} points")
    split_of = [{p.group: p.split for p in pts.values()} for pts in (a, b)]
    moved = sorted(g for g in split_of[0] if split_of[1].get(g) != split_of[0][g])
    print(f"groups whose split changed: {len(moved)} ({', '.join(moved)})")
    for split in SPLITS:
        n = [sum(1 for p in pts.values() if p.split == split) for pts in (a, b)]
        print(f"  {split}: {n[0]:,} -> {n[1]:,} points")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, default=None)
    ap.add_argument("--after", type=Path, default=None)
    args = ap.parse_args()
    lines: Counter[str] = Counter()
    for conv in load_corpus("friends"):
        for u in conv.utterances:
            lines[u.speaker] += 1
    rule = {x for x in lines if is_voice_label(x)}
    old = {x for x in lines if OLD_LIST.search(x)}
    print(f"{len(lines)} speaker labels, {sum(lines.values()):,} utterances")
    print(f"rule: {len(rule)} voice labels, {sum(lines[x] for x in rule)} utterances")
    print(f"word list: {len(old)} voice labels, {sum(lines[x] for x in old)} utterances")
    print("rule only:", {x: lines[x] for x in sorted(rule - old)})
    print("word list only:", {x: lines[x] for x in sorted(old - rule)})
    print("both:", ", ".join(sorted(rule & old)))
    if args.before and args.after:
        compare_builds(args.before, args.after)


if __name__ == "__main__":
    main()
