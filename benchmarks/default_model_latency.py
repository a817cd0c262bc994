"""Latency, load time and peak memory of the live engine on one core (docs/model-card.md).

    .venv/bin/python benchmarks/default_model_latency.py [--corpus ami] [--history-tokens 2048]
    .venv/bin/python benchmarks/default_model_latency.py --corpus irc --domain chat  # chat model

Replays real meetings from the shared data through :class:`TurnTakingEngine` utterance by
utterance. Once the history holds at least ``--history-tokens`` whitespace tokens, every pause
is timed: ``observe`` (per-utterance work, done while the next person talks; cacheable) and
``decide`` for each listener (the work at the pause), and all listeners' decisions at one pause
together. Reports p50/p99/max, the model load time and the process's peak resident memory.

Run it alone: timings on a shared machine are noisy. The load average is printed with the
figures, and ``decide`` is also given in CPU time (``time.thread_time``), which leaves out the
waits for a core that inflate wall time on a busy machine (not the slowdown of sharing caches
and memory bandwidth with other jobs).
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import subprocess
import sys
import time

import numpy as np

from polylogue.conversation import Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.engine import TurnTakingEngine
from polylogue.engine.model import load_model
from polylogue.turntaking.points import PointOptions, boundary_is_decision_point

_COLD_START = (
    "import time; t = time.perf_counter(); "
    "from polylogue.engine.engine import TurnTakingEngine; TurnTakingEngine.load(); "
    "print(time.perf_counter() - t)"
)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1e3, q))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--corpus", default="ami")
    ap.add_argument("--conversations", type=int, default=3)
    ap.add_argument("--history-tokens", type=int, default=2048)
    ap.add_argument("--max-pauses", type=int, default=3000)
    ap.add_argument("--domain", default=None, help="Its shipped model (chat has its own).")
    args = ap.parse_args()

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    model = load_model(domain=args.domain)
    load_s = time.perf_counter() - t0
    model.proba(np.zeros((1, len(model.metadata["features"])), dtype=np.float32))  # warm up

    load_at_start = os.getloadavg()
    observe: list[float] = []
    decide: list[float] = []
    decide_cpu: list[float] = []
    pause: list[float] = []
    explain: list[float] = []
    for conv in itertools.islice(load_corpus(args.corpus), args.conversations):
        engine = TurnTakingEngine(model, conv.participants)
        tokens = 0
        for u in conv.utterances:
            dt = engine.observe(Utterance(u.speaker, u.text, u.start, u.end))
            tokens += len(u.text.split())
            listeners = engine.listeners()
            if (
                tokens < args.history_tokens
                or not listeners  # nobody else known yet (a scene's first speaker)
                or not boundary_is_decision_point(u, PointOptions())
            ):
                continue
            observe.append(dt)
            at_pause = 0.0
            for target in listeners:
                c = time.thread_time()
                s = time.perf_counter()
                engine.decide(target)
                e = time.perf_counter()
                decide_cpu.append(time.thread_time() - c)
                decide.append(e - s)
                at_pause += e - s
            pause.append(at_pause)
            s = time.perf_counter()
            engine.decide(listeners[0], explain=True)
            explain.append(time.perf_counter() - s)
            if len(decide) >= args.max_pauses:
                break
    if not decide:
        raise SystemExit(
            f"no conversation of {args.corpus} reaches {args.history_tokens} tokens of history"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cold = subprocess.run(
        [sys.executable, "-c", _COLD_START], capture_output=True, text=True, check=True
    ).stdout.strip()
    print(
        f"corpus {args.corpus}: {len(decide):,} decisions at {len(pause):,} pauses after "
        f">= {args.history_tokens} tokens of history, 1 core; load average "
        f"{load_at_start[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end"
    )
    print(f"model load             {load_s * 1e3:8.1f} ms (files and the one-row scoring table)")
    print(f"cold start             {float(cold) * 1e3:8.1f} ms (fresh process: imports + load)")
    print(
        f"decide (at the pause)  p50 {pct(decide, 50):6.3f} ms   p99 {pct(decide, 99):6.3f} ms   "
        f"max {pct(decide, 100):6.3f} ms"
    )
    print(
        f"decide, CPU time       p50 {pct(decide_cpu, 50):6.3f} ms   "
        f"p99 {pct(decide_cpu, 99):6.3f} ms"
    )
    print(
        f"all listeners, 1 pause p50 {pct(pause, 50):6.3f} ms   p99 {pct(pause, 99):6.3f} ms   "
        f"({len(decide) / len(pause):.1f} listeners per pause)"
    )
    print(f"decide + explanation   p50 {pct(explain, 50):6.3f} ms   p99 {pct(explain, 99):6.3f} ms")
    print(
        f"observe (per utterance, cached before the pause)  p50 {pct(observe, 50):6.3f} ms   "
        f"p99 {pct(observe, 99):6.3f} ms"
    )
    print(
        f"peak resident memory   {peak:8.1f} MB "
        f"(python + numpy + polylogue before the model: {rss_before:.1f} MB)"
    )


if __name__ == "__main__":
    main()
