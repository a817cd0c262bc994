"""Bad input, round four (the CLI side): names that are only invisible characters, roles
holding control or bidi characters, ``--only``/``--ignore`` names nobody in a stream has, output
folders that cannot be written (checked before any work), a missing ``--alias-file``, and the
domain a call's transcript shows. The real CLI (in-process, and one real process for the
stream read as it arrives) on real transcripts where the case needs one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import run_polylogue

from polylogue.conversation import BadNameError, clean_name, clean_role

ROOT = Path(__file__).resolve().parents[1]
STANDUP = ROOT / "examples" / "standup.jsonl"
ZWSP, ZWNJ, ZWJ, LRI, RLO = "\u200b", "\u200c", "\u200d", "\u2066", "\u202e"


def _run(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[bytes]:
    return run_polylogue(args, stdin, env={"COLUMNS": "400"})


def _one_error(proc: subprocess.CompletedProcess[bytes]) -> str:
    err = proc.stderr.decode()
    assert proc.returncode == 2, (proc.returncode, err, proc.stdout.decode()[-500:])
    assert "Traceback" not in err
    return err


# ----------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", [ZWSP, ZWNJ + ZWJ, "\u2060\ufe0f", " \u3164 ", "\u00ad"])
def test_the_normaliser_refuses_a_name_of_only_invisible_characters(name: str) -> None:
    with pytest.raises(BadNameError, match="only invisible characters"):
        clean_name(name)
    assert clean_name("  ") == ""  # blank stays blank: callers say why they need a name
    assert clean_name(f"Ann{ZWSP}a") == "Anna"  # invisible inside a name: removed


def test_invisible_speakers_are_refused_never_merged_into_one(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text(f"Alice: hi\n{ZWSP}: one\n{ZWNJ}{ZWJ}: two\nBob: yo\n", encoding="utf-8")
    err = _one_error(_run(["decide", str(path), "--as", "Bob"]))
    assert f"{path}:line 2: speaker name '\\u200b' is only invisible characters" in err
    stdin = _one_error(_run(["decide", "-", "--as", "Bob"], f"{ZWNJ}{ZWJ}: two\n"))
    assert "<stdin>:line 1: speaker name '\\u200c\\u200d' is only invisible" in stdin
    header = tmp_path / "h.jsonl"
    header.write_text(
        json.dumps({"participants": [{"id": "a", "name": ZWSP}, {"id": "b"}]}) + "\n"
        + json.dumps({"speaker": "a", "text": "hi"}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    assert "participant name '\\u200b' is only invisible" in _one_error(
        _run(["decide", str(header), "--as", "b"])
    )


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--as", ZWSP), ("--alias", f"Dave={ZWSP}"), ("--only", ZWNJ), ("--ignore", LRI)],
)
def test_options_naming_only_invisible_characters_are_refused(flag: str, value: str) -> None:
    args = ["decide", str(STANDUP), "--as", "Dave"]
    args = ["decide", str(STANDUP), "--as", value] if flag == "--as" else [*args, flag, value]
    err = _one_error(_run(args))
    assert "only invisible characters" in err or "bidi control U+2066" in err, err
    assert "\\u" in err  # the value named, escaped


@pytest.mark.parametrize("role", ["facilitator\nFAKE LINE", "chair\x00", f"{RLO}rotaredom", 7])
def test_a_participant_role_with_controls_is_refused(tmp_path: Path, role: object) -> None:
    path = tmp_path / "r.jsonl"
    head = {"participants": [{"id": "ann", "role": role}, {"id": "bob"}]}
    path.write_text(
        json.dumps(head) + "\n" + json.dumps({"speaker": "ann", "text": "hi bob"}) + "\n",
        encoding="utf-8",
    )
    err = _one_error(_run(["decide", str(path), "--as", "bob"]))
    assert f"{path}:line 1: participant 'ann': role" in err
    assert "FAKE LINE" not in err.replace("\\n", " ").split("\n", 1)[0] or "\\n" in err
    with pytest.raises(BadNameError):
        clean_role(f"{ZWSP}{ZWJ}")


def test_live_identities_of_only_invisible_characters_stay_apart() -> None:
    """A live room cannot refuse a participant: two invisible identities stay two people."""
    from polylogue.adapters.room import clean_identity

    a, b = clean_identity(ZWSP), clean_identity(ZWNJ)
    assert a and b and a != b and a.isascii()


# ----------------------------------------------------------------------------- --only/--ignore


def _standup_lines() -> list[str]:
    """The standup example's utterances as ``Speaker: text`` lines (no header)."""
    rows = [json.loads(x) for x in STANDUP.read_text(encoding="utf-8").splitlines()]
    return [f"{r['speaker']}: {r['text']}" for r in rows if "speaker" in r]


def test_stdin_only_a_name_nobody_has_warns_at_once_and_fails_at_the_end() -> None:
    """A real process on a pipe: the warning comes before any line is answered."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "polylogue.cli", "decide", "-", "--as", "Dave", "--json",
         "--only", "Priyaa"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stderr is not None
    lines = _standup_lines()
    proc.stdin.write(lines[0] + "\n")
    proc.stdin.flush()
    first = proc.stderr.readline()  # before anything else is sent
    assert first.startswith("warning: --only 'Priyaa' is not (yet) in the roster of <stdin>")
    assert "the agent answers nobody" in first
    out, err = proc.communicate("\n".join(lines[1:]) + "\n", timeout=300)
    assert proc.returncode == 2, err
    assert "--only 'Priyaa' named nobody who spoke (the agent answered nobody)" in err
    assert "speakers in <stdin>:" in err and "Traceback" not in err
    assert len(out.splitlines()) == len(lines)  # every line was still answered


def test_stdin_ignore_a_misspelt_name_is_an_error_at_the_end() -> None:
    lines = [*_standup_lines(), "TV: dave, breaking news tonight"]
    proc = _run(["decide", "-", "--as", "Dave", "--ignore", "Telly"], "\n".join(lines) + "\n")
    err = _one_error(proc)
    assert err.startswith("warning: --ignore 'Telly' is not (yet) in the roster")
    assert "--ignore 'Telly' named nobody who spoke" in err and "TV" in err
    ok = _run(["decide", "-", "--as", "Dave", "--ignore", "TV"], "\n".join(lines) + "\n")
    assert ok.returncode == 0, ok.stderr.decode()


def test_stdin_with_a_header_refuses_an_unknown_only_name_at_once() -> None:
    text = STANDUP.read_text(encoding="utf-8")
    proc = _run(["decide", "-", "--as", "Dave", "--only", "Priyaa"], text)
    err = _one_error(proc)
    assert "'Priyaa' is not a participant" in err and not proc.stdout.strip()


# ----------------------------------------------------------------------------- output folders


def test_an_output_that_is_a_file_is_refused_before_any_work(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("not a folder\n", encoding="utf-8")
    runs = tmp_path / "runs"
    for args in (
        ["scorecard", "--out", str(taken), "--data", "ami", "--runs", str(runs)],
        ["scorecard", "--out", str(taken / "sub"), "--data", "ami", "--runs", str(runs)],
        ["eval", "-d", str(tmp_path / "no-bench"), "--out", str(taken)],
        ["tom", "run", "--model", "majority", "--out", str(taken)],
        # build used to move the file aside (to a hidden name) and write a benchmark there
        ["build", "--corpus", "friends", "--limit-conversations", "1", "--out", str(taken)],
    ):
        err = _one_error(_run(args))
        assert "Invalid value for --out" in err and "nothing was run" in err, err
    assert not runs.exists()
    assert taken.read_text(encoding="utf-8") == "not a folder\n"


def test_a_missing_alias_file_is_one_line_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "aliases.txt"
    err = _one_error(_run(["decide", str(STANDUP), "--as", "Dave", "--alias-file", str(missing)]))
    assert err.strip() == f"error: {missing}: cannot read the alias file: No such file or directory"
    assert "Errno" not in err


# ----------------------------------------------------------------------------- domains


def _header_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode().splitlines()[0]


def test_a_call_with_an_operator_is_decided_as_an_earnings_call(tmp_path: Path) -> None:
    """The first lines of a real Earnings-21 call, with the roles its reader gives."""
    from polylogue.corpora import load_corpus

    conv = next(iter(load_corpus("earnings21")))
    name = {p.id: p.display_name for p in conv.participants}
    people = [{"id": name[p.id], **({"role": p.role} if p.role else {})}
              for p in conv.participants]  # fmt: skip
    rows = [json.dumps({"speaker": name[u.speaker], "text": u.text}) for u in conv.utterances[:12]]
    with_roles = tmp_path / "call.jsonl"
    with_roles.write_text("\n".join([json.dumps({"participants": people}), *rows]) + "\n")
    who = name[conv.utterances[1].speaker]
    head = _header_line(_run(["decide", str(with_roles), "--as", who]))
    assert ", earnings (inferred:" in head
    assert ", meeting:" in _header_line(
        _run(["decide", str(with_roles), "--as", who, "--domain", "meeting"])
    )
    stdin = _run(["decide", "-", "--as", who], with_roles.read_text(encoding="utf-8"))
    assert ", earnings (inferred:" in _header_line(stdin)
    labelled = tmp_path / "operator.txt"  # no header: a speaker labelled Operator
    labelled.write_text(
        "Operator: Good day and welcome to the call.\nAnn Lee: Thank you, operator.\n",
        encoding="utf-8",
    )
    assert ", earnings (inferred:" in _header_line(
        _run(["decide", str(labelled), "--as", "Ann Lee"])
    )
    plain = tmp_path / "meeting.txt"
    plain.write_text("Ann: shall we start?\nBob: yes.\n", encoding="utf-8")
    assert ", meeting (the default" in _header_line(_run(["decide", str(plain), "--as", "Bob"]))


def test_a_readers_conversation_takes_its_corpus_domain() -> None:
    from polylogue.corpora import load_corpus
    from polylogue.corpora.transcripts import transcript_domain

    assert transcript_domain(next(iter(load_corpus("earnings21")))) == ("earnings", "inferred")
    assert transcript_domain(next(iter(load_corpus("icsi")))) == ("meeting", "inferred")
