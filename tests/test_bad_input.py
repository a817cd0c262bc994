"""Bad input gives a located one-line error (exit 2 in the CLI), never a traceback or wrong data.

Each test reproduces one finding of the fault/bad-input probe (issue 18) on a damaged copy of a
real shared file, or on the exact input the probe used.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

POLYLOGUE = [str(Path(sys.executable).parent / "polylogue")]


def _run(args: list[str], stdin: str | bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "400"}  # no wrapping of the one-line error
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run(
        [*POLYLOGUE, *args], input=data, capture_output=True, timeout=120, env=env
    )


def _assert_located(proc: subprocess.CompletedProcess[bytes], *fragments: str) -> str:
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err
    assert "Traceback" not in err, err
    assert err.startswith("error: "), err
    for frag in fragments:
        assert frag in err, (frag, err)
    return err


# ----------------------------------------------------------------------------- 1. error printer


def test_error_printer_shows_markup_in_user_text_verbatim() -> None:
    proc = _run(["decide", "-", "--as", "Dave"], "Alice: hi\nsee [/b] here\n")
    _assert_located(proc, "<stdin>:line 2", "'see [/b] here'")


def test_error_printer_shows_bracketed_file_name_verbatim(tmp_path: Path) -> None:
    missing = tmp_path / "notes[/draft].txt"
    proc = _run(["decide", str(missing), "--as", "A"])
    _assert_located(proc, "notes[/draft].txt")


def test_error_printer_does_not_turn_colon_codes_into_emoji(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from polylogue.cli import print_error

    print_error("predictions.jsonl:100: bad [bold]record[/bold] :smile:")
    err = capsys.readouterr().err
    assert "predictions.jsonl:100: bad [bold]record[/bold] :smile:" in err


# ----------------------------------------------------------------------------- 3. non-finite times

NON_FINITE = ["inf", "1e999", "Infinity", "nan", "-1"]


@pytest.mark.parametrize("value", NON_FINITE)
def test_user_formats_reject_non_finite_and_negative_times(tmp_path: Path, value: str) -> None:
    from polylogue.conversation import ConversationFormatError
    from polylogue.corpora.transcripts import read_transcript

    cases = {
        "t.jsonl": '{"speaker": "Alice", "text": "hi"}\n'
        f'{{"speaker": "Bob", "text": "hi", "start": {value}}}\n',
        "t.csv": f"speaker,text,start\nAlice,hi,1\nBob,hi,{value}\n",
        "t.vtt": f"WEBVTT\n\n00:01.000 --> 00:02.000\n<v Alice>hi\n\n3.0 --> {value}\n<v Bob>hi\n",
        "t.txt": f"Alice: hi\n[{value}] Bob: hi\n",
    }
    for name, text in cases.items():
        if name == "t.jsonl" and value in ("inf", "nan"):
            continue  # not JSON at all (an invalid-JSON error, tested elsewhere)
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ConversationFormatError) as err:
            read_transcript(path)
        assert err.value.path == str(path)
        assert "line" in err.value.where, (name, err.value)


@pytest.mark.parametrize("value", ["inf", "1e999", "NaN", "-3.5"])
def test_ami_rejects_non_finite_word_times(tmp_path: Path, value: str) -> None:
    from corpus_copies import ami_copy

    from polylogue.conversation import ConversationFormatError
    from polylogue.corpora.ami import read_ami

    release = ami_copy(tmp_path)
    words = release / "words" / "ES2008a.C.words.xml"
    text = words.read_text(encoding="iso-8859-1")
    first = text.index('starttime="')
    end = text.index('"', first + len('starttime="'))
    words.write_text(text[:first] + f'starttime="{value}' + text[end:], encoding="iso-8859-1")
    with pytest.raises(ConversationFormatError) as err:
        list(read_ami(tmp_path))
    assert err.value.path.endswith("ES2008a.C.words.xml")
    assert "line" in err.value.where and value in err.value.message


@pytest.mark.parametrize("field", [3, 4])
@pytest.mark.parametrize("value", ["inf", "nan", "1e999", "-2.0"])
def test_rttm_rejects_non_finite_times(tmp_path: Path, field: int, value: str) -> None:
    from corpus_copies import EARNINGS_CALL, earnings_copy

    from polylogue.conversation import ConversationFormatError
    from polylogue.corpora.earnings import read_earnings21

    root = earnings_copy(tmp_path)
    rttm = root / "rttms" / f"{EARNINGS_CALL}.rttm"
    lines = rttm.read_text(encoding="utf-8").splitlines()
    parts = lines[4].split()
    parts[field] = value
    lines[4] = " ".join(parts)
    rttm.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ConversationFormatError) as err:
        list(read_earnings21(root))
    assert err.value.path == str(rttm) and err.value.where == "line 5"


def test_decide_json_never_writes_non_finite_numbers() -> None:
    proc = _run(["decide", "-", "--as", "Dave", "--json"], "Alice: hi\n[1e999] Bob: Dave?\n")
    _assert_located(proc, "<stdin>:line 2", "1e999")
    assert b"Infinity" not in proc.stdout and b"NaN" not in proc.stdout


def test_ami_addressee_outside_the_meeting_is_an_error(tmp_path: Path) -> None:
    from corpus_copies import ami_copy

    from polylogue.conversation import ConversationFormatError
    from polylogue.corpora.ami import read_ami

    acts = ami_copy(tmp_path) / "dialogueActs" / "ES2008a.A.dialog-act.xml"
    text = acts.read_text(encoding="iso-8859-1")
    acts.write_text(text.replace('addressee="D,C,B"', 'addressee="D,Z"', 1), encoding="iso-8859-1")
    with pytest.raises(ConversationFormatError) as err:
        list(read_ami(tmp_path))
    assert err.value.path == str(acts)
    assert "ES2008a.A.dialog-act.vkaraisk.3" in err.value.where and "line 11" in err.value.where
    assert "addressee Z is not a participant" in err.value.message


def test_ami_dialogue_act_ending_before_it_starts_is_an_error(tmp_path: Path) -> None:
    from corpus_copies import ami_copy

    from polylogue.conversation import ConversationFormatError
    from polylogue.corpora.ami import read_ami

    words = ami_copy(tmp_path) / "words" / "ES2008a.B.words.xml"
    text = words.read_text(encoding="iso-8859-1")
    first = text.index('starttime="', text.index("<w "))  # the first word, "Alima"
    end = text.index('"', first + len('starttime="'))
    words.write_text(text[:first] + 'starttime="99999.0' + text[end:], encoding="iso-8859-1")
    with pytest.raises(ConversationFormatError) as err:
        list(read_ami(tmp_path))
    assert err.value.path.endswith("ES2008a.B.dialog-act.xml")
    assert "before it starts (99999.0)" in err.value.message


# ----------------------------------------------------------------------------- 5. WebVTT tags


def test_vtt_megabyte_cue_of_unclosed_voice_tags_is_a_located_error(tmp_path: Path) -> None:
    """Quadratic before (14.5 s for 80 KB): at 1 MB this test would run for most of an hour.
    The timing itself is printed by benchmarks/vtt_adversarial.py."""
    from polylogue.conversation import ConversationFormatError
    from polylogue.corpora.transcripts import read_transcript

    path = tmp_path / "attack.vtt"
    path.write_text(
        "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n" + "<v a" * 250_000 + "\n", encoding="utf-8"
    )
    with pytest.raises(ConversationFormatError) as err:
        read_transcript(path)
    assert err.value.where == "cue 'at line 3' (line 3)"
    assert "cue has no speaker" in err.value.message


def test_vtt_voice_span_followed_by_unclosed_tags_keeps_the_speaker(tmp_path: Path) -> None:
    from polylogue.corpora.transcripts import read_transcript

    path = tmp_path / "mixed.vtt"
    path.write_text(
        "WEBVTT\n\n00:01.000 --> 00:02.000\n<v Alice>Dave, <b>really</b>?"
        + " <v a" * 50_000
        + "\n",
        encoding="utf-8",
    )
    conv = read_transcript(path)
    assert [(u.speaker, u.text[:14]) for u in conv.utterances] == [("Alice", "Dave, really? ")]
