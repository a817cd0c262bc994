"""Reasons that contradict their actions, over the test splits of every corpus (docs/address.md).

    .venv/bin/python benchmarks/explanation_contradictions.py [--corpora ami friends ...]
        [--renderings original recognizer] [--limit N] [--irc-agents 3] [--json out.json]

Every conversation of each corpus's test split (the published split; IRC: its ``test`` logs) is
replayed through ``LiveConversation`` once per agent (every participant; on IRC the
``--irc-agents`` most talkative of each log, as a log has over a hundred), in both renderings of
the words (``polylogue.rendering``: as written, and as a speech recognizer writes them). At each
decision the engine's answer is explained for every role and operating point and both audiences
(``polylogue.evaluation.explanations``, with the function the live conversation uses), written
as a front end writes it and checked by ``polylogue.engine.explanation.contradictions``: a SPEAK
whose reason says someone else was addressed, claims an address the verdict does not make,
argues for silence, or is below the threshold without saying an address overrode it; a
non-SPEAK that claims an address, or that the address gate held back without saying so; a
reason code whose action or values disagree.

Printed: per corpus and rendering the decisions (all 14 configurations together), the
contradictions, and the SPEAKs by the threshold alone while the words address someone else (a
policy figure: such a reason says only what speaks for the target); then contradictions by kind.
Exits 1 when any contradiction is found.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus
from polylogue.evaluation.explanations import (
    AuditCounts,
    agents_of,
    audit_conversation,
    deployments,
    summary_rows,
)
from polylogue.rendering import RENDERINGS
from polylogue.turntaking.dataset import reader_options
from polylogue.turntaking.dataset.assign import published_splits

CORPORA = ("ami", "friends", "icsi", "earnings21", "molweni", "irc")


def test_split(corpus: str, limit: int | None = None) -> Iterator[Conversation]:
    """The conversations of ``corpus``'s test split, read as a benchmark build reads them."""
    if corpus == "irc":
        convs: Iterator[Conversation] = load_corpus("irc", splits="test")
    else:
        groups = published_splits()["splits"][corpus]
        convs = (
            c
            for c in load_corpus(corpus, **reader_options(corpus))
            if groups.get(c.group_id) == "test"
        )
    for i, conv in enumerate(convs):
        if limit is not None and i >= limit:
            return
        yield conv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=CORPORA)
    parser.add_argument("--renderings", nargs="+", default=list(RENDERINGS), choices=RENDERINGS)
    parser.add_argument("--limit", type=int, default=None, help="conversations per corpus")
    parser.add_argument("--irc-agents", type=int, default=3, help="agents per IRC log")
    parser.add_argument("--json", type=Path, default=None, help="write the counts here")
    args = parser.parse_args(argv)

    counts = AuditCounts()
    start = time.perf_counter()
    for corpus in args.corpora:
        convs = list(test_split(corpus, args.limit))
        deps = deployments(convs[0].domain)
        agents_limit = args.irc_agents if corpus == "irc" else None
        for rendering in args.renderings:
            for conv in convs:
                audit_conversation(conv, rendering, deps, counts, agents_of(conv, agents_limit))
        print(
            f"{corpus}: {len(convs)} conversations, {time.perf_counter() - start:.0f} s so far",
            file=sys.stderr,
        )
    print(
        "| corpus | rendering | decisions | contradictions | SPEAK by threshold, other addressed |"
    )
    print("|---|---|---:|---:|---:|")
    for row in summary_rows(counts):
        print("| " + " | ".join(row) + " |")
    kinds: Counter[str] = Counter()
    for (*_, kind), n in counts.found.items():
        kinds[kind] += n
    total = sum(counts.decisions.values())
    print(f"\n{total} decisions, {counts.total} contradictions", end="")
    print(": " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()) if kinds else "")
    for e in counts.examples[:5]:
        print(json.dumps({k: e[k] for k in ("corpus", "config", "found", "text", "reason")}))
    print(f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "decisions": {"/".join(k): v for k, v in counts.decisions.items()},
                    "contradictions": {"/".join(k): v for k, v in counts.found.items()},
                    "speak_over_other": {
                        "/".join(k): v for k, v in counts.speak_over_other.items()
                    },
                    "reasons": {"/".join(k): v for k, v in counts.reasons.items()},
                    "examples": counts.examples,
                },
                indent=1,
            )
        )
    return 1 if counts.total else 0


if __name__ == "__main__":
    raise SystemExit(main())
