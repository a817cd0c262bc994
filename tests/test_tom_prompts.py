"""Prompt variants: names round-trip, each ablation changes what it should and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from polylogue.paths import corpus_dir
from polylogue.tom.media import Frame, PromptMedia
from polylogue.tom.prompts import PromptError, ToMPromptOptions, build_prompt, parse_variant
from polylogue.tom.records import load_tom_benchmark
from polylogue.tom.transcript import AmiSessions, transcript_window


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    return load_tom_benchmark()


@pytest.fixture(scope="module")
def sessions() -> AmiSessions:
    return AmiSessions(corpus_dir("ami"))


def _prompt(bench, sessions, rid: str, variant: str):  # type: ignore[no-untyped-def]
    rec = bench.by_id()[rid]
    opts = parse_variant(variant)
    window = transcript_window(
        sessions, rec.item.session_id, rec.item.window, opts.transcript_options()
    )
    return build_prompt(rec.item, opts, window)


@pytest.mark.parametrize(
    "name",
    [
        "noprompt",
        "cot",
        "eot+utter",
        "naivecot+video",
        "noprompt+utter+nodm+prior-role+q1only",
        "eot+utter+joint",
        "cot+utter+prior-dialogue_act+prior-phase+notime",
    ],
)
def test_variant_names_round_trip(name: str) -> None:
    opts = parse_variant(name)
    assert parse_variant(opts.name) == opts
    assert ToMPromptOptions.from_dict(opts.to_dict()) == opts
    assert len({opts.digest(), parse_variant("noprompt").digest()}) == (
        1 if name == "noprompt" else 2
    )


def test_invalid_variants() -> None:
    with pytest.raises(PromptError):
        parse_variant("cot+loud")
    with pytest.raises(PromptError):
        parse_variant("noprompt+video+prior-dialogue_act")


def test_reasoning_addenda(bench, sessions) -> None:  # type: ignore[no-untyped-def]
    rid = "state:ES2002a_state0004_w0"
    base = _prompt(bench, sessions, rid, "noprompt+utter").user
    cot = _prompt(bench, sessions, rid, "cot+utter").user
    eot = _prompt(bench, sessions, rid, "eot+utter").user
    naive = _prompt(bench, sessions, rid, "naivecot+utter").user
    assert "Reason before answering" in cot and "Reason before answering" not in base
    assert "interpretive bias" in eot and "step by step" in naive
    for text in (base, cot, eot, naive):
        assert '{"Q1":"<OPTION>"}' in text and "The target participant is A." in text
        assert text.index("Output:") < text.index("Transcript")


def test_you_q1_only_removes_the_q2_leak(bench, sessions) -> None:  # type: ignore[no-untyped-def]
    rid = "you:ES2002a_you0005"  # Q2 asks about C, the Q1 gold addressee
    joint = _prompt(bench, sessions, rid, "noprompt+utter+joint")
    alone = _prompt(bench, sessions, rid, "noprompt+utter+q1only")
    assert "What is C's attitude" in joint.user and joint.questions == ("Q1", "Q2")
    assert "attitude" not in alone.user and alone.questions == ("Q1",)
    assert '{"Q1":"<OPTION>"}' in alone.user


def test_default_you_prompts_are_separate(bench, sessions) -> None:  # type: ignore[no-untyped-def]
    """The default asks Q1 without Q2's text, then Q2 in its own prompt."""
    rid = "you:ES2002a_you0005"
    default = _prompt(bench, sessions, rid, "noprompt+utter")
    assert parse_variant("noprompt+utter").you_questions == "separate"
    assert default.questions == ("Q1", "Q2") and len(default.parts) == 2
    q1, q2 = default.parts
    assert q1.questions == ("Q1",) and "attitude" not in q1.user and q1.user == default.user
    assert q2.questions == ("Q2",) and "What is C's attitude" in q2.user
    assert "says 'you'" not in q2.user and '{"Q2":"<OPTION>"}' in q2.user
    alone = _prompt(bench, sessions, rid, "noprompt+utter+q1only")
    assert q1.user == alone.user and default.digest() != alone.digest()


def test_priors_and_discourse_markers(bench, sessions) -> None:  # type: ignore[no-untyped-def]
    rid = "consensus:ES2002a_consensus0009"
    base = _prompt(bench, sessions, rid, "noprompt+utter").user
    role = _prompt(bench, sessions, rid, "noprompt+utter+prior-role").user
    phase = _prompt(bench, sessions, rid, "noprompt+utter+prior-phase").user
    da = _prompt(bench, sessions, rid, "noprompt+utter+prior-dialogue_act").user
    nodm = _prompt(bench, sessions, rid, "noprompt+utter+nodm").user
    assert "Participant roles: A = " in role and "Participant roles" not in base
    assert "kick-off meeting" in phase and "Topic segment" in phase
    assert "dialogue-act tags" in da and "] : " not in da and "[inf" in da
    assert " um " in base.lower().replace(",", " ") and " um " not in nodm.lower().replace(",", " ")


def test_video_variants_need_media_and_caption_frames(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rec = bench.by_id()["you:ES2002a_you0002"]
    with pytest.raises(PromptError, match="needs media"):
        build_prompt(rec.item, parse_variant("noprompt+video"), None, None)
    frames = {
        role: [Frame(t, tmp_path / f"{role}_{t}.jpg") for t in (0.0, 2.0)]
        for role in ("Q1_corner", "Q2_mosaic")
    }
    media = PromptMedia(
        videos={"Q1_corner": tmp_path / "c.mp4", "Q2_mosaic": tmp_path / "m.mp4"}, frames=frames
    )
    p = build_prompt(rec.item, parse_variant("noprompt+video+joint"), None, media)
    assert [im.caption for im in p.images][:2] == [
        "Video 1 (corner view), frame at 0.0s",
        "Video 1 (corner view), frame at 2.0s",
    ]
    assert len(p.images) == 4 and "Transcript" not in p.user
    assert "top-left tile: participant A" in p.user and "bottom-right tile: participant B" in p.user
    q1 = build_prompt(rec.item, parse_variant("noprompt+video+q1only"), None, media)
    assert len(q1.images) == 2 and "close-up grid" not in q1.user
    first, second = build_prompt(rec.item, parse_variant("noprompt+video"), None, media).parts
    assert [im.path.name for im in first.images] == ["Q1_corner_0.0.jpg", "Q1_corner_2.0.jpg"]
    assert [im.path.name for im in second.images] == ["Q2_mosaic_0.0.jpg", "Q2_mosaic_2.0.jpg"]
    assert "close-up" in second.user and "corner" not in second.user
