"""Scorer parity: crafted prediction files that exercise each documented behaviour of the
official MeetingToM evaluator, scored against real gold rows of the release.

Expected numbers are worked out by hand in the comments next to each case.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from polylogue.paths import corpus_dir
from polylogue.tom.records import ToMTask, load_tom_benchmark
from polylogue.tom.scoring import (
    SUMMARY_COLUMNS,
    extract_answers,
    load_official_gold,
    normalise_label,
    parse_model_variant,
    parse_text_answer,
    route_file,
    score_official,
    score_official_rows,
    score_strict,
)

STATE_BUNDLES = ("ES2002a_state0004", "ES2002a_state0008", "ES2002a_state0010")
YOU_BUNDLES = (
    "ES2002a_you0002",
    "ES2002a_you0005",
    "ES2002a_you0006",
    "ES2002a_you0008",
    "ES2002a_you0014",
)
CONS_BUNDLES = (
    "ES2002a_consensus0009",
    "ES2002a_consensus0013",
    "ES2002b_consensus0022",
    "ES2003d_consensus0005",
    "ES2004b_consensus0022",
)


def _real_rows(task: str, keep: Any) -> list[dict[str, Any]]:
    path = corpus_dir("meetingtom") / f"{task}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if keep(r)]


@pytest.fixture(scope="module")
def gold_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real gold rows of a few bundles per task (the state file keeps 5 of the 6 windows)."""
    d = tmp_path_factory.mktemp("gold")
    state = _real_rows("state", lambda r: r["source_bundle_name"] in STATE_BUNDLES)
    state = [r for r in state if r["bundle_name"] != "ES2002a_state0010_w1"]
    you = _real_rows("you", lambda r: r["bundle_name"] in YOU_BUNDLES)
    cons = _real_rows("consensus", lambda r: r["bundle_name"] in CONS_BUNDLES)
    for name, rows in (("state", state), ("you", you), ("consensus", cons)):
        with open(d / f"{name}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    return d


def _gold_paths(gold_dir: Path) -> list[Path]:
    return [gold_dir / f"{t}.jsonl" for t in ("state", "you", "consensus")]


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return path


def _responses_api(text: str) -> list[dict[str, Any]]:
    """A raw Responses-API ``output`` list: label-like siblings precede the nested answer."""
    return [
        {
            "type": "message",
            "id": "msg_0a1b",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    ]


STATE_ROWS: list[dict[str, Any]] = [
    # top-level Q1 wins over the text field; normalised "cognitive conflict" -> correct
    {
        "metadata": {"bundle_name": "ES2002a_state0004", "window_index": 0},
        "Q1": "cognitive conflict",
        "response_text": '{"Q1":"HESITATION"}',
    },
    # identity from custom_id; the LAST balanced object wins; "focused-listening." -> correct
    {
        "custom_id": "state::ES2002a_state0004::Q1::1",
        "response_text": 'draft {"Q1":"ACTIVE_ENGAGEMENT"} final: {"Q1": "focused-listening."}',
    },
    # window from metadata.transcript_txt; label-like siblings fail validation -> correct
    {
        "metadata": {"bundle_name": "ES2002a_state0008", "transcript_txt": "t/window0.txt"},
        "output": _responses_api('{"Q1":"ACTIVE_ENGAGEMENT"}'),
    },
    # released id / bundle_name only: no STATE identity -> skipped (rows_missing_key_or_widx)
    {
        "id": "state:ES2002a_state0008_w1",
        "bundle_name": "ES2002a_state0008_w1",
        "Q1": "FOCUSED_LISTENING",
    },
    # placeholder is rejected (missing label) ...
    {
        "metadata": {"bundle_name": "ES2002a_state0010", "window_index": "0"},
        "response_text": "{'Q1': '<OPTION>'}",
    },
    # ... and the duplicate key overwrites it: bare Q1 label "HESITATION" (gold FOCUSED_LISTENING)
    {
        "metadata": {"bundle_name": "ES2002a_state0010", "window_index": 0},
        "prediction": "HESITATION",
    },
]

YOU_ROWS: list[dict[str, Any]] = [
    # bare Q1 label accepted; Q2 always needs JSON -> Q2 missing
    {"bundle_name": "ES2002a_you0002", "response_text": "MULTIPLE"},
    # a bare one-letter label is rejected -> Q1 and Q2 missing
    {"bundle_name": "ES2002a_you0005", "response_text": "C"},
    # YOU is not validated: the sibling "type": "message" becomes the Q1 answer (gold MULTIPLE)
    {
        "metadata": {"bundle_name": "ES2002a_you0006"},
        "output": _responses_api('{"Q1":"MULTIPLE","Q2":"NEUTRAL"}'),
    },
    # lower-case keys are read
    {"bundle_name": "ES2002a_you0008", "q1": "d", "q2": "support"},
    # identity from the id suffix; any label-like Q1 string counts ("MAYBE_D", gold D)
    {"id": "you:ES2002a_you0014", "answer": '{"Q1": "Maybe D", "Q2": "NEUTRAL"}'},
]

CONS_ROWS: list[dict[str, Any]] = [
    {"bundle_name": "ES2002a_consensus0009", "Q1": "TRUE_CONSENSUS", "Q2": "NONE"},  # 2 points
    {"bundle_name": "ES2002a_consensus0013", "Q1": "TRUE_CONSENSUS", "Q2": "A"},  # 1 point
    {"bundle_name": "ES2002b_consensus0022", "Q1": "NO_CONSENSUS", "Q2": "NONE"},  # 0 points
    # the PSEUDO_CONSENSU alias; curly quotes are straightened first -> 2 points
    {
        "custom_id": "consensus::ES2003d_consensus0005::Q1Q2::cot",
        "response_text": "\u201cQ1\u201d oops "
        "{\u201cQ1\u201d: \u201cPSEUDO_CONSENSU\u201d, \u201cQ2\u201d: \u201cB\u201d}",
    },
    # Q1 only: counts for cons_q1_acc, not for the points metric
    {"bundle_name": "ES2004b_consensus0022", "response_text": '{"Q1":"PSEUDO_CONSENSUS"}'},
]


def test_normalisation_and_text_parsing() -> None:
    assert normalise_label(" `Focused-Listening.` ", None) == "FOCUSED_LISTENING"
    assert normalise_label("pseudo consensu", None) == "PSEUDO_CONSENSUS"
    assert (
        normalise_label("<OPTION>", None) is None and normalise_label("Your Answer", None) is None
    )
    assert normalise_label("MAYBE", ["A"]) is None and normalise_label(3, None) is None
    assert parse_text_answer("{'Q1': 'a'}", "Q1", None) == "A"  # Python-literal fallback
    assert parse_text_answer('{"q1": "B", "Q1": "C"}', "Q1", None) == "C"  # upper key preferred
    assert parse_text_answer("MULTIPLE", "Q1", None) == "MULTIPLE"
    assert parse_text_answer("A", "Q1", None) is None  # too short for a bare label
    assert parse_text_answer("the answer is MULTIPLE", "Q1", None) is None  # spaces
    assert parse_text_answer("NEUTRAL", "Q2", None) is None  # Q2 never bare
    assert parse_text_answer('{"Q2": "x"} not json {', "Q2", None) == "X"


def test_state_official_semantics(gold_dir: Path) -> None:
    gold = load_official_gold(_gold_paths(gold_dir))[ToMTask.STATE]
    assert len(gold) == 5
    from polylogue.tom.scoring import FileCounts

    counts = FileCounts()
    metrics, summary = score_official_rows(STATE_ROWS, ToMTask.STATE, gold, counts=counts)
    # aligned: 0004w0 CC ok, 0004w1 FL ok, 0008w0 AE ok, 0010w0 HES vs FL -> 3/4
    assert metrics["Q1"].n == 4 and summary["state_acc"] == pytest.approx(0.75)
    # F1: CC 1, FL 2/3 (one FN), AE 1, HES 0, three absent labels 0 -> (8/3)/7
    assert summary["state_macro_f1"] == pytest.approx((8 / 3) / 7)
    assert counts.rows_missing_key_or_widx == 1
    assert counts.duplicate_keys == 1 and counts.rows_missing_label == 1
    assert counts.missing_pred_for_gold == 1  # 0008w1 has no usable row
    only0, _ = score_official_rows(STATE_ROWS, ToMTask.STATE, gold, only_windows=(0,))
    assert only0["Q1"].accuracy == pytest.approx(2 / 3)
    # an out-of-list prediction is no false negative: FL's F1 becomes 1 under --labels CC,FL
    over, _ = score_official_rows(
        STATE_ROWS, ToMTask.STATE, gold, labels_override=["COGNITIVE_CONFLICT", "FOCUSED_LISTENING"]
    )
    assert over["Q1"].macro_f1 == pytest.approx(1.0)


def test_you_official_semantics_and_strict_validation(gold_dir: Path) -> None:
    gold = load_official_gold(_gold_paths(gold_dir))[ToMTask.YOU]
    metrics, summary = score_official_rows(YOU_ROWS, ToMTask.YOU, gold)
    # Q1 aligned: MULTIPLE ok, MESSAGE (gold MULTIPLE), D ok, MAYBE_D (gold D) -> 2/4
    assert metrics["Q1"].n == 4 and summary["you_q1_acc"] == pytest.approx(0.5)
    # label list = sorted union of gold and predictions; D and MULTIPLE F1 2/3, junk labels 0
    assert metrics["Q1"].labels == ("D", "MAYBE_D", "MESSAGE", "MULTIPLE")
    assert summary["you_q1_macro_f1"] == pytest.approx((4 / 3) / 4)
    # Q2 aligned: 0006 NEUTRAL, 0008 SUPPORT, 0014 NEUTRAL, all right; union {NEUTRAL, SUPPORT}
    assert (
        metrics["Q2"].n == 3 and summary["you_q2_acc"] == 1.0 and summary["you_q2_macro_f1"] == 1.0
    )
    # strict extraction validates YOU: the Responses-API item yields the real answer
    strict = extract_answers(
        YOU_ROWS[2], ("Q1", "Q2"), {"Q1": ["A", "B", "C", "D", "MULTIPLE", "UNKNOWN"], "Q2": None}
    )
    assert strict["Q1"] == "MULTIPLE"


def test_consensus_points_and_conditional_accuracy(gold_dir: Path) -> None:
    gold = load_official_gold(_gold_paths(gold_dir))[ToMTask.CONSENSUS]
    metrics, summary = score_official_rows(CONS_ROWS, ToMTask.CONSENSUS, gold)
    assert summary["cons_q1_acc"] == pytest.approx(4 / 5)
    assert summary["cons_points_acc"] == pytest.approx(5 / 8)  # 2+1+0+2 over 4 bundles x 2
    assert summary["cons_q2_cond_acc"] == pytest.approx(2 / 3)  # NONE ok, A wrong, B ok
    # Q1 macro over the fixed 4 labels: TC 0.8, PC 1, NC 0, UNCERTAIN 0
    assert metrics["Q1"].macro_f1 == pytest.approx(0.45)
    # Q2-conditional macro over fixed A-D,NONE: labels absent from the subset count as 0
    assert metrics["Q2_cond"].labels == ("A", "B", "C", "D", "NONE")
    # NONE 2/3 (one FN to A), A 0, B 1, C and D absent -> (2/3 + 1) / 5
    assert metrics["Q2_cond"].macro_f1 == pytest.approx((2 / 3 + 1) / 5)


def test_file_routing_and_model_variant_parsing() -> None:
    assert route_file("young-lm_state_noprompt.jsonl") == [ToMTask.YOU]  # 'you' inside a model name
    assert route_file("m_you_consensus_eot.jsonl") == [ToMTask.YOU, ToMTask.CONSENSUS]
    assert route_file("m_state_cot.jsonl") == [ToMTask.STATE] and route_file("m_misc.jsonl") == []
    assert parse_model_variant("gpt5_state_cot") == ("gpt5", "cot")
    assert parse_model_variant("a_b_you_noprompt") == ("a_b", "noprompt")
    assert parse_model_variant("m_state_cot_v2") == ("m", "cot")  # no word boundary: fallback
    assert parse_model_variant("m_state_naivecot") == ("m", "NA")
    assert parse_model_variant("gpt5_consensus") == ("gpt5", "NA")


def test_overall_summary_csv(gold_dir: Path, tmp_path: Path) -> None:
    pred = tmp_path / "pred"
    pred.mkdir()
    _write(pred / "m1_state_noprompt.jsonl", STATE_ROWS)
    _write(pred / "m1_you_noprompt.jsonl", YOU_ROWS)
    _write(pred / "m1_consensus_cot.jsonl", CONS_ROWS)
    # same (model, variant) as m1_state_noprompt: the later file (by name) overwrites its cells
    _write(pred / "m1_state_noprompt_v2.jsonl", STATE_ROWS[:1])
    (pred / "notes.txt").write_text("ignored: wrong extension")
    result = score_official(_gold_paths(gold_dir), pred)
    path = result.write_summary(tmp_path / "out")
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
        header = rows and list(rows[0].keys())
    assert tuple(header) == SUMMARY_COLUMNS
    assert [(r["model"], r["variant"]) for r in rows] == [("m1", "cot"), ("m1", "noprompt")]
    cot, noprompt = rows
    assert cot["state_acc"] == "" and cot["cons_points_acc"] == "0.625000"
    assert noprompt["state_acc"] == "1.000000"  # from the overwriting _v2 file (1 row, correct)
    assert noprompt["you_q1_acc"] == "0.500000" and noprompt["cons_q1_acc"] == ""
    assert len(result.files) == 4


def test_legacy_state_gold_and_raw_you_gold(tmp_path: Path) -> None:
    legacy = _write(
        tmp_path / "old_state.jsonl",
        [
            {
                "id": "state:X_state0001",
                "task": "state",
                "bundle_name": "X_state0001",
                "answers": {"Q1": "hesitation", "Q2": "ACTIVE_ENGAGEMENT"},
            },
            {"id": "you:X_you0001", "answers": {"Q1": " b ", "Q2": "support"}},
        ],
    )
    gold = load_official_gold([legacy])
    assert gold[ToMTask.STATE] == {
        ("X_state0001", 0): {"Q1": "HESITATION"},
        ("X_state0001", 1): {"Q1": "ACTIVE_ENGAGEMENT"},
    }
    assert gold[ToMTask.YOU] == {"X_you0001": {"Q1": " b ", "Q2": "support"}}  # YOU gold kept raw


def test_strict_mode_counts_missing_as_wrong() -> None:
    bench = load_tom_benchmark()
    records = bench.select(limit_per_task=4)
    preds: dict[str, dict[str, str | None]] = {}
    for r in records:
        preds[r.id] = dict(r.gold.answers)
    state_ids = [r.id for r in records if r.task is ToMTask.STATE]
    del preds[state_ids[0]]  # missing
    preds[state_ids[1]] = {"Q1": None}  # unparseable
    result = score_strict(records, preds)
    m = result.metrics["state.Q1"]
    assert m.n == 4 and m.n_missing == 2 and m.coverage == 0.5 and m.accuracy == 0.5
    assert result.summary["you.Q1.acc"] == 1.0 and result.summary["cons_points_acc"] == 1.0
    assert result.metrics["consensus.Q2_cond"].n == 4
    assert sum(row.get("<MISSING>", 0) for row in m.confusion.values()) == 2
