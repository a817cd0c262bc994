"""Evaluation-harness cost per sample, real Friends points (docs/evaluation.md, performance.md).

1. Harness overhead per sample: a full ``run_evaluation`` (prompt-free baseline, JSONL append +
   flush per sample, fsync per chunk, manifest, metrics) minus the time spent inside the
   predictor. Target: under 1 ms per sample.
2. Throughput of the OpenAI-compatible backend against a local llama.cpp server (xllamacpp,
   SmolLM2-135M, 8 slots) at concurrency 1 vs 8.

Usage: python benchmarks/eval_harness_overhead.py [--data BENCH_DIR] [--server-points 16]
Prints a Markdown table; figures in docs/evaluation.md come from this script.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before xllamacpp is imported


def build_friends_bench(folder: Path, scenes: int = 120) -> Path:
    from polylogue.corpora import load_corpus
    from polylogue.turntaking.dataset import BenchmarkBuild, BuildOptions, save_benchmark
    from polylogue.turntaking.points import conversation_points, with_split

    convs = list(itertools.islice(load_corpus("friends", source="s10json"), scenes))
    episodes = sorted({c.group_id for c in convs})
    split_of = {e: ("test" if i % 3 == 0 else "train") for i, e in enumerate(episodes)}
    points = [with_split(p, split_of[p.group]) for c in convs for p in conversation_points(c)]
    save_benchmark(BenchmarkBuild(convs, points, BuildOptions(), {}), folder)
    return folder


def harness_overhead(bench: Path, out: Path, repeats: int = 3) -> list[tuple[str, float, int]]:
    from polylogue.evaluation.runner import load_points, run_evaluation
    from polylogue.models import load_predictor

    points = [*load_points(bench, "train")[0], *load_points(bench, "test")[0]]
    _, info = load_points(bench, "test")
    predictor = load_predictor("baseline:always-silent")
    inputs = [p.input for p in points]
    # Warm-up: first-call imports (scikit-learn, rich) are not per-sample overhead.
    run_evaluation(points[:50], info, predictor, out / "warmup", n_boot=10, progress=False)
    rows = []
    for label, n_boot, chunk in (
        ("run, chunk 16, no bootstrap", 0, 16),
        ("run, chunk 1 (fsync every sample), no bootstrap", 0, 1),
        ("run, chunk 16, metrics with 1000 bootstrap replicates", 1000, 16),
    ):
        per_sample = []
        for r in range(repeats):
            t0 = time.perf_counter()
            predictor.predict(inputs)
            inside = time.perf_counter() - t0
            t0 = time.perf_counter()
            run_evaluation(
                points,
                info,
                predictor,
                out / f"{chunk}-{n_boot}-{r}",
                chunk_size=chunk,
                n_boot=n_boot,
                progress=False,
            )
            total = time.perf_counter() - t0
            per_sample.append((total - inside) / len(points))
        rows.append((label, statistics.median(per_sample) * 1000, len(points)))
    return rows


def server_throughput(bench: Path, n_points: int) -> list[tuple[int, float, float, float, float]]:
    import httpx
    import xllamacpp as xlc

    from polylogue.evaluation.runner import load_points
    from polylogue.llm.hf import smollm2_gguf_path
    from polylogue.models import load_predictor
    from polylogue.prompts import PromptOptions

    gguf = str(smollm2_gguf_path())
    p = xlc.CommonParams()
    p.model.path = gguf
    p.model_alias = {"smollm2-135m"}
    p.hostnames = ["127.0.0.1"]
    p.port = 0
    p.n_parallel = 8
    p.n_ctx = 8 * 1024
    p.cpuparams.n_threads = 2
    p.cpuparams_batch.n_threads = 2
    p.verbosity = 0
    p.cache_ram_mib = 0  # no host prompt cache: every request is a fresh prompt
    srv = xlc.Server(p)
    base = srv.listening_address
    while httpx.get(base + "/health", timeout=2).status_code != 200:
        time.sleep(0.05)
    points, _ = load_points(bench, "test")
    rows = []
    # Different points per setting (alternating, so prompt lengths match) so the server's
    # prompt cache cannot help the second setting.
    for i, conc in enumerate((1, 8)):
        batch = [x.input for x in points[i : 2 * n_points : 2]]
        pred = load_predictor(
            f"openai:smollm2@{base}/v1",
            concurrency=conc,
            prompt=PromptOptions(max_prompt_tokens=700),
        )
        t0 = time.perf_counter()
        out = pred.predict(batch)
        wall = time.perf_counter() - t0
        lat = statistics.median(x.latency_s for x in out)
        usage = [x.extra["usage"] for x in out]
        tokens = statistics.mean(u["prompt_tokens"] for u in usage)
        # Tokens the server reused from a slot's KV cache (shared system-prompt prefix).
        reused = statistics.mean(
            (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0) for u in usage
        )
        rows.append((conc, len(out) / wall, lat, tokens, reused))
    del srv
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, help="a built benchmark (default: Friends S10 subset)")
    ap.add_argument("--server-points", type=int, default=16)
    ap.add_argument("--skip-server", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench = args.data or build_friends_bench(Path(tmp) / "bench")
        print("| harness setting | overhead per sample (ms, median of 3) | samples |")
        print("|---|---|---|")
        for label, ms, n in harness_overhead(bench, Path(tmp) / "runs"):
            print(f"| {label} | {ms:.3f} | {n} |")
        if not args.skip_server:
            print(
                "\n| concurrency | points/s | median latency (s) | prompt tokens (mean) "
                "| reused from KV cache (mean) |"
            )
            print("|---|---|---|---|---|")
            for conc, rate, lat, tok, reused in server_throughput(bench, args.server_points):
                print(f"| {conc} | {rate:.2f} | {lat:.2f} | {tok:.0f} | {reused:.0f} |")


if __name__ == "__main__":
    main()
