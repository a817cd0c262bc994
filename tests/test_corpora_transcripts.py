"""Readers for users' own transcripts (JSONL, CSV, WebVTT, text lines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polylogue.conversation import ConversationFormatError
from polylogue.corpora.transcripts import (
    TRANSCRIPT_FORMATS,
    infer_format,
    parse_header_line,
    parse_time,
    parse_transcript_line,
    read_transcript,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _jsonl(tmp_path: Path, rows: list[dict], name: str = "t.jsonl") -> Path:
    return _write(tmp_path, name, "".join(json.dumps(r) + "\n" for r in rows))


# ----------------------------------------------------------------------------- shipped example


def test_standup_example_in_three_formats_agrees() -> None:
    j = read_transcript(EXAMPLES / "standup.jsonl")
    v = read_transcript(EXAMPLES / "standup.vtt")
    c = read_transcript(EXAMPLES / "standup.csv")
    assert j.id == "standup-example" and j.roster_known is True
    assert [p.id for p in j.participants] == ["alice", "bob", "carol", "dave"]
    assert j.participant("dave").role == "QA engineer"
    assert 20 <= len(j) <= 30
    assert [u.text for u in j.utterances] == [u.text for u in v.utterances]
    assert [u.text for u in j.utterances] == [u.text for u in c.utterances]
    names = {p.id: p.name for p in j.participants}
    assert [names[u.speaker] for u in j.utterances] == [u.speaker for u in v.utterances]
    for a, b, d in zip(j.utterances, v.utterances, c.utterances, strict=True):
        assert a.start == pytest.approx(b.start) == pytest.approx(d.start)
        assert a.end == pytest.approx(b.end) == pytest.approx(d.end)
        expected = None if a.addressees is None else tuple(names[x] for x in a.addressees)
        assert d.addressees == expected
        assert b.addressees is None  # WebVTT cannot say whom a cue addresses
    # Explicitly addressed ("Dave, can you ...") and talked about without being addressed.
    ask = next(u for u in j.utterances if u.text.startswith("Okay. Dave, can you"))
    assert ask.addressees == ("dave",)
    about = next(u for u in j.utterances if "so Bob isn't chasing" in u.text)
    assert about.speaker == "alice" and about.addressees is None
    assert v.roster_known is False and c.roster_known is False


# ----------------------------------------------------------------------------- JSONL


def test_jsonl_without_header(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        [
            {
                "speaker": "Ana Lima",
                "text": "Ben, ready?",
                "addressee": "ben",
                "start": 0,
                "end": 1.5,
            },
            {"speaker": "Ben", "text": "Yes.", "start": "00:00:02.000", "end": "2.5"},
            {"speaker": "Cy", "text": "Both of you, thanks.", "addressee": ["Ana Lima", "Ben"]},
            {"speaker": "Ana Lima", "text": "Sure.", "addressee": []},
        ],
    )
    conv = read_transcript(path, conversation_id="demo")
    assert conv.id == "demo" and conv.corpus == "user" and conv.roster_known is False
    assert [p.id for p in conv.participants] == ["Ana Lima", "Ben", "Cy"]
    assert conv.participant("Ana Lima").aliases == ("Ana",)
    u = conv.utterances
    assert u[0].addressees == ("Ben",)
    assert (u[1].start, u[1].end, u[1].addressees) == (2.0, 2.5, None)
    assert u[2].addressees == ("Ana Lima", "Ben") and u[2].start is None
    assert u[3].addressees == ()
    assert [x.id for x in u] == ["u0001", "u0002", "u0003", "u0004"]


def test_jsonl_header_resolves_names_and_ids(tmp_path: Path) -> None:
    header = {
        "participants": [
            {"id": "p1", "name": "Alice Martin", "role": "chair"},
            {"id": "p2", "name": "Bob"},
            {"id": "p3", "name": "Dana", "aliases": ["D"]},
        ],
        "id": "meeting-7",
        "domain": "earnings",
    }
    path = _jsonl(
        tmp_path,
        [
            header,
            {"speaker": "Alice", "text": "Dana, go ahead.", "addressee": "D", "id": "a"},
            {"speaker": "p3", "text": "Thanks Alice.", "addressee": "alice martin"},
        ],
    )
    conv = read_transcript(path)
    assert conv.id == "meeting-7" and conv.domain == "earnings" and conv.roster_known is True
    assert [u.speaker for u in conv.utterances] == ["p1", "p3"]
    assert [u.addressees for u in conv.utterances] == [("p3",), ("p1",)]
    assert conv.utterances[0].id == "a"
    assert conv.participant("p2").role is None  # a silent attendee is still on the roster


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"speaker": "A", "text": "hi", "addressee": "Zed"}], r"line 1: unknown addressee 'Zed'"),
        ([{"speaker": "A", "text": "hi"}, {"text": "no speaker"}], r"line 2: missing speaker"),
        ([{"speaker": "A", "text": "  "}], r"line 1: missing text"),
        ([{"speaker": "A", "text": "hi", "start": 5, "end": 4}], r"line 1: end 4.0 is before"),
        ([{"speaker": "A", "text": "hi", "start": "soon"}], r"line 1: start 'soon' is not"),
        ([{"speaker": "A", "text": "hi", "start": -1}], r"line 1: start -1 must be"),
        ([{"speaker": "A", "text": "hi", "addressee": 3}], r"line 1: addressee must be"),
        (
            [{"speaker": "A", "text": "hi"}, {"participants": [{"id": "A"}]}],
            r"line 2: the participants header must be the first line",
        ),
        (
            [{"participants": [{"id": "A"}]}, {"speaker": "B", "text": "hi"}],
            r"line 2: speaker 'B' is not in the participants header",
        ),
        ([{"participants": [{"id": "A"}, {"id": "A"}]}], r"duplicate participant ids"),
        ([{"participants": []}], r"'participants' must be a non-empty list"),
        ([{"participants": [{"id": "A"}]}], r"empty transcript"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path: Path, rows: list[dict], message: str) -> None:
    path = _jsonl(tmp_path, rows, name="bad.jsonl")
    with pytest.raises(ConversationFormatError, match=message) as err:
        read_transcript(path)
    assert err.value.path.endswith("bad.jsonl")


def test_jsonl_unparseable_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.jsonl", '{"speaker": "A", "text": "hi"}\n\n{"speaker": \n')
    with pytest.raises(ConversationFormatError, match=r"x\.jsonl:line 3: invalid JSON"):
        read_transcript(path)
    with pytest.raises(ConversationFormatError, match="empty transcript"):
        read_transcript(_write(tmp_path, "empty.jsonl", "\n\n"))


# ----------------------------------------------------------------------------- CSV


def test_csv_with_times_and_addressees(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "m.csv",
        "Speaker,Text,Start,End,Addressee\n"
        'Ann,"Bo, Cal: thoughts?",00:01:02.500,1:04,Bo; Cal\n'
        "Bo,I agree.,64.2,66,\n"
        "Cal,Same.,,,Ann\n",
    )
    conv = read_transcript(path)
    u = conv.utterances
    assert (u[0].start, u[0].end, u[0].addressees) == (62.5, 64.0, ("Bo", "Cal"))
    assert (u[1].start, u[1].end, u[1].addressees) == (64.2, 66.0, None)
    assert (u[2].start, u[2].addressees) == (None, ("Ann",))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("speaker,words\nA,hi\n", r"line 1: CSV header must have speaker and text"),
        ("speaker,text\nA,hi\n,orphan\n", r"line 3: missing speaker"),
        ("speaker,text,start,end\nA,hi,00:00:05,00:00:04\n", r"line 2: end 4.0 is before"),
        ("speaker,text\nA,hi,extra\n", r"line 2: more cells than header columns"),
        ("speaker,text,addressee\nA,hi,B\n", r"line 2: unknown addressee 'B'"),
        ("speaker,text\n", r"empty transcript"),
        ("", r"empty transcript"),
    ],
)
def test_csv_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConversationFormatError, match=message):
        read_transcript(_write(tmp_path, "bad.csv", text))


# ----------------------------------------------------------------------------- WebVTT


def test_vtt_voice_spans_zoom_style_and_notes(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "call.vtt",
        "WEBVTT - team call\n\n"
        "NOTE exported by a meeting tool\n\n"
        "1\n00:00:01.000 --> 00:00:03.000 align:start\n<v Ann>Hi &amp; welcome.</v>\n\n"
        "2\n00:00:03.500 --> 00:00:05.000\n<v Bo>Hey.</v> <v.loud Cal>Morning!</v>\n\n"
        "00:05.500 --> 00:07.250\nAnn: Let's <b>start</b>.\n",
    )
    conv = read_transcript(path)
    got = [(u.speaker, u.text, u.start, u.end, u.id) for u in conv.utterances]
    assert got == [
        ("Ann", "Hi & welcome.", 1.0, 3.0, "1"),
        ("Bo", "Hey.", 3.5, 5.0, "2.1"),
        ("Cal", "Morning!", 3.5, 5.0, "2.2"),
        ("Ann", "Let's start.", 5.5, 7.25, "u0004"),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1\n00:00:01.000 --> 00:00:02.000\n<v A>hi</v>\n", r"line 1: a WebVTT file must start"),
        (
            "WEBVTT\n\nintro\n00:00:01.000 --> 00:00:02.000\nMusic playing\n",
            r"cue 'intro' \(line 4\): cue has no speaker",
        ),
        ("WEBVTT\n\n00:00:03.000 --> 00:00:02.000\n<v A>hi</v>\n", r"end 2.0 is before"),
        ("WEBVTT\n\ncue-1\n<v A>hi</v>\n", r"line 3: cue without a 'start --> end' line"),
        ("WEBVTT\n\n00:00:xx --> 00:00:02.000\n<v A>hi</v>\n", r"cue start '00:00:xx'"),
        ("WEBVTT\n\n", r"empty transcript"),
    ],
)
def test_vtt_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConversationFormatError, match=message):
        read_transcript(_write(tmp_path, "bad.vtt", text))


# ----------------------------------------------------------------------------- text lines


def test_txt_lines_and_streaming_parser(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "notes.txt",
        '{"participants": [{"id": "ann", "name": "Ann"}, {"id": "bo", "name": "Bo"}]}\n'
        "# comment\n"
        "[00:00:01 --> 00:00:02.5] Ann: Bo, over to you.\n"
        '{"speaker": "Bo", "text": "Thanks.", "addressee": "Ann"}\n',
    )
    conv = read_transcript(path)
    assert conv.roster_known is True
    assert [(u.speaker, u.start, u.end, u.addressees) for u in conv.utterances] == [
        ("ann", 1.0, 2.5, None),
        ("bo", None, None, ("ann",)),
    ]
    with pytest.raises(ConversationFormatError, match=r"bad\.txt:line 2: expected 'Speaker: text'"):
        read_transcript(_write(tmp_path, "bad.txt", "Ann: hi\njust some words\n"))


def test_parse_transcript_line() -> None:
    assert parse_transcript_line("", 1) is None
    assert parse_transcript_line("   # note", 2) is None
    u = parse_transcript_line("Dr. Kim: Next slide, please.", 3)
    assert u is not None and (u.speaker, u.text) == ("Dr. Kim", "Next slide, please.")
    u = parse_transcript_line('{"speaker": "Bo", "text": "ok", "addressee": ["Ann"]}', 4)
    assert u is not None and u.addressees == ("Ann",)
    u = parse_transcript_line("[1:02] Ann: Right.", 5)
    assert u is not None and u.start == 62.0 and u.end is None
    with pytest.raises(ConversationFormatError, match=r"<stdin>:line 6: expected 'Speaker: text'"):
        parse_transcript_line("no speaker here", 6)
    with pytest.raises(ConversationFormatError, match=r"line 7: invalid JSON"):
        parse_transcript_line('{"speaker": ', 7)
    with pytest.raises(ConversationFormatError, match=r"line 8: a participants header"):
        parse_transcript_line('{"participants": [{"id": "a"}]}', 8)
    with pytest.raises(ConversationFormatError, match=r"line 9: missing text"):
        parse_transcript_line('{"speaker": "A"}', 9)


def test_parse_header_line() -> None:
    roster = parse_header_line('{"participants": ["Ann", {"id": "b", "name": "Bo Li"}]}')
    assert roster is not None
    assert [(p.id, p.name, p.aliases) for p in roster] == [
        ("Ann", "Ann", ()),
        ("b", "Bo Li", ("Bo",)),
    ]
    assert parse_header_line("Ann: hi") is None
    assert parse_header_line('{"speaker": "Ann", "text": "hi"}') is None


# ----------------------------------------------------------------------------- helpers


def test_parse_time_forms() -> None:
    def t(v: object) -> float | None:
        return parse_time(v, "f", "line 1", "start")

    assert t("01:02:03.5") == 3723.5
    assert t("1:05") == 65.0
    assert t("00:00:01,250") == 1.25  # SRT-style decimal comma
    assert t(7) == 7.0 and t("7.5") == 7.5
    assert t("") is None and t(None) is None
    with pytest.raises(ConversationFormatError, match="not seconds"):
        t("1:2:3:4")
    with pytest.raises(ConversationFormatError, match="must be a time"):
        t(True)


def test_format_inference(tmp_path: Path) -> None:
    assert set(TRANSCRIPT_FORMATS) == {"jsonl", "csv", "vtt", "srt", "txt"}
    assert infer_format("a/b.NDJSON") == "jsonl"
    with pytest.raises(ConversationFormatError, match="cannot infer the transcript format"):
        infer_format("meeting.docx")
    path = _write(tmp_path, "meeting.log", "Ann: hi\nBo: hello\n")
    assert len(read_transcript(path, format="txt")) == 2
    with pytest.raises(ValueError, match="unknown transcript format"):
        read_transcript(path, format="docx")
