"""MeetingToM release loading and validation on the real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polylogue.conversation import ConversationFormatError
from polylogue.paths import corpus_dir
from polylogue.tom.records import (
    KNOWN_ANOMALY_KINDS,
    ToMTask,
    anomaly_counts,
    load_tom_benchmark,
    validate,
)


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    return load_tom_benchmark()


def test_counts_and_parsed_questions(bench) -> None:  # type: ignore[no-untyped-def]
    assert {t: len(r) for t, r in bench.records.items()} == {
        ToMTask.STATE: 600,
        ToMTask.YOU: 300,
        ToMTask.CONSENSUS: 300,
    }
    assert not bench.orphan_reconstructions
    state = bench.task_records("state")[0].item
    assert state.scoring_bundle == "ES2002a_state0004" and state.window_index == 0
    assert state.target == "A" and state.reconstruction.target_view == "Closeup1"
    you = bench.task_records("you")[0].item
    assert (you.speaker, you.you_time, you.attitude_subject) == ("B", 15.0, "MULTIPLE")
    assert you.reconstruction.closeup_to_agent["Closeup4"] == "B"
    cons = bench.task_records("consensus")[0].item
    assert cons.reconstruction.mosaic is not None and cons.reconstruction.mosaic.tile_width == 640


def test_validate_reports_exactly_the_documented_anomalies(bench) -> None:  # type: ignore[no-untyped-def]
    findings = validate(bench)
    counts = anomaly_counts(findings)
    assert counts == {
        "consensus_order": 1,
        "negative_start": 1,
        "nonstandard_duration": 9,
        "q2_names_q1_gold": 203,
        "q2_subject_differs": 97,
        "self_address": 1,
        "unknown_participant": 1,
        "unknown_speaker": 3,
    }
    assert set(counts) <= set(KNOWN_ANOMALY_KINDS)
    by_kind = {(f.kind, f.record_id) for f in findings}
    assert ("negative_start", "you:ES2004c_you0001") in by_kind
    assert ("self_address", "you:ES2013b_you0011") in by_kind
    assert ("unknown_participant", "you:ES2007a_you0001") in by_kind
    assert {r for k, r in by_kind if k == "unknown_speaker"} == {
        "you:ES2004c_you0001",
        "you:ES2006a_you0002",
        "you:ES2007d_you0011",
    }


def test_select_filters(bench) -> None:  # type: ignore[no-untyped-def]
    sel = bench.select(tasks=["you"], sessions=["ES2002a"], limit_per_task=2)
    assert [r.id for r in sel] == ["you:ES2002a_you0002", "you:ES2002a_you0005"]


def test_inconsistent_copy_is_reported(tmp_path: Path) -> None:
    src = corpus_dir("meetingtom")
    for name in ("state.jsonl", "you.jsonl", "consensus.jsonl", "reconstruction.jsonl"):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    lines = (tmp_path / "consensus.jsonl").read_text().splitlines()
    row = json.loads(lines[0])
    row["answers"]["Q2"] = "C"  # a dissenter without PSEUDO_CONSENSUS
    lines[0] = json.dumps(row)
    (tmp_path / "consensus.jsonl").write_text("\n".join(lines) + "\n")
    counts = anomaly_counts(validate(load_tom_benchmark(tmp_path)))
    assert counts["consensus_q2_inconsistent"] == 1
    # a record without a reconstruction line is a format error naming file and line
    rec = (tmp_path / "reconstruction.jsonl").read_text().splitlines()
    (tmp_path / "reconstruction.jsonl").write_text("\n".join(rec[1:]) + "\n")
    with pytest.raises(ConversationFormatError, match=r"state.jsonl:line 1"):
        load_tom_benchmark(tmp_path)
