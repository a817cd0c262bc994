"""AMI reader tests on the real shared corpus (``shared/data/ami``)."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from pathlib import Path

import pytest
from corpus_copies import ami_copy

from polylogue.conversation import Conversation, ConversationFormatError
from polylogue.corpora import load_corpus
from polylogue.corpora.ami import (
    RELEASE_DIR,
    ami_meeting_info,
    ami_meetings,
    read_ami,
    read_ami_topics,
    read_ami_words,
    words_to_text,
)
from polylogue.paths import corpus_dir

# From shared/data/ami/README.md.
RESERVED = {f"{s}{x}" for s in ("IS1009", "TS3003", "TS3007") for x in "abcd"}
ADDRESSEE_MEETINGS = {
    "ES2002a", "ES2002c", "ES2002d", "ES2008a", "ES2008b", "ES2009c", "ES2009d",
    "IS1000a", "IS1001a", "IS1001b", "IS1001c", "IS1003b", "IS1003d", "IS1005a",
    "IS1006b", "IS1006d", "IS1008a", "IS1008b", "IS1008c", "IS1008d", "TS3005a", "TS3005b",
}  # fmt: skip


@pytest.fixture(scope="module")
def ami() -> Path:
    return corpus_dir("ami")


@pytest.fixture(scope="module")
def release(ami: Path) -> Path:
    return ami / RELEASE_DIR


@pytest.fixture(scope="module")
def es2008a(ami: Path) -> Conversation:
    return next(read_ami(ami, ["ES2008a"]))


@pytest.fixture(scope="module")
def everything(ami: Path) -> list[Conversation]:
    """All meetings once (a few seconds); shared by the corpus-wide count tests."""
    return list(read_ami(ami))


def _raw_dact_files(release: Path) -> list[Path]:
    return sorted((release / "dialogueActs").glob("*.dialog-act.xml"))


# ----------------------------------------------------------------------------- corpus-wide


def test_meetings_present_are_the_readme_set_minus_reserved(ami: Path, release: Path) -> None:
    meetings = ami_meetings(ami)
    from_files = {p.name.split(".")[0] for p in _raw_dact_files(release)}
    assert meetings == sorted(from_files)
    # 139 meetings with dialogue acts, 12 reserved for independent evaluation.
    assert len(meetings) == 139 - len(RESERVED)
    assert not RESERVED & set(meetings)
    info = ami_meeting_info(ami)
    assert len(info) == 171  # meetings.xml lists every AMI meeting, reserved ones included
    assert set(info) >= RESERVED
    assert all(info[m].meeting_type == "scenario" for m in meetings if m != "IB4003")


def test_dialogue_act_and_addressee_counts_match_raw_files(
    release: Path, everything: list[Conversation]
) -> None:
    # Independent count: regular expressions over the raw XML text.
    raw_dacts = raw_addressed = raw_addressee_attrs = 0
    raw_addressed_meetings: set[str] = set()
    for p in _raw_dact_files(release):
        text = p.read_text(encoding="iso-8859-1")
        raw_dacts += len(re.findall(r"<dact\b", text))
        n = len(re.findall(r'\baddressee="[^"]+"', text))
        raw_addressed += n
        raw_addressee_attrs += len(re.findall(r'\baddressee="', text))
        if n:
            raw_addressed_meetings.add(p.name.split(".")[0])
    assert raw_addressee_attrs == 8876  # the README figure: every addressed meeting is present

    # Words outside every act are kept as act-less utterances of their own (benchmark v2.1).
    kept = sum(len(c) - c.metadata["unassigned_word_runs"] for c in everything)
    dropped = sum(c.metadata["dropped_dialogue_acts"] for c in everything)
    assert kept + dropped == raw_dacts
    assert 0 < dropped < 0.1 * raw_dacts  # acts made only of laughter, gaps or punctuation
    # One addressee attribute is empty (ES2009d.D) and counts as unannotated.
    addressed = sum(u.addressees is not None for c in everything for u in c.utterances)
    assert addressed == raw_addressed == raw_addressee_attrs - 1
    annotated = {c.id for c in everything if c.metadata["addressee_annotated"]}
    assert annotated == raw_addressed_meetings == ADDRESSEE_MEETINGS


def test_every_conversation_is_well_formed(everything: list[Conversation]) -> None:
    da_names = {
        "bck", "stl", "fra", "inf", "sug", "ass", "el.inf", "el.sug", "el.ass", "el.und",
        "off", "und", "be.pos", "be.neg", "oth",
    }  # fmt: skip
    for conv in everything:
        assert conv.corpus == "ami" and conv.roster_known
        assert conv.group == conv.id.rstrip("abcd")
        letters = {p.id for p in conv.participants}
        keys = [(u.start, u.end, u.speaker) for u in conv.utterances]
        assert all(None not in k for k in keys)
        assert keys == sorted(keys)
        for u in conv.utterances:
            assert u.text and u.text == u.text.strip() and "  " not in u.text
            assert u.start is not None and u.end is not None and u.start <= u.end
            assert u.dialogue_act is None or u.dialogue_act in da_names
            assert u.addressees is None or set(u.addressees) <= letters
    # No split may see one series twice: groups are whole series.
    series = Counter(c.group for c in everything)
    assert series["ES2008"] == 4 and series["IB4003"] == 1


# ----------------------------------------------------------------------------- one meeting


def test_hand_picked_dialogue_act(es2008a: Conversation) -> None:
    by_id = {u.id: u for u in es2008a.utterances}
    # dact vkaraisk.6 covers words23..words39 of ES2008a.A.words.xml.
    u = by_id["ES2008a.A.dialog-act.vkaraisk.6"]
    assert u.speaker == "A"
    assert u.text == (
        "Um I'm just gonna have a little PowerPoint presentation for us, for our kick-off meeting."
    )
    assert (u.start, u.end) == (37.49, 41.95)
    assert u.dialogue_act == "off"  # ami_da_7
    assert u.addressees == ("D", "C", "B")
    # The first act of speaker B covers only a laugh, so it is dropped.
    assert "ES2008a.B.dialog-act.vkaraisk.1" not in by_id
    assert by_id["ES2008a.B.dialog-act.vkaraisk.2"].text == "Alima."
    assert by_id["ES2008a.B.dialog-act.vkaraisk.2"].addressees == ("A",)


def test_text_normalisation_and_notes(ami: Path) -> None:
    es2002c, es2008b = read_ami(ami, ["ES2002c", "ES2008b"])
    c = {u.id: u for u in es2002c.utterances}
    # words61..67: "And the Play-Doh 's yellow <laugh> ..." (the clitic is its own token).
    assert c["ES2002c.A.dialog-act.dharshi.17"].text.startswith("And the Play-Doh's yellow")
    assert c["ES2002c.B.dialog-act.dharshi.100"].note == (
        'Actually says "it\'s one of those things where you"'
    )
    b = {u.id: u for u in es2008b.utterances}
    # words629..637: "the idea of an L_C_D_ screen was brought up"
    assert b["ES2008b.D.dialog-act.vkaraisk.65"].text == (
        "the idea of an LCD screen was brought up"
    )


def test_roster_roles_and_metadata(es2008a: Conversation) -> None:
    roles = {p.id: (p.role, p.aliases, p.name) for p in es2008a.participants}
    assert roles == {
        "A": ("project manager", ("PM",), None),
        "B": ("industrial designer", ("ID",), None),
        "C": ("user interface designer", ("UI",), None),
        "D": ("marketing expert", ("ME",), None),
    }
    meta = es2008a.metadata
    assert meta["speakers"]["A"]["global_name"] == "FEE029"
    assert meta["seen_type"] == "training" and meta["meeting_type"] == "scenario"
    assert meta["unit"] == "da" and meta["addressee_annotated"] is True
    assert es2008a.group == "ES2008" and es2008a.roster_known


def test_unit_turn_merges_consecutive_same_speaker_acts(ami: Path, es2008a: Conversation) -> None:
    turns = next(read_ami(ami, ["ES2008a"], unit="turn"))
    speakers = [u.speaker for u in es2008a.utterances]
    changes = sum(a != b for a, b in itertools.pairwise(speakers))
    assert len(turns) == changes + 1
    assert all(a.speaker != b.speaker for a, b in itertools.pairwise(turns.utterances))
    assert turns.metadata["unit"] == "turn"
    # The opening turn of A is her first run of acts, texts joined in order.
    first_a = next(i for i, u in enumerate(es2008a.utterances) if u.speaker == "A")
    run = []
    for u in es2008a.utterances[first_a:]:
        if u.speaker != "A":
            break
        run.append(u)
    turn = next(t for t in turns.utterances if t.id == run[0].id)
    assert turn.text == " ".join(u.text for u in run)
    assert (turn.start, turn.end) == (run[0].start, run[-1].end)


def test_meeting_selection(ami: Path) -> None:
    got = [c.id for c in read_ami(ami, ["ES2008a", "ES2002b"], include_unannotated=False)]
    assert got == ["ES2008a"]
    assert [c.id for c in read_ami(ami, "ES2008a")] == ["ES2008a"]  # one id as a string
    with pytest.raises(ValueError, match="IS1009a"):
        list(read_ami(ami, ["IS1009a"]))  # reserved: listed in meetings.xml, files absent
    with pytest.raises(ValueError, match="unit"):
        list(read_ami(ami, ["ES2008a"], unit="sentence"))  # type: ignore[arg-type]
    via_registry = next(load_corpus("ami", meetings=["ES2008a"]))
    assert via_registry.id == "ES2008a"


def test_words_are_timed_and_complete(ami: Path, release: Path) -> None:
    words = read_ami_words(ami, "ES2008a")
    raw = sum(
        len(re.findall(r"<w\b", p.read_text(encoding="iso-8859-1")))
        for p in (release / "words").glob("ES2008a.*.words.xml")
    )
    assert len(words) == raw
    assert {w.speaker for w in words} == {"A", "B", "C", "D"}
    # The file ends with three untimed words, outside every dialogue act; they keep None
    # and follow the last timed word of their speaker.
    untimed = [i for i, w in enumerate(words) if w.start is None or w.end is None]
    assert [words[i].word_id for i in untimed] == [
        f"ES2008a.A.words{n}" for n in (1315, 1316, 1317)
    ]
    assert words[untimed[0] - 1].word_id == "ES2008a.A.words1314"
    starts = [w.start for w in words if w.start is not None]
    assert starts == sorted(starts)
    assert all(w.is_punct == (w.text in {".", ",", "?", "!"}) for w in words)
    a_words = [w for w in words if w.speaker == "A"]
    first = next(i for i, w in enumerate(a_words) if w.word_id == "ES2008a.A.words23")
    assert words_to_text(a_words[first : first + 17]) == (
        "Um I'm just gonna have a little PowerPoint presentation for us, for our kick-off meeting."
    )


def test_topics(ami: Path) -> None:
    topics = read_ami_topics(ami, "ES2002b")
    assert [t.label for t in topics[:3]] == [
        "opening",
        "new requirements",
        "interface specialist presentation",
    ]
    assert topics[0].depth == 0 and topics[0].start is not None and topics[0].end is not None
    sub = topics[3]  # a sub-topic described in free text, inside topic 3
    assert (sub.depth, sub.type_name, sub.label) == (1, "other", "evaluation of existing products")
    parent = topics[2]
    assert parent.start <= sub.start <= sub.end <= parent.end  # type: ignore[operator]
    top_level = [t for t in topics if t.depth == 0]
    assert all(a.start <= b.start for a, b in itertools.pairwise(top_level))  # type: ignore[operator]
    # IS1006d describes topics with a free "description" instead of a type pointer.
    assert read_ami_topics(ami, "IS1006d")[0].label == "opening"
    assert read_ami_topics(ami, "ES2006c") == []  # the release has no topics for it


# ----------------------------------------------------------------------------- bad input


def test_copy_reads_like_the_original(release: Path, tmp_path: Path, es2008a: Conversation) -> None:
    ami_copy(tmp_path)
    copy = next(read_ami(tmp_path))
    assert copy.utterances == es2008a.utterances
    assert copy.participants == es2008a.participants
    assert copy.metadata == es2008a.metadata


def test_malformed_xml_names_file_and_line(release: Path, tmp_path: Path) -> None:
    out = ami_copy(tmp_path)
    words = out / "words" / "ES2008a.C.words.xml"
    lines = words.read_text(encoding="iso-8859-1").splitlines()
    lines[5] = lines[5].replace("</w>", "</x>", 1)  # unbalanced tag on line 6
    words.write_text("\n".join(lines), encoding="iso-8859-1")
    with pytest.raises(ConversationFormatError) as err:
        list(read_ami(tmp_path))
    assert err.value.path.endswith("ES2008a.C.words.xml")
    assert err.value.where == "line 6"


def test_dangling_word_reference_names_the_act(release: Path, tmp_path: Path) -> None:
    out = ami_copy(tmp_path)
    acts = out / "dialogueActs" / "ES2008a.B.dialog-act.xml"
    text = acts.read_text(encoding="iso-8859-1")
    acts.write_text(text.replace("id(ES2008a.B.words21)", "id(ES2008a.B.words999999)", 1),
                    encoding="iso-8859-1")  # fmt: skip
    with pytest.raises(ConversationFormatError) as err:
        list(read_ami(tmp_path))
    assert err.value.path.endswith("ES2008a.B.dialog-act.xml")
    assert "ES2008a.B.dialog-act.vkaraisk.5" in err.value.where
    assert "ES2008a.B.words999999" in err.value.message


def test_not_an_ami_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="AMI"):
        list(read_ami(tmp_path))
