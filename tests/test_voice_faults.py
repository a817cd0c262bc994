"""Transcript text reaches espeak-ng as text, never as options, and a misbehaving espeak-ng
stops a voice meeting with an error naming the utterance, never a hang.

The misbehaving espeak-ng programs here are real executables put first on ``PATH`` (a shell
script that exits with an error, sleeps in a child process, or writes bytes that are not WAV
audio on one marked line and runs Debian's espeak-ng otherwise). A real process that misbehaves
is not a mock of the component's contract: the code under test starts it, feeds it, waits for
it and kills it exactly as it does the real program.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polylogue.conversation import Conversation, Participant, Utterance

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
#: Lines holding this word make the fake espeak-ng misbehave.
MARK = "zebra"


def _voice():  # type: ignore[no-untyped-def]
    from test_voice import _voice as need_voice

    return need_voice()


def _fake_espeak(folder: Path, misbehave: str) -> Path:
    """A folder holding an ``espeak-ng`` that runs the real one, except on text holding
    :data:`MARK`, where it does ``misbehave`` (shell)."""
    real = "/usr/bin/espeak-ng"
    if not Path(real).is_file():
        import shutil

        real = shutil.which("espeak-ng") or real
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "espeak-ng"
    script.write_text(
        "#!/bin/sh\n"
        'text="$(cat)"\n'
        f'case "$text" in *{MARK}*) {misbehave} ;; esac\n'
        f'printf "%s" "$text" | exec {real} "$@"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return folder


def _conversation(agent_line: str = "sure i will look at them") -> Conversation:
    people = (Participant("alice", "Alice"), Participant("bob", "Bob"), Participant("dave", "Dave"))
    lines = [
        ("alice", "the budget is due on friday"),
        ("bob", f"the {MARK} report is late"),
        ("dave", agent_line),
    ]
    utts = tuple(Utterance(who, text, id=f"u{i}") for i, (who, text) in enumerate(lines))
    return Conversation("voice-faults", "test", utts, people, roster_known=True)


def test_a_line_starting_with_a_dash_is_spoken_not_read_as_an_option(tmp_path: Path) -> None:
    """Real espeak-ng: ``-w FILE`` would make it write a WAV file there, ``--version`` would
    print its version instead of audio."""
    voice = _voice()
    stolen = tmp_path / "stolen.wav"
    for text in (f"-w {stolen} good morning", "--version", "-- -v"):
        samples = voice.synthesize(text, "en-us+f2")
        assert len(samples) > voice.SAMPLE_RATE * 0.3, text  # spoken: audio of the words
    assert not stolen.exists()
    assert voice.pronounce("-Dave") == voice.pronounce("Dave")


def test_a_failing_espeak_ng_stops_the_example_naming_the_utterance(tmp_path: Path) -> None:
    _voice()
    import json

    fake = _fake_espeak(tmp_path / "bin", 'echo "espeak-ng: voice data broken" >&2; exit 3')
    path = tmp_path / "meeting.jsonl"
    rows = [
        {"participants": [{"id": "alice"}, {"id": "bob"}, {"id": "dave"}]},
        {"speaker": "alice", "text": "the budget is due on friday"},
        {"speaker": "bob", "text": f"the {MARK} report is late"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    env = {
        **os.environ,
        "PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT / "src"),
    }
    args = [
        "examples/voice_meeting.py",
        str(path),
        "--as",
        "dave",
        "--no-hints",
        "--voices",
        "espeak",
    ]
    run = subprocess.run(
        [sys.executable, *args, "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert run.returncode == 2, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    err = run.stderr.strip().splitlines()[-1]
    assert err.startswith(f"error: {path}: utterance 2 (bob: 'the {MARK} report is late')")
    assert "exited with status 3" in err and "voice data broken" in err
    assert not (tmp_path / "out" / "meeting.wav").exists()


def test_a_hanging_espeak_ng_is_killed_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake sleeps in a child process that keeps the pipes open: killing only the
    program would leave the wait going."""
    voice = _voice()
    fake = _fake_espeak(tmp_path / "bin", "sleep 600; exit 0")
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ.get('PATH', '')}")
    t0 = time.monotonic()
    with pytest.raises(voice.VoiceError) as got:
        asyncio.run(
            voice.run_voice_meeting(
                _conversation(), "dave", hints=False, voices="espeak", espeak_timeout_s=2.0
            )
        )
    assert f"utterance 2 (bob: 'the {MARK} report is late')" in str(got.value)
    assert "did not finish within 2 s" in str(got.value)
    # Bounded, not timed: far below the fake's 600 s sleep.
    assert time.monotonic() - t0 < 300


def test_garbage_from_espeak_ng_is_an_error_naming_the_agents_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's own line goes through the TTS service inside the pipeline: its failure
    stops the meeting too (not a silent gap in the audio)."""
    voice = _voice()
    fake = _fake_espeak(tmp_path / "bin", "printf 'RIFF garbage, not audio'; exit 0")
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ.get('PATH', '')}")
    conv = _conversation(f"the {MARK} is mine")
    conv = Conversation(
        conv.id, conv.corpus, (conv.utterances[0], conv.utterances[2]), conv.participants,
        roster_known=True,
    )  # fmt: skip
    with pytest.raises(voice.VoiceError) as got:
        asyncio.run(voice.run_voice_meeting(conv, "dave", hints=False, voices="espeak", reply=None))
    msg = str(got.value)
    assert f"utterance 2 (dave, spoken by the agent: 'the {MARK} is mine')" in msg
    assert "not 16-bit mono WAV audio" in msg


def test_a_failing_espeak_ng_on_a_roster_name_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    voice = _voice()
    fake = _fake_espeak(tmp_path / "bin", "exit 1")
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ.get('PATH', '')}")
    assert voice.pronounce("Dave")  # the real program, through the wrapper
    with pytest.raises(voice.VoiceError, match=f"the roster name '{MARK}'"):
        voice.pronounce(MARK)
