"""Kill ``polylogue train`` mid-epoch (SIGKILL), rerun it with ``--resume``: the resumed run
trains exactly the batches the balanced sampler deals for the rest of the run, across an
epoch boundary, and never trains a step twice after its checkpoint.

Tiny on purpose: 8 real Friends points, 64-token prompts, 4-point batches (2 steps an epoch),
5 steps, a checkpoint every 3 and at the end; the kill lands after the step-3 checkpoint
(mid-epoch 1, so the resumed epoch is not epoch 0), and the resumed session trains step 4
(the end of epoch 1) and step 5 (epoch 2). Validation decodes 1 point (not asserted on).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_training_support import tiny_friends

from polylogue.training.lora.config import load_run_config
from polylogue.training.lora.data import stratified_subset
from polylogue.training.lora.sampler import BalancedBatchSampler, sampler_groups
from polylogue.training.lora.sft import latest_checkpoint
from polylogue.turntaking.dataset import load_split_points

STEPS = 5
SHORT_SYSTEM = "Decide whether to speak now ($speak) or stay silent ($silent).\n"


def _args(bench: Path, run: Path, system: Path) -> list[str]:
    return [
        "--data",
        str(bench),
        "--out",
        str(run),
        "--max-train-points",
        "8",
        "--max-prompt-tokens",
        "64",
        "--batch-size",
        "4",
        "--grad-accum",
        "1",
        "--max-steps",
        str(STEPS),
        "--eval-steps",
        "3",
        "--eval-max-points",
        "1",
        "--lora-r",
        "2",
        "--lora-alpha",
        "4",
        "--precision",
        "fp32",
        "--set",
        f"system_template={json.dumps(str(system))}",
        "--set",
        "warmup_steps=0",
        "--set",
        "eval_batch_size=4",
        "--set",
        "log_batches=true",
        "--set",
        "keep_checkpoints=true",
        "--set",
        "save_total_limit=10",
        "--set",
        'target_modules=["q_proj"]',
    ]


def _train(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with open(log, "ab") as f:  # a file, not a pipe: a full pipe would stall the trainer
        return subprocess.Popen(
            [sys.executable, "-m", "polylogue.cli", "train", *args],
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
        )


@pytest.mark.slow
def test_resume_after_kill_mid_epoch_continues_the_same_batches(tmp_path: Path) -> None:
    bench = tiny_friends(tmp_path / "friends")
    system = tmp_path / "system.txt"
    system.write_text(SHORT_SYSTEM, encoding="utf-8")
    run = tmp_path / "run"
    log = tmp_path / "train.log"
    args = _args(bench, run, system)
    proc = _train(args, log)
    deadline = time.monotonic() + 600
    while (latest := latest_checkpoint(run)) is None or latest.name != "checkpoint-3":
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "no step-3 checkpoint in time"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (run / "polylogue_adapter.json").exists()  # killed before it finished
    done = int(latest_checkpoint(run).name.split("-")[1])  # type: ignore[union-attr]
    # A checkpoint cut by a kill while saving (no trainer_state.json) is skipped.
    (run / "checkpoints" / f"checkpoint-{done + 1}").mkdir(exist_ok=True)
    assert latest_checkpoint(run).name == f"checkpoint-{done}"  # type: ignore[union-attr]

    resumed = _train([*args, "--resume"], log)
    assert resumed.wait(timeout=600) == 0, log.read_text()
    assert f"resuming from {run / 'checkpoints' / f'checkpoint-{done}'}" in log.read_text()
    assert (run / "polylogue_adapter.json").is_file()

    # What the sampler deals: epoch e's batches from seed + e, two batches (steps) an epoch.
    config = load_run_config(run)
    points = stratified_subset(load_split_points((str(bench),), "train"), 8, config.seed)
    groups, names = sampler_groups("four_way", [p.gold.category.value for p in points])
    sampler = BalancedBatchSampler(groups, 4, group_names=names, seed=config.seed)
    expected: list[list[str]] = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        expected += [sorted(points[i].point_id for i in b) for b in sampler.global_batches()]
    assert len(expected) == 6  # two batches an epoch
    expected = expected[:STEPS]
    # Epochs differ, so a replayed epoch 0 would show; so does step 5's (the resumed session's).
    assert expected[2:4] != expected[:2] and expected[4] != expected[0]

    rows = [json.loads(x) for x in (run / "batches" / "rank-0.jsonl").read_text().splitlines()]
    # The killed session may have trained steps after its last checkpoint; the resumed
    # session retrains exactly those, so the last record of each step is the one that counts.
    final = {r["step"]: sorted(r["point_ids"]) for r in rows}
    assert [final[s] for s in range(1, STEPS + 1)] == expected
    assert [r["step"] for r in rows[-(STEPS - done) :]] == list(range(done + 1, STEPS + 1))
