"""Look-alike names and several speakers in one cue (issue 34, items 6 and 7): every user
format and stdin read a spelling that only *looks* different (another script's letters,
fullwidth forms, variation selectors, the combining grapheme joiner, invisible fillers) as the
same person, with one warning naming both spellings; genuinely different names stay apart; a
declared roster still refuses an unknown spelling. Lines are real AMI lines."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import warnings
from pathlib import Path

import pytest

from polylogue.conversation import Conversation, ConversationFormatError, clean_name, name_key
from polylogue.corpora import load_corpus
from polylogue.corpora.transcripts import read_transcript
from polylogue.engine.live import LiveConversation, Policy
from polylogue.errors import InputWarning
from polylogue.serve.local import POLYLOGUE

#: The same name as a reader sees it, written in ways that print (nearly) identically.
LOOKALIKES = {
    "cyrillic A": "\u0410nn",
    "greek and cyrillic": "\u0391\u043f\u043f".replace("\u043f", "n"),
    "fullwidth": "\uff21\uff4e\uff4e",
    "variation selector": "An\ufe0fn",
    "combining grapheme joiner": "A\u034fnn",
    "hangul filler": "Ann\u3164",
    "hangul choseong filler": "\u115fAnn",
    "hangul jungseong filler": "An\u1160n",
    "halfwidth hangul filler": "Ann\uffa0",
    "braille blank": "A\u2800nn",
    "zero width joiner": "An\u200dn",
    "mongolian variation selector": "Ann\u180b",
}
#: Different people whose names are close: never joined.
DIFFERENT = [("Ann", "Anne"), ("Jose", "Jos\u00e9"), ("Ian", "Ian Li"), ("Ali", "All"),
             ("Mia", "Mila"), ("Cleo", "C\u0456eo")]  # fmt: skip


@pytest.fixture(scope="module")
def lines() -> list[str]:
    conv: Conversation = next(iter(load_corpus("ami")))
    return [u.text for u in conv.utterances if len(u.text.split()) > 3][:6]


def _write(fmt: str, path: Path, turns: list[tuple[str, str]]) -> Path:
    if fmt == "jsonl":
        body = "\n".join(json.dumps({"speaker": s, "text": t}) for s, t in turns)
    elif fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["speaker", "text"])
        w.writerows(turns)
        body = buf.getvalue()
    elif fmt == "txt":
        body = "\n".join(f"{s}: {t}" for s, t in turns)
    elif fmt == "srt":
        body = "\n\n".join(
            f"{i + 1}\n00:00:{i:02d},000 --> 00:00:{i:02d},900\n{s}: {t}"
            for i, (s, t) in enumerate(turns)
        )
    else:
        body = "WEBVTT\n\n" + "\n\n".join(
            f"00:00:{i:02d}.000 --> 00:00:{i:02d}.900\n<v {s}>{t}</v>"
            for i, (s, t) in enumerate(turns)
        )
    out = path / f"t.{fmt}"
    out.write_text(body + "\n", encoding="utf-8")
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "txt", "srt", "vtt"])
@pytest.mark.parametrize("kind", sorted(LOOKALIKES))
def test_a_lookalike_spelling_is_one_person_with_a_warning(
    tmp_path: Path, lines: list[str], fmt: str, kind: str
) -> None:
    other = LOOKALIKES[kind]
    turns = [("Ann", lines[0]), ("Bo", lines[1]), (other, lines[2]), ("Bo", lines[3])]
    path = _write(fmt, tmp_path, turns)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        conv = read_transcript(path)
    assert [p.id for p in conv.participants] == ["Ann", "Bo"]
    assert [u.speaker for u in conv.utterances] == ["Ann", "Bo", "Ann", "Bo"]
    said = [str(w.message) for w in caught if issubclass(w.category, InputWarning)]
    assert len(said) == 1, said  # one warning
    assert ascii(other.strip())[1:-1] in said[0] and "'Ann'" in said[0]  # naming both


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_different_names_stay_two_people(tmp_path: Path, lines: list[str], a: str, b: str) -> None:
    assert name_key(a) != name_key(b)
    path = _write("jsonl", tmp_path, [(a, lines[0]), (b, lines[1]), (a, lines[2])])
    conv = read_transcript(path)
    assert [p.id for p in conv.participants] == [a, b]


def test_a_declared_roster_refuses_a_lookalike_spelling(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "t.jsonl"
    header = {"participants": ["Ann", "Bo"]}
    rows = [header, {"speaker": "Ann", "text": lines[0]}, {"speaker": "\u0410nn", "text": lines[1]}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(ConversationFormatError, match="looks like 'Ann'") as e:
        read_transcript(path)
    assert "line 3" in str(e.value)


def test_clean_name_folds_fullwidth_and_drops_invisible_characters() -> None:
    for kind, spelling in LOOKALIKES.items():
        if "cyrillic" not in kind and "greek" not in kind:
            assert clean_name(spelling) == "Ann", kind
    assert clean_name("\u0410nn") == "\u0410nn"  # another script is kept as written


def test_stdin_and_live_sessions_join_lookalikes(lines: list[str]) -> None:
    """stdin (``decide -``) and the live engine behind serve and the adapters."""
    spellings = list(LOOKALIKES.values())
    text = "".join(f"{s}: {lines[i % len(lines)]}\nBo: {lines[1]}\n" for i, s in
                   enumerate(["Ann", *spellings]))  # fmt: skip
    done = subprocess.run(
        [POLYLOGUE, "decide", "-", "--as", "Bo", "--json"],
        input=text.encode(),
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    rows = [json.loads(x) for x in done.stdout.decode().splitlines() if x.startswith("{")]
    speakers = {r.get("speaker_name") for r in rows if "speaker_name" in r}
    assert speakers == {"Ann", "Bo"}, speakers
    live = LiveConversation.start("Bo", [], Policy())
    ids = [live.speaker_id(s) for s in ["Ann", *spellings, spellings[0], "Anne"]]
    assert ids == ["Ann"] * (len(spellings) + 2) + ["Anne"]
    warned = [w for w in live.warnings if "looks like 'Ann'" in w]
    assert len(warned) == len(spellings)  # once per spelling


CUES_SRT = """1
00:00:01,000 --> 00:00:03,000
Ann: {0}
Bo: {1}

2
00:00:03,500 --> 00:00:05,000
Ann: {2}
and so: {3}
"""


def test_two_speaker_lines_in_one_srt_cue_are_two_utterances(
    tmp_path: Path, lines: list[str]
) -> None:
    path = tmp_path / "t.srt"
    path.write_text(CUES_SRT.format(*lines[:4]), encoding="utf-8")
    conv = read_transcript(path)
    got = [(u.speaker, u.text) for u in conv.utterances]
    # A wrapped caption line with a lower-case "label:" stays in its utterance.
    assert got == [("Ann", lines[0]), ("Bo", lines[1]), ("Ann", f"{lines[2]} and so: {lines[3]}")]
    assert [u.id for u in conv.utterances] == ["1.1", "1.2", "2"]


def test_two_voice_spans_in_one_webvtt_cue_are_two_utterances(
    tmp_path: Path, lines: list[str]
) -> None:
    path = tmp_path / "t.vtt"
    path.write_text(
        f"WEBVTT\n\n00:00:01.000 --> 00:00:03.000\n<v Ann>{lines[0]}</v>\n<v Bo>{lines[1]}\n\n"
        f"00:00:03.000 --> 00:00:04.000\n<v.loud Cy>{lines[2]} <v Ann>{lines[3]}\n",
        encoding="utf-8",
    )
    conv = read_transcript(path)
    assert [u.speaker for u in conv.utterances] == ["Ann", "Bo", "Cy", "Ann"]
    assert [u.text for u in conv.utterances] == lines[:4]
