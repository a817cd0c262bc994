"""Paired CPU time of ``decide`` with and without the feature-block seam, on a busy machine.

    .venv/bin/python benchmarks/blocks_latency.py [--domain chat] [--ref 43e4494]

``default_model_latency.py`` gives the absolute figures but runs one code version per process,
and on a shared machine its p50 moves more between two runs of the same code than the seam
could cost. Here one process holds three engines on the same model and the same stream: the
current :class:`TurnTakingEngine` and two copies of ``engine/engine.py`` as it was at ``--ref``
(before the seam; it runs on the current feature code, whose base and chat states did not
change). Every utterance is observed and every decision taken by all three, in random order,
three times over, and timed in CPU time; the
difference between the two old copies is the measurement's own bias (the null), the
difference between the new engine and the first old copy is the seam plus that bias.
Every answer is checked to be the same across the three.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.conversation import Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.engine import TurnTakingEngine
from polylogue.engine.model import load_model

ROOT = Path(__file__).resolve().parents[1]


def old_engine_class(ref: str, folder: Path) -> Any:
    """``TurnTakingEngine`` from ``engine/engine.py`` at git ``ref``, as a stand-alone module."""
    text = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{ref}:src/polylogue/engine/engine.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = folder / "engine_before_blocks.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("engine_before_blocks", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.TurnTakingEngine


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--domain", default=None, help="chat: the chat model on Ubuntu IRC.")
    ap.add_argument("--ref", default="43e4494", help="A commit before the seam.")
    ap.add_argument("--decisions", type=int, default=6000)
    ap.add_argument("--history-tokens", type=int, default=2048)
    args = ap.parse_args()
    corpus = "irc" if args.domain == "chat" else "ami"
    model = load_model(domain=args.domain)
    with tempfile.TemporaryDirectory() as tmp:
        old = old_engine_class(args.ref, Path(tmp))
        names = ("new", "old", "old again")
        # Random orders: which engine runs first (or just after another's tree walk) changes
        # its time by as much as the seam could cost, so no engine may keep a place.
        rng = np.random.default_rng(0)
        cpu: dict[str, list[int]] = {n: [] for n in names}
        for conv in itertools.islice(load_corpus(corpus), 3):
            engines = {
                "new": TurnTakingEngine(model, conv.participants),
                "old": old(model, conv.participants),
                "old again": old(model, conv.participants),
            }
            tokens = 0
            for u in conv.utterances:
                for name in rng.permutation(names):
                    engines[name].observe(Utterance(u.speaker, u.text, u.start, u.end))
                tokens += len(u.text.split())
                if tokens < args.history_tokens:
                    continue
                for target in engines["new"].listeners()[:4]:
                    got = {}
                    for _ in range(3):
                        for name in rng.permutation(names):
                            c = time.thread_time_ns()
                            got[name] = engines[name].decide(target)
                            cpu[name].append(time.thread_time_ns() - c)
                    seen = {
                        (d.p_speak, d.p_backchannel, d.addressed, str(d.cues)) for d in got.values()
                    }
                    assert len(seen) == 1, f"the engines disagree at {target}: {seen}"
                if len(cpu["new"]) >= args.decisions:
                    break
    ms = {n: np.asarray(v) / 1e6 for n, v in cpu.items()}
    n = len(ms["new"])
    print(f"{args.domain or 'general'} model on {corpus}: {n:,} timings per engine, 1 process")
    for name in names:
        print(f"  {name:10s} decide CPU p50 {np.median(ms[name]):.4f} ms")
    seam = np.median(ms["new"] - ms["old"]) * 1e3
    null = np.median(ms["old again"] - ms["old"]) * 1e3
    print(f"  median paired difference new - old {seam:+.1f} us; old again - old {null:+.1f} us")


if __name__ == "__main__":
    main()
