"""End to end: the real app (uvicorn on loopback) driven by Debian's Chromium through Playwright.

Covers keyboard labelling, save-on-answer, reload/resume, revising an answer, two annotators
at once in separate browser contexts, the adjudicator view and the export of the adjudicated
set. Set ``POLYLOGUE_SCREENSHOTS=1`` to refresh the screenshots under ``docs/screenshots/``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from benches import friends_benchmark
from browsers import VIEWPORT, launch_chromium, new_study, require_chromium, serve_study

pytestmark = pytest.mark.slow

DOCS_SHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"
N_PER_CATEGORY = 3  # 18 items: I1, I2, S1, S2, S3 and SA x 3
N_CATEGORIES = 6  # I1, I2, S1, S2, S3 (v2.1), SA

playwright_api = require_chromium()


@pytest.fixture(scope="module")
def study_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from polylogue.annotate.store import StudyKind
    from polylogue.annotate.study import SamplingPlan, benchmark_items

    tmp = tmp_path_factory.mktemp("browser")
    bench = friends_benchmark(tmp / "bench", 60)
    src = benchmark_items(bench, "test")
    store, study, keys, report = new_study(
        tmp / "study.sqlite",
        "friends-e2e",
        StudyKind.TURNTAKING,
        src,
        SamplingPlan(N_PER_CATEGORY, seed=7),
        ["h1", "h2"],
        adjudicators=["adj"],
        instructions="Decide whether the highlighted target should take the turn now.",
    )
    assert sum(report.drawn.values()) == N_CATEGORIES * N_PER_CATEGORY
    shots = tmp / "shots"
    shots.mkdir()
    with serve_study(store) as (url, _):
        yield {"url": url, "store": store, "study": study, "keys": keys, "tmp": tmp, "shots": shots}


@pytest.fixture(scope="module")
def browser(study_env: dict[str, Any]) -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        b = launch_chromium(p)
        yield b
        b.close()


def _shot(page: Any, env: dict[str, Any], name: str) -> None:
    path = env["shots"] / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    assert path.stat().st_size > 10_000  # a rendered page, not a blank one
    if os.environ.get("POLYLOGUE_SCREENSHOTS"):
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, DOCS_SHOTS / path.name)


def _answer(page: Any, key: str, done_after: int, total: int) -> None:
    """Press a shortcut and wait until the server has confirmed the save."""
    expect = playwright_api.expect
    page.keyboard.press(key)
    expect(page.locator("[data-testid=progress]")).to_have_text(f"{done_after} / {total} done")
    expect(page.locator("#save-status")).to_have_text("Saved ✓")


def _labels(env: dict[str, Any], annotator: str) -> dict[str, str]:
    return {
        a.item_id: a.label for a in env["store"].answers(env["study"]) if a.annotator == annotator
    }


def _order(env: dict[str, Any], annotator: str) -> tuple[str, ...]:
    return next(a.order for a in env["store"].annotators(env["study"]) if a.name == annotator)


def test_label_reload_resume_and_revise(study_env: dict[str, Any], browser: Any) -> None:
    env = study_env
    expect = playwright_api.expect
    total = N_CATEGORIES * N_PER_CATEGORY
    ctx = browser.new_context(viewport=VIEWPORT)
    page = ctx.new_page()
    page.goto(f"{env['url']}/a/{env['keys']['h1']}")
    page.wait_for_selector("body[data-ready='1']")
    expect(page.locator("[data-testid=progress]")).to_have_text(f"0 / {total} done")
    expect(page.locator("#position")).to_have_text(f"Item 1 of {total}")
    # The target is marked in the participant list, and the context ends with the pause marker.
    expect(page.locator(".participant.is-target .badge")).to_have_text("target")
    expect(page.locator(".turn.is-current")).to_have_count(1)
    expect(page.locator(".pause")).to_have_count(1)
    expect(page.locator(".question .qtext")).to_contain_text("take the floor now?")
    _shot(page, env, "annotate-item")

    _answer(page, "s", 1, total)
    _answer(page, "k", 2, total)
    _answer(page, "s", 3, total)
    expect(page.locator("#position")).to_have_text(f"Item 4 of {total}")
    order = _order(env, "h1")
    assert _labels(env, "h1") == {order[0]: "SPEAK", order[1]: "SILENT", order[2]: "SPEAK"}

    # Reload: the page resumes at the first open item with the saved progress.
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    expect(page.locator("[data-testid=progress]")).to_have_text(f"3 / {total} done")
    expect(page.locator("#position")).to_have_text(f"Item 4 of {total}")

    # Going back shows the saved answer; changing it revises the stored row.
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#position")).to_have_text(f"Item 3 of {total}")
    expect(page.locator(".option.chosen")).to_have_attribute("data-label", "SPEAK")
    page.keyboard.press("k")
    expect(page.locator("#save-status")).to_have_text("Saved ✓")
    expect(page.locator("#position")).to_have_text(f"Item 4 of {total}")
    row = next(
        a
        for a in env["store"].answers(env["study"])
        if a.annotator == "h1" and a.item_id == order[2]
    )
    assert (row.label, row.revisions) == ("SILENT", 1)
    assert row.seconds is not None and row.seconds >= 0
    ctx.close()


def test_two_annotators_concurrently_then_adjudicate_and_export(
    study_env: dict[str, Any], browser: Any
) -> None:
    env = study_env
    expect = playwright_api.expect
    total = N_CATEGORIES * N_PER_CATEGORY
    pages = {}
    for name in ("h1", "h2"):
        ctx = browser.new_context(viewport=VIEWPORT)
        page = ctx.new_page()
        page.goto(f"{env['url']}/a/{env['keys'][name]}")
        page.wait_for_selector("body[data-ready='1']")
        pages[name] = page
    # Two people, interleaved: h1 continues (3 done already) with S, h2 alternates K/S.
    done = {"h1": len(_labels(env, "h1")), "h2": 0}
    step = 0
    while done["h1"] < total or done["h2"] < total:
        for name in ("h1", "h2"):
            if done[name] >= total:
                continue
            key = "s" if name == "h1" else ("k" if step % 2 == 0 else "s")
            done[name] += 1
            _answer(pages[name], key, done[name], total)
        step += 1
    expect(pages["h1"].locator("[data-testid=done]")).to_be_visible()
    _shot(pages["h2"], env, "annotate-done")

    h1, h2 = _labels(env, "h1"), _labels(env, "h2")
    assert len(h1) == len(h2) == total
    order1, order2 = _order(env, "h1"), _order(env, "h2")
    assert order1 != order2 and sorted(order1) == sorted(order2)
    assert [h1[i] for i in order1[3:]] == ["SPEAK"] * (total - 3)
    assert [h2[i] for i in order2] == ["SILENT" if k % 2 == 0 else "SPEAK" for k in range(total)]

    # An annotator's API never carries gold, categories or the other annotator's answers.
    api = pages["h2"].request.get(f"{env['url']}/api/a/{env['keys']['h2']}/items/0").json()
    assert set(api) == {"position", "total", "questions", "payload", "answers"}
    assert api["answers"] == {"decision": h2[order2[0]]}
    assert "gold" not in str(api["payload"]) and "category" not in api["payload"]
    assert pages["h2"].request.get(f"{env['url']}/api/a/not-a-key/state").status == 404
    # An annotator key does not open the adjudicator view.
    assert pages["h1"].request.get(f"{env['url']}/adjudicate/{env['keys']['h1']}").status == 404

    # Two annotators who disagree are a tie: the adjudicator decides each one by keyboard.
    ties = sorted(i for i in h1 if h1[i] != h2[i])
    assert ties
    ctx = browser.new_context(viewport=VIEWPORT)
    adj = ctx.new_page()
    adj.goto(f"{env['url']}/adjudicate/{env['keys']['adj']}")
    adj.wait_for_selector("body[data-ready='1']")
    expect(adj.locator("[data-testid=queue]")).to_have_text(f"0 / {len(ties)} decided")
    expect(adj.locator(".vote")).to_have_count(2)
    _shot(adj, env, "adjudicate")
    for k in range(len(ties)):
        adj.keyboard.press("k")
        expect(adj.locator("[data-testid=queue]")).to_have_text(f"{k + 1} / {len(ties)} decided")
    expect(adj.locator("[data-testid=done]")).to_be_visible()
    decided = {d.item_id: d.label for d in env["store"].adjudications(env["study"])}
    assert decided == dict.fromkeys(ties, "SILENT")

    # The adjudicated set is a benchmark folder that load_benchmark reads back.
    from polylogue.annotate.analysis import export_adjudicated
    from polylogue.turntaking.dataset import load_benchmark

    report = export_adjudicated(env["store"], env["study"], env["tmp"] / "adjudicated")
    assert report.items == total and not report.dropped_unresolved
    points = load_benchmark(env["tmp"] / "adjudicated").points("test")
    got = {p.point_id: p.gold.label.value for p in points}
    expected = {i: (decided[i] if i in decided else h1[i]) for i in h1}
    assert got == expected
    ctx.close()


def test_meetingtom_questions_by_number_keys(
    tmp_path: Path, study_env: dict[str, Any], browser: Any
) -> None:
    """A MeetingToM item: two questions answered with number keys, transcript window shown."""
    from polylogue.annotate.store import StudyKind
    from polylogue.annotate.study import SamplingPlan, meetingtom_items
    from polylogue.paths import corpus_dir

    expect = playwright_api.expect
    src = meetingtom_items(tasks=["you"], ami_folder=corpus_dir("ami"))
    store, study, keys, _ = new_study(
        tmp_path / "tom.sqlite", "tom", StudyKind.MEETINGTOM, src, SamplingPlan(2, seed=1), ["a"]
    )
    with serve_study(store) as (url, _):
        ctx = browser.new_context(viewport=VIEWPORT)
        page = ctx.new_page()
        page.goto(f"{url}/a/{keys['a']}")
        page.wait_for_selector("body[data-ready='1']")
        expect(page.locator(".question")).to_have_count(2)
        expect(page.locator(".question.active")).to_have_attribute("data-qid", "Q1")
        expect(page.locator(".turn").first).to_be_visible()
        expect(page.locator("#context-meta")).to_contain_text("MeetingToM · you")
        _shot(page, study_env, "annotate-meetingtom")
        page.keyboard.press("5")  # Q1: MULTIPLE
        expect(page.locator(".question.active")).to_have_attribute("data-qid", "Q2")
        expect(page.locator("[data-testid=progress]")).to_have_text("0 / 2 done")
        page.keyboard.press("3")  # Q2: NEUTRAL -> item complete, next item
        expect(page.locator("[data-testid=progress]")).to_have_text("1 / 2 done")
        expect(page.locator("#position")).to_have_text("Item 2 of 2")
        first = next(a.order[0] for a in store.annotators(study))
        got = {(x.item_id, x.question_id): x.label for x in store.answers(study)}
        assert got == {(first, "Q1"): "MULTIPLE", (first, "Q2"): "NEUTRAL"}
        ctx.close()
