"""benchmarks/lora_reproduction.py at CI scale: the cheap rows on a small real Friends build.

The script's LM stages are a benchmark (hours of CPU); what is tested here is what a run at any
size relies on: stages skip what is done, the report's four-way categories agree with the
harness's own per-category figures, stage status reads the results on disk, the resume command
is written, and ``--publish`` rewrites the docs block in place.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from benches import friends_benchmark
from sklearn.metrics import roc_auc_score

from polylogue.evaluation.metrics import compute_metrics
from polylogue.evaluation.runner import read_predictions
from polylogue.turntaking.dataset import load_benchmark

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "lora_reproduction.py"
BEGIN = "<!-- lora-reproduction-results:begin -->"
END = "<!-- lora-reproduction-results:end -->"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )


def test_cheap_rows_report_resume_and_publish(tmp_path: Path) -> None:
    out = tmp_path / "run"
    friends_benchmark(out / "bench" / "friends", conversations=40)
    args = [
        "--out",
        str(out),
        "--stages",
        "eval,report",
        "--eval-models",
        "previous-speaker,explicit-address",
        "--eval-corpora",
        "friends",
        "--test-points",
        "40",
        "--natural-points",
        "0",
        "--train-points",
        "64",
        "--max-prompt-tokens",
        "384",
        "--device",
        "cpu",
    ]
    first = run_script(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    results = json.loads((out / "results.json").read_text())
    table = results["tables"]["friends-balanced"]
    assert set(table) == {"previous-speaker", "explicit-address"}
    for key, row in table.items():
        (metrics_path,) = (out / "eval" / "friends-balanced" / key).glob("*/metrics.json")
        metrics = json.loads(metrics_path.read_text())
        assert row["n"] == metrics["n"] == 40
        # The paper's four categories from the predictions, against the harness's own
        # per-category accuracy and counts (S3 and SA are S2's).
        counts, acc = metrics["per_category_n"], metrics["per_category"]
        s2 = [c for c in ("S2", "S3", "SA") if counts.get(c)]
        assert row["four_way"]["S2"]["n"] == sum(counts[c] for c in s2)
        right = sum(acc[c] * counts[c] for c in s2)
        assert abs(row["four_way"]["S2"]["accuracy"] * row["four_way"]["S2"]["n"] - right) < 1e-6
        for c in ("I1", "I2", "S1"):
            assert row["four_way"][c]["n"] == counts.get(c, 0)
        total_right = sum(v["accuracy"] * v["n"] for v in row["four_way"].values() if v["n"])
        assert abs(total_right / 40 - metrics["accuracy"]) < 1e-9
        assert row["speak_ratio"] == metrics["agent"]["speak_ratio"]
        assert row["precision"] == metrics["agent"]["precision"]
        # The ranking figure is sklearn's ROC AUC of the predictions' P(SPEAK) (a rule's 0/1
        # scores: its balanced accuracy).
        (preds_path,) = (out / "eval" / "friends-balanced" / key).glob("*/predictions.jsonl")
        preds = read_predictions(preds_path)
        assert row["auc"] == metrics["threshold_sweep"]["roc_auc"]
        assert row["auc"] == pytest.approx(
            roc_auc_score([r["gold"] == "SPEAK" for r in preds], [r["p_speak"] for r in preds])
        )
        assert abs(row["auc"] - metrics["balanced_accuracy"]) < 1e-9
    # Prompts that kept no earlier turn under the budget, counted on the sampled points.
    context = results["context"]["friends-balanced"]

    (pred_path,) = (out / "eval" / "friends-balanced" / "previous-speaker").glob(
        "*/predictions.jsonl"
    )
    ids = [r["point_id"] for r in read_predictions(pred_path)]
    points = load_benchmark(str(out / "bench" / "friends")).points_by_id("test", ids)
    assert context["points"] == 40
    assert context["with_earlier_turns"] == sum(1 for p in points if p.input.history)
    assert 0 <= context["lost_all_earlier_turns"] <= context["with_earlier_turns"]
    status = results["status"]
    assert status["eval/friends-balanced/previous-speaker"] == "done"
    assert status["train/decision"] == "pending"
    md = (out / "results.md").read_text()
    assert "| previous-speaker rule | 40 |" in md and "| explicit-address rule | 40 |" in md
    assert "Unfinished stages continue with the same command" in md
    resume = (out / "resume.sh").read_text()
    assert f"--out {out}" in resume and "nice -n 19" in resume

    # A training stage still running has only its checkpoint validations: the report shows
    # them as development figures (here: the rule's decisions written as a validation is).
    rows = read_predictions(pred_path)
    by_id = {p.point_id: p for p in points}
    gold = [by_id[r["point_id"]].gold for r in rows]
    said = [r["decision"] for r in rows]
    metrics = compute_metrics(
        [g.label.value for g in gold],
        said,
        [g.category.value for g in gold],
        [by_id[r["point_id"]].group for r in rows],
        None,
        n_boot=0,
    )
    step = out / "train" / "decision" / "validation" / "step-000007"
    step.mkdir(parents=True)
    (step / "metrics.json").write_text(json.dumps({"step": 7, **metrics}, default=str))

    # A cut row (--reasoning-test-points): a real 20-point evaluation where the reasoning row's
    # goes (a rule: the LM rows take hours). The report scores every row again on its points.
    scored = subprocess.run(
        [
            sys.executable,
            "-m",
            "polylogue.cli",
            "eval",
            "--data",
            str(out / "bench" / "friends"),
            "--split",
            "test",
            "--model",
            "baseline:explicit-address",
            "--limit",
            "20",
            "--sample-seed",
            "13",
            "--balanced",
            "--out",
            str(out / "eval" / "friends-balanced" / "sft-reasoning"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert scored.returncode == 0, scored.stdout + scored.stderr

    # The same command again: every finished stage is skipped, nothing is recorded twice.
    sessions = json.loads((out / "stages.json").read_text())
    again = run_script(*args, "--reasoning-test-points", "20")
    assert again.returncode == 0, again.stdout + again.stderr
    later = json.loads((out / "results.json").read_text())
    cut = later["tables"]["friends-balanced"]["sft-reasoning"]
    same = later["tables"]["friends-balanced-sft-reasoning-points"]
    # A seeded stratified sample of 20 is the first 20 of the 40: every row holds its points.
    assert set(same) == {"previous-speaker", "explicit-address", "sft-reasoning"}
    assert {row["n"] for row in same.values()} == {20} and cut["n"] == 20
    # The rule re-scored on those points is the rule scored on them alone.
    for key in ("accuracy", "f1_avg", "balanced_accuracy", "speak_ratio", "precision"):
        assert same["explicit-address"][key] == cut[key]
    assert same["explicit-address"]["four_way"] == cut["four_way"]
    (cut_pred,) = (out / "eval" / "friends-balanced" / "sft-reasoning").glob("*/predictions.jsonl")
    ids = {r["point_id"] for r in read_predictions(cut_pred)}
    prev = [r for r in read_predictions(pred_path) if r["point_id"] in ids]
    assert (
        same["previous-speaker"]["balanced_accuracy"]
        == compute_metrics([r["gold"] for r in prev], [r["decision"] for r in prev], n_boot=0)[
            "balanced_accuracy"
        ]
    )
    # The cut row against each row, paired on its points: against the same rule, nothing.
    paired = later["tables"]["friends-balanced-sft-reasoning-paired"]
    assert paired["explicit-address"] == [0.0, 0.0, 0.0]
    d, lo, hi = paired["previous-speaker"]
    assert d == pytest.approx(
        cut["balanced_accuracy"] - same["previous-speaker"]["balanced_accuracy"], abs=1e-4
    )
    assert lo <= d <= hi
    md = (out / "results.md").read_text()
    assert "row scored 20 of these points" in md
    assert "Its BalAcc minus each row's on those points" in md
    # Both session commands are named (they differ in an option that may change).
    assert len(later["session_commands"]) == 2
    assert "--reasoning-test-points 20" in later["session_commands"][1]
    (curve,) = json.loads((out / "results.json").read_text())["train_decision_in_progress"]
    speak = [g.label.value == "SPEAK" for g in gold]
    said_speak = [d == "SPEAK" for d in said]
    assert curve["step"] == 7 and curve["n"] == 40
    assert curve["speak_ratio"] == sum(said_speak) / sum(speak)
    right = sum(a and b for a, b in zip(said_speak, speak, strict=True))
    assert curve["precision"] == right / sum(said_speak)
    assert curve["balanced_accuracy"] == metrics["balanced_accuracy"]
    assert "#### train/decision: not finished" in (out / "results.md").read_text()
    assert "eval/friends-balanced/previous-speaker: skipped (40 points scored)" in again.stdout
    assert json.loads((out / "stages.json").read_text()) == sessions

    # The folder holds this configuration: another one is refused, naming what differs, and
    # nothing is run or recorded; options that do not change results may differ.
    other = [*args[:-4], "--max-prompt-tokens", "256", "--device", "cpu"]
    refused = run_script(*other)
    assert refused.returncode != 0
    assert "another configuration" in refused.stderr
    assert "max_prompt_tokens: folder 384, now 256" in refused.stderr
    assert json.loads((out / "stages.json").read_text()) == sessions
    assert json.loads((out / "run_args.json").read_text())["args"]["max_prompt_tokens"] == 384

    # --publish: the report into PREFIX.md/.json and between the docs markers, idempotently.
    docs = tmp_path / "training.md"
    docs.write_text(
        f"# Training\n\nbefore\n\n{BEGIN}\nstale-block-text\n{END}\n\nafter\n", encoding="utf-8"
    )
    prefix = tmp_path / "results" / "repro"
    publish = ["--out", str(out), "--publish", str(prefix), "--docs", str(docs)]
    done = run_script(*publish)
    assert done.returncode == 0, done.stdout + done.stderr
    text = docs.read_text(encoding="utf-8")
    assert text.startswith("# Training\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert "stale-block-text" not in block and "| previous-speaker rule | 40 |" in block
    # No machine paths in the block: the run folder is a placeholder, the command relative.
    assert str(out) not in block and sys.executable not in block
    published = prefix.with_suffix(".json").read_text() + prefix.with_suffix(".md").read_text()
    assert str(out) not in published and sys.executable not in published
    assert "--out RUN_FOLDER" in block and "PYTHONPATH=src " in block
    # The block's "generated by" line too: PREFIX lies outside the working directory here, so
    # it is a placeholder, never the machine's path (tmp_path).
    assert str(tmp_path) not in block and "--publish PUBLISH" in block
    assert json.loads(prefix.with_suffix(".json").read_text())["tables"] == later["tables"]
    assert run_script(*publish).returncode == 0
    assert docs.read_text(encoding="utf-8") == text

    # The recognizer rendering: the same sampled points, their words as a speech recognizer
    # writes them, in views of their own beside the written ones (nothing else is rerun).
    heard = run_script(
        *args, "--renderings", "original,recognizer", "--reasoning-test-points", "20"
    )
    assert heard.returncode == 0, heard.stdout + heard.stderr
    tables = json.loads((out / "results.json").read_text())["tables"]
    assert set(tables["friends-balanced-recognizer"]) == {"previous-speaker", "explicit-address"}
    for key in ("previous-speaker", "explicit-address"):
        (run,) = (out / "eval" / "friends-balanced-recognizer" / key).glob("*/metrics.json")
        assert json.loads(run.read_text())["rendering"] == "recognizer"
        (heard_preds,) = run.parent.glob("predictions.jsonl")
        assert {r["point_id"] for r in read_predictions(heard_preds)} == {
            r["point_id"] for r in read_predictions(pred_path)
        }
    assert tables["friends-balanced"] == later["tables"]["friends-balanced"]
    assert "balanced class ratio, recognizer rendering" in (out / "results.md").read_text()
    assert "eval/friends-balanced/previous-speaker: skipped" in heard.stdout
