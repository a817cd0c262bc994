"""Studies and the SQLite store on real data: sampling, orders, gold separation, concurrency."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from pathlib import Path

import pytest
from benches import friends_benchmark

from polylogue.annotate.store import (
    AnnotationStore,
    Role,
    StoreError,
    StudyItem,
    StudyKind,
)
from polylogue.annotate.study import (
    SamplingPlan,
    annotator_order,
    benchmark_items,
    create_study,
    meetingtom_item,
    meetingtom_items,
    sample_items,
)
from polylogue.conversation import ConversationFormatError
from polylogue.paths import corpus_dir


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return friends_benchmark(tmp_path_factory.mktemp("bench") / "friends", 60)


@pytest.fixture(scope="module")
def test_items(bench: Path) -> list[StudyItem]:
    src = benchmark_items(bench, "test")
    assert src.finish is not None  # candidates are light; the sample is built in full
    return src.finish(src.items)


def test_turntaking_items_show_only_model_visible_fields(
    bench: Path, test_items: list[StudyItem]
) -> None:
    from polylogue.turntaking.dataset import load_benchmark

    points = {p.point_id: p for p in load_benchmark(bench).points("test")}
    for it in test_items[:50]:
        p = points[it.item_id]
        assert it.category == p.gold.category.value
        assert it.gold["answers"] == {"decision": p.gold.label.value}
        shown = json.dumps(it.payload)
        # No label-bearing field reaches the payload.
        for field in ("label", "category", "addressed", "referenced", "next_speaker", "evidence"):
            assert f'"{field}' not in shown
        turns = it.payload["transcript"]
        assert turns[-1]["text"] == p.input.current.text
        assert all(t["is_target"] == (t["speaker"] == p.input.target.id) for t in turns)
        assert len(turns) + it.payload["omitted_turns"] == len(p.input.context)


def test_sampling_is_seeded_stratified_and_order_independent(test_items: list[StudyItem]) -> None:
    plan = SamplingPlan({"I1": 100, "I2": 4, "S1": 4, "S2": 4}, seed=5)
    chosen, report = sample_items(test_items, plan)
    again, _ = sample_items(list(reversed(test_items)), plan)
    assert [i.item_id for i in chosen] == [i.item_id for i in again]
    available = report.available
    # A category with fewer items than asked contributes all it has (the paper's S1 case).
    assert report.drawn["I1"] == available["I1"] < 100
    assert report.drawn["I2"] == report.drawn["S1"] == report.drawn["S2"] == 4
    other, _ = sample_items(test_items, SamplingPlan(plan.per_category, seed=6))
    assert {i.item_id for i in other} != {i.item_id for i in chosen}


def test_annotator_orders_are_reproducible_permutations() -> None:
    ids = [f"p{i}" for i in range(30)]
    a = annotator_order(ids, 13, "h1")
    assert a == annotator_order(ids, 13, "h1")
    assert sorted(a) == sorted(ids)
    assert a != annotator_order(ids, 13, "h2")
    assert a != annotator_order(ids, 14, "h1")


def test_store_keeps_gold_away_from_annotators(tmp_path: Path, test_items: list[StudyItem]) -> None:
    store = AnnotationStore(tmp_path / "s.sqlite")
    study, keys, _ = create_study(
        store,
        "s1",
        StudyKind.TURNTAKING,
        test_items,
        SamplingPlan(2, seed=1),
        ["h1", "h2"],
        adjudicators=["adj"],
    )
    # Benchmark v2.1: six categories (SA = silent although individually addressed, S3 =
    # silent participant of the exchange).
    assert len(store.items(study)) == 12 and study.plan["drawn"] == dict.fromkeys(
        ("I1", "I2", "S1", "S2", "S3", "SA"), 2
    )
    h1 = store.annotator_by_key(keys["h1"])
    assert h1 is not None and h1.role is Role.ANNOTATOR and len(h1.order) == 12
    assert store.annotator_by_key("nope") is None
    view = store.item_view(h1, 0)
    assert view.gold == {} and view.category == ""
    assert view.item_id == h1.order[0]
    # Answers: validated, revisable, per annotator.
    with pytest.raises(StoreError, match="not an option"):
        store.save_answer(h1, h1.order[0], "decision", "MAYBE")
    with pytest.raises(StoreError, match="no question"):
        store.save_answer(h1, h1.order[0], "Q9", "SPEAK")
    with pytest.raises(StoreError, match="not assigned"):
        store.save_answer(h1, "not-an-item", "decision", "SPEAK")
    adj = store.annotator_by_key(keys["adj"])
    assert adj is not None
    with pytest.raises(StoreError, match="adjudicator"):
        store.save_answer(adj, h1.order[0], "decision", "SPEAK")
    store.save_answer(h1, h1.order[0], "decision", "SPEAK", 2.5)
    revised = store.save_answer(h1, h1.order[0], "decision", "SILENT", 1.0)
    assert (revised.label, revised.revisions) == ("SILENT", 1)
    h2 = store.annotator_by_key(keys["h2"])
    assert h2 is not None and store.own_answers(h2) == []
    p = store.progress(h1)
    assert (p.done, p.total, p.next_position) == (1, 12, 1)
    with pytest.raises(StoreError, match="already exists"):
        store.create_study("s1", StudyKind.TURNTAKING, test_items[:2], seed=1, plan={}, source={})


def _write_answers(db: str, key: str, n_rounds: int) -> None:
    store = AnnotationStore(db)
    who = store.annotator_by_key(key)
    assert who is not None
    for r in range(n_rounds):
        for item_id in who.order:
            store.save_answer(who, item_id, "decision", "SPEAK" if r % 2 else "SILENT")


def test_two_writer_processes_lose_nothing(tmp_path: Path, test_items: list[StudyItem]) -> None:
    db = tmp_path / "c.sqlite"
    store = AnnotationStore(db)
    study, keys, _ = create_study(
        store, "c", StudyKind.TURNTAKING, test_items, SamplingPlan(5, seed=2), ["h1", "h2"]
    )
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_write_answers, args=(str(db), keys[a], 5)) for a in ("h1", "h2")]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    answers = store.answers(study)
    n_items = len(store.items(study))  # 5 per category; v2.1 has six (with SA and S3)
    assert n_items == 30
    assert len(answers) == 2 * n_items
    # Five rounds alternate SILENT/SPEAK: the last one is SILENT, and 4 of 5 writes changed it.
    assert {a.label for a in answers} == {"SILENT"}
    assert {a.revisions for a in answers} == {4}
    with store._connect() as con:
        (logged,) = con.execute("SELECT COUNT(*) FROM answer_log").fetchone()
        (check,) = con.execute("PRAGMA integrity_check").fetchone()
    assert logged == 2 * n_items * 5 and check == "ok"


def test_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "notes.sqlite"
    bad.write_text("this is a text file, not SQLite\n" * 20)
    with pytest.raises(StoreError, match="not a polylogue study database"):
        AnnotationStore(bad)


def test_meetingtom_items_from_real_records_with_transcripts() -> None:
    source = meetingtom_items(tasks=["you", "state"], ami_folder=corpus_dir("ami"), stratify="task")
    assert {it.category for it in source.items} == {"you", "state"}
    assert len(source.items) == 300 + 600
    chosen, _ = sample_items(source.items, SamplingPlan(2, seed=3))
    assert source.finish is not None
    finished = source.finish(chosen)
    assert [it.item_id for it in finished] == [it.item_id for it in chosen]
    you = next(it for it in finished if it.category == "you")
    assert [q.id for q in you.questions] == ["Q1", "Q2"]
    assert you.questions[0].options == ("A", "B", "C", "D", "MULTIPLE", "UNKNOWN")
    assert you.questions[0].keys == ("1", "2", "3", "4", "5", "6")
    transcript = you.payload["transcript"]
    assert transcript, "the AMI words of this session should give a transcript"
    assert all(-5 < t["start"] < you.payload["window"]["duration"] + 5 for t in transcript)
    # Gold answers stay out of what annotators see.
    assert set(you.gold["answers"]) == {"Q1", "Q2"}
    assert "answers" not in you.payload
    state = next(it for it in finished if it.category == "state")
    assert state.payload["target_agent"] in {"A", "B", "C", "D"}


def test_meetingtom_label_strata_and_media(tmp_path: Path) -> None:
    from polylogue.tom.records import load_tom_benchmark

    record = load_tom_benchmark(tasks=["consensus"]).task_records("consensus")[0]
    media = tmp_path / "media" / "consensus" / record.item.bundle_name / "media"
    media.mkdir(parents=True)
    (media / "mosaic.mp4").write_bytes(b"\x00" * 64)
    item = meetingtom_item(record, media_root=tmp_path / "media", stratify="label")
    assert item.category == f"consensus:{record.gold.answers['Q1']}"
    assert item.payload["media"] == {
        q: f"consensus/{record.item.bundle_name}/media/mosaic.mp4" for q in ("Q1", "Q2")
    }
    with pytest.raises(ValueError, match="stratify"):
        meetingtom_item(record, stratify="nope")


def test_malformed_meetingtom_file_names_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "mtom"
    shutil.copytree(corpus_dir("meetingtom"), folder)
    lines = (folder / "you.jsonl").read_text().splitlines()
    lines[4] = lines[4][:40]  # truncated JSON on line 5
    (folder / "you.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ConversationFormatError, match=r"you\.jsonl:line 5"):
        meetingtom_items(folder, tasks=["you"])


def test_missing_split_and_folder_errors(bench: Path, tmp_path: Path) -> None:
    from polylogue.turntaking.dataset import BenchmarkFormatError

    with pytest.raises(StoreError, match="no split 'dev'"):
        benchmark_items(bench, "dev")
    with pytest.raises(BenchmarkFormatError, match="no manifest"):
        benchmark_items(tmp_path, "test")


def test_relabel_derives_the_category_from_decision_and_cues(bench: Path) -> None:
    from polylogue.annotate.analysis import relabel
    from polylogue.turntaking.dataset import load_benchmark
    from polylogue.turntaking.types import Category, Decision

    points = load_benchmark(bench).points("test")
    for p in points:
        g = p.gold
        assert relabel(g, g.label) is g  # agreement with the corpus keeps everything
        flipped = relabel(g, Decision.SILENT if g.label is Decision.SPEAK else Decision.SPEAK)
        assert flipped.category.decision is flipped.label
        # v2.1: individual address is I1/SA, a group address I2/S1 (S3 in the exchange), a
        # reference alone S2.
        singled_out = g.addressed and not g.group_address
        if flipped.label is Decision.SPEAK:
            assert flipped.category is (Category.I1 if singled_out else Category.I2)
        elif singled_out:
            assert flipped.category is Category.SA
        else:
            s2 = g.referenced and not g.addressed
            other = Category.S3 if g.in_exchange else Category.S1
            assert flipped.category is (Category.S2 if s2 else other)
        assert (flipped.addressed, flipped.referenced, flipped.next_speaker) == (
            g.addressed,
            g.referenced,
            g.next_speaker,
        )
