"""End-to-end MeetingToM runs on real records: run folders, resume, export, both scorers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polylogue.paths import corpus_dir
from polylogue.tom.backends import (
    ChanceGenerator,
    HeuristicGenerator,
    HFTextGenerator,
    MajorityGenerator,
)
from polylogue.tom.prompts import parse_variant
from polylogue.tom.records import TASK_FILES, ToMTask, load_tom_benchmark
from polylogue.tom.report import build_report, label_tables, scores_from_run
from polylogue.tom.runner import MANIFEST, PREDICTIONS, export_official, load_tom_run, run_tom
from polylogue.tom.scoring import majority_labels, score_official


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    return load_tom_benchmark()


def test_heuristic_run_resume_export_and_score(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    records = bench.select(limit_per_task=6)
    options = parse_variant("noprompt+utter")
    ami = corpus_dir("ami")
    first = run_tom(bench, records, HeuristicGenerator(), options, tmp_path, ami_folder=ami)
    assert first.generated == 18 and first.errors == 0
    manifest, rows = load_tom_run(first.folder)
    assert manifest["status"] == "complete" and manifest["variant"] == "noprompt+utter"
    assert [r["point_id"] for r in rows] == [r.id for r in records]
    assert all("answers" not in r and "gold" not in r for r in rows)  # no gold in predictions

    # a killed write: drop the last two rows and leave half a line behind
    pred = first.folder / PREDICTIONS
    lines = pred.read_text().splitlines(keepends=True)
    pred.write_text("".join(lines[:-2]) + lines[-2][: len(lines[-2]) // 2])
    again = run_tom(bench, records, HeuristicGenerator(), options, tmp_path, ami_folder=ami)
    assert again.folder == first.folder and again.generated == 2 and again.reused == 16
    assert [json.loads(x) for x in pred.read_text().splitlines()] == rows

    # official files: the official scorer reads them exactly like the official-mode run scores
    files = export_official(first.folder, tmp_path / "official")
    assert sorted(p.name for p in files) == [
        "heuristic-utter_consensus_noprompt.jsonl",
        "heuristic-utter_state_noprompt.jsonl",
        "heuristic-utter_you_noprompt.jsonl",
    ]
    official = score_official(
        [bench.folder / TASK_FILES[t] for t in ToMTask], tmp_path / "official"
    )
    cells = official.table[("heuristic-utter", "noprompt")]
    scores = scores_from_run(bench, first.folder, "official")
    assert cells["state_acc"] == scores.values["t1_acc"]
    assert cells["you_q1_acc"] == scores.values["t21_acc"]
    assert cells["cons_q1_acc"] == scores.values["t31_acc"] and scores.n["t1"] == 6
    strict = scores_from_run(bench, first.folder, "strict")
    assert strict.values["t1_acc"] == scores.values["t1_acc"]  # full coverage: modes agree
    assert strict.coverage == {k: 1.0 for k in strict.coverage}


def test_baselines_and_report_tables(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    records = bench.select(limit_per_task=10)
    ami = corpus_dir("ami")
    majority = {f"{t.value}.{q}": lab for (t, q), lab in majority_labels(records).items()}
    setups = [
        (ChanceGenerator(seed=1), "noprompt+utter"),
        (MajorityGenerator(majority), "noprompt+utter"),
        (HeuristicGenerator(), "noprompt+utter"),
        (HeuristicGenerator(), "noprompt+utter+nodm"),
    ]
    runs = [
        run_tom(bench, records, gen, parse_variant(variant), tmp_path, ami_folder=ami)
        for gen, variant in setups
    ]
    scores = [scores_from_run(bench, r.folder, "strict") for r in runs]
    maj = scores[1].values
    state_gold = [r.gold.answers["Q1"] for r in records if r.task is ToMTask.STATE]
    assert maj["t1_acc"] == pytest.approx(state_gold.count(majority["state.Q1"]) / len(state_gold))
    text = build_report(scores, modality="utterance")
    assert text.startswith("Table 1. Overall performance")
    assert (
        "| chance-level | 14.29 | 14.29 | 16.67 | 16.67 | 25.00 | 25.00 | 25.00 | 25.00 | – | – "
        "| 20.00 | 20.00 |" in text
    )
    assert "Table 5. Discourse markers" in text and "w/o discourse markers" in text
    table5 = text.split("Table 5.")[1]
    assert "| Task 1 Acc. | Task 1 Macro | Task 2.1 Acc. | Task 2.1 Macro |" in table5
    assert "Table 3." not in text  # no prompting ablation was run
    per_label = label_tables(scores[1])
    # the majority baseline predicts one STATE label for all 10 STATE records
    assert f"| {majority['state.Q1']} | " in per_label and "| 10 |" in per_label
    assert "gold \\ predicted" in per_label and "consensus.Q2_cond" in per_label


@pytest.mark.slow
def test_smollm2_text_only_run(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The local SmolLM2 model answers real records by option scoring; the run resumes."""
    records = [
        bench.by_id()[i]
        for i in ("state:ES2002a_state0004_w0", "state:ES2002a_state0004_w1", "you:ES2002a_you0002")
    ]
    gen = HFTextGenerator("smollm2", mode="choice", threads=1, cache_path=tmp_path / "c.sqlite")
    options = parse_variant("noprompt+utter+q1only")
    run = run_tom(bench, records, gen, options, tmp_path, ami_folder=corpus_dir("ami"))
    assert run.generated == 3 and run.errors == 0
    for row in run.rows:
        answer = json.loads(row["response_text"])
        assert set(answer) == {"Q1"} and row["usage"]["prompt_tokens"] > 100
    scores = scores_from_run(bench, run.folder, "strict")
    assert scores.coverage == {"t1": 1.0, "t21": 1.0}  # option scoring always yields a label
    assert (run.folder / MANIFEST).is_file()
    # a fresh run folder (and generator) with the same options answers from the response cache
    fresh = HFTextGenerator("smollm2", mode="choice", threads=1, cache_path=tmp_path / "c.sqlite")
    again = run_tom(bench, records, fresh, options, tmp_path / "b", ami_folder=corpus_dir("ami"))
    assert all(r["cached"] for r in again.rows) and run.folder.name == again.folder.name
    assert [r["response_text"] for r in again.rows] == [r["response_text"] for r in run.rows]
