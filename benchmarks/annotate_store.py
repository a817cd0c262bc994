"""Answers saved per second by concurrent annotation-store writers (docs/performance.md).

Builds a small real Friends benchmark, creates a study and lets W processes (one annotator
each) save R rounds of answers over all items, then checks that nothing was lost. Prints
figures; asserts nothing about speed.

    python benchmarks/annotate_store.py --writers 4 --items-per-category 25 --rounds 3
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import tempfile
import time
from pathlib import Path

from polylogue.annotate.store import AnnotationStore, StudyKind
from polylogue.annotate.study import SamplingPlan, benchmark_items, create_study


def _writer(db: str, key: str, rounds: int, out: multiprocessing.Queue) -> None:
    store = AnnotationStore(db)
    who = store.annotator_by_key(key)
    assert who is not None
    latencies = []
    for r in range(rounds):
        for item_id in who.order:
            t = time.perf_counter()
            store.save_answer(who, item_id, "decision", "SPEAK" if r % 2 else "SILENT")
            latencies.append(time.perf_counter() - t)
    out.put(latencies)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--items-per-category", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scenes", type=int, default=60, help="Friends scenes to build from")
    args = ap.parse_args()

    from polylogue.corpora import load_corpus
    from polylogue.turntaking.dataset import build_benchmark, save_benchmark

    with tempfile.TemporaryDirectory() as tmp:
        bench = save_benchmark(
            build_benchmark(itertools.islice(load_corpus("friends"), args.scenes)),
            Path(tmp) / "bench",
        )
        src = benchmark_items(bench, "test")
        store = AnnotationStore(Path(tmp) / "study.sqlite")
        names = [f"h{i}" for i in range(args.writers)]
        study, keys, report = create_study(
            store,
            "bench",
            StudyKind.TURNTAKING,
            src.items,
            SamplingPlan(args.items_per_category, seed=1),
            names,
            finish=src.finish,
        )
        n_items = sum(report.drawn.values())
        queue: multiprocessing.Queue = multiprocessing.Queue()
        procs = [
            multiprocessing.Process(
                target=_writer, args=(str(store.path), keys[n], args.rounds, queue)
            )
            for n in names
        ]
        t0 = time.perf_counter()
        for p in procs:
            p.start()
        latencies = [x for _ in procs for x in queue.get()]
        for p in procs:
            p.join()
        wall = time.perf_counter() - t0
        answers = store.answers(study)
        latencies.sort()
        total = len(latencies)
        print(f"writers={args.writers} items={n_items} rounds={args.rounds} saves={total}")
        print(f"wall {wall:.2f} s  ->  {total / wall:,.0f} saves/s")
        median, p95 = latencies[total // 2], latencies[int(total * 0.95)]
        print(f"save latency ms: median {1000 * median:.2f}  p95 {1000 * p95:.2f}")
        print(
            f"rows {len(answers)} (expected {args.writers * n_items}); lost: "
            f"{args.writers * n_items - len(answers)}"
        )


if __name__ == "__main__":
    main()
