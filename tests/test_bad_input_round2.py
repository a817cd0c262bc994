"""Bad input, round two (issue 29, items 1-9; issue 27, items 1 and 3).

Each test reproduces one class of the second probe as the user met it (mostly through the
``polylogue`` command, on copies of real shared files) and checks the fix on more than the
probe's one instance: a located one-line error (exit 2), a warning naming the first place, or
the right reading.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_run import located_error, polylogue_process, run_polylogue

from polylogue.turntaking.dataset import FORMAT_VERSION

POLYLOGUE = [str(Path(sys.executable).parent / "polylogue")]
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BIG = "7" * 5000  # over json's 4,300-digit limit: a plain ValueError before the fix
HUGE = "9" * 400  # parses, then float() overflowed


def _run(args: list[str], stdin: str | bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """``polylogue ARGS`` in this process (tests/cli_run.py): the command's behaviour."""
    return run_polylogue(args, stdin, env={"COLUMNS": "400"})  # no wrapping of the error


def _process(
    args: list[str], stdin: str | bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``polylogue ARGS`` as a real process, as the user met it (bytes piped to its stdin)."""
    return polylogue_process(args, stdin, env={"COLUMNS": "400"})


def _ok(proc: subprocess.CompletedProcess[bytes]) -> tuple[str, str]:
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 0, err
    return out, err


def _json_rows(proc: subprocess.CompletedProcess[bytes]) -> list[dict[str, object]]:
    out, _ = _ok(proc)
    return [json.loads(line) for line in out.splitlines()]


# ----------------------------------------------------------------------------- 1. big integers


@pytest.mark.parametrize("number", [BIG, HUGE, "-" + BIG])
def test_big_integers_on_stdin_and_in_user_files_are_located(tmp_path: Path, number: str) -> None:
    line = '{"speaker": "A", "text": "hi there", "id": ' + number + "}\n"
    located_error(_process(["decide", "-", "--as", "A"], line), "<stdin>:line 1", "digits")
    header = '{"participants": [{"id": "a", "name": "A", "role": ' + number + "}]}\n"
    located_error(
        _process(["decide", "-", "--as", "A"], header + "A: hi\n"), "<stdin>:line 1", "digits"
    )
    start = '{"speaker": "A", "text": "hi"}\n{"speaker": "B", "text": "ok", "start": '
    user = tmp_path / "t.jsonl"
    user.write_text(start + number + "}\n", encoding="utf-8")
    located_error(_process(["decide", str(user), "--as", "A"]), f"{user}:line 2", "digits")


def test_big_integers_in_corpus_files_are_located(tmp_path: Path) -> None:
    from corpus_copies import friends_s10_episode, icsi_copy

    from polylogue.conversation import ConversationFormatError
    from polylogue.corpora.friends import read_friends_s10_json
    from polylogue.corpora.icsi import read_icsi
    from polylogue.corpora.molweni import read_molweni_file
    from polylogue.paths import data_root

    s10 = friends_s10_episode(tmp_path)
    data = json.loads(s10.read_text(encoding="utf-8"))
    text = json.dumps(data).replace('"season_id": "s10"', '"season_id": ' + BIG, 1)
    assert BIG in text
    s10.write_text(text, encoding="utf-8")
    with pytest.raises(ConversationFormatError, match="digits") as err:
        list(read_friends_s10_json(s10))
    assert err.value.path == str(s10)

    root = icsi_copy(tmp_path / "icsi")
    meeting = next((root / "data" / "Academic" / "all").glob("*.json"))
    meeting.write_text(meeting.read_text(encoding="utf-8")[:-1] + ', "x": ' + HUGE + "}")
    with pytest.raises(ConversationFormatError, match="digits") as err:
        list(read_icsi(root))
    assert err.value.path == str(meeting)

    dev = tmp_path / "dev.json"
    dev.write_text("[" + BIG + "]", encoding="utf-8")
    with pytest.raises(ConversationFormatError, match="digits"):
        list(read_molweni_file(dev))
    # and Molweni nested 100,000 deep (a RecursionError before)
    dev.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(ConversationFormatError, match="nested too deeply"):
        list(read_molweni_file(dev))
    assert (data_root() / "molweni" / "DP" / "dev.json").is_file()  # the real file reads
    assert len(list(read_molweni_file(data_root() / "molweni" / "DP" / "dev.json"))) > 0


# ----------------------------------------------------------------------------- 2-3. folders


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "friends"
    proc = _process(
        ["build", "--corpus", "friends", "--limit-conversations", "3", "--out", str(out)]
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return out


def _damaged(bench: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "b"
    shutil.copytree(bench, copy)
    return copy


def _eval_and_inspect(folder: Path, tmp_path: Path, *fragments: str) -> None:
    runs = tmp_path / "runs"
    located_error(
        _run(["eval", "-d", str(folder), "-m", "baseline:always-speak", "--out", str(runs)]),
        *fragments,
    )
    located_error(_run(["inspect", str(folder), "-n", "1"]), *fragments)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda b: (b / "test.parquet").write_bytes((b / "test.parquet").read_bytes()[:3000]),
            "not a readable Parquet split",
        ),
        (lambda b: (b / "test.parquet").write_bytes(b""), "not a readable Parquet split"),
        (
            lambda b: shutil.copy(b / "conversations.parquet", b / "test.parquet"),
            "not a decision-point split",
        ),
        (lambda b: (b / "manifest.json").write_text("[1, 2]"), "expected a manifest object"),
        (lambda b: (b / "manifest.json").write_bytes(b"\xff\xfe{}"), "not UTF-8"),
        (lambda b: (b / "manifest.json").write_text('{"kind": ' + BIG + "}"), "digits"),
    ],
    ids=[
        "truncated split",
        "zero-byte split",
        "other schema",
        "list manifest",
        "non-UTF-8 manifest",
        "big-int manifest",
    ],
)
def test_damaged_benchmark_folders_give_one_located_error(
    bench: Path, tmp_path: Path, damage: object, message: str
) -> None:
    folder = _damaged(bench, tmp_path)
    damage(folder)  # type: ignore[operator]
    _eval_and_inspect(folder, tmp_path, str(folder), message)


def _set_version(folder: Path, version: object) -> None:
    """The folder as a build of format ``version`` wrote it: the manifest's number, and split
    files without the format stamp (older builds wrote none)."""
    import pyarrow.parquet as pq

    manifest = json.loads((folder / "manifest.json").read_text())
    if version is None:
        del manifest["format_version"]
    else:
        manifest["format_version"] = version
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for split in folder.glob("*.parquet"):
        table = pq.read_table(split)
        meta = {k: v for k, v in (table.schema.metadata or {}).items() if b"polylogue" not in k}
        pq.write_table(table.replace_schema_metadata(meta), split)


def test_other_benchmark_format_versions_are_refused_or_upgraded_with_a_message(
    bench: Path, tmp_path: Path
) -> None:
    folder = _damaged(bench, tmp_path)
    for newer in (99, "3", 0):
        _set_version(folder, newer)
        _eval_and_inspect(folder, tmp_path, str(folder / "manifest.json"), "format")
    err = _run(["inspect", str(folder), "-n", "1"]).stderr.decode()
    _set_version(folder, 99)
    _eval_and_inspect(folder, tmp_path, "benchmark format 99 is newer", "upgrade polylogue")
    # format 1 wrote no version (before BACKCHANNEL and SA); 2 grouped Molweni differently
    for old, says in (
        (None, "no BACKCHANNEL"),
        (1, "no BACKCHANNEL"),
        (2, "Molweni"),
        (3, "no S3"),
        (4, "take leave in words"),
    ):
        _set_version(folder, old)
        for args in (
            ["inspect", str(folder), "-n", "1"],
            [
                "eval",
                "-d",
                str(folder),
                "-m",
                "baseline:always-speak",
                "--out",
                str(tmp_path / f"r{old}"),
            ],
        ):
            _, err = _ok(_run(args))
            warning = [w for w in err.splitlines() if w.startswith("warning:")]
            assert len(warning) == 1, err
            want = f"benchmark format {old or 1} upgraded to format {FORMAT_VERSION}"
            assert want in warning[0], err
            assert says in warning[0] and "rebuild it" in warning[0], err


def test_split_jsonl_and_run_predictions_with_big_or_bad_values_are_located(
    bench: Path, tmp_path: Path
) -> None:
    folder = _damaged(bench, tmp_path)
    (folder / "test.parquet").unlink()
    (folder / "test.jsonl").write_text('{"point_id": "p1", "index": ' + BIG + "}\n")
    _eval_and_inspect(folder, tmp_path, f"{folder / 'test.jsonl'}:line 1", "digits")

    runs = tmp_path / "runs"
    args = [
        "eval",
        "-d",
        str(bench),
        "-m",
        "baseline:always-speak",
        "--out",
        str(runs),
        "--limit",
        "20",
    ]
    _ok(_run(args))
    (pred,) = runs.glob("*/predictions.jsonl")
    lines = pred.read_text().splitlines()
    for bad, message in (
        ('"abc"', "p_speak 'abc' is not a probability"),
        (BIG, "digits"),
        ("1.5", "not a probability"),
    ):
        rec = json.loads(lines[3])
        text = json.dumps(rec).replace(
            f'"p_speak": {json.dumps(rec["p_speak"])}', f'"p_speak": {bad}'
        )
        pred.write_text("\n".join([*lines[:3], text, *lines[4:10]]) + "\n")
        located_error(_run(args), str(pred), message)


# ----------------------------------------------------------------------------- 4. merged cues

SRT_MERGED = (
    "1\n00:00:01,000 --> 00:00:03,000\nAlice: Dave, can you check?\n"
    "2\n00:00:03,500 --> 00:00:05,000\nBob: it failed\n"
    "3\n00:00:05,500 --> 00:00:06,000\nDave: on it\n"
)
VTT_MERGED = (
    "WEBVTT\n\n00:01.000 --> 00:03.000\n<v Alice>Dave, can you check?\n"
    "00:03.500 --> 00:05.000\n<v Bob>it failed\nc3\n00:05.500 --> 00:06.000\nDave: on it\n"
)


@pytest.mark.parametrize(("name", "text"), [("t.srt", SRT_MERGED), ("t.vtt", VTT_MERGED)])
def test_a_missing_blank_line_does_not_merge_cues(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    for proc in (
        _run(["decide", str(path), "--as", "Dave", "--json"]),
        _run(["decide", "-", "--as", "Dave", "--json"], text),
    ):
        rows = _json_rows(proc)
        assert [(r["speaker_name"], r["start"]) for r in rows] == [
            ("Alice", 1.0),
            ("Bob", 3.5),
            ("Dave", 5.5),
        ], rows
        assert rows[0]["text"] == "Dave, can you check?"


# ----------------------------------------------------------------------------- 5. lines, BOMs


def test_unicode_line_separators_inside_json_strings_keep_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rows = [
        {"speaker": "Alice", "text": "first part\u2028second part"},
        {"speaker": "Bob", "text": "next\u0085line\x1cgroup"},
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    out = _json_rows(_run(["decide", str(path), "--as", "Bob", "--json"]))
    assert [r["text"] for r in out] == ["first part second part", "next line group"]
    txt = tmp_path / "t.txt"
    txt.write_text("Alice: a\u2028b\nBob: c\n", encoding="utf-8")
    out = _json_rows(_run(["decide", str(txt), "--as", "Bob", "--json"]))
    assert [r["text"] for r in out] == ["a b", "c"]


@pytest.mark.parametrize(
    "text",
    [
        "Alice: Bob, are you there?\nBob: yes\n",
        "WEBVTT\n\n00:01.000 --> 00:02.000\nAlice: Bob, are you there?\n\n"
        "00:02.500 --> 00:03.000\nBob: yes\n",
    ],
    ids=["txt", "vtt"],
)
def test_a_byte_order_mark_on_stdin_is_dropped(text: str) -> None:
    rows = _json_rows(
        _run(["decide", "-", "--as", "Bob", "--json"], b"\xef\xbb\xbf" + text.encode())
    )
    assert [r["speaker_name"] for r in rows] == ["Alice", "Bob"]


def test_lone_carriage_returns_end_lines_and_are_answered_at_once() -> None:
    proc = subprocess.Popen(
        [*POLYLOGUE, "decide", "-", "--as", "Bob", "--json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"Alice: Bob, can you hear me?\rBob: yes\r")
        proc.stdin.flush()
        got = b""
        deadline = time.monotonic() + 120  # a bound so a regression fails instead of hanging
        while got.count(b"\n") < 2 and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if ready:
                got += os.read(proc.stdout.fileno(), 65536)
        # both utterances answered while stdin is still open (not one utterance at EOF)
        rows = [json.loads(line) for line in got.splitlines()]
        assert [r["speaker_name"] for r in rows] == ["Alice", "Bob"], got
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()


def test_corpus_readers_accept_a_byte_order_mark(tmp_path: Path) -> None:
    from corpus_copies import EARNINGS_CALL, earnings_copy, friends_csv_head, friends_s10_episode

    from polylogue.corpora.earnings import read_earnings21
    from polylogue.corpora.friends import read_friends_csv, read_friends_s10_json

    csv = friends_csv_head(tmp_path, lines=80)
    plain = list(read_friends_csv(csv))
    csv.write_bytes(b"\xef\xbb\xbf" + csv.read_bytes())
    assert list(read_friends_csv(csv)) == plain and plain
    s10 = friends_s10_episode(tmp_path)
    plain = list(read_friends_s10_json(s10))
    s10.write_bytes(b"\xef\xbb\xbf" + s10.read_bytes())
    assert list(read_friends_s10_json(s10)) == plain and plain
    root = earnings_copy(tmp_path / "e")
    plain = [c.utterances for c in read_earnings21(root)]
    for rel in ("speaker-metadata.csv", f"rttms/{EARNINGS_CALL}.rttm"):
        (root / rel).write_bytes(b"\xef\xbb\xbf" + (root / rel).read_bytes())
    assert [c.utterances for c in read_earnings21(root)] == plain


def test_rttm_rows_are_never_dropped_silently(tmp_path: Path) -> None:
    from corpus_copies import EARNINGS_CALL, earnings_copy

    from polylogue.conversation import ConversationFormatError
    from polylogue.corpora.earnings import read_rttm_runs

    root = earnings_copy(tmp_path)
    rttm = root / "rttms" / f"{EARNINGS_CALL}.rttm"
    rows = rttm.read_text().splitlines()
    runs = read_rttm_runs(rttm)
    # lower-case type and other RTTM types (SPKR-INFO, comments) are read as RTT-09 says
    rttm.write_text(
        ";; a comment\nSPKR-INFO x 1 <NA> <NA> <NA> unknown A <NA> <NA>\n"
        + "\n".join(r.replace("SPEAKER", "speaker", 1) for r in rows)
        + "\n"
    )
    assert read_rttm_runs(rttm) == runs
    rttm.write_text("\n".join([*rows[:5], "SPEKAER" + rows[5][7:], *rows[6:]]) + "\n")
    with pytest.raises(ConversationFormatError, match="unknown RTTM row type 'SPEKAER'") as err:
        read_rttm_runs(rttm)
    assert err.value.where == "line 6"


# ----------------------------------------------------------------------------- 6. look-alikes


@pytest.mark.parametrize(
    ("written", "other"),
    [
        ("Jose\u0301", "Jos\u00e9"),
        ("Da\u200bve", "Dave"),
        ("Da\u00adve", "Dave"),
        ("Dave\u2060", "Dave"),
    ],
    ids=["NFD", "zero-width space", "soft hyphen", "word joiner"],
)
def test_look_alike_names_are_one_participant_and_a_warning_says_so(
    tmp_path: Path, written: str, other: str
) -> None:
    lines = [
        {"speaker": written, "text": "Alice, what do you think?"},
        {"speaker": "Alice", "text": "good idea"},
        {"speaker": other, "text": "thanks"},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), "utf-8")
    stdin = "".join(f"{r['speaker']}: {r['text']}\n" for r in lines)
    for proc in (
        _run(["decide", str(path), "--as", written, "--json"]),
        _run(["decide", "-", "--as", written, "--json"], stdin),
    ):
        rows = _json_rows(proc)
        assert {r["speaker"] for r in rows} == {other, "Alice"}, rows
        # --as in the other spelling is the same person: no decision after their own lines
        assert rows[0]["decision"] is None and rows[2]["decision"] is None, rows
        err = proc.stderr.decode()
        assert err.count("warning:") == 1 and "both spellings are one person" in err, err


@pytest.mark.parametrize("bad", ["\u202e", "\u2066", "\x1b[31m", "\n"])
def test_names_with_bidi_or_control_characters_are_refused(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"speaker": f"Ev{bad}e", "text": "hi"}) + "\n", encoding="utf-8")
    located_error(_run(["decide", str(path), "--as", "A"]), f"{path}:line 1", "speaker name")
    if bad != "\n":
        located_error(_run(["decide", "-", "--as", "A"], f"Ev{bad}e: hi\n"), "<stdin>:line 1")
        proc = _run(["decide", "-", "--as", f"A{bad}"], "A: hi\n")
        err = proc.stderr.decode()
        assert proc.returncode == 2 and "--as" in err and "Traceback" not in err, err


# ----------------------------------------------------------------------------- 7. warn once


def test_inconsistent_input_is_warned_once_and_located(tmp_path: Path) -> None:
    lines = [
        '{"speaker": "Alice", "text": "one", "start": 10}',
        '{"speaker": "Bob", "text": "two", "start": 5}',
        '{"speaker": "Alice", "text": "three", "start": 3, "start": 4}',
        '{"speaker": "Bob", "text": "four", "start": "00:00:61"}',
        '{"speaker": "Alice", "text": "five", "start": 2}',
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out, err = _ok(_run(["decide", str(path), "--as", "Bob", "--json"]))
    warnings = [w for w in err.splitlines() if w.startswith("warning:")]
    assert len(warnings) == 3, err  # one per kind
    assert any(
        f"{path}:line 2" in w and "before the utterance above" in w and "2 more" in w
        for w in warnings
    ), err
    assert any(f"{path}:line 3" in w and "repeated JSON key 'start'" in w for w in warnings), err
    assert any(f"{path}:line 4" in w and "over 59" in w for w in warnings), err
    assert [json.loads(r)["start"] for r in out.splitlines()] == [10, 5, 4, 61, 2]
    # on stdin: at the first occurrence, once
    proc = _run(["decide", "-", "--as", "Bob"], "[10] Alice: one\n[5] Bob: two\n[3] Alice: three\n")
    _, err = _ok(proc)
    assert err.count("warning:") == 1 and "<stdin>:line 2" in err, err


def test_duplicate_csv_header_columns_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("speaker,text,Text\nAlice,hello there,oops\n")
    located_error(
        _run(["decide", str(path), "--as", "Alice"]), f"{path}:line 1", "repeats the column"
    )


def test_subtitle_conventions_are_read(tmp_path: Path) -> None:
    vtt = tmp_path / "yt.vtt"
    vtt.write_text(
        "WEBVTT\nKind: captions\nLanguage: en\n\n"
        "00:00:01.000 --> 00:00:02.000 align:start position:0%\n"
        "{\\an8}Alice: Bob, are you there?\n\n"
        "00:00:02.100 --> 00:00:02.400\n\n"  # an empty cue
        "00:00:02.500 --> 00:00:04.000\n- Bob: yes I am\n- Alice: good, Carol?\n\n"
        "00:00:04.500 --> 00:00:06.000\n-Carol: here\n"
    )
    rows = _json_rows(_run(["decide", str(vtt), "--as", "Bob", "--json"]))
    assert [(r["speaker_name"], r["text"]) for r in rows] == [
        ("Alice", "Bob, are you there?"),
        ("Bob", "yes I am"),
        ("Alice", "good, Carol?"),
        ("Carol", "here"),
    ]
    srt = tmp_path / "t.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:02,000\n{\\an8}- Alice: hi\n- Bob: hello\n")
    rows = _json_rows(_run(["decide", str(srt), "--as", "Bob", "--json"]))
    assert [r["speaker_name"] for r in rows] == ["Alice", "Bob"]
    bad = tmp_path / "x.vtt"
    bad.write_text("WEBVTTX\n\n00:01.000 --> 00:02.000\nAlice: hi\n")
    located_error(_run(["decide", str(bad), "--as", "Alice"]), "must start with 'WEBVTT'")
    located_error(
        _run(["decide", "-", "--as", "Alice", "--format", "vtt"], bad.read_text()), "must start"
    )


# ----------------------------------------------------------------------------- 8. files


def test_recursive_globs_do_not_follow_symlink_loops(tmp_path: Path) -> None:
    (tmp_path / "calls" / "a").mkdir(parents=True)
    shutil.copy(EXAMPLES / "standup.jsonl", tmp_path / "calls" / "a" / "standup.jsonl")
    (tmp_path / "calls" / "a" / "up").symlink_to("..")
    (tmp_path / "calls" / "again.jsonl").symlink_to("a/standup.jsonl")
    out = tmp_path / "bench"
    proc = _run(["build", "-t", str(tmp_path / "calls" / "**" / "*.jsonl"), "--out", str(out)])
    said, err = _ok(proc)
    # one file, read once: not once per path through the loop (41 before), nor per link
    assert "from 1 conversations" in said + err, said + err


def test_symlink_loops_and_unreadable_files_exit_2(tmp_path: Path) -> None:
    loop = tmp_path / "loop.txt"
    loop.symlink_to(loop)
    located_error(_run(["decide", str(loop), "--as", "A"]), "loop.txt")
    locked = tmp_path / "locked.txt"
    locked.write_text("Alice: hi\n")
    locked.chmod(0)
    if os.geteuid() == 0:
        # Root reads any chmod 000 file. A write-only procfs file is one root cannot read
        # either (EACCES), so the real command runs as is: no dropping to another user, who
        # could not read a checkout in a private (0700) folder.
        write_only = Path("/proc/sys/vm/drop_caches")
        if not write_only.exists():
            pytest.skip("no unreadable file for root on this system (Linux procfs)")
        locked.unlink()
        locked.symlink_to(write_only)
    located_error(_run(["decide", str(locked), "--as", "Alice"]), "Permission denied", "locked.txt")


def test_printed_names_and_text_cannot_forge_output_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rows = [
        {"speaker": "Alice", "text": "hi\x1b[2K\r2 Mallory: fake line\x07"},
        {"speaker": "Bob", "text": "ok\u2028\u202e3 reversed"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out, _ = _ok(_run(["decide", str(path), "--as", "Bob"]))
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out, out
    body = [line for line in out.splitlines() if line[:1].isdigit()]
    assert len(body) == 2 and body[0].startswith("1 Alice: hi\\x1b[2K"), out


def test_huge_utterances_and_lines_are_capped(tmp_path: Path) -> None:
    from polylogue.conversation import MAX_UTTERANCE_CHARS

    text = "word " * (MAX_UTTERANCE_CHARS // 5 + 1)
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"speaker": "A", "text": text}) + "\n")
    located_error(_run(["decide", str(path), "--as", "A"]), f"{path}:line 1", "characters (at most")
    located_error(
        _run(["decide", "-", "--as", "A"], "A: " + text + "\n"), "<stdin>:line 1", "at most"
    )
    located_error(
        _run(["decide", "-", "--as", "A"], "A: hi\nB: " + "x" * 1_000_000),
        "<stdin>:line 2",
        "line over",
    )


def test_an_unknown_as_on_a_huge_roster_lists_a_few_names(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        "".join(json.dumps({"speaker": f"S{i}", "text": "hi"}) + "\n" for i in range(12_000))
    )
    proc = _run(["decide", str(path), "--as", "Nobody"])
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert "and 11,988 more" in err and len(err) < 2_000, err[:3000]


# ----------------------------------------------------------------------------- 9. linear roster


def test_spoken_presence_gives_the_same_features_as_the_listed_roster() -> None:
    """decide FILE without a roster (everyone registered, present = who has spoken) computes
    the rank and counts from counters; the features equal those of the explicit list."""
    import numpy as np

    from polylogue.corpora.ami import read_ami
    from polylogue.engine.engine import TurnTakingEngine
    from polylogue.engine.features import SPOKEN
    from polylogue.paths import data_root

    conv = next(iter(read_ami(data_root() / "ami", meetings=["ES2002a"])))
    engine = TurnTakingEngine.load()
    engine.add_participants(conv.participants)
    state = engine.state
    compared = 0
    for u in conv.utterances[:300]:
        engine.observe(u)
        for target in [p.id for p in conv.participants]:
            listed = [*state.utt_count, target]
            a = state.features(target, listed)
            b = state.features(target, SPOKEN)
            assert np.array_equal(a, b, equal_nan=True), (u, target)
            compared += 1
    assert compared == 1200


# ----------------------------------------------------------------------------- issue 27


def test_the_documented_stdin_span_form_works_as_the_first_line() -> None:
    text = "[12.0 --> 14.5] Alice: Dave, can you check?\n[15.0 --> 16.0] Dave: sure\n"
    rows = _json_rows(_run(["decide", "-", "--as", "Dave", "--json"], text))
    assert [(r["speaker_name"], r["start"], r["end"]) for r in rows] == [
        ("Alice", 12.0, 14.5),
        ("Dave", 15.0, 16.0),
    ]
    # and the point form, and an SRT stream, are still told apart
    rows = _json_rows(_run(["decide", "-", "--as", "Dave", "--json"], "[00:01:02.5] Alice: hi\n"))
    assert rows[0]["start"] == 62.5
    rows = _json_rows(_run(["decide", "-", "--as", "Dave", "--json"], SRT_MERGED))
    assert len(rows) == 3


QMSUM = (
    "Professor D: so that is the plan for the front end\n"
    "PhD F: right\n"
    "Professor D: Jane, what do you think about it?\n"
    "Grad C: hmm\n"
)


def test_aliases_connect_transcript_labels_to_the_names_people_say(tmp_path: Path) -> None:
    def third(args: list[str], stdin: str | None = None) -> dict[str, object]:
        return _json_rows(_run([*args, "--json"], stdin))[2]

    plain = third(["decide", "-", "--as", "PhD F"], QMSUM)
    assert "addressed by name" not in plain["cues"]["active"]  # type: ignore[index]
    aliased = third(["decide", "-", "--as", "PhD F", "--alias", "PhD F=Jane"], QMSUM)
    assert "addressed by name" in aliased["cues"]["active"]  # type: ignore[index]
    assert aliased["p_speak"] > plain["p_speak"]  # type: ignore[operator]
    # --as may use the alias; a roster file does the same for WebVTT files
    assert (
        third(["decide", "-", "--as", "jane", "--alias", "PhD F=Jane"], QMSUM)["p_speak"]
        == aliased["p_speak"]
    )
    vtt = tmp_path / "m.vtt"
    vtt.write_text(
        "WEBVTT\n\n"
        + "".join(
            f"00:00:0{k}.000 --> 00:00:0{k}.900\n<v {who}>{said}\n\n"
            for k, (who, said) in enumerate((x.split(": ", 1) for x in QMSUM.splitlines()), 1)
        )
    )
    roster = tmp_path / "aliases.txt"
    roster.write_text("# who is who\nPhD F = Jane, Jane Doe\nprofessor d = Morgan\n")
    from_file = third(["decide", str(vtt), "--as", "PhD F", "--alias-file", str(roster)])
    assert "addressed by name" in from_file["cues"]["active"]  # type: ignore[index]
    located_error(
        _run(["decide", str(vtt), "--as", "PhD F", "--alias", "Dr X=Jane"]),
        "'Dr X', who is not a participant",
    )
    located_error(_run(["decide", str(vtt), "--as", "PhD F", "--alias", "Jane"]), "NAME=ALIAS")


def test_stream_lines_split_at_every_line_end_across_chunks() -> None:
    """What `decide -` reads stdin with, fed in every chunk size (a pipe delivers any)."""
    from polylogue.corpora.transcripts import stream_lines

    data = "\ufeffA: one\r\nB: two\rC: three\nD: f\u2028our\u0085\r\n\nE: é".encode()

    class Chunks:  # a pipe handing over ``size`` bytes per read
        def __init__(self, size: int) -> None:
            self.data, self.size = data, size

        def read1(self, _: int) -> bytes:
            out, self.data = self.data[: self.size], self.data[self.size :]
            return out

    want = ["A: one", "B: two", "C: three", "D: f\u2028our\u0085", "", "E: é"]
    for size in range(1, len(data) + 1):
        assert list(stream_lines(Chunks(size))) == want, size
