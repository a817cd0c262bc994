"""Corpus conversations written as user transcripts read back unchanged (real AMI, IRC, Molweni)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus
from polylogue.corpora.export import (
    write_transcript,
)
from polylogue.corpora.irc import read_irc
from polylogue.corpora.molweni import read_molweni
from polylogue.corpora.segments import read_transcript_parts
from polylogue.corpora.transcripts import read_transcript
from polylogue.paths import corpus_dir


@pytest.fixture(scope="module")
def ami() -> Conversation:
    return next(iter(load_corpus("ami", meetings=["ES2002a"])))


@pytest.mark.parametrize("style", ["zoom", "teams"])
def test_ami_meeting_as_webvtt_round_trips(ami: Conversation, tmp_path: Path, style: str) -> None:
    names = {p.id: p.aliases[0] for p in ami.participants}  # role codes: PM, ME, UI, ID
    path = write_transcript(ami, tmp_path / f"{style}.vtt", "vtt", style=style, names=names)  # type: ignore[arg-type]
    back = read_transcript(path)
    timed = [u for u in ami.utterances if u.start is not None and u.text.strip()]
    assert [u.text for u in back.utterances] == [" ".join(u.text.split()) for u in timed]
    assert [u.speaker for u in back.utterances] == [names[u.speaker] for u in timed]
    assert all(
        abs((b.start or 0) - (a.start or 0)) < 1e-3
        for a, b in zip(timed, back.utterances, strict=True)
    )
    if style == "teams":
        assert "<v PM>" in path.read_text()


def test_irc_log_as_csv_keeps_markup_like_text_and_addressees(tmp_path: Path) -> None:
    conv = next(iter(read_irc(corpus_dir("ubuntu-irc-disentanglement"), "dev")))
    path = write_transcript(conv, tmp_path / "irc.csv", "csv", breaks=[500])
    back = read_transcript(path)
    kept = [u for u in conv.utterances if u.text.strip()]
    assert len(back.utterances) == len(kept)
    assert [u.text for u in back.utterances] == [" ".join(u.text.split()) for u in kept]
    annotated = [(u.speaker, u.addressees) for u in kept if u.addressees]
    back_annotated = [(u.speaker, u.addressees) for u in back.utterances if u.addressees]
    assert back_annotated == annotated
    parts = read_transcript_parts(path)
    assert len(parts) == 2 and len(parts[0].utterances) == 500


def test_molweni_dialogue_as_jsonl_and_vtt_with_break(tmp_path: Path) -> None:
    convs = list(read_molweni(corpus_dir("molweni"), "test"))[:2]
    first = convs[0]
    back = read_transcript(write_transcript(first, tmp_path / "m.jsonl", "jsonl", breaks=[3]))
    assert [(u.speaker, u.text) for u in back.utterances] == [
        (u.speaker, u.text) for u in first.utterances
    ]
    assert back.metadata["breaks"] == [3]
    # No times: a WebVTT file cannot hold the dialogue, and says so by being empty of cues.
    empty = write_transcript(first, tmp_path / "m.vtt", "vtt")
    with pytest.raises(ValueError, match="no utterances"):
        read_transcript(empty)
    with pytest.raises(ValueError, match="style"):
        write_transcript(first, tmp_path / "x.vtt", "vtt", style="slack")  # type: ignore[arg-type]


def test_chat_csv_export_declared_chat_makes_every_message_a_decision_moment(
    tmp_path: Path,
) -> None:
    """IRC times have minute resolution: read as speech, most messages end at "the same" time
    as the next one starts and no pause follows them. Declared chat, each message counts."""
    from polylogue.turntaking.points import conversation_points

    conv = next(iter(read_irc(corpus_dir("ubuntu-irc-disentanglement"), "dev")))
    rows = [u for u in conv.utterances if u.text.strip()][:200]
    path = write_transcript(replace(conv, utterances=tuple(rows)), tmp_path / "irc.csv", "csv")

    as_meeting = read_transcript(path)
    as_chat = read_transcript(path, domain="chat")
    assert as_meeting.domain == "meeting" and as_chat.domain == "chat"
    moments = {
        name: {len(p.input.context) for p in conversation_points(c)}
        for name, c in (("meeting", as_meeting), ("chat", as_chat))
    }
    # Every message after the first with a listener present is a moment in chat mode ...
    assert len(moments["chat"]) >= 0.9 * (len(rows) - 1)
    # ... while the timestamp reading loses most of them (pauses need a real silence).
    assert len(moments["meeting"]) < 0.5 * len(moments["chat"])
