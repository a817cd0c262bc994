"""A voice meeting through a real Pipecat pipeline: espeak-ng speech on one track per
participant, Silero VAD, the pocketsphinx STT service, the polylogue gate, espeak-ng TTS.

Without the espeak-ng program (or the voice extra) the tests skip with a message, except in
CI (``CI=true``), where they fail so that a missing install is caught.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from polylogue.conversation import Conversation, Participant, Utterance

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def _need(ok: bool, what: str) -> None:
    if ok:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{what} is missing in CI: scripts/setup.sh test installs it")
    pytest.skip(f"{what} is not installed (scripts/setup.sh test installs it)")


def _voice():  # type: ignore[no-untyped-def]
    try:
        from polylogue.adapters import voice
    except ImportError:
        _need(False, "the voice extra (pip install 'polylogue[voice]')")
    _need(voice.espeak_path() is not None, "the espeak-ng program (apt-get install espeak-ng)")
    return voice


def _meeting() -> Conversation:
    people = (Participant("alice", "Alice"), Participant("bob", "Bob"), Participant("dave", "Dave"))
    lines = [
        ("alice", "the budget is due on friday"),
        ("bob", "dave can you check the logs"),
        ("dave", "sure i will look at them"),
        ("alice", "thank you"),
    ]
    utts = tuple(Utterance(who, text, id=f"u{i}") for i, (who, text) in enumerate(lines))
    return Conversation("voice-test", "test", utts, people, roster_known=True)


@pytest.fixture(scope="module")
def always_speak():  # type: ignore[no-untyped-def]
    """The shipped model with a floor threshold of 0: every decision is SPEAK, so each
    recognised line must give a reply."""
    _voice()
    from polylogue.engine.deployment import Deployment

    return Deployment.resolve(threshold=0.0)


def test_recognised_speech_reaches_the_gate_and_replies_follow_in_order(always_speak) -> None:  # type: ignore[no-untyped-def]
    voice = _voice()
    conv = _meeting()
    m = asyncio.run(
        voice.run_voice_meeting(
            conv, "dave", reply="okay", deployment=always_speak, decision_timeout_s=60.0
        )
    )
    humans = [x for x in m.timeline]
    assert [x[1] for x in humans] == ["alice", "bob", "alice"]
    # every decision is on recognised words of the line's speaker, in the order spoken
    assert m.rows and all(r.recognised for r in m.rows)
    assert [r.reference_index[0] for r in m.rows] == sorted(r.reference_index[0] for r in m.rows)
    assert {r.reference_index[0] for r in m.rows} <= {0, 1, 3}
    assert all(r.action == "SPEAK" for r in m.rows)
    assert len(m.decisions) == len(m.rows)
    # the gate observed the recognised text, not the reference
    heard = [text for who, text in m.observed if who != "dave"]
    assert heard == [r.recognised for r in m.rows]
    # each SPEAK was answered by the agent's voice after the speech ended: the reply to
    # Bob is the agent's own next line, the others the stock reply
    assert len(m.agent_said) == len(m.rows)
    for row, (text, start) in zip(m.rows, m.agent_said, strict=True):
        assert start >= row.end
        expected = "sure i will look at them" if row.reference_index == [1] else "okay"
        assert text.lower().strip(".") == expected
    starts = [s for _, s in m.agent_said]
    assert starts == sorted(starts)
    # and the agent's words were observed as its turns, between the humans' lines
    said = [text for who, text in m.observed if who == "dave"]
    assert [t.lower().strip(".") for t in said][: len(m.rows)] == [
        t.lower().strip(".") for t, _ in m.agent_said
    ]
    # the mix holds every voice: at least as long as the last agent clip's start
    assert len(m.mix) / voice.SAMPLE_RATE > starts[-1]
    for r in m.rows:
        assert r.latency_ms >= r.vad_wait_ms + r.recognition_ms


def test_roster_names_missing_from_the_dictionary_get_pronunciations(tmp_path: Path) -> None:
    voice = _voice()
    # ids like "p1" are no words a person says; names and aliases are
    assert voice.hint_words([Participant("p1", "Zorblax Quinn", aliases=("Zee",))]) == [
        "zorblax",
        "quinn",
        "zee",
    ]
    assert voice.pronounce("zorblax")[:2] == ["Z", "AO"]
    rec = voice.Recognizer(["zorblax", "dave"], cache_dir=tmp_path)
    assert "zorblax" in rec.added and "dave" not in rec.added  # dave is in the dictionary
    pcm = voice.synthesize("the budget is due on friday", voice.HUMAN_VOICES[0]).tobytes()
    r = rec.recognize(pcm)
    again = rec.recognize(pcm)  # from the cache: the same words and the measured decode time
    assert again == r and len(list(tmp_path.glob("*.json"))) == 1
    assert r.text and r.seconds > 0


def test_roster_terms_are_the_names_people_say() -> None:
    from polylogue.adapters import roster_terms

    people = [
        Participant("p1", "Dave Smith", aliases=("Davey",)),
        Participant("u-7f3a"),  # a transport id, no name
        Participant("ALL", "ALL"),  # a chorus line
        Participant("anna", "Anna"),
    ]
    assert roster_terms(people) == ["Dave Smith", "Davey", "Anna"]


def test_example_writes_the_wav_and_decisions(tmp_path: Path) -> None:
    _voice()
    import subprocess
    import sys
    import wave

    path = tmp_path / "meeting.jsonl"
    lines = [
        {"participants": [{"id": "alice"}, {"id": "dave"}], "domain": "meeting"},
        {"speaker": "alice", "text": "dave what do you think"},
        {"speaker": "dave", "text": "i think it is fine"},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(
        [sys.executable, "examples/voice_meeting.py", str(path), "--as", "dave", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [json.loads(x) for x in (out / "decisions.jsonl").read_text().splitlines()]
    assert rows and rows[0]["speaker"] == "alice" and rows[0]["recognised"]
    assert set(rows[0]) >= {"reference", "action", "p_speak", "latency_ms", "recognition_ms"}
    with wave.open(str(out / "meeting.wav")) as w:
        assert w.getframerate() == 16000 and w.getnframes() > 16000
    bad = subprocess.run(
        [sys.executable, "examples/voice_meeting.py", str(path), "--as", "zed", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "Traceback" not in bad.stderr
