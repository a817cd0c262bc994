"""Latency of the (unshipped) text tier at one pause, on one core (docs/model-card.md).

    .venv/bin/python benchmarks/text_tier_latency.py [--text-dir DIR] [--corpus friends]

Replays real conversations from the shared data through
:class:`polylogue.training.engine_models.text_tier.TextTurnTakingEngine` (onnxruntime with one
intra-op thread, the process pinned to one core). At every pause it times ``observe`` (per-utterance
work) and then the decision for *all* listeners (``decide_all``: one batched text forward
pass plus the trees per listener), and prints p50/p99/max of each, the number of listeners,
the fast tier's all-listener figure on the same pauses, and the load average (other jobs on a
shared machine inflate every wall figure; the thread CPU times are what one free core needs).
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from pathlib import Path

import numpy as np

from polylogue.conversation import Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.engine import TurnTakingEngine
from polylogue.engine.model import load_model
from polylogue.training.engine_models.text_tier import TextTier, TextTurnTakingEngine


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1e3, q))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--text-dir",
        type=Path,
        required=True,
        help="a folder from polylogue.training.engine_models.text_component package",
    )
    ap.add_argument("--corpus", default="friends")
    ap.add_argument("--conversations", type=int, default=20)
    ap.add_argument("--max-pauses", type=int, default=300)
    args = ap.parse_args()

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    model = load_model()
    text = TextTier.load(args.text_dir, threads=1)
    load_s = time.perf_counter() - t0

    observe: list[float] = []
    decide_text: list[float] = []
    decide_fast: list[float] = []
    # CPU time of this thread (onnxruntime runs on the caller's thread with one intra-op
    # thread): what one free core would need, whatever else the machine is doing.
    cpu_text: list[float] = []
    cpu_fast: list[float] = []
    listeners: list[int] = []
    for conv in itertools.islice(load_corpus(args.corpus), args.conversations):
        engine = TextTurnTakingEngine(model, text, conv.participants)
        fast = TurnTakingEngine(model, conv.participants)
        for u in conv.utterances:
            utt = Utterance(u.speaker, u.text, u.start, u.end)
            observe.append(engine.observe(utt))
            fast.observe(utt)
            who = engine.listeners()
            if not who:
                continue
            s, c = time.perf_counter(), time.thread_time()
            engine.decide_all()
            decide_text.append(time.perf_counter() - s)
            cpu_text.append(time.thread_time() - c)
            s, c = time.perf_counter(), time.thread_time()
            for target in who:
                fast.decide(target)
            decide_fast.append(time.perf_counter() - s)
            cpu_fast.append(time.thread_time() - c)
            listeners.append(len(who))
        if len(decide_text) >= args.max_pauses:
            break
    load_after = os.getloadavg()
    print(
        f"corpus {args.corpus}: {len(decide_text)} pauses, listeners per pause "
        f"median {np.median(listeners):.0f} (max {max(listeners)})"
    )
    print(f"load (fast model + text tier): {load_s * 1e3:.0f} ms")
    for name, v in (
        ("observe (per utterance)", observe),
        ("text tier: decide, all listeners", decide_text),
        ("fast tier: decide, all listeners", decide_fast),
        ("text tier: same, thread CPU time", cpu_text),
        ("fast tier: same, thread CPU time", cpu_fast),
    ):
        print(
            f"{name:34s} p50 {pct(v, 50):7.2f} ms  p99 {pct(v, 99):7.2f} ms  "
            f"max {pct(v, 100):7.2f} ms"
        )
    print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f} (2-core machine)")


if __name__ == "__main__":
    main()
