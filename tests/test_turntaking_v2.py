"""Benchmark v2 on the real shared corpora: real pauses, three outcomes, faithful categories."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from polylogue.conversation import Conversation
from polylogue.corpora.ami import read_ami
from polylogue.corpora.friends import read_friends
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.features import FEATURE_NAMES
from polylogue.engine.model import load_model
from polylogue.paths import corpus_dir
from polylogue.turntaking.dataset import (
    BuildOptions,
    build_benchmark,
    paper_protocol_options,
    save_benchmark,
    table1,
)
from polylogue.turntaking.points import (
    PointOptions,
    conversation_points,
    prepare_conversation,
)
from polylogue.turntaking.timeline import pause_counts
from polylogue.turntaking.types import Category, Decision, DecisionPoint, Outcome

# IS1006d and IS1003b carry addressee annotation (the audit examples); ES2011a is plain.
MEETINGS = ["IS1006d", "IS1003b", "ES2011a"]


@pytest.fixture(scope="module")
def ami() -> dict[str, Conversation]:
    convs = read_ami(corpus_dir("ami"), meetings=MEETINGS, unit="ipu")
    return {c.id: prepare_conversation(c) for c in convs}


@pytest.fixture(scope="module")
def ami_points(ami) -> dict[str, list[DecisionPoint]]:
    return {cid: list(conversation_points(c)) for cid, c in ami.items()}


def _at(points: list[DecisionPoint], time: float) -> list[DecisionPoint]:
    return [
        p for p in points if p.gold.pause_time is not None and abs(p.gold.pause_time - time) < 1e-6
    ]


def test_is1006d_backchannel_inside_a_turn_is_no_pause(ami, ami_points) -> None:
    # D's "Mm-hmm" (500.09-501.07 s) lies inside A's act (499.59-504.90 s). The DA builder
    # made it an I1/SPEAK point for D; it is no pause, and its end is no decision point.
    conv, pts = ami["IS1006d"], ami_points["IS1006d"]
    mm = next(u for u in conv.utterances if u.speaker == "D" and u.start == 500.09)
    assert mm.text == "Mm-hmm." and mm.dialogue_act == "bck" and mm.end == 501.07
    assert not [p for p in pts if p.gold.pause_time and 500.0 < p.gold.pause_time < 504.9]
    # The real pause is after A's act (504.90 s; D resumes at 505.76 s): D takes the floor,
    # the others stay silent, and A's act is the current utterance.
    at = {p.input.target.id: p for p in _at(pts, 504.9)}
    assert set(at) == {"B", "C", "D"}
    assert at["D"].input.current.speaker == "A"
    assert at["D"].input.current.text.endswith("meet the evaluation criterium.")
    assert at["D"].gold.outcome is Outcome.TAKE_FLOOR and at["D"].gold.category is Category.I1
    assert at["B"].gold.outcome is Outcome.SILENT and at["C"].gold.outcome is Outcome.SILENT
    assert at["D"].gold.pause_s == pytest.approx(0.86)
    # Backchannels are an outcome of their own and SILENT for the floor decision.
    bc = [p for p in pts if p.gold.outcome is Outcome.BACKCHANNEL]
    assert len(bc) > 20 and all(p.gold.label is Decision.SILENT for p in bc)


def test_is1003b_listener_still_talking_is_no_pause(ami, ami_points) -> None:
    # A's "Twelve, twelve a half." (480.77-481.84 s, addressed to B) ends while B is talking
    # (480.49-486.87 s). The DA builder made B an I1/SPEAK point there with a negative time
    # since B spoke; in v2 there is no pause until B stops.
    conv, pts = ami["IS1003b"], ami_points["IS1003b"]
    twelve = next(u for u in conv.utterances if u.text == "Twelve, twelve a half.")
    assert (twelve.speaker, twelve.addressees, twelve.end) == ("A", ("B",), 481.84)
    assert not [p for p in pts if p.gold.pause_time and 480.49 < p.gold.pause_time < 486.87]
    at = _at(pts, 486.87)
    assert at and all(p.input.current.speaker == "B" for p in at)


def test_no_context_holds_speech_after_the_pause(ami, ami_points) -> None:
    for cid, pts in ami_points.items():
        conv = ami[cid]
        assert pts
        for p in pts:
            t = p.gold.pause_time
            assert t is not None and p.gold.pause_s is not None and p.gold.pause_s >= 0.2 - 1e-9
            # Everything in the context ended by the pause (so started before it)...
            assert all(u.start <= t and u.end <= t for u in p.input.context)  # type: ignore[operator]
            assert p.input.current.end == t
            # ...everything after it starts at least the gap later, and no speech spans it.
            assert all(u.start >= t + 0.2 - 1e-9 for u in conv.utterances[p.index + 1 :])  # type: ignore[operator]
            # No ids (AMI "+1" piece suffixes would reveal continuation) or labels in inputs.
            cur = p.input.current
            assert cur.id is None and cur.addressees is None and cur.dialogue_act is None


def test_timing_features_never_negative(ami, ami_points) -> None:
    # The shipped default model's engine runs on v2 inputs, and the time since the target
    # last spoke is never negative (the target never talks through a pause).
    model = load_model()
    extractor = FeatureExtractor(model.yield_model, model.relation_model)
    col = FEATURE_NAMES.index("time_since_target")
    for pts in ami_points.values():
        inputs = [p.input for p in pts]
        x = extractor.features(inputs)
        since = x[:, col]
        assert np.all(np.isnan(since) | (since >= 0))
        p = model.proba(x)
        assert p.shape == (len(inputs),) and np.all((p >= 0) & (p <= 1))
    for p in ami_points["IS1003b"]:
        target_ends = [u.end for u in p.input.context if u.speaker == p.input.target.id]
        assert all(e <= p.gold.pause_time for e in target_ends)  # type: ignore[operator]


def test_group_address_is_symmetric(ami_points) -> None:
    # A group address ("B,C,D") counts as not individually addressed whatever the target
    # does: I2 if they take the floor, S1 (S3 in the exchange) if not. Individual: I1 / SA.
    pts = [p for v in ami_points.values() for p in v]
    group = [p for p in pts if p.gold.group_address]
    assert {p.gold.category for p in group} == {Category.I2, Category.S1, Category.S3}
    for p in group:
        silent = Category.S3 if p.gold.in_exchange else Category.S1
        assert p.gold.category is (Category.I2 if p.gold.label is Decision.SPEAK else silent)
    single = [p for p in pts if p.gold.addressed and not p.gold.group_address]
    assert {p.gold.category for p in single} == {Category.I1, Category.SA}
    # The authors' scheme puts a group address that is answered in I1 (their mapping).
    assert any(p.gold.paper_category == "I1" for p in group)


def test_paper_mapping_and_eight_way_scheme(ami_points) -> None:
    pts = [p for v in ami_points.values() for p in v]
    for p in pts:
        g = p.gold
        assert g.paper_category in {"I1", "I2", "S1", "S2"}
        assert g.fine_category in {"I1", "I2", "I3", "S1", "S2", "S3", "S4", "S5"}
        assert g.paper_category[0] == g.fine_category[0] == g.category.value[0]
        if g.label is Decision.SPEAK:
            assert (g.paper_category == "I1") == g.addressed == (g.fine_category == "I1")
        elif g.fine_category in ("S2", "S3"):
            assert g.paper_category == "S2"  # mentioned, or spoke in the last two turns
        # The authors' S2 excludes addressees; an addressee who stays silent is never S2.
        if g.addressed:
            assert g.fine_category != "S2"
    rows = {r["dataset"]: r for r in table1(pts, "paper")}
    ours = {r["dataset"]: r for r in table1(pts, "ours")}
    assert rows["ami"]["total"] == ours["ami"]["total"] == len(pts)
    assert ours["ami"]["SA"] > 0 and "SA" not in rows["ami"]


def test_missed_vocatives_now_found() -> None:
    lines = {
        "Run Phoebe run.": "Phoebe Buffay",
        "Okay look, Rachel I know you really want to do this": "Rachel Green",
        "Rachel you have to read this book.": "Rachel Green",
    }
    found: dict[str, DecisionPoint] = {}
    for conv in read_friends(corpus_dir("friends"), source="csv", seasons=[2, 7]):
        if not any(k in u.text for u in conv.utterances for k in lines):
            continue
        for p in conversation_points(conv, PointOptions(keep_no_context=True)):
            for line, target in lines.items():
                if line in p.input.current.text and p.input.target.id == target:
                    found[line] = p
    assert set(found) == set(lines)
    for p in found.values():
        assert p.gold.addressed and p.gold.address_evidence == "vocative"
        assert p.gold.category in (Category.I1, Category.SA)


def test_friends_descriptions_keep_their_whole_name() -> None:
    convs = [
        c
        for c in read_friends(corpus_dir("friends"), source="csv", seasons=[2])
        if any(p.id in ("Big Bully", "The Teacher") for p in c.participants)
    ]
    names = {p.id: p.display_name for c in convs for p in c.participants}
    assert names["Big Bully"] == "Big Bully"
    # "Big" in "a big bully" or "The" in any line never counts as naming them.
    for c in convs:
        for p in conversation_points(c):
            if p.input.target.id == "Big Bully" and p.gold.referenced:
                assert "Big Bully" in p.input.current.text


def test_untimed_corpus_keeps_utterance_boundaries_and_lexical_backchannels() -> None:
    conv = next(
        c
        for c in read_friends(corpus_dir("friends"), source="csv", seasons=[1])
        if len(c.utterances) > 40
    )
    pts = list(conversation_points(conv))
    assert prepare_conversation(conv).metadata["decision_moments"] == "utterance"
    assert all(p.gold.pause_time is None and p.index > 0 for p in pts)
    for p in pts:
        nxt = conv.utterances[p.index + 1]
        if p.gold.outcome is Outcome.TAKE_FLOOR:
            # The next line is the target's, or one spoken by everyone (ALL) that they joined.
            assert nxt.speaker in (p.input.target.id, "ALL")
        if p.gold.outcome is Outcome.BACKCHANNEL:
            # Only an acknowledgement, and the previous speaker goes on.
            assert nxt.speaker == p.input.target.id
            assert conv.utterances[p.index + 2].speaker == p.input.current.speaker


def test_pause_counts_grow_with_shorter_gaps(ami) -> None:
    counts = pause_counts(ami["IS1006d"], [0.0, 0.2, 0.5])
    assert counts[0.0] > counts[0.2] > counts[0.5] > 100


def test_splits_hold_two_annotated_teams_and_build_is_deterministic(tmp_path: Path) -> None:
    # Only the addressee-annotated series (teams): validation and test each get two.
    meetings = [
        "ES2008a", "ES2008b", "ES2009c", "ES2009d", "IS1000a", "IS1001a", "IS1001b",
        "IS1003b", "IS1003d", "IS1006b", "IS1006d", "IS1008a", "IS1008b", "TS3005a", "TS3005b",
    ]  # fmt: skip

    def build() -> Path:
        convs = read_ami(corpus_dir("ami"), meetings=meetings, unit="ipu")
        b = build_benchmark(convs, BuildOptions())
        teams: dict[str, set[str]] = {}
        for p in b.points:
            teams.setdefault(p.split or "", set()).add(p.group)
        assert len(teams["validation"]) >= 2 and len(teams["test"]) >= 2
        return save_benchmark(b, tmp_path / f"b{len(list(tmp_path.iterdir()))}")

    m1 = json.loads((build() / "manifest.json").read_text())
    m2 = json.loads((build() / "manifest.json").read_text())
    assert m1["data_hash"] == m2["data_hash"]
    assert m1["protocol"] == "default" and m1["class_ratio"] == "natural"


def test_paper_protocol_build(ami) -> None:
    convs = read_ami(corpus_dir("ami"), meetings=MEETINGS, unit="da")
    b = build_benchmark(convs, paper_protocol_options())
    assert b.options.protocol == "paper" and b.options.seed == 42
    labels = [p.gold.label for p in b.points]
    assert labels.count(Decision.SPEAK) == labels.count(Decision.SILENT)
    # Per-sample split: one meeting's points land in every split (the leakage it documents).
    splits_of_meeting = {p.split for p in b.points if p.input.conversation_id == "IS1006d"}
    assert splits_of_meeting == {"train", "validation", "test"}
    # Utterance boundaries with the next-speaker label: no backchannel outcome, no pause time.
    assert all(p.gold.outcome is not Outcome.BACKCHANNEL for p in b.points)
    assert all(p.gold.pause_time is None for p in b.points)
    for p in b.points[:500]:
        conv = next(c for c in b.conversations if c.id == p.input.conversation_id)
        assert (p.gold.label is Decision.SPEAK) == (
            conv.utterances[p.index + 1].speaker == p.input.target.id
        )


def test_cli_paper_protocol_and_inspect_by_outcome(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from polylogue.cli import app as cli

    runner = CliRunner()
    out = tmp_path / "paper"
    r = runner.invoke(
        cli,
        ["build", "--corpus", "friends", "--limit-conversations", "60", "--protocol", "paper",
         "--out", str(out)],
        catch_exceptions=False,
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["protocol"] == "paper" and manifest["class_ratio"] == "balanced"
    assert (
        manifest["options"]["seed"] == 42 and manifest["options"]["points"]["timing"] == "utterance"
    )
    assert {r["dataset"] for r in manifest["table1_paper_mapping"]} == {"friends"}
    default = tmp_path / "default"
    r = runner.invoke(
        cli,
        ["build", "--corpus", "friends", "--limit-conversations", "60", "--out", str(default)],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        cli,
        ["inspect", str(default), "--split", "train", "--outcome", "backchannel", "-n", "2"],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.output
    assert r.output.count("(BACKCHANNEL)") == 2 and "TAKE_FLOOR" in r.output
    bad = runner.invoke(
        cli, ["build", "--corpus", "friends", "--protocol", "nope", "--out", str(out)]
    )
    assert bad.exit_code == 2


def test_ami_ipu_pieces_partition_each_act_at_silences() -> None:
    das = {u.id: u for u in next(read_ami(corpus_dir("ami"), meetings=["IS1006d"])).utterances}
    pieces = next(read_ami(corpus_dir("ami"), meetings=["IS1006d"], unit="ipu", ipu_gap=0.2))
    assert pieces.metadata["unit"] == "ipu" and pieces.metadata["ipu_gap_s"] == 0.2
    by_act: dict[str, list] = {}
    for u in pieces.utterances:
        by_act.setdefault((u.id or "").split("+")[0], []).append(u)
    assert set(by_act) == set(das)
    split = {k: v for k, v in by_act.items() if len(v) > 1}
    assert len(split) > 10
    for act_id, parts in by_act.items():
        da = das[act_id]
        parts.sort(key=lambda u: u.start)  # type: ignore[arg-type,return-value]
        # Same words, same annotation; pieces lie inside the act, separated by >= 0.2 s.
        assert " ".join(p.text for p in parts).split() == da.text.split()
        assert all(
            p.addressees == da.addressees and p.dialogue_act == da.dialogue_act for p in parts
        )
        assert parts[0].start == da.start and parts[-1].end == da.end
        for a, b in itertools.pairwise(parts):
            assert b.start - a.end >= 0.2 - 1e-9  # type: ignore[operator]
        assert [p.id for p in parts] == [act_id] + [f"{act_id}+{k}" for k in range(1, len(parts))]
    with pytest.raises(ValueError, match="ipu_gap"):
        next(read_ami(corpus_dir("ami"), meetings=["IS1006d"], unit="ipu", ipu_gap=float("nan")))
