"""``polylogue decide`` on every transcript format, streamed stdin, and malformed input."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import run_polylogue
from typer.testing import CliRunner

from polylogue.cli import app
from polylogue.corpora.transcripts import read_transcript

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
POLYLOGUE = [str(Path(sys.executable).parent / "polylogue")]


def _decide_json(*args: str) -> list[dict]:
    result = CliRunner().invoke(app, ["decide", *args, "--json"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "vtt"])
def test_decide_on_each_format(suffix: str) -> None:
    path = EXAMPLES / f"standup.{suffix}"
    conv = read_transcript(path)
    dave = next(p for p in conv.participants if (p.name or p.id).lower().startswith("dave"))
    rows = _decide_json(str(path), "--as", "Dave")
    assert len(rows) == len(conv.utterances)
    for row, u in zip(rows, conv.utterances, strict=True):
        assert row["text"] == u.text
        if u.speaker == dave.id:
            assert row["decision"] is None and row["skipped"] == "target is speaking"
        elif row["decision"] is not None:
            assert row["decision"] in {"SPEAK", "SILENT"}
            assert 0.0 <= row["p_speak"] <= 1.0
            assert (row["decision"] == "SPEAK") == (row["p_speak"] >= row["threshold"])
            assert isinstance(row["cues"]["active"], list)
    decided = [r for r in rows if r["decision"] is not None]
    assert decided, "no pause was decided"


def test_formats_agree() -> None:
    """The same meeting as JSONL (with a roster) and CSV (without) gets the same probabilities
    once everybody has spoken (before that, the CSV reader cannot know who is present)."""
    conv = read_transcript(EXAMPLES / "standup.csv")
    seen: set[str] = set()
    all_seen_at = 0
    for i, u in enumerate(conv.utterances):
        seen.add(u.speaker)
        if len(seen) == len(conv.participants):
            all_seen_at = i
            break
    rows = {
        s: _decide_json(str(EXAMPLES / f"standup.{s}"), "--as", "Dave") for s in ("jsonl", "csv")
    }
    jsonl = [r["p_speak"] for r in rows["jsonl"][all_seen_at:]]
    csv = [r["p_speak"] for r in rows["csv"][all_seen_at:]]
    assert any(p is not None for p in jsonl)
    assert jsonl == pytest.approx(csv, abs=1e-6)


def test_threshold_option_moves_decisions() -> None:
    path = str(EXAMPLES / "standup.jsonl")
    low = _decide_json(path, "--as", "Dave", "--threshold", "0.0")
    high = _decide_json(path, "--as", "Dave", "--threshold", "1.0")
    assert all(r["decision"] == "SPEAK" for r in low if r["decision"])
    assert all(r["decision"] == "SILENT" for r in high if r["decision"] and r["p_speak"] < 1.0)


def test_rich_output_shows_probabilities_and_cues() -> None:
    result = CliRunner().invoke(app, ["decide", str(EXAMPLES / "standup.jsonl"), "--as", "Dave"])
    assert result.exit_code == 0, result.output
    assert "P(speak)=" in result.stdout
    assert "pauses decided" in result.stdout


def test_stdin_streaming_answers_each_line_as_it_arrives() -> None:
    lines = [
        "Alice: Morning everyone, let's keep it quick today.",
        "Bob: Sure. I finished the retry logic yesterday and I'm on billing today.",
        "Alice: Dave, can you check whether the nightly refresh still runs late?",
        "Dave: Yes, I'll look at the scheduler logs after this.",
    ]
    proc = subprocess.Popen(
        [*POLYLOGUE, "decide", "-", "--as", "Dave", "--json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdin is not None and proc.stdout is not None
    answers = []
    try:
        for line in lines:
            # The next line is only written after the answer to this one came back.
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            answers.append(json.loads(proc.stdout.readline()))
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    assert [a["speaker"] for a in answers] == ["Alice", "Bob", "Alice", "Dave"]
    assert answers[3]["decision"] is None
    # Addressed by name, Dave's P(SPEAK) is far above his P(SPEAK) after Bob's status update.
    assert answers[2]["p_speak"] > answers[1]["p_speak"]
    assert "addressed by name" in answers[2]["cues"]["active"]


def _run(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``polylogue ARGS`` in this process (tests/cli_run.py), its output as text; the streaming
    test above runs a real process."""
    # A wide terminal so rich does not wrap the one-line error message.
    proc = run_polylogue(args, stdin, env={"COLUMNS": "400"})
    out, err = (io.TextIOWrapper(io.BytesIO(b), "utf-8").read() for b in (proc.stdout, proc.stderr))
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_malformed_transcript_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.jsonl"
    bad.write_text(
        '{"speaker": "Alice", "text": "Hi Bob."}\n'
        '{"speaker": "Bob", "text": "Hi."}\n'
        '{"speaker": "Alice", "te\n',
        encoding="utf-8",
    )
    proc = _run(["decide", str(bad), "--as", "Bob"])
    assert proc.returncode != 0
    assert "broken.jsonl" in proc.stderr and "line 3" in proc.stderr


def test_malformed_stdin_line_names_the_line() -> None:
    proc = _run(
        ["decide", "-", "--as", "Bob"],
        stdin="Alice: hello Bob, how are you?\nthis line has no speaker\n",
    )
    assert proc.returncode != 0
    assert "<stdin>" in proc.stderr and "line 2" in proc.stderr


def test_unknown_participant_is_a_clear_error() -> None:
    proc = _run(["decide", str(EXAMPLES / "standup.csv"), "--as", "Zed"])
    assert proc.returncode != 0
    assert "Zed" in proc.stderr and "Alice" in proc.stderr


def _full_name_lines() -> str:
    """The stand-up as streamed 'Speaker: text' lines, Alice and Dave with full names."""
    conv = read_transcript(EXAMPLES / "standup.csv")
    full = {"Alice": "Alice Wong", "Dave": "Dave Park"}
    names = {p.id: p.display_name for p in conv.participants}
    return "".join(
        f"{full.get(names[u.speaker], names[u.speaker])}: {u.text}\n" for u in conv.utterances
    )


def test_stdin_as_first_name_finds_the_full_name_and_unknown_warns_once() -> None:
    lines = _full_name_lines()
    proc = _run(["decide", "-", "--as", "dave", "--json"], stdin=lines)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in proc.stdout.splitlines()]
    dave_rows = [r for r in rows if r["speaker"] == "Dave Park"]
    assert dave_rows and all(r["skipped"] == "target is speaking" for r in dave_rows)
    assert "warning" not in proc.stderr
    zed = _run(["decide", "-", "--as", "Zed", "--json"], stdin=lines)
    assert zed.returncode == 0
    assert zed.stderr.count("'Zed' has not appeared") == 1


def test_plain_output_when_piped_threshold_and_speak_list() -> None:
    path = str(EXAMPLES / "standup.jsonl")
    rows = _decide_json(path, "--as", "Dave")
    result = CliRunner().invoke(app, ["decide", path, "--as", "Dave"])  # stdout is not a tty
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    threshold = next(r["threshold"] for r in rows if r["decision"])
    assert lines[0].startswith(
        "operating point matched, meeting (declared by the transcript): "
        f"P(speak) >= {threshold:.2f} means SPEAK"
    )
    utterance_lines = [x for x in lines[1:] if x[:1].isdigit()]
    assert len(utterance_lines) == len(rows)  # one line per utterance, never wrapped
    for line, row in zip(utterance_lines, rows, strict=True):
        assert line.startswith(f"{row['index'] + 1} ") and row["text"] in line
        assert ("P(speak)=" in line) == (row["decision"] is not None)
    speak_at = [r["index"] + 1 for r in rows if r["decision"] == "SPEAK"]
    summary = next(x for x in lines if "should have spoken at" in x)
    assert summary.endswith(f"after utterance {', '.join(map(str, speak_at))}.")


def test_check_compares_each_decision_with_who_spoke_next() -> None:
    path = EXAMPLES / "standup.jsonl"
    rows = _decide_json(str(path), "--as", "Dave", "--check")
    conv = read_transcript(path)
    checked = 0
    for row, nxt in zip(rows, [*conv.utterances[1:], None], strict=True):
        if row["decision"] is None or nxt is None:
            assert row["agrees"] is None
            continue
        checked += 1
        assert row["agrees"] == ((row["decision"] == "SPEAK") == (nxt.speaker == "dave"))
    assert checked > 10
    text = CliRunner().invoke(app, ["decide", str(path), "--as", "Dave", "--check"]).stdout
    agreed = sum(r["agrees"] is True for r in rows)
    assert f"--check: {agreed} of {checked} decisions agree" in text


def test_probability_bar_marks_the_threshold() -> None:
    from polylogue.cli.decide import probability_bar

    assert probability_bar(0.5, 0.25, width=8) == "██│██····"
    assert probability_bar(0.0, 1.0, width=4) == "····│"


@pytest.mark.parametrize("fmt", [None, "vtt"])
def test_stdin_webvtt_and_srt_give_the_file_decisions(tmp_path: Path, fmt: str | None) -> None:
    conv = read_transcript(EXAMPLES / "standup.vtt")
    names = {p.id: p.display_name for p in conv.participants}

    def clock(t: float, sep: str) -> str:
        m, s = divmod(t, 60)
        return f"00:{int(m):02d}:{s:06.3f}".replace(".", sep)

    srt = "".join(
        f"{i}\n{clock(u.start, ',')} --> {clock(u.end, ',')}\n{names[u.speaker]}: {u.text}\n\n"
        for i, u in enumerate(conv.utterances, 1)
    )
    vtt = (EXAMPLES / "standup.vtt").read_text(encoding="utf-8")
    expected = [r["p_speak"] for r in _decide_json(str(EXAMPLES / "standup.vtt"), "--as", "Dave")]
    # A stream only knows who has spoken so far: compare once everybody has (as in file mode).
    seen: set[str] = set()
    everyone = next(
        i
        for i, u in enumerate(conv.utterances)
        if seen.add(u.speaker) or len(seen) == len(conv.participants)
    )
    for text, name in ((vtt, "vtt"), (srt, "srt")):
        args = ["decide", "-", "--as", "Dave", "--json"]
        proc = _run([*args, *(["--format", name] if fmt else [])], stdin=text)
        assert proc.returncode == 0, proc.stderr
        got = [json.loads(x)["p_speak"] for x in proc.stdout.splitlines()]
        assert len(got) == len(expected)
        assert got[everyone:] == pytest.approx(expected[everyone:], abs=1e-6), name
    (tmp_path / "m.srt").write_text(srt, encoding="utf-8")
    from_file = [r["p_speak"] for r in _decide_json(str(tmp_path / "m.srt"), "--as", "Dave")]
    assert from_file == pytest.approx(expected, abs=1e-6)


def test_stdin_format_is_honoured() -> None:
    vtt = (EXAMPLES / "standup.vtt").read_text(encoding="utf-8")
    proc = _run(["decide", "-", "--as", "Dave", "--format", "txt"], stdin=vtt)
    assert proc.returncode == 2 and "<stdin>" in proc.stderr
    proc = _run(["decide", "-", "--as", "Dave", "--format", "csv"], stdin="speaker,text\n")
    assert proc.returncode == 2 and "cannot be streamed" in proc.stderr


def test_three_outcomes_and_domain_option() -> None:
    from polylogue.engine.deployment import Thresholds, choose_action
    from polylogue.engine.model import load_model

    model = load_model()
    path = str(EXAMPLES / "standup.jsonl")
    rows = [r for r in _decide_json(path, "--as", "Dave", "--domain", "meeting") if r["decision"]]
    assert rows
    point = Thresholds(**model.operating_points["matched"]["meeting"])
    for r in rows:
        assert r["threshold"] == pytest.approx(point.take_floor)
        total = r["p_speak"] + r["p_backchannel"] + r["p_silent"]
        assert total == pytest.approx(1.0, abs=1e-3)
        # One action from the one rule over the two probabilities (rounded in the JSON).
        assert r["decision"] == choose_action(r["p_speak"], r["p_backchannel"], point).value
    # An explicit threshold wins over the domain's.
    fixed = _decide_json(path, "--as", "Dave", "--domain", "tv", "--threshold", "0.5")
    assert all(r["threshold"] == 0.5 for r in fixed if r["decision"])
    bad = CliRunner().invoke(app, ["decide", path, "--as", "Dave", "--domain", "podcast"])
    assert bad.exit_code == 2
    assert "podcast" in bad.output and "meeting" in bad.output
