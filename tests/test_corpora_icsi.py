"""ICSI (QMSum) reader tests on the real shared corpus (``shared/data/icsi-qmsum``)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from polylogue.conversation import Conversation, ConversationFormatError
from polylogue.corpora import load_corpus
from polylogue.corpora.icsi import QMSUM_SPLITS, clean_icsi_text, icsi_meetings, read_icsi
from polylogue.paths import corpus_dir

ROLES = {"PhD", "Grad", "Professor", "Postdoc", "Undergrad"}


@pytest.fixture(scope="module")
def icsi() -> Path:
    return corpus_dir("icsi-qmsum")


@pytest.fixture(scope="module")
def transcripts(icsi: Path) -> Path:
    return icsi / "data" / "Academic" / "all"


@pytest.fixture(scope="module")
def everything(icsi: Path) -> list[Conversation]:
    return list(read_icsi(icsi))


def test_meetings_present_are_qmsum_train_and_val(icsi: Path) -> None:
    meetings = icsi_meetings(icsi)
    # README: 59 QMSum ICSI meetings, of which the 9 test meetings are reserved.
    assert len(meetings) == 59 - 9
    assert set(meetings) == set(QMSUM_SPLITS["train"]) | set(QMSUM_SPLITS["val"])
    assert not set(meetings) & set(QMSUM_SPLITS["test"])


def test_turn_counts_match_raw_files(transcripts: Path, everything: list[Conversation]) -> None:
    # Independent counts: a regex over the raw JSON text, and json for the empty-turn check.
    raw_turns = sum(
        len(re.findall(r'"speaker"\s*:', p.read_text(encoding="utf-8")))
        for p in transcripts.glob("*.json")
    )
    # The README's 48,321 turns cover all 59 meetings; the 50 present here hold 40,278.
    assert raw_turns == 40_278
    assert sum(c.metadata["raw_turns"] for c in everything) == raw_turns
    wordless = 0
    for p in transcripts.glob("*.json"):
        for turn in json.loads(p.read_text(encoding="utf-8"))["meeting_transcripts"]:
            stripped = re.sub(r"\{\w+\}|@", " ", turn["content"])
            wordless += not re.search(r"[A-Za-z0-9]", stripped)
    assert sum(c.metadata["dropped_turns"] for c in everything) == wordless
    assert sum(len(c) for c in everything) == raw_turns - wordless


def test_conversations_are_well_formed(everything: list[Conversation]) -> None:
    labels = set()
    for conv in everything:
        assert conv.corpus == "icsi" and conv.group == conv.id and not conv.roster_known
        assert conv.metadata["split"] in ("train", "val")
        for p in conv.participants:
            assert p.name is None and p.role in ROLES and p.id.startswith(p.role)
            labels.add(p.id)
        indices = [int(u.id.rsplit(".t", 1)[1]) for u in conv.utterances]  # type: ignore[union-attr]
        assert indices == sorted(indices) and len(set(indices)) == len(indices)
        for u in conv.utterances:
            assert u.start is None and u.end is None and u.addressees is None
            assert u.text and "{" not in u.text and "@" not in u.text
            assert " ," not in u.text and " 's" not in u.text and "  " not in u.text
    assert len(labels) <= 35  # README: 35 distinct labels over all 59 meetings


def test_hand_picked_turns(icsi: Path) -> None:
    conv = next(read_icsi(icsi, ["Bed002"]))
    by_id = {u.id: u for u in conv.utterances}
    # Raw: "OK , we 're on . So just make sure that th your wireless mike is on , if you 're
    # wearing a wireless ."
    assert by_id["Bed002.t1"].speaker == "Grad A"
    assert by_id["Bed002.t1"].text == (
        "OK, we're on. So just make sure that th your wireless mike is on, "
        "if you're wearing a wireless."
    )
    # Raw: "And you should be able to see which one {disfmarker} which one you 're on by , uh ,
    # watching the little bars change ."
    assert by_id["Bed002.t3"].text == (
        "And you should be able to see which one which one you're on by, uh, "
        "watching the little bars change."
    )
    assert conv.metadata["split"] == "val"
    assert conv.metadata["topics"][0] == {
        "topic": "Setting up recording equipment and explaining its use",
        "spans": [[0, 90]],
    }
    assert [p.id for p in conv.participants][:3] == ["Grad E", "Grad A", "Grad B"]


def test_cleaning_rules() -> None:
    assert clean_icsi_text("{vocalsound} {disfmarker}") == ""
    assert clean_icsi_text("@ @ .") == ""
    assert clean_icsi_text("she 'll learn @ @ .") == "she'll learn."
    assert clean_icsi_text('a " time - line " tag .') == 'a "time-line" tag.'


def test_selection_and_registry(icsi: Path) -> None:
    assert [c.id for c in read_icsi(icsi, ["Bro003", "Bed002"])] == ["Bro003", "Bed002"]
    assert [c.id for c in read_icsi(icsi, "Bdb001")] == ["Bdb001"]
    with pytest.raises(ValueError, match="Bed003"):
        list(read_icsi(icsi, ["Bed003"]))  # a reserved QMSum test meeting
    assert next(load_corpus("icsi", meetings=["Bdb001"])).id == "Bdb001"


def test_malformed_json_names_file_and_line(transcripts: Path, tmp_path: Path) -> None:
    bad = tmp_path / "Bed002.json"
    text = (transcripts / "Bed002.json").read_text(encoding="utf-8")
    lines = text.splitlines()
    lines[3] = lines[3] + ","  # a stray comma on line 4
    bad.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ConversationFormatError) as err:
        list(read_icsi(tmp_path))
    assert err.value.path == str(bad)
    assert err.value.where.startswith("line ")
    assert "invalid JSON" in err.value.message  # one wording for every JSON reader


def test_bad_turn_record_names_the_index(transcripts: Path, tmp_path: Path) -> None:
    shutil.copy(transcripts / "Bed002.json", tmp_path / "Bed002.json")
    doc = json.loads((tmp_path / "Bed002.json").read_text(encoding="utf-8"))
    del doc["meeting_transcripts"][7]["content"]
    (tmp_path / "Bed002.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ConversationFormatError) as err:
        list(read_icsi(tmp_path))
    assert err.value.where == "meeting_transcripts[7]"
