"""The benchmark builder on the real shared corpora."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from polylogue.conversation import (
    Conversation,
    Participant,
    Utterance,
    read_jsonl,
    read_parquet,
    write_jsonl,
    write_parquet,
)
from polylogue.corpora import load_corpus
from polylogue.corpora.ami import read_ami
from polylogue.corpora.earnings import read_earnings21
from polylogue.corpora.friends import read_friends
from polylogue.paths import corpus_dir
from polylogue.turntaking.dataset import (
    FORMAT_VERSION,
    BenchmarkFormatError,
    BuildOptions,
    build_benchmark,
    is_current_build,
    load_benchmark,
    save_benchmark,
)
from polylogue.turntaking.points import conversation_points, prepare_conversation
from polylogue.turntaking.types import Category, Decision, Outcome

# Meetings of four AMI series; ES2008a and IS1008a carry addressee annotation.
AMI_MEETINGS = ["ES2008a", "ES2011a", "IS1008a", "TS3005a", "ES2016a"]


@pytest.fixture(scope="module")
def ami_convs() -> list[Conversation]:
    # The benchmark's AMI unit: acts split at word gaps, so pauses are cut at word level.
    return list(read_ami(corpus_dir("ami"), meetings=AMI_MEETINGS, unit="ipu"))


@pytest.fixture(scope="module")
def ami_build(ami_convs):
    return build_benchmark(ami_convs, BuildOptions(seed=7))


def test_ami_annotated_addressee_gives_i1(ami_convs) -> None:
    # v2: points index the end-ordered conversation; I1 = individually addressed and takes
    # the floor; a sole addressee who stays silent is SA (was S2); one of a group is S1/I2.
    conv = prepare_conversation(next(c for c in ami_convs if c.id == "IS1008a"))
    pts = list(conversation_points(conv))
    i1 = [p for p in pts if p.gold.category is Category.I1]
    assert i1, "IS1008a has addressee annotation, so some addressees answer"
    by_annotation = [p for p in i1 if p.gold.address_evidence == "annotation"]
    assert len(by_annotation) > 10
    for p in i1:
        raw = conv.utterances[p.index]
        assert p.gold.outcome is Outcome.TAKE_FLOOR
        assert p.gold.next_speaker == p.input.target.id
        if p.gold.address_evidence == "annotation":
            assert raw.addressees == (p.input.target.id,)
        else:  # e.g. "Industrial designer." addresses C by role
            assert p.gold.address_evidence == "role"
            assert (p.input.target.role or "").lower() in raw.text.lower()
    silent_addressed = [p for p in pts if p.gold.addressed and p.gold.label is Decision.SILENT]
    sole = [p for p in silent_addressed if len(conv.utterances[p.index].addressees or ()) == 1]
    group = [p for p in silent_addressed if len(conv.utterances[p.index].addressees or ()) > 1]
    assert sole and all(p.gold.category is Category.SA for p in sole)
    assert group and {p.gold.category for p in group} <= {Category.S1, Category.S3}
    assert all((p.gold.category is Category.S3) == p.gold.in_exchange for p in group)


def test_ami_single_letter_ids_never_match_articles(ami_convs) -> None:
    # AMI participants are agent letters without names: "a"/"A" in the text must never make
    # participant A "referenced" (the authors' regex bug). Only role mentions may reference.
    n_with_article = 0
    for conv in ami_convs:
        for p in conversation_points(conv):
            if p.input.target.id == "A" and re.search(r"\ba\b", p.input.current.text, re.I):
                n_with_article += 1
                assert p.gold.reference_evidence in (None, "role")
            assert p.gold.reference_evidence != "name"
    assert n_with_article > 20


def test_ami_role_mention_is_referenced_not_addressed(ami_convs) -> None:
    hits = [
        p
        for conv in ami_convs
        for p in conversation_points(conv)
        if p.gold.reference_evidence == "role"
    ]
    assert hits
    for p in hits:
        # The role name ("marketing expert") or its code ("ME") is in the text.
        terms = [p.input.target.role or "", *p.input.target.aliases]
        assert any(t and t.lower() in p.input.current.text.lower() for t in terms)


def test_friends_to_note_is_explicit_address() -> None:
    scenes = [
        c
        for c in read_friends(corpus_dir("friends"), source="s10json")
        if c.id.startswith("friends_s10e04")
    ]
    noted = [p for c in scenes for p in conversation_points(c) if p.gold.address_evidence == "note"]
    assert noted
    for p in noted:
        conv = next(c for c in scenes if c.id == p.input.conversation_id)
        raw = conv.utterances[p.index]
        assert raw.note and "to" in raw.note.lower()
        assert p.input.target.id in (raw.addressees or ())
        # The note is a label: it never reaches the model-visible text.
        assert "(to " not in p.input.current.text
        sole = len(raw.addressees or ()) == 1
        if p.gold.label is Decision.SPEAK:  # v2: a group address is not individual address
            assert p.gold.category is (Category.I1 if sole else Category.I2)
        else:  # silent: SA if singled out, else (one of a group) S1, or S3 in the exchange
            group_cat = Category.S3 if p.gold.in_exchange else Category.S1
            assert p.gold.category is (Category.SA if sole else group_cat)


def test_friends_referenced_not_addressed_real_example() -> None:
    conv = next(
        c
        for c in read_friends(corpus_dir("friends"), source="csv", seasons=[5])
        if c.id == "friends_s05e01c02"
    )
    pts = {p.point_id: p for p in conversation_points(conv)}
    # Joey: "Ross, hey, the band's ready outside for your first dance with Emily, so..."
    ross = next(
        p for p in pts.values() if p.index == 60 and p.input.target.display_name.startswith("Ross")
    )
    emily = next(
        p for p in pts.values() if p.index == 60 and p.input.target.display_name.startswith("Emily")
    )
    assert "Emily" in emily.input.current.text
    assert ross.gold.addressed and ross.gold.category is Category.I1
    assert emily.gold.category is Category.S2 and emily.gold.reference_evidence == "name"


def test_friends_presence_is_causal() -> None:
    conv = next(iter(read_friends(corpus_dir("friends"), source="csv", seasons=[1])))
    first_turn = {}
    for i, u in enumerate(conv.utterances):
        first_turn.setdefault(u.speaker, i)
    for p in conversation_points(conv):
        for q in p.input.present:
            # Someone counts as present only after speaking or being addressed, never earlier.
            spoke_by_then = first_turn.get(q.id, 10**9) <= p.index
            addressed_by_then = any(
                q.id in (u.addressees or ()) for u in conv.utterances[: p.index + 1]
            )
            named_by_then = q.display_name.split()[0] in " ".join(
                u.text for u in conv.utterances[: p.index + 1]
            )
            assert spoke_by_then or addressed_by_then or named_by_then


def test_earnings_shared_first_name_resolved_by_recency() -> None:
    conv = next(read_earnings21(corpus_dir("earnings21"), calls=["4320211"]))
    pts = list(conversation_points(conv))
    # Brett answers Brian D'Ambrosia's section with "Thanks, Brian." while an analyst Brian
    # Nagel is also on the call: the vocative goes to the Brian who just spoke.
    thanks = [p for p in pts if p.input.current.text.startswith("Thanks, Brian.")]
    assert thanks
    by_target = {p.input.target.display_name: p for p in thanks if p.index == thanks[0].index}
    assert by_target["Brian D'Ambrosia"].gold.addressed
    assert not by_target.get("Brian Nagel") or not by_target["Brian Nagel"].gold.addressed


def test_no_group_in_two_splits_and_determinism(ami_convs, tmp_path: Path) -> None:
    b1 = build_benchmark(ami_convs, BuildOptions(seed=7))
    b2 = build_benchmark(
        list(read_ami(corpus_dir("ami"), meetings=AMI_MEETINGS, unit="ipu")), BuildOptions(seed=7)
    )
    split_of: dict[str, set[str]] = {}
    for p in b1.points:
        split_of.setdefault(p.group, set()).add(p.split or "")
    assert all(len(s) == 1 for s in split_of.values())
    assert {s for v in split_of.values() for s in v} == {"train", "validation", "test"}
    f1 = save_benchmark(b1, tmp_path / "a")
    f2 = save_benchmark(b2, tmp_path / "b")
    m1 = json.loads((f1 / "manifest.json").read_text())
    m2 = json.loads((f2 / "manifest.json").read_text())
    assert m1["data_hash"] == m2["data_hash"]


def test_saved_benchmark_round_trip_and_causality(ami_build, tmp_path: Path) -> None:
    folder = save_benchmark(
        ami_build, tmp_path / "bench", inputs={"ami": {"path": "x", "sha256": "y"}}
    )
    bench = load_benchmark(folder)
    assert set(bench.splits) == {"train", "validation", "test"}
    total = sum(len(bench.points(s)) for s in bench.splits)
    assert total == len(ami_build.points)
    convs = bench.conversations
    for p in bench.points("test")[:2000]:
        conv = convs[p.input.conversation_id]
        assert len(p.input.context) == p.index + 1
        assert p.input.current.text == conv.utterances[p.index].text
        # Nothing after the pause is visible: all context ends by the pause, everything after
        # starts at least the gap later. The label is the floor decision of the outcome.
        pause = p.gold.pause_time
        assert pause is not None and p.gold.pause_s is not None and p.gold.pause_s >= 0.2 - 1e-6
        assert all(u.end is not None and u.end <= pause for u in p.input.context)
        assert all(u.start >= pause + 0.2 - 1e-6 for u in conv.utterances[p.index + 1 :])
        assert (p.gold.label is Decision.SPEAK) == (p.gold.outcome is Outcome.TAKE_FLOOR)
        if p.gold.outcome is Outcome.TAKE_FLOOR:
            assert p.gold.next_speaker == p.input.target.id
        # Model inputs carry no annotation: no addressees, dialogue acts, notes or ids.
        assert all(
            u.addressees is None and u.dialogue_act is None and u.note is None and u.id is None
            for u in p.input.context[-5:]
        )
    manifest = bench.manifest
    assert manifest["options"]["seed"] == 7
    assert manifest["table1"][0]["total"] == len(ami_build.points)
    # Table 1 (ours + the paper mapping) for all splits + train/validation/test, then the
    # outcome table and the fine 8-way table.
    assert (folder / "stats.md").read_text().count("| ami |") == 10
    assert manifest["format_version"] == FORMAT_VERSION
    assert is_current_build(folder)
    # A build written by an older builder (v2 grouped Molweni differently) is not reused.
    stale = json.loads((folder / "manifest.json").read_text())
    stale["format_version"] = FORMAT_VERSION - 1
    (folder / "manifest.json").write_text(json.dumps(stale))
    assert not is_current_build(folder)
    assert not is_current_build(tmp_path / "missing")
    assert manifest["decision_moments"] == dict.fromkeys(AMI_MEETINGS, "pause")


def test_balanced_view_and_subsample(ami_build, tmp_path: Path) -> None:
    folder = save_benchmark(ami_build, tmp_path / "bench")
    bench = load_benchmark(folder)
    bal = bench.points("train", balanced=True)
    labels = [p.gold.label for p in bal]
    assert labels.count(Decision.SPEAK) == labels.count(Decision.SILENT)
    small = build_benchmark(
        list(read_ami(corpus_dir("ami"), meetings=AMI_MEETINGS, unit="ipu")),
        BuildOptions(seed=7, max_points={"train": 300}),
    )
    train = small.split("train")
    assert len(train) == 300
    full = ami_build.split("train")
    for cat in ("I2", "S1"):
        share_full = sum(p.gold.category.value == cat for p in full) / len(full)
        share_small = sum(p.gold.category.value == cat for p in train) / len(train)
        assert abs(share_full - share_small) < 0.01


def test_huggingface_datasets_loads_the_folder(ami_build, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    folder = save_benchmark(ami_build, tmp_path / "bench")
    ds = datasets.load_dataset(
        "parquet",
        data_files={s: str(folder / f"{s}.parquet") for s in ("train", "validation", "test")},
        cache_dir=str(tmp_path / "hf-cache"),
    )
    row = ds["test"][0]
    assert set(row) >= {"point_id", "input", "gold"}
    assert row["gold"]["label"] in ("SPEAK", "SILENT")
    assert "label" not in row["input"]


def test_conversation_round_trip(ami_convs, tmp_path: Path) -> None:
    convs = ami_convs[:2]
    write_jsonl(convs, tmp_path / "c.jsonl")
    write_parquet(convs, tmp_path / "c.parquet")
    assert list(read_jsonl(tmp_path / "c.jsonl")) == convs
    assert read_parquet(tmp_path / "c.parquet") == convs


def test_malformed_benchmark_and_conversation_files(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkFormatError, match="manifest"):
        load_benchmark(tmp_path)
    bad = tmp_path / "bad.jsonl"
    good = Conversation("c", "x", (Utterance("a", "hello there"),), (Participant("a"),))
    bad.write_text(json.dumps(good.to_dict()) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:line 2"):
        list(read_jsonl(bad))
    with pytest.raises(ValueError, match="not a participant"):
        Conversation("c", "x", (Utterance("zed", "hello"),), (Participant("a"),))


def test_cli_build_and_inspect_on_a_user_transcript(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "standup.jsonl"
    out = tmp_path / "bench"
    # Three identical copies: exact duplicates are removed, so one conversation's points remain
    # and, with fewer than three groups to split, they all go to "test".
    files = []
    for i in range(3):
        f = tmp_path / f"standup{i}.jsonl"
        f.write_text(example.read_text())
        files.append(f)
    args = [sys.executable, "-m", "polylogue.cli", "build", "--out", str(out)]
    for f in files:
        args += ["--transcript", str(f)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "| Dataset |" in r.stderr
    bench = load_benchmark(out)
    assert bench.manifest["counts"]["duplicates_removed"] == 2 * len(bench.points("test")) > 0
    assert {p.input.conversation_id for p in bench.points("test")} == {"standup-example"}
    r = subprocess.run(
        [sys.executable, "-m", "polylogue.cli", "inspect", str(out), "--split", "test", "-n", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and "[pause]" in r.stdout


def test_cli_build_reports_missing_corpus_clearly(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "polylogue.cli",
            "build",
            "--corpus",
            "ami",
            "--data-root",
            str(tmp_path),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "ami" in r.stderr and "does not exist" in r.stderr


def test_load_corpus_registry_names_unknown_corpus() -> None:
    with pytest.raises(KeyError, match="unknown corpus"):
        list(load_corpus("nope"))


def test_a_single_transcript_builds_as_test_only(tmp_path: Path) -> None:
    from polylogue.corpora.transcripts import read_transcript

    example = Path(__file__).resolve().parents[1] / "examples" / "standup.vtt"
    build = build_benchmark([read_transcript(example)])
    assert build.points and {p.split for p in build.points} == {"test"}
