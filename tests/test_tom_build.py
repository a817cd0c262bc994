"""``tom build`` on real AMI meetings: valid release-format records that the harness runs,
both scorers score, and the annotation study turns into adjudicated gold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from polylogue.cli import app
from polylogue.paths import corpus_dir
from polylogue.tom.baselines import LeakGenerator
from polylogue.tom.build import (
    BUILD_FILE,
    PROPOSALS_FILE,
    BuildError,
    ToMBuildOptions,
    build_items,
    release_sessions,
)
from polylogue.tom.prompts import parse_variant
from polylogue.tom.records import (
    KNOWN_ANOMALY_KINDS,
    LABELS,
    TASK_FILES,
    ToMTask,
    load_tom_benchmark,
    validate,
)
from polylogue.tom.report import scores_from_run
from polylogue.tom.runner import export_official, run_tom
from polylogue.tom.scoring import score_official

#: Not used by the release: ES2015a (decision annotation), IS1008a (addressee + you-usage).
MEETINGS = ("ES2015a", "IS1008a")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("built") / "items"
    return build_items(corpus_dir("ami"), out, ToMBuildOptions(meetings=MEETINGS))


def test_records_are_valid_release_records(built: Any) -> None:
    bench = load_tom_benchmark(built.folder)
    counts = {t: len(bench.task_records(t)) for t in ToMTask}
    assert all(n > 0 for n in counts.values()) and counts[ToMTask.STATE] % 2 == 0
    kinds = {a.kind for a in validate(bench)}
    assert kinds <= set(KNOWN_ANOMALY_KINDS) and "invalid_gold" not in kinds
    assert {r.item.session_id for r in bench.all_records()} == set(MEETINGS)
    for rec in bench.all_records():
        for q, label in rec.gold.answers.items():
            assert label in LABELS[(rec.task, q)]
        if rec.task is not ToMTask.STATE:
            assert rec.item.window.duration == 50.0
    # STATE: two 5-s windows per source bundle, first and last 5 s of a 50-s window
    state = bench.task_records(ToMTask.STATE)
    w0, w1 = state[0].item.window, state[1].item.window
    assert state[0].item.scoring_bundle == state[1].item.scoring_bundle
    assert (w0.duration, w1.duration, round(w1.start - w0.start, 3)) == (5.0, 5.0, 45.0)
    # ES2015's close-up mapping comes from the release (ES2015b/c): D, B, C, A
    es = next(r for r in bench.task_records(ToMTask.YOU) if r.item.session_id == "ES2015a")
    assert es.item.reconstruction.closeup_to_agent == {
        "Closeup1": "D",
        "Closeup2": "B",
        "Closeup3": "C",
        "Closeup4": "A",
    }
    manifest = json.loads((built.folder / BUILD_FILE).read_text())
    assert manifest["release_overlap"] == [] and manifest["meetings"] == list(MEETINGS)


def test_addressee_proposals_follow_the_ami_annotation(built: Any) -> None:
    """Where the proposal says ``ami:addressee``, the AMI act holding the 'you' at window
    start + T names exactly that addressee (read here straight from the conversation)."""
    from polylogue.tom.transcript import AmiSessions

    bench = load_tom_benchmark(built.folder)
    proposals = {
        json.loads(line)["id"]: json.loads(line)["proposals"]
        for line in (built.folder / PROPOSALS_FILE).read_text().splitlines()
    }
    conv = AmiSessions(corpus_dir("ami")).conversation("IS1008a")
    checked = 0
    for rec in bench.task_records(ToMTask.YOU):
        if proposals[rec.id]["Q1"]["source"] != "ami:addressee":
            continue
        assert rec.item.speaker is not None and rec.item.you_time is not None
        t = rec.item.window.start + rec.item.you_time
        act = next(
            u
            for u in conv.utterances
            if u.speaker == rec.item.speaker
            and u.start is not None
            and u.end is not None
            and u.start - 0.05 <= t <= u.end + 0.05
            and u.addressees is not None
        )
        assert act.addressees is not None and "you" in act.text.lower()
        others = [a for a in act.addressees if a != rec.item.speaker]
        expected = others[0] if len(others) == 1 else "MULTIPLE"
        assert rec.gold.answers["Q1"] == expected
        # Q2 asks the proposed addressee's attitude, in the release's template
        assert rec.item.attitude_subject == expected
        checked += 1
    assert checked >= 3


def test_release_meetings_are_excluded_by_default(tmp_path: Path) -> None:
    used = release_sessions(corpus_dir("meetingtom"))
    assert "ES2002a" in used and "ES2015a" not in used
    result = build_items(
        corpus_dir("ami"),
        tmp_path / "b",
        ToMBuildOptions(meetings=("ES2002a", "ES2015a"), tasks=("you",), per_meeting=2),
    )
    assert result.excluded == ["ES2002a"] and result.meetings == ["ES2015a"]
    # Q2 without the proposed addressee's letter: no Q1 hint for annotators or joint prompts
    neutral = build_items(
        corpus_dir("ami"),
        tmp_path / "n",
        ToMBuildOptions(
            meetings=("ES2015a",), tasks=("you",), per_meeting=2, q2_subject="addressee"
        ),
    )
    bench = load_tom_benchmark(neutral.folder)
    assert {r.item.questions["Q2"].text.split("'s")[0] for r in bench.all_records()} == {
        "What is the addressee"
    }
    assert not {a.kind for a in validate(bench)} & {"q2_names_q1_gold", "q2_subject_differs"}
    with pytest.raises(BuildError, match="all are used by the release"):
        build_items(corpus_dir("ami"), tmp_path / "c", ToMBuildOptions(meetings=("ES2002a",)))
    # asked for explicitly, release meetings can be mined (ids then stay in their own folder)
    kept = build_items(
        corpus_dir("ami"),
        tmp_path / "d",
        ToMBuildOptions(
            meetings=("ES2002a",), tasks=("you",), per_meeting=2, exclude_release=False
        ),
    )
    assert {it.session for it in kept.items} == {"ES2002a"}


def test_harness_and_both_scorers_read_the_built_items(built: Any, tmp_path: Path) -> None:
    bench = load_tom_benchmark(built.folder)
    records = list(bench.all_records())
    # Q2's subject is the proposed addressee, so the leak baseline reproduces every proposal:
    # the joint prompt leaks on built items exactly as on the release.
    you = [r for r in records if r.task is ToMTask.YOU]
    leak = run_tom(
        bench,
        you,
        LeakGenerator(),
        parse_variant("noprompt+utter+joint"),
        tmp_path,
        ami_folder=corpus_dir("ami"),
    )
    assert scores_from_run(bench, leak.folder).values["t21_acc"] == 1.0

    from polylogue.tom.baselines import FixedHeuristic

    run = run_tom(
        bench,
        records,
        FixedHeuristic(),
        parse_variant("noprompt+utter"),
        tmp_path,
        ami_folder=corpus_dir("ami"),
    )
    assert run.errors == 0 and len(run.rows) == len(records)
    official = scores_from_run(bench, run.folder, "official")
    strict = scores_from_run(bench, run.folder, "strict")
    assert strict.n["t1"] == len(bench.task_records(ToMTask.STATE))
    assert official.values["t1_acc"] == strict.values["t1_acc"]  # full coverage
    export_official(run.folder, tmp_path / "official")
    gold = [built.folder / TASK_FILES[t] for t in ToMTask]
    table = score_official(gold, tmp_path / "official").table[("heuristic-fixed-utter", "noprompt")]
    assert table["state_acc"] == official.values["t1_acc"]
    assert table["you_q1_acc"] == official.values["t21_acc"]
    assert table["cons_q1_acc"] == official.values["t31_acc"]


def test_cli_build_validate_and_annotation_study(tmp_path: Path) -> None:
    """``tom build`` -> ``tom validate --data`` -> ``annotate create --meetingtom`` -> two
    annotators + adjudication -> agreement per task -> exported gold the harness reads."""
    from polylogue.annotate.analysis import agreement_report, export_adjudicated
    from polylogue.annotate.store import AnnotationStore

    runner = CliRunner()
    out = tmp_path / "items"
    res = runner.invoke(
        app, ["tom", "build", "--out", str(out), "--meetings", "IS1008a", "--per-meeting", "2"]
    )
    assert res.exit_code == 0, res.output
    assert res.stdout.strip().splitlines()[-1] == str(out)
    val = runner.invoke(app, ["tom", "validate", "--data", str(out)])
    assert val.exit_code == 0 and "UNEXPECTED" not in val.output, val.output
    bad = runner.invoke(app, ["tom", "build", "--out", str(tmp_path / "x"), "--meetings", "XX"])
    assert bad.exit_code == 2 and "XX" in bad.output
    # the cross-fitted heuristic runs on the built folder (one meeting series: 2 folds, one
    # of them empty, so its records get the default thresholds of an empty training set)
    run = runner.invoke(
        app,
        ["tom", "run", "--model", "heuristic", "--data", str(out), "--out", str(tmp_path / "r")],
    )
    assert run.exit_code == 0, run.output
    manifest = json.loads((Path(run.stdout.strip().splitlines()[-1]) / "manifest.json").read_text())
    assert manifest["generator"]["fit"] == "3-fold cross-fit by AMI meeting series"
    assert manifest["generator"]["folds"]["0"] == ["IS1008"]

    db = tmp_path / "study.sqlite"
    created = runner.invoke(
        app,
        [
            "annotate", "create", "--db", str(db), "--study", "built",
            "--meetingtom", str(out), "--annotators", "h1,h2", "--adjudicator", "adj",
        ],
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    store = AnnotationStore(db)
    study = store.study("built")
    items = store.items(study)
    assert len(items) == 4 + 2 + 2  # 2 STATE bundles x 2 windows, 2 YOU, 2 CONSENSUS
    people = {a.name: a for a in store.annotators(study)}
    # h1 takes every proposal; h2 differs on YOU Q1 of one item: a tie the adjudicator settles
    tie = next(it for it in items if it.item_id.startswith("you:"))
    for it in items:
        for q in it.questions:
            proposal = it.gold["answers"][q.id]
            store.save_answer(people["h1"], it.item_id, q.id, proposal)
            other = next(o for o in q.options if o != proposal)
            h2 = other if (it is tie and q.id == "Q1") else proposal
            store.save_answer(people["h2"], it.item_id, q.id, h2)
    store.save_adjudication(study, tie.item_id, "Q1", "UNKNOWN", "adj")
    rows = {s.slice: s for s in agreement_report(store, study)}
    assert {"Q1/state", "Q1/you", "Q2/you", "Q1/consensus", "Q2/consensus"} <= set(rows)
    assert rows["Q1/state"].fleiss == pytest.approx(1.0)
    assert rows["Q1/you"].agreement == pytest.approx(0.5)  # one of two YOU items differs
    report = export_adjudicated(store, study, tmp_path / "gold")
    assert report.items == len(items)
    gold = load_tom_benchmark(tmp_path / "gold")
    assert gold.by_id()[tie.item_id].gold.answers["Q1"] == "UNKNOWN"
    assert {a.kind for a in validate(gold)} <= set(KNOWN_ANOMALY_KINDS)
