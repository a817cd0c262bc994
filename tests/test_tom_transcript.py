"""Transcript windows aligned from real AMI word-level transcripts of benchmark sessions."""

from __future__ import annotations

import statistics

import pytest

from polylogue.paths import corpus_dir
from polylogue.tom.records import PARTICIPANT_LETTERS, ToMTask, load_tom_benchmark
from polylogue.tom.transcript import (
    AmiSessions,
    TranscriptOptions,
    render_transcript,
    transcript_window,
)

YOU_WORDS = {"you", "your", "you're", "yours", "yourself", "ya"}


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    return load_tom_benchmark()


@pytest.fixture(scope="module")
def sessions() -> AmiSessions:
    return AmiSessions(corpus_dir("ami"))


def test_you_word_at_window_start_plus_question_time(bench, sessions) -> None:  # type: ignore[no-untyped-def]
    """Letters are AMI agent letters: the asked speaker says 'you' at start + T (+-0.5 s)."""
    items = [
        r.item
        for r in bench.task_records(ToMTask.YOU)
        if r.item.speaker in PARTICIPANT_LETTERS and r.item.session_id < "ES2006"
    ]
    assert len(items) > 60
    for it in items:
        moment = it.window.start + (it.you_time or 0.0)
        hits = [
            w
            for w in sessions.words(it.session_id)
            if w.speaker == it.speaker
            and w.text.lower() in YOU_WORDS
            and w.start is not None
            and abs(w.start - moment) <= 0.5
        ]
        assert hits, f"{it.id}: no 'you' by {it.speaker} near {moment:.2f}s"


def test_state_windows_track_who_speaks(bench, sessions) -> None:  # type: ignore[no-untyped-def]
    """Targets labelled ACTIVE_ENGAGEMENT speak far more in their 5-s window than listeners."""
    talk: dict[str, list[float]] = {"ACTIVE_ENGAGEMENT": [], "FOCUSED_LISTENING": []}
    for r in bench.task_records(ToMTask.STATE):
        label = r.gold.answers["Q1"]
        if label not in talk or r.item.session_id >= "ES2005":
            continue
        w = transcript_window(sessions, r.item.session_id, r.item.window)
        talk[label].append(sum(s.end - s.start for s in w.segments if s.speaker == r.item.target))
    assert len(talk["ACTIVE_ENGAGEMENT"]) > 30 and len(talk["FOCUSED_LISTENING"]) > 30
    assert statistics.mean(talk["ACTIVE_ENGAGEMENT"]) > 2 * statistics.mean(
        talk["FOCUSED_LISTENING"]
    )


def test_negative_start_is_clamped_and_times_stay_question_relative(bench, sessions) -> None:  # type: ignore[no-untyped-def]
    rec = bench.by_id()["you:ES2004c_you0001"]
    w = transcript_window(sessions, rec.item.session_id, rec.item.window)
    assert rec.item.window.start < 0 and w.start == 0.0 and w.end == rec.item.window.end
    assert w.segments and min(s.start for s in w.segments) >= -0.5
    first = render_transcript(w).splitlines()[0]
    # relative to the requested (negative) start: the session's first words are at >= 24.1 s
    assert float(first[1:].split("-")[0]) >= 23.5


def test_rendering_options_and_discourse_markers(bench, sessions) -> None:  # type: ignore[no-untyped-def]
    rec = bench.by_id()["you:ES2002a_you0002"]
    full = transcript_window(sessions, rec.item.session_id, rec.item.window)
    text = render_transcript(full, TranscriptOptions(timestamps=False))
    assert text.splitlines()[0].startswith("B: ") and " um " in f" {text.lower()} "
    opts = TranscriptOptions(remove_discourse_markers=True, timestamps=False)
    clean = render_transcript(
        transcript_window(sessions, rec.item.session_id, rec.item.window, opts), opts
    )
    words = {w.strip(".,?!").lower() for w in clean.split()}
    assert not words & {"um", "uh", "mm-hmm", "hmm"} and "you" in words
    assert not any(line.split(": ", 1)[1].startswith((",", ".")) for line in clean.splitlines())
    rich = TranscriptOptions(dialogue_acts=True, roles=True)
    annotated = render_transcript(
        transcript_window(sessions, rec.item.session_id, rec.item.window, rich), rich
    )
    assert "B (project manager) [" in annotated
    assert full.phase == "project kick-off meeting (1 of 4)" and full.topics


def test_empty_window_text(sessions) -> None:  # type: ignore[no-untyped-def]
    from polylogue.tom.records import SourceWindow

    w = transcript_window(sessions, "ES2002a", SourceWindow(10_000.0, 10_005.0, 5.0))
    assert not w.segments and render_transcript(w) == TranscriptOptions().empty_text
