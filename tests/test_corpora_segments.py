"""Conversation/scene breaks in user transcripts, resets after long gaps, folders and globs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from polylogue.cli import app
from polylogue.conversation import ConversationFormatError
from polylogue.corpora.segments import (
    cut_points,
    expand_transcript_paths,
    read_transcript_parts,
)
from polylogue.corpora.transcripts import read_transcript
from polylogue.errors import PolylogueInputError
from polylogue.turntaking.dataset import load_benchmark

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _two_scenes_jsonl(path: Path) -> Path:
    lines = [
        {"speaker": "Ann", "text": "Shall we start with the budget?", "start": 0, "end": 2},
        {"speaker": "Bo", "text": "Yes, the numbers are in.", "start": 3, "end": 5},
        {"break": True},
        {"speaker": "Cy", "text": "Morning all, new topic today.", "start": 900, "end": 903},
        {"speaker": "Ann", "text": "Cy, go ahead with it.", "start": 904, "end": 906},
        {
            "speaker": "Cy",
            "text": "Right, the hiring plan.",
            "start": 907,
            "end": 909,
            "break": True,
        },
        {"speaker": "Bo", "text": "Who is on the panel?", "start": 910, "end": 912},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_jsonl_breaks_marker_line_and_field(tmp_path: Path) -> None:
    path = _two_scenes_jsonl(tmp_path / "day.jsonl")
    whole = read_transcript(path)
    assert len(whole.utterances) == 6 and whole.metadata["breaks"] == [2, 4]
    parts = read_transcript_parts(path)
    assert [len(p.utterances) for p in parts] == [2, 2, 2]
    assert [p.id for p in parts] == ["day#1", "day#2", "day#3"]
    assert {p.group for p in parts} == {"day"}
    # Without a roster, a part only knows the people who speak in it.
    assert [q.id for q in parts[1].participants] == ["Cy", "Ann"]
    # A file without markers is one conversation, exactly as before.
    plain = read_transcript_parts(EXAMPLES / "standup.jsonl")
    assert len(plain) == 1 and plain[0] == read_transcript(EXAMPLES / "standup.jsonl")


def test_reset_after_long_gap(tmp_path: Path) -> None:
    path = tmp_path / "gap.csv"
    path.write_text(
        "speaker,text,start,end\n"
        "Ann,hello there both,0,2\nBo,hi Ann how are you,3,5\n"
        "Ann,back after lunch now,3600,3602\nBo,welcome back Ann,3603,3605\n"
    )
    conv = read_transcript(path)
    assert cut_points(conv) == [] and cut_points(conv, reset_after=600) == [2]
    assert [len(p.utterances) for p in read_transcript_parts(path, reset_after=600)] == [2, 2]
    with pytest.raises(ValueError, match="positive"):
        cut_points(conv, reset_after=0)


def test_csv_break_column_and_bad_value(tmp_path: Path) -> None:
    path = tmp_path / "scenes.csv"
    path.write_text(
        "speaker,text,break\nAnn,first scene line,\nBo,still the first,0\n"
        ",,1\nCy,second scene opens,\nAnn,and a third,yes\n"
    )
    conv = read_transcript(path)
    assert conv.metadata["breaks"] == [2, 3]
    path.write_text("speaker,text,break\nAnn,first line here,maybe\n")
    with pytest.raises(ConversationFormatError, match=r"scenes\.csv:line 2: break must be"):
        read_transcript(path)


def test_vtt_note_break_zoom_and_teams_styles(tmp_path: Path) -> None:
    path = tmp_path / "call.vtt"
    path.write_text(
        "WEBVTT\n\n"
        "1\n00:00:01.000 --> 00:00:03.000\n<v Ann>Let us begin.</v>\n\n"
        "2\n00:00:04.000 --> 00:00:06.000\nBo: Sounds good to me.\n\n"
        "NOTE scene break\n\n"
        "3\n00:10:00.000 --> 00:10:02.000\n<v Cy>Second call starts here.</v>\n\n"
        "NOTE just a comment\n\n"
        "4\n00:10:03.000 --> 00:10:05.000\n<v Ann>Hi Cy, welcome.</v>\n"
    )
    conv = read_transcript(path)
    assert conv.metadata["breaks"] == [2]
    assert [u.speaker for u in conv.utterances] == ["Ann", "Bo", "Cy", "Ann"]


def test_txt_dash_line_is_a_break(tmp_path: Path) -> None:
    path = tmp_path / "chat.txt"
    path.write_text("Ann: hi all\nBo: hey Ann\n---\nCy: new day, anyone here?\n")
    assert read_transcript(path).metadata["breaks"] == [2]


def test_expand_folder_glob_and_errors(tmp_path: Path) -> None:
    for name in ("a.jsonl", "b.csv", "c.vtt", "notes.md"):
        (tmp_path / name).write_text((EXAMPLES / "standup.jsonl").read_text())
    got = expand_transcript_paths([tmp_path])
    assert [p.name for p in got] == ["a.jsonl", "b.csv", "c.vtt"]
    assert [p.name for p in expand_transcript_paths([str(tmp_path / "*.csv")])] == ["b.csv"]
    assert [p.name for p in expand_transcript_paths([tmp_path], "vtt")] == ["c.vtt"]
    with pytest.raises(PolylogueInputError, match="no file matches"):
        expand_transcript_paths([str(tmp_path / "*.srt")])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        expand_transcript_paths([tmp_path / "missing.jsonl"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PolylogueInputError, match="holds no transcript files"):
        expand_transcript_paths([empty])


def test_cli_build_takes_a_folder_glob_format_and_reset(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    _two_scenes_jsonl(folder / "day.jsonl")
    (folder / "standup.log").write_text((EXAMPLES / "standup.jsonl").read_text())
    out = tmp_path / "bench"
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            *("build", "--out", str(out), "-t", str(folder), "-t", str(folder / "*.log")),
            *("--format", "jsonl", "--reset-after", "300"),
        ],
    )
    assert res.exit_code == 0, res.output
    bench = load_benchmark(out)
    ids = {c for c in bench.conversations}
    assert {"day#1", "day#2", "day#3", "standup-example"} <= ids
    # Each point's context stays inside its part: no utterance of an earlier part is visible.
    for p in bench.points("test"):
        if p.input.conversation_id == "day#2":
            assert p.input.context[0].text.startswith("Morning all")
    bad = runner.invoke(app, ["build", "--out", str(out), "-t", str(folder), "--format", "srt"])
    assert bad.exit_code == 2


def test_csv_text_with_control_separators_stays_one_row(tmp_path: Path) -> None:
    # Real IRC lines (test log 2008-07-14_18) contain \x1e and \x15; they are not line breaks.
    path = tmp_path / "irc.csv"
    path.write_text('speaker,text\nkaddy,"0639\x1e0631\x1e0628"\nbob,"ka\x15/window 11"\n')
    conv = read_transcript(path)
    # Two rows; \x1e counts as whitespace, which the reader normalises to one space.
    assert [u.text for u in conv.utterances] == ["0639 0631 0628", "ka\x15/window 11"]


def test_cli_build_domain_chat_for_a_chat_export(tmp_path: Path) -> None:
    from dataclasses import replace

    from polylogue.corpora.export import write_transcript
    from polylogue.corpora.irc import read_irc
    from polylogue.paths import corpus_dir

    conv = next(iter(read_irc(corpus_dir("ubuntu-irc-disentanglement"), "dev")))
    rows = tuple(u for u in conv.utterances if u.text.strip())[:150]
    path = write_transcript(replace(conv, utterances=rows), tmp_path / "channel.csv", "csv")
    runner = CliRunner()
    sizes = {}
    for domain in ("chat", None):
        out = tmp_path / f"bench-{domain}"
        extra = ["--domain", domain] if domain else []
        res = runner.invoke(app, ["build", "--out", str(out), "-t", str(path), *extra])
        assert res.exit_code == 0, res.output
        bench = load_benchmark(out)
        points = [p for split in ("train", "validation", "test") for p in bench.points(split)]
        assert {p.input.domain for p in points} == {domain or "meeting"}
        sizes[domain] = len({len(p.input.context) for p in points})
    # Minute-resolution chat times read as speech leave few pauses; declared chat keeps them.
    assert sizes["chat"] >= 0.9 * (len(rows) - 1) > 2 * sizes[None]
    bad = runner.invoke(
        app, ["build", "--out", str(tmp_path / "x"), "-t", str(path), "--domain", "irc"]
    )
    assert bad.exit_code == 2 and "unknown domain" in bad.output
