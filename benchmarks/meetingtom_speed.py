"""MeetingToM harness timings: loading, windows, baselines, scoring, media (docs/performance.md).

Run: ``.venv/bin/python benchmarks/meetingtom_speed.py [--smollm2 N]``. Figures depend on the
machine and its load; nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smollm2", type=int, default=0, help="also time SmolLM2 on N STATE records")
    args = ap.parse_args()

    from polylogue.paths import corpus_dir
    from polylogue.tom.backends import HeuristicGenerator, HFTextGenerator
    from polylogue.tom.media import FrameSampling, extract_frames, run_ffmpeg
    from polylogue.tom.prompts import parse_variant
    from polylogue.tom.records import load_tom_benchmark, validate
    from polylogue.tom.report import scores_from_run
    from polylogue.tom.runner import run_tom
    from polylogue.tom.transcript import AmiSessions, transcript_window

    t = time.perf_counter()
    bench = load_tom_benchmark()
    print(f"load 1,200 records: {time.perf_counter() - t:.3f} s")
    t = time.perf_counter()
    validate(bench)
    print(f"validate: {time.perf_counter() - t:.3f} s")

    sessions = AmiSessions(corpus_dir("ami"))
    records = list(bench.all_records())
    t = time.perf_counter()
    for r in records:
        transcript_window(sessions, r.item.session_id, r.item.window)
    print(f"transcript windows, all records (cold AMI cache): {time.perf_counter() - t:.2f} s")

    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        run = run_tom(
            bench,
            records,
            HeuristicGenerator(),
            parse_variant("noprompt+utter"),
            tmp,
            ami_folder=corpus_dir("ami"),
        )
        print(f"heuristic run, 1,200 records: {time.perf_counter() - t:.2f} s")
        for mode in ("official", "strict"):
            t = time.perf_counter()
            scores_from_run(bench, run.folder, mode)
            print(f"score ({mode}): {time.perf_counter() - t:.3f} s")

        video = Path(tmp) / "v.mp4"
        run_ffmpeg(
            [
                "-f",
                "lavfi",
                "-i",
                "testsrc2=size=640x360:rate=25:duration=50",
                "-c:v",
                "libx264",
                "-preset",
                "veryfast",
                "-pix_fmt",
                "yuv420p",
                str(video),
            ]
        )
        t = time.perf_counter()
        frames = extract_frames(video, Path(tmp) / "frames", FrameSampling(fps=0.5))
        print(f"{len(frames)} frames at 0.5 fps from a 50 s clip: {time.perf_counter() - t:.2f} s")

        if args.smollm2:
            state = bench.select(tasks=["state"], limit_per_task=args.smollm2)
            gen = HFTextGenerator("smollm2", threads=1)
            gen._load()
            t = time.perf_counter()
            run_tom(
                bench,
                state,
                gen,
                parse_variant("noprompt+utter"),
                tmp,
                ami_folder=corpus_dir("ami"),
            )
            dt = time.perf_counter() - t
            print(f"SmolLM2 option scoring: {dt / len(state):.2f} s per STATE record")


if __name__ == "__main__":
    main()
