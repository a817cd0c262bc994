"""Built MeetingToM items through the real annotation app in Chromium: two annotators label
by keyboard, the adjudicator settles their tie, and the exported gold is read by the harness
and the official scorer (same set-up as ``test_annotate_browser.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browsers import VIEWPORT, launch_chromium, new_study, require_chromium, serve_study

pytestmark = pytest.mark.slow

playwright_api = require_chromium()


def test_built_items_round_trip_through_the_annotation_app(tmp_path: Path) -> None:
    from polylogue.annotate.analysis import agreement_report, export_adjudicated
    from polylogue.annotate.store import StudyKind
    from polylogue.annotate.study import SamplingPlan, meetingtom_items
    from polylogue.paths import corpus_dir
    from polylogue.tom.build import ToMBuildOptions, build_items
    from polylogue.tom.records import KNOWN_ANOMALY_KINDS, TASK_FILES, ToMTask, load_tom_benchmark
    from polylogue.tom.records import validate as validate_records
    from polylogue.tom.scoring import score_official

    expect = playwright_api.expect
    built = build_items(
        corpus_dir("ami"),
        tmp_path / "built",
        ToMBuildOptions(meetings=("IS1008a",), tasks=("you", "consensus"), per_meeting=1),
    )
    src = meetingtom_items(built.folder, ami_folder=corpus_dir("ami"))
    store, study, keys, _ = new_study(
        tmp_path / "study.sqlite",
        "built",
        StudyKind.MEETINGTOM,
        src,
        SamplingPlan(None, seed=3),
        ["h1", "h2"],
        adjudicators=["adj"],
    )
    items = {it.item_id: it for it in store.items(study)}
    assert len(items) == 2
    you_id = next(i for i in items if i.startswith("you:"))
    proposal = items[you_id].gold["answers"]["Q1"]
    options = next(q.options for q in items[you_id].questions if q.id == "Q1")
    disagree = "UNKNOWN" if proposal != "UNKNOWN" else "MULTIPLE"

    with serve_study(store) as (url, _), playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        for name in ("h1", "h2"):
            order = next(a.order for a in store.annotators(study) if a.name == name)
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.goto(f"{url}/a/{keys[name]}")
            page.wait_for_selector("body[data-ready='1']")
            for done, item_id in enumerate(order, 1):
                expect(page.locator(".question")).to_have_count(2)
                for q in sorted(items[item_id].questions, key=lambda q: q.id):
                    label = items[item_id].gold["answers"][q.id]
                    if name == "h2" and item_id == you_id and q.id == "Q1":
                        label = disagree
                    expect(page.locator(".question.active")).to_have_attribute("data-qid", q.id)
                    page.keyboard.press(str(q.options.index(label) + 1))
                expect(page.locator("[data-testid=progress]")).to_have_text(f"{done} / 2 done")
            expect(page.locator("[data-testid=done]")).to_be_visible()

        adj = browser.new_context(viewport=VIEWPORT).new_page()
        adj.goto(f"{url}/adjudicate/{keys['adj']}")
        adj.wait_for_selector("body[data-ready='1']")
        expect(adj.locator("[data-testid=queue]")).to_have_text("0 / 1 decided")
        expect(adj.locator(".vote")).to_have_count(2)
        adj.keyboard.press(str(options.index("UNKNOWN") + 1))
        expect(adj.locator("[data-testid=queue]")).to_have_text("1 / 1 decided")
        browser.close()

    # Agreement per task: they agree everywhere but on YOU Q1.
    rows = {s.slice: s for s in agreement_report(store, study)}
    assert rows["Q1/consensus"].agreement == 1.0 and rows["Q2/you"].agreement == 1.0
    assert rows["Q1/you"].agreement == 0.0

    # The adjudicated set is a release-format folder: validated, and scored by the official
    # scorer (the proposals, as predictions, now miss YOU Q1 only).
    report = export_adjudicated(store, study, tmp_path / "gold")
    assert report.items == 2 and report.changed_from_gold == 1
    gold = load_tom_benchmark(tmp_path / "gold")
    assert gold.by_id()[you_id].gold.answers["Q1"] == "UNKNOWN"
    assert {a.kind for a in validate_records(gold)} <= set(KNOWN_ANOMALY_KINDS)
    preds = tmp_path / "preds"
    preds.mkdir()
    for task in ("you", "consensus"):
        lines = [
            json.dumps({"bundle_name": it.gold["record"]["bundle_name"], **it.gold["answers"]})
            for it in items.values()
            if it.gold["record"]["task"] == task
        ]
        (preds / f"proposals_{task}_noprompt.jsonl").write_text("\n".join(lines) + "\n")
    table = score_official([tmp_path / "gold" / TASK_FILES[t] for t in ToMTask], preds).table
    cells = table[("proposals", "noprompt")]
    assert cells["you_q1_acc"] == 0.0 and cells["you_q2_acc"] == 1.0
    assert cells["cons_q1_acc"] == 1.0
