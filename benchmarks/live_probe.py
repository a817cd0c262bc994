"""Cost of one LiveKit `predict_end_of_turn` probe on a partial transcript (docs/performance.md).

The probe decides on a partial transcript without letting it touch the conversation.

    python benchmarks/live_probe.py [--repeats 30]

The first AMI meeting is fed into a :class:`~polylogue.engine.live.LiveConversation`; after
50, 100, 200 and 400 utterances the next utterance of a listener (not the agent, B) with
at least four words is probed on a copy, three ways:

* ``round trip``: ``LiveConversation.from_dict(live.to_dict(), deployment)`` (what the adapter
  did before issue 26), then the decision;
* ``fork``: ``live.fork()`` (a deep copy that shares the model and deployment; the adapter
  now), then the decision;
* ``decision only`` (the baseline): the same decision on the conversation itself, which a
  probe must not do (the partial transcript would stay in the state); the floor a probe
  cannot go under.

``to_dict alone`` is what ``serve`` pays per event to store a session.

Prints the median and 90th percentile in milliseconds of each (one process, wall clock).
"""

from __future__ import annotations

import argparse
import statistics
import time

from polylogue.conversation import Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.live import LiveConversation


def _ms(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"{statistics.median(xs) * 1000:7.3f} / {xs[int(0.9 * (len(xs) - 1))] * 1000:7.3f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    conv = next(iter(load_corpus("ami")))
    live = LiveConversation.start("B", conv.participants)
    utts = [Utterance(u.speaker, u.text, u.start, u.end) for u in conv.utterances]
    print(f"{conv.id}: {len(utts)} utterances; median / p90 ms per probe")
    print(
        f"{'after':>6s} {'round trip':>17s} {'fork':>17s} {'decision only':>17s} "
        f"{'to_dict alone':>17s}"
    )
    fed = 0
    for n in (50, 100, 200, 400):
        while fed < n:
            live.utterance(utts[fed])
            fed += 1
        # The next utterance by someone else with a few words: a real decision point.
        probe_u = next(u for u in utts[n:] if u.speaker != "B" and len(u.text.split()) >= 4)
        rows: dict[str, list[float]] = {"round": [], "fork": [], "decide": [], "snap": []}
        for _ in range(args.repeats):
            t = time.perf_counter()
            live.to_dict()
            rows["snap"].append(time.perf_counter() - t)
            t = time.perf_counter()
            LiveConversation.from_dict(live.to_dict(), live.deployment).utterance(probe_u)
            rows["round"].append(time.perf_counter() - t)
            if hasattr(live, "fork"):
                t = time.perf_counter()
                live.fork().utterance(probe_u)
                rows["fork"].append(time.perf_counter() - t)
        # The baseline commits the utterance, so it is measured on throwaway copies.
        for _ in range(args.repeats):
            c = LiveConversation.from_dict(live.to_dict(), live.deployment)
            t = time.perf_counter()
            c.utterance(probe_u)
            rows["decide"].append(time.perf_counter() - t)
        fork = _ms(rows["fork"]) if rows["fork"] else "   (no fork)     "
        print(f"{n:6d} {_ms(rows['round'])} {fork} {_ms(rows['decide'])} {_ms(rows['snap'])}")


if __name__ == "__main__":
    main()
