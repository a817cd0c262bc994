"""MeetingToM release loading and validation on the real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polylogue.conversation import ConversationFormatError
from polylogue.paths import corpus_dir
from polylogue.tom.records import (
    KNOWN_ANOMALY_KINDS,
    ToMRecordError,
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


# ----------------------------------------------------------------------------- the schema


def _copy(tmp_path: Path) -> Path:
    src = corpus_dir("meetingtom")
    for name in ("state.jsonl", "you.jsonl", "consensus.jsonl", "reconstruction.jsonl"):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    return tmp_path


def _edit(path: Path, index: int, change) -> None:  # type: ignore[no-untyped-def]
    lines = path.read_bytes().split(b"\n")
    row = json.loads(lines[index])
    change(row)
    lines[index] = json.dumps(row).encode()
    path.write_bytes(b"\n".join(lines))


def test_every_bad_record_is_one_error_naming_file_line_and_field(tmp_path: Path) -> None:
    """Wrong types, an unknown task, a non-UTF-8 byte, a duplicate id, a reversed window and
    bundle names that would lead out of a folder: all refused before use, one line each."""
    from cli_run import run_polylogue

    folder = _copy(tmp_path)
    state, recon = folder / "state.jsonl", folder / "reconstruction.jsonl"

    def set_path(keys: list[str], value: object):  # type: ignore[no-untyped-def]
        def change(row: dict) -> None:  # type: ignore[type-arg]
            for k in keys[:-1]:
                row = row[k]
            row[keys[-1]] = value

        return change

    _edit(state, 0, set_path(["answers", "Q1"], 3))  # line 1: a number for a label
    _edit(state, 1, set_path(["task"], "mood"))  # line 2: an unknown task
    _edit(state, 3, set_path(["questions", "Q1", "options"], "A,B"))  # line 4
    lines = state.read_bytes().split(b"\n")
    lines[4] = lines[4].replace(b"participant", b"particip\xffant")  # line 5: not UTF-8
    lines[6] = lines[5]  # line 7: the id of line 6 again
    state.write_bytes(b"\n".join(lines))
    _edit(recon, 10, set_path(["source_window", "end"], 1.0))  # line 11: end before start
    _edit(recon, 11, set_path(["source_window", "start"], "150"))  # line 12: a string
    _edit(recon, 12, set_path(["bundle_name"], "../../outside"))  # line 13
    _edit(recon, 13, set_path(["session_id"], "/etc"))  # line 14: an absolute path
    with pytest.raises(ToMRecordError) as got:
        load_tom_benchmark(folder)
    # The reconstruction file is read first; its problems stop the load.
    ids = [json.loads(x)["id"] for x in recon.read_text(encoding="utf-8").splitlines()[10:14]]
    start = json.loads(recon.read_text(encoding="utf-8").splitlines()[10])["source_window"]
    plain = "is not a plain name (letters, digits, '.', '_', '-'; no path separator, no '..'): "
    assert got.value.problems == [
        f"{recon}:line 11: record {ids[0]!r}: field source_window.end: "
        f"1 is not after source_window.start {start['start']:g}",
        f"{recon}:line 12: record {ids[1]!r}: field source_window.start: "
        "expected a number, got str '150'",
        f"{recon}:line 13: record {ids[2]!r}: field bundle_name: '../../outside' {plain}"
        "it names a folder",
        f"{recon}:line 14: record {ids[3]!r}: field session_id: '/etc' {plain}it names a folder",
    ]
    fixed = (corpus_dir("meetingtom") / "reconstruction.jsonl").read_bytes()
    recon.write_bytes(fixed)
    with pytest.raises(ToMRecordError) as got:
        load_tom_benchmark(folder)
    problems = got.value.problems
    assert len(problems) == 5, problems
    assert problems[0] == (
        f"{state}:line 1: record 'state:ES2002a_state0004_w0': field answers.Q1: "
        "expected a string, got int 3"
    )
    assert (
        problems[1].startswith(f"{state}:line 2: ")
        and "field task: unknown task 'mood'" in problems[1]
    )
    assert (
        problems[2].startswith(f"{state}:line 4: ")
        and "field questions.Q1.options: expected a list" in problems[2]
    )
    assert problems[3] == f"{state}:line 5: not UTF-8 text (byte 0xff at column 151)" or (
        problems[3].startswith(f"{state}:line 5: not UTF-8 text (byte 0xff")
    )
    assert (
        problems[4].startswith(f"{state}:line 7: ")
        and "field id: duplicate of state.jsonl line 6" in problems[4]
    )
    run = run_polylogue(["tom", "validate", "--data", str(folder)])
    err = run.stderr.decode()
    assert run.returncode == 2 and "Traceback" not in err, err
    assert "5 bad MeetingToM record(s)" in err and f"{state}:line 7:" in err


def test_tom_media_never_writes_outside_its_folder(tmp_path: Path) -> None:
    """A record built in code (not loaded, so not checked by the schema) with a bundle name
    that leads out: refused before anything is cut or written."""
    from dataclasses import replace

    from polylogue.tom.media import AmiMediaSource, MediaError, build_record_media

    rec = next(iter(load_tom_benchmark().all_records())).item.reconstruction
    out = tmp_path / "media"
    for bad in ("../../escaped", str(tmp_path / "abs")):
        with pytest.raises(MediaError, match="leads outside the output folder"):
            build_record_media(replace(rec, bundle_name=bad), AmiMediaSource(tmp_path), out)
    assert not out.exists() and not (tmp_path / "escaped").exists()
    assert not (tmp_path / "abs").exists()
