"""Bad input gives a located one-line error (exit 2 in the CLI), never a traceback or wrong data.

Each test reproduces one finding of the fault/bad-input probe (issue 18) on a damaged copy of a
real shared file, or on the exact input the probe used.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_run import polylogue_process, run_polylogue


def _run(args: list[str], stdin: str | bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """``polylogue ARGS`` in this process (tests/cli_run.py): the command's behaviour."""
    return run_polylogue(args, stdin, env={"COLUMNS": "400"})  # no wrapping of the error


def _assert_located(proc: subprocess.CompletedProcess[bytes], *fragments: str) -> str:
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("error: "), err  # after any progress bar
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
        + " <v a" * 15_000  # under MAX_UTTERANCE_CHARS; still quadratic-sized
        + "\n",
        encoding="utf-8",
    )
    conv = read_transcript(path)
    assert [(u.speaker, u.text[:14]) for u in conv.utterances] == [("Alice", "Dave, really? ")]


# ----------------------------------------------------------------------------- 2. located errors

HUGE_FIELD = "x" * 140_000  # over the csv module's 131,072-character field limit
DEEP_JSON = "[" * 100_000 + "]" * 100_000


def _raises_at(fn: object, path: Path, where: str, message: str) -> None:
    from polylogue.conversation import ConversationFormatError

    with pytest.raises(ConversationFormatError) as err:
        fn()  # type: ignore[operator]
    assert err.value.path == str(path), err.value
    assert err.value.where == where, err.value
    assert message in err.value.message, err.value


def _friends_csv(tmp_path: Path, *lines: str) -> Path:
    """The real friends.csv head with damaged lines appended (as lines 302, 303...)."""
    from corpus_copies import friends_csv_head

    path = friends_csv_head(tmp_path, lines=300)
    with open(path, "a", encoding="utf-8", newline="") as f:
        f.write("".join(lines))
    return path


@pytest.mark.parametrize(
    ("lines", "where", "message"),
    [
        (["Ross?,Ross Geller,1,1,99,x1\n"], "line 302", "utterance 'x1' is not a whole number"),
        (["Ross?,Ross Geller,-1,1,99,1\n"], "line 302", "season '-1' is not a whole number"),
        (["Ross?,Ross Geller,1,1\n"], "line 302", "expected 6 cells, got 4"),
        (["Ross?,Ross Geller,1,1,99,1,extra\n"], "line 302", "expected 6 cells, got 7"),
        ([f"{HUGE_FIELD},Ross Geller,1,1,99,1\n"], "line 302", "malformed CSV: field larger"),
        (['"Ross, are you', "\n"], "line 302", "a quote is never closed"),
        (
            ["Hi.,Ross Geller,1,1,99,1\n", "Hi!,Monica Geller,1,1,99,1\n"],
            "line 303",
            "duplicate utterance s01e01c99u001",
        ),
    ],
)
def test_friends_csv_damage_is_located(
    tmp_path: Path, lines: list[str], where: str, message: str
) -> None:
    from polylogue.corpora.friends import read_friends_csv

    path = _friends_csv(tmp_path, *lines)
    _raises_at(lambda: list(read_friends_csv(path)), path, where, message)


def test_friends_csv_bad_bytes_are_located(tmp_path: Path) -> None:
    from polylogue.corpora.friends import read_friends_csv

    path = _friends_csv(tmp_path)
    with open(path, "ab") as f:
        f.write(b"Caf\xe9?,Ross Geller,1,1,99,1\n")
    _raises_at(lambda: list(read_friends_csv(path)), path, "line 302", "byte 0xe9 at column 4")


@pytest.mark.parametrize(
    ("damage", "where", "message"),
    [
        (lambda d: [1], "", "expected an object with 'episodes'"),
        (lambda d: {"episodes": {"a": 1}}, "episodes", "expected a list"),
        (
            lambda d: _set_speakers(d, "Ross Geller"),
            "episodes[0].scenes[0].utterances[0].speakers",
            "expected a list of names",
        ),
        (
            lambda d: _duplicate_first_utterance(d),
            "episodes[0].scenes[0].utterances[1]",
            "duplicate utterance_id 's10_e01_c01_u000'",
        ),
    ],
)
def test_friends_s10_json_structure_is_checked(
    tmp_path: Path, damage: object, where: str, message: str
) -> None:
    import json

    from corpus_copies import friends_s10_episode

    from polylogue.corpora.friends import read_friends_s10_json

    path = friends_s10_episode(tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(damage(data)), encoding="utf-8")  # type: ignore[operator]
    _raises_at(lambda: list(read_friends_s10_json(path)), path, where, message)


def _set_speakers(data: dict, value: object) -> dict:
    data["episodes"][0]["scenes"][0]["utterances"][0]["speakers"] = value
    return data


def _duplicate_first_utterance(data: dict) -> dict:
    utts = data["episodes"][0]["scenes"][0]["utterances"]
    utts.insert(1, dict(utts[0]))
    return data


def test_deeply_nested_json_is_located(tmp_path: Path) -> None:
    from corpus_copies import friends_s10_episode, icsi_copy

    from polylogue.conversation import read_jsonl
    from polylogue.corpora.friends import read_friends_s10_json
    from polylogue.corpora.icsi import read_icsi
    from polylogue.corpora.transcripts import read_transcript

    s10 = friends_s10_episode(tmp_path)
    s10.write_text('{"episodes": ' + DEEP_JSON + "}", encoding="utf-8")
    _raises_at(lambda: list(read_friends_s10_json(s10)), s10, "", "nested too deeply")

    root = icsi_copy(tmp_path / "icsi")
    meeting = root / "data" / "Academic" / "all" / "Bed002.json"
    meeting.write_text('{"meeting_transcripts": ' + DEEP_JSON + "}", encoding="utf-8")
    _raises_at(lambda: list(read_icsi(root)), meeting, "", "nested too deeply")

    user = tmp_path / "deep.jsonl"
    user.write_text('{"speaker": "A", "text": "hi"}\n{"text": ' + DEEP_JSON + "}\n")
    _raises_at(lambda: read_transcript(user), user, "line 2", "nested too deeply")

    bench = tmp_path / "test.jsonl"
    bench.write_text('{"id": ' + DEEP_JSON + "}\n")
    _raises_at(lambda: list(read_jsonl(bench)), bench, "line 1", "nested too deeply")


def test_earnings_damage_is_located(tmp_path: Path) -> None:
    from corpus_copies import EARNINGS_CALL, earnings_copy

    from polylogue.corpora.earnings import read_earnings21

    root = earnings_copy(tmp_path)
    nlp = root / "transcripts" / "nlp_references" / f"{EARNINGS_CALL}.nlp"
    n_lines = nlp.read_bytes().count(b"\n")
    with open(nlp, "ab") as f:
        f.write(b"x\xe9|0||||LC|[]|[]\n")  # the probe's reproduction
    _raises_at(lambda: list(read_earnings21(root)), nlp, f"line {n_lines + 1}", "not UTF-8 text")

    root = earnings_copy(tmp_path / "pipe")
    nlp = root / "transcripts" / "nlp_references" / f"{EARNINGS_CALL}.nlp"
    with open(nlp, "a", encoding="utf-8") as f:
        f.write("AT|T|0||||UC|[]|[]\n")  # a '|' in a token would make "T" the speaker
    _raises_at(
        lambda: list(read_earnings21(root)), nlp, f"line {n_lines + 1}", "expected 8 columns, got 9"
    )

    root = earnings_copy(tmp_path / "field")
    nlp = root / "transcripts" / "nlp_references" / f"{EARNINGS_CALL}.nlp"
    with open(nlp, "a", encoding="utf-8") as f:
        f.write(f"{HUGE_FIELD}|0||||LC|[]|[]\n")
    _raises_at(lambda: list(read_earnings21(root)), nlp, f"line {n_lines + 1}", "field larger")

    for name, column in (
        ("speaker-metadata.csv", "speaker_name"),
        ("earnings21-file-metadata.csv", "file_id"),
    ):
        root = earnings_copy(tmp_path / f"meta-{column}")
        meta = root / name
        lines = meta.read_text(encoding="utf-8").splitlines()
        header = lines[0].split(",")
        keep = [i for i, h in enumerate(header) if h != column]
        meta.write_text(
            "\n".join(",".join(r.split(",")[i] for i in keep) for r in lines) + "\n",
            encoding="utf-8",
        )
        _raises_at(
            lambda root=root: list(read_earnings21(root)),
            meta,
            "line 1",
            f"missing columns ['{column}']",
        )


def test_user_csv_field_over_the_limit_is_located(tmp_path: Path) -> None:
    from polylogue.corpora.transcripts import read_transcript

    path = tmp_path / "t.csv"
    path.write_text(f"speaker,text\nAlice,hi\nBob,{HUGE_FIELD}\n", encoding="utf-8")
    _raises_at(lambda: read_transcript(path), path, "line 3", "field larger than field limit")


def test_user_transcript_bad_bytes_are_located(tmp_path: Path) -> None:
    from polylogue.corpora.transcripts import read_transcript

    path = tmp_path / "t.txt"
    path.write_bytes(b"Alice: hi\nBob: caf\xe9\n")
    _raises_at(lambda: read_transcript(path), path, "line 2", "byte 0xe9 at column 9")


def test_stdin_bad_bytes_and_deep_json_are_located() -> None:
    # A real process, the bytes piped to its stdin as the probe sent them.
    proc = polylogue_process(["decide", "-", "--as", "Dave"], b"Alice: hi\nBob: caf\xe9\n")
    _assert_located(proc, "<stdin>:line 2: not UTF-8 text")
    proc = _run(["decide", "-", "--as", "Dave"], "Alice: hi\n" + '{"text": ' + DEEP_JSON + "}\n")
    _assert_located(proc, "<stdin>:line 2", "nested too deeply")
    proc = _run(["decide", "-", "--as", "Dave"], '{"participants": ' + DEEP_JSON + "}\n")
    _assert_located(proc, "<stdin>:line 1", "nested too deeply")
    header = b'\n# roster\n{"participants": ["Caf\xe9", "Dave"]}\nDave: hi\n'
    _assert_located(_run(["decide", "-", "--as", "Dave"], header), "<stdin>:line 3: not UTF-8")


# ----------------------------------------------------------------------------- 4. silently wrong


def test_user_csv_unterminated_quote_is_an_error_not_a_swallowed_line(tmp_path: Path) -> None:
    from polylogue.corpora.transcripts import read_transcript

    path = tmp_path / "t.csv"
    path.write_text(
        'speaker,text\nAlice,Hi all\nBob,"Dave, hi?\nCarol,lost line\nDave,also lost\n',
        encoding="utf-8",
    )
    _raises_at(lambda: read_transcript(path), path, "line 3", "a quote is never closed")


def test_user_csv_multi_line_quoted_text_is_still_accepted(tmp_path: Path) -> None:
    from polylogue.corpora.transcripts import read_transcript

    path = tmp_path / "t.csv"
    path.write_text('speaker,text\nAlice,"Hi,\nall"\nBob,hi\n', encoding="utf-8")
    conv = read_transcript(path)
    assert [(u.speaker, u.text) for u in conv.utterances] == [
        ("Alice", "Hi, all"),
        ("Bob", "hi"),
    ]


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        (
            "t.jsonl",
            '{"speaker": "A", "text": "hi", "id": "u1"}\n'
            '{"speaker": "B", "text": "yo", "id": "u1"}\n',
            "line 2",
        ),
        ("t.csv", "speaker,text,id\nA,hi,u1\nB,yo,u1\n", "line 3"),
        (
            "t.vtt",
            "WEBVTT\n\nc1\n00:01.000 --> 00:02.000\n<v A>hi\n\n"
            "c1\n00:03.000 --> 00:04.000\n<v B>yo\n",
            "cue 'c1' (line 8)",
        ),
    ],
)
def test_user_duplicate_utterance_ids_are_errors(
    tmp_path: Path, name: str, text: str, where: str
) -> None:
    from polylogue.corpora.transcripts import read_transcript

    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    _raises_at(
        lambda: read_transcript(path),
        path,
        where,
        "duplicate utterance id 'u1'" if name != "t.vtt" else "duplicate utterance id 'c1'",
    )


def test_build_on_a_damaged_corpus_exits_2_with_a_located_error(tmp_path: Path) -> None:
    from corpus_copies import EARNINGS_CALL, earnings_copy

    root = earnings_copy(tmp_path / "data" / "earnings21")
    nlp = root / "transcripts" / "nlp_references" / f"{EARNINGS_CALL}.nlp"
    n_lines = nlp.read_bytes().count(b"\n")
    with open(nlp, "ab") as f:
        f.write(b"x\xe9|0||||LC|[]|[]\n")
    out = tmp_path / "bench"
    proc = _run(
        [
            "build",
            "--corpus",
            "earnings21",
            "--data-root",
            str(tmp_path / "data"),
            "--out",
            str(out),
        ]
    )
    _assert_located(proc, f"{nlp}:line {n_lines + 1}: not UTF-8 text")
    assert not (out / "manifest.json").exists()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda s: s.replace('"start": 1.0', '"start": Infinity', 1), "not a finite time"),
        (lambda s: s.replace('"start": 1.0', '"start": -4.0', 1), "not a finite time"),
        (lambda s: s.replace('"end": 7.7', '"end": 0.5', 1), "ends (0.5) before it starts"),
    ],
)
def test_conversation_files_reject_impossible_times(
    tmp_path: Path, damage: object, message: str
) -> None:
    """A built conversations file (here the example meeting) with a damaged time."""
    from polylogue.conversation import read_jsonl, write_jsonl
    from polylogue.corpora.transcripts import read_transcript

    path = tmp_path / "conversations.jsonl"
    write_jsonl([read_transcript(Path(__file__).parents[1] / "examples" / "standup.jsonl")], path)
    text = path.read_text(encoding="utf-8")
    assert '"start": 1.0' in text and '"end": 7.7' in text
    path.write_text(damage(text), encoding="utf-8")  # type: ignore[operator]
    _raises_at(lambda: list(read_jsonl(path)), path, "line 1", message)


def test_conversation_files_with_bad_bytes_are_located(tmp_path: Path) -> None:
    from polylogue.conversation import read_jsonl

    path = tmp_path / "conversations.jsonl"
    path.write_bytes(b"\n\n" + b'{"id": "caf\xe9"}\n')
    _raises_at(lambda: list(read_jsonl(path)), path, "line 3", "not UTF-8 text")
