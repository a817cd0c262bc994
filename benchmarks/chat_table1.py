"""Table 1 (decision points per category) for the chat corpora (quoted in docs/corpora-chat.md).

    .venv/bin/python benchmarks/chat_table1.py [--markdown out.md]

Streams the builder's decision points (``turntaking.points.conversation_points``, with the
builder's de-duplication of identical context + target + label across the corpus) and counts
categories, without building split files: the full IRC channel benchmark has over a million
points and ``polylogue build --corpus irc`` spends most of its time writing them.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from polylogue.conversation import Conversation
from polylogue.corpora.irc import read_irc
from polylogue.corpora.molweni import read_molweni
from polylogue.paths import corpus_dir
from polylogue.turntaking.points import conversation_points, prefix_hashes
from polylogue.turntaking.types import CATEGORIES as _CATEGORIES

#: Benchmark v2 categories (docs/benchmark.md): SA = addressed individually, stays silent.
# One home for the category list (turntaking.types): v2.1 added S3.
CATEGORIES = tuple(c.value for c in _CATEGORIES)


def count(convs: Iterable[Conversation], seen: set[tuple[str, str, str]]) -> Counter[str]:
    c: Counter[str] = Counter()
    for conv in convs:
        c["conversations"] += 1
        c["messages"] += len(conv.utterances)
        hashes = prefix_hashes(conv)
        for p in conversation_points(conv):
            key = (hashes[p.index], p.input.target.id, p.gold.label.value)
            if key in seen:
                c["duplicates"] += 1
                continue
            seen.add(key)
            c[p.gold.category.value] += 1
            c["targets"] += 1
    return c


def row(name: str, c: Counter[str]) -> str:
    n = sum(c[k] for k in CATEGORIES)
    speak = 100 * (c["I1"] + c["I2"]) / n if n else 0.0
    cats = " | ".join(f"{c[k]:,}" for k in CATEGORIES)
    return (
        f"| {name} | {c['conversations']:,} | {c['messages']:,} | {n:,} | {cats} | "
        f"{speak:.1f} | {c['duplicates']:,} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args()
    irc_root = corpus_dir("ubuntu-irc-disentanglement")
    mol_root = corpus_dir("molweni")
    lines = [
        "| Dataset (split) | conversations | messages | points | I1 | I2 | S1 | S2 | SA "
        "| SPEAK % | duplicates removed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for corpus, splits, read in (
        ("irc", ("train", "dev", "test"), lambda s: read_irc(irc_root, s)),
        ("molweni", ("dev", "test"), lambda s: read_molweni(mol_root, s)),
    ):
        seen: set[tuple[str, str, str]] = set()
        total: Counter[str] = Counter()
        for split in splits:
            t0 = time.perf_counter()
            c = count(read(split), seen)
            total.update(c)
            lines.append(row(f"{corpus} ({split})", c))
            print(f"{corpus}/{split}: {time.perf_counter() - t0:.0f}s", flush=True)
        lines.append(row(f"**{corpus} (all)**", total))
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")


if __name__ == "__main__":
    main()
