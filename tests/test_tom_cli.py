"""``polylogue tom`` commands end to end on a few real records."""

from __future__ import annotations

import csv
from pathlib import Path

from typer.testing import CliRunner

from polylogue.cli import app

runner = CliRunner()


def test_validate_lists_known_anomalies() -> None:
    result = runner.invoke(app, ["tom", "validate"])
    assert result.exit_code == 0, result.output
    assert "state: 600 records" in result.output
    assert "q2_names_q1_gold" in result.output and "203" in result.output
    assert "UNEXPECTED" not in result.output
    assert result.stdout.splitlines()[-1].startswith("verdict: OK: 1200 records load;")


def test_validate_verdict_names_undocumented_kinds() -> None:
    from polylogue.cli.tom import validate_verdict

    line = validate_verdict(10, {"self_address": 1, "mystery": 2}, ["mystery"])
    assert line == "verdict: FAIL: 1 undocumented finding kind(s) (mystery) in 10 records"


def test_run_score_export_report(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    # heuristic-fixed: the cross-fitted `heuristic` reads every session to fit (covered on a
    # small built folder in test_tom_build.py)
    args = [
        "tom",
        "run",
        "--model",
        "heuristic-fixed",
        "--variant",
        "noprompt+utter",
        "--limit",
        "3",
    ]
    result = runner.invoke(app, [*args, "--out", str(runs)])
    assert result.exit_code == 0, result.output
    # not a terminal: progress is one plain line per step, never run together
    progress = [x for x in result.output.splitlines() if x.startswith("records: ")]
    assert progress and all(x.count("/") == 1 for x in progress)
    folder = Path(result.stdout.strip().splitlines()[-1])
    assert (folder / "predictions.jsonl").is_file() and folder.parent == runs

    scored = runner.invoke(app, ["tom", "score", str(folder), "--out", str(tmp_path / "s")])
    assert scored.exit_code == 0, scored.output
    header = next(x for x in scored.stdout.splitlines() if x.startswith("| metric"))
    assert "official %" in header and "strict %" in header
    assert any(x.startswith("| Task 1 Acc.") for x in scored.stdout.splitlines())
    assert "{" not in scored.stdout  # tables, not Python dicts
    assert (tmp_path / "s" / "scores.json").is_file()

    official = tmp_path / "official"
    exported = runner.invoke(app, ["tom", "export", str(folder), "--out", str(official)])
    assert exported.exit_code == 0, exported.output
    summary = runner.invoke(app, ["tom", "score", str(official), "--out", str(tmp_path / "o")])
    assert summary.exit_code == 0, summary.output
    assert "| model" in summary.stdout and "| heuristic-fixed-utter |" in summary.stdout
    with open(tmp_path / "o" / "overall_summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["model"], r["variant"]) for r in rows] == [("heuristic-fixed-utter", "noprompt")]
    assert all(rows[0][c] for c in ("state_acc", "you_q1_acc", "cons_points_acc"))

    report = runner.invoke(app, ["tom", "report", str(folder), "--modality", "utterance"])
    assert report.exit_code == 0, report.output
    assert "Table 1. Overall performance" in report.stdout


def test_leak_baseline_from_the_cli(tmp_path: Path) -> None:
    args = ["tom", "run", "--model", "leak", "--tasks", "you", "--limit", "5"]
    result = runner.invoke(
        app, [*args, "--variant", "noprompt+utter+joint", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "copying Q2's subject answers Task 2.1 at" in result.output
    folder = Path(result.stdout.strip().splitlines()[-1])
    report = runner.invoke(app, ["tom", "report", str(folder), "--modality", "utterance"])
    assert report.exit_code == 0, report.output
    assert "copy Q2's subject (no input; joint-prompt leak)" in report.stdout
    assert "[joint YOU prompt: Q2 leaks Q1]" in report.stdout
    wrong = runner.invoke(
        app, ["tom", "run", "--model", "leak", "--limit", "1", "--out", str(tmp_path)]
    )
    assert wrong.exit_code == 2 and "YOU only" in wrong.output


def test_score_and_report_explain_task_32(tmp_path: Path) -> None:
    """The official Task 3.2 of a model that never says PSEUDO_CONSENSUS is 100%: the printed
    tables say why, next to what the strict columns mean (issue 27, item 7)."""
    from polylogue.tom.report import MODE_RULES, TASK32_NOTES

    run = runner.invoke(
        app,
        [
            *("tom", "run", "--model", "majority", "--tasks", "consensus", "--limit", "30"),
            *("--out", str(tmp_path / "runs")),
        ],
    )
    assert run.exit_code == 0, run.output
    folder = run.stdout.strip().splitlines()[-1]
    score = runner.invoke(app, ["tom", "score", folder])
    assert score.exit_code == 0, score.output
    lines = score.stdout.splitlines()
    row = next(line for line in lines if line.startswith("| Task 3.2 Acc."))
    assert "100.00" in row  # the number the note is about
    pred_pc = next(line for line in lines if line.startswith("| Task 3.2 strict: predicted PC"))
    assert pred_pc.split("|")[4].strip() == "0"  # shown, with its n = 0
    for text in (*TASK32_NOTES.values(), MODE_RULES["official"], MODE_RULES["strict"]):
        assert text in score.stdout, text
    never = [line for line in lines if "never predicted PSEUDO_CONSENSUS" in line]
    assert len(never) == 1 and "Task 3.2 of 100.00" in never[0]
    report = runner.invoke(app, ["tom", "report", folder])
    assert report.exit_code == 0, report.output
    assert all(text in report.stdout for text in TASK32_NOTES.values())
    assert "never predicted PSEUDO_CONSENSUS: its Task 3.2 of 100.00" in report.stdout
