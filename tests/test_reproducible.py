"""Two processes with different hash seeds write the same results: a benchmark build, the
default model's evaluation and ``decide --json``.

Output built by walking a set or a dict keyed by strings can change with ``PYTHONHASHSEED``
(``evaluation.metrics.listener_minutes`` once summed over a set; on 8 AMI meetings the last
digits of ``minutes`` moved). Two small real runs cannot catch every such order, but they catch
any output that is not reproducible as a whole, which ``tests/benches.py`` relies on: it copies
one build instead of rebuilding. (This replaces the before/after scripts that compared these
artefacts across code versions; ``tests/test_deployment.py`` checks that every front end gives
the same actions and ``tests/test_live_snapshot.py`` that old snapshots still load.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: One process runs the three commands through the console script's own ``main``.
DRIVER = """
import contextlib, sys
from polylogue.cli import main
out = sys.argv[1]
for args, stdout in (
    (["build", "--corpus", "ami", "--limit-conversations", "2", "--out", out + "/bench"], None),
    (["eval", "--model", "default", "--data", out + "/bench", "--out", out + "/runs",
      "--n-boot", "20", "--no-progress"], None),
    (["decide", sys.argv[2], "--as", "bob", "--json"], out + "/decide.jsonl"),
):
    sys.argv = ["polylogue", *args]
    with contextlib.ExitStack() as stack:
        if stdout:
            stack.enter_context(contextlib.redirect_stdout(open(stdout, "w")))
        try:
            main()
        except SystemExit as exc:
            if exc.code:
                raise
"""

#: When and with what a file was written, and wall-clock times: not results.
VOLATILE = frozenset(
    {"created", "started", "finished", "python", "polylogue_version", "latency_ms", "latency_s"}
)


def _results(folder: Path) -> dict[str, object]:
    """Every file the commands wrote, JSON parsed without :data:`VOLATILE` keys, else bytes."""

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    out: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))  # run folders are named by their configuration
        if not path.is_file() or (name.startswith("runs/") and path.name == "manifest.json"):
            continue  # a run's manifest records its command line (folders) and timings
        if path.suffix == ".json":
            out[name] = strip(json.loads(path.read_text(encoding="utf-8")))
        elif path.suffix == ".jsonl":
            lines = path.read_text(encoding="utf-8").splitlines()
            out[name] = [strip(json.loads(line)) for line in lines if line.strip()]
        else:
            out[name] = path.read_bytes()
    return out


def test_build_eval_and_decide_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    results = []
    for seed in ("1", "2"):
        out = tmp_path / f"seed-{seed}"
        out.mkdir()
        proc = subprocess.run(
            [sys.executable, "-c", DRIVER, str(out), str(EXAMPLES / "standup.jsonl")],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        results.append(_results(out))
    first, second = results
    (metrics,) = (name for name in first if name.endswith("/metrics.json"))
    assert {"decide.jsonl", "bench/manifest.json", "bench/test.parquet"} <= first.keys()
    # listener minutes are summed over the AMI listeners: the figure that once moved
    assert first[metrics]["agent"]["minutes"] > 0  # type: ignore[index]
    assert first.keys() == second.keys()
    for name in first:
        assert first[name] == second[name], name
