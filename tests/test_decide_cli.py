"""``polylogue decide`` on every transcript format, streamed stdin, and malformed input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
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
    # A wide terminal so rich does not wrap the one-line error message.
    env = {**os.environ, "COLUMNS": "400"}
    return subprocess.run(
        [*POLYLOGUE, *args], input=stdin, capture_output=True, text=True, timeout=120, env=env
    )


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


def test_three_outcomes_and_domain_option() -> None:
    from polylogue.engine.model import load_model

    model = load_model()
    path = str(EXAMPLES / "standup.jsonl")
    rows = [r for r in _decide_json(path, "--as", "Dave", "--domain", "meeting") if r["decision"]]
    assert rows
    for r in rows:
        assert r["threshold"] == pytest.approx(model.domain_thresholds["meeting"])
        total = r["p_speak"] + r["p_backchannel"] + r["p_silent"]
        assert total == pytest.approx(1.0, abs=1e-3)
        # A backchannel is only suggested when the floor decision is SILENT.
        assert not (r["backchannel"] and r["decision"] == "SPEAK")
    # An explicit threshold wins over the domain's.
    fixed = _decide_json(path, "--as", "Dave", "--domain", "tv", "--threshold", "0.5")
    assert all(r["threshold"] == 0.5 for r in fixed if r["decision"])
    bad = CliRunner().invoke(app, ["decide", path, "--as", "Dave", "--domain", "podcast"])
    assert bad.exit_code == 2
    assert "podcast" in bad.output and "meeting" in bad.output
