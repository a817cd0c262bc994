"""Honest MeetingToM baselines on the real release: the Q2-subject leak, strict Task 3.2 and
the cross-fitted heuristic."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from polylogue.paths import corpus_dir
from polylogue.tom.baselines import (
    CrossFitHeuristic,
    LeakGenerator,
    fit_crossfit_heuristic,
    fit_crossfit_majority,
    leak_metrics,
    series_folds,
)
from polylogue.tom.prompts import parse_variant
from polylogue.tom.records import TASK_FILES, ToMGold, ToMRecord, ToMTask, load_tom_benchmark
from polylogue.tom.report import build_report, leak_values, scores_from_run
from polylogue.tom.runner import export_official, load_tom_run, run_tom
from polylogue.tom.scoring import score_official, score_strict
from polylogue.tom.transcript import AmiSessions


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    return load_tom_benchmark()


def test_leak_baseline_scores_203_of_300_with_the_joint_prompt(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    you = list(bench.task_records("you"))
    assert len(you) == 300
    # The generator reads Q2's subject from the prompt text it is shown (video-free, so the
    # transcript is only rendered, never used).
    joint = run_tom(
        bench,
        you,
        LeakGenerator(),
        parse_variant("noprompt+utter+joint"),
        tmp_path,
        ami_folder=corpus_dir("ami"),
    )
    strict = scores_from_run(bench, joint.folder, "strict")
    official = scores_from_run(bench, joint.folder, "official")
    assert strict.details["you.Q1"].n == 300
    assert round(strict.values["t21_acc"] * 300) == 203  # 67.67%
    assert official.values["t21_acc"] == pytest.approx(203 / 300)
    # The official evaluator scores the exported file the same way.
    export_official(joint.folder, tmp_path / "off")
    table = score_official([bench.folder / TASK_FILES[t] for t in ToMTask], tmp_path / "off").table
    assert table[("copy-q2-subject-utter-joint", "noprompt")]["you_q1_acc"] == pytest.approx(
        203 / 300
    )
    # The same numbers without running anything, for the report's baseline row.
    m = leak_metrics(you)
    assert m is not None and m.n == 300 and round(m.accuracy * 300) == 203
    assert 0 < m.macro_f1 < m.accuracy

    # The default separate prompts never show Q2's text to Q1: the leak is gone (UNKNOWN).
    first = you[:60]  # enough to show it, quicker than all 300
    separate = run_tom(
        bench,
        first,
        LeakGenerator(),
        parse_variant("noprompt+utter"),
        tmp_path,
        ami_folder=corpus_dir("ami"),
    )
    _, rows = load_tom_run(separate.folder)
    assert {json.loads(r["response_text"]).get("Q1") for r in rows} == {"UNKNOWN"}
    n_unknown = sum(r.gold.answers["Q1"] == "UNKNOWN" for r in first)
    assert round(scores_from_run(bench, separate.folder).values["t21_acc"] * 60) == n_unknown

    # Every table with a Task 2.1 column carries the leak row; joint runs are labelled.
    scores = [scores_from_run(bench, joint.folder), scores_from_run(bench, separate.folder)]
    text = build_report(scores, leak=leak_values(you))
    assert "| copy Q2's subject (no input; joint-prompt leak) | – | – | 67.67 |" in text
    assert "Task 2.1 Macro" in text
    separate_acc = f"{100 * n_unknown / 60:.2f}"
    assert f"| copy-q2-subject (noprompt+utter) | – | – | {separate_acc} |" in text
    alone = build_report(scores[:1], leak=leak_values(you))
    assert "| copy-q2-subject (noprompt+utter+joint) [joint YOU prompt: Q2 leaks Q1] |" in alone


def _cons(bench, bundles):  # type: ignore[no-untyped-def]
    by_id = bench.by_id()
    return [by_id[f"consensus:{b}"] for b in bundles]


def test_strict_task32_on_crafted_cases(bench) -> None:  # type: ignore[no-untyped-def]
    pc = ("ES2003d_consensus0005", "ES2004b_consensus0022", "ES2004c_consensus0035")  # B, C, D
    true = ("ES2002a_consensus0009", "ES2002a_consensus0013", "ES2002b_consensus0022")
    records = _cons(bench, pc + true)

    # A model that never says PSEUDO_CONSENSUS: official 3.2 = 100%, strict gold-PC = 0.
    never = {r.id: {"Q1": "TRUE_CONSENSUS", "Q2": "NONE"} for r in records}
    res = score_strict(records, never)
    assert res.metrics["consensus.Q2_cond"].accuracy == 1.0  # the 3 TRUE items, all NONE
    gold_pc = res.metrics["consensus.Q2_goldpc"]
    assert gold_pc.n == 3 and gold_pc.accuracy == 0.0
    assert res.metrics["consensus.Q2_predpc"].n == 0

    # PC + right dissenter (B), PC + wrong one (D for C), no Q2 answer on the third gold-PC
    # item, and a false alarm: PC + A on a TRUE item (gold NONE).
    ids = [r.id for r in records]
    preds = {
        ids[0]: {"Q1": "PSEUDO_CONSENSUS", "Q2": "B"},
        ids[1]: {"Q1": "PSEUDO_CONSENSUS", "Q2": "D"},
        ids[2]: {"Q1": "NO_CONSENSUS", "Q2": None},
        ids[3]: {"Q1": "PSEUDO_CONSENSUS", "Q2": "A"},
        ids[4]: {"Q1": "TRUE_CONSENSUS", "Q2": "NONE"},
        ids[5]: {"Q1": "TRUE_CONSENSUS", "Q2": "NONE"},
    }
    res = score_strict(records, preds)
    gold_pc = res.metrics["consensus.Q2_goldpc"]  # B right, D wrong, missing wrong
    assert (gold_pc.n, gold_pc.n_missing, gold_pc.accuracy) == (3, 1, pytest.approx(1 / 3))
    pred_pc = res.metrics["consensus.Q2_predpc"]  # ids 0, 1, 3: only B is right
    assert (pred_pc.n, pred_pc.accuracy) == (3, pytest.approx(1 / 3))
    # official-style conditional: Q1 right on ids 0, 1, 4, 5 -> Q2 right on 0, 4, 5
    assert res.metrics["consensus.Q2_cond"].accuracy == pytest.approx(3 / 4)


def test_cross_fitted_thresholds_never_see_their_own_fold(bench) -> None:  # type: ignore[no-untyped-def]
    sessions = ("ES2002a", "ES2003a", "ES2004a", "ES2005a", "ES2006a", "ES2007a")
    records = [r for r in bench.all_records() if r.item.session_id in sessions]
    ami = AmiSessions(corpus_dir("ami"))
    folds = series_folds([r.item.session_id for r in records], 3)
    assert folds == {"ES2002": 0, "ES2003": 1, "ES2004": 2, "ES2005": 0, "ES2006": 1, "ES2007": 2}
    fitted = fit_crossfit_heuristic(records, ami, k=3)
    assert isinstance(fitted, CrossFitHeuristic) and set(fitted.params) == {0, 1, 2}

    # Rewrite the gold of fold 0 (ES2002, ES2005): its own thresholds must not move, while
    # the other folds, which train on it, may.
    def scrambled(r: ToMRecord) -> ToMRecord:
        if folds[r.item.session_id[:6]] != 0 or r.task is ToMTask.CONSENSUS:
            return r
        label = "FOCUSED_LISTENING" if r.task is ToMTask.STATE else "UNKNOWN"
        return replace(r, gold=ToMGold(r.id, {**r.gold.answers, "Q1": label}))

    refit = fit_crossfit_heuristic([scrambled(r) for r in records], ami, k=3)
    assert refit.params[0] == fitted.params[0]
    assert refit.params != fitted.params  # the scrambled labels do reach folds 1 and 2
    described = fitted.describe()
    assert described["kind"] == "heuristic" and described["folds"]["0"] == ["ES2002", "ES2005"]


def test_cross_fitted_majority_uses_other_folds_only(bench) -> None:  # type: ignore[no-untyped-def]
    records = list(bench.all_records())
    fitted = fit_crossfit_majority(records, k=3)
    flipped = [
        replace(r, gold=ToMGold(r.id, {**r.gold.answers, "Q1": "UNCERTAIN"}))
        if r.task is ToMTask.CONSENSUS and fitted.folds[r.item.session_id[:6]] == 1
        else r
        for r in records
    ]
    refit = fit_crossfit_majority(flipped, k=3)
    assert refit.labels[1] == fitted.labels[1]
    assert fitted.labels[0]["consensus.Q1"] == "TRUE_CONSENSUS"
    # folds 0 and 2 train on fold 1: the flipped labels become their majority
    assert refit.labels[0]["consensus.Q1"] == refit.labels[2]["consensus.Q1"] == "UNCERTAIN"
