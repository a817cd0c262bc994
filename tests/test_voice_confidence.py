"""Word confidences read by the address verdict: a word a recognizer wrote with a low
probability may be a roster name it misheard (``Utterance.unsure``,
``polylogue.turntaking.sounds``).

The recognizer tests run Whisper tiny.en on the bundled piper voice (the voice extra); the
verdict tests run the shipped address model on real recognizer output
(``benchmarks/probes/names_heard_words.jsonl``, ``names_heard_talk.jsonl``).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from polylogue.conversation import Conversation, Participant, Utterance

ROOT = Path(__file__).resolve().parents[1]


def _neural():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_voice import _neural as need

    return need()


def _room(*names: str):  # type: ignore[no-untyped-def]
    from polylogue.adapters import start_live
    from polylogue.adapters.room import RoomTracker

    people = [Participant(n.lower(), n) for n in names]
    live, _ = start_live(names[0].lower(), people)
    return RoomTracker(live)


def _addressed(room, speaker: str, text: str, unsure: tuple[str, ...] = ()) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    """Who the live verdict on ``text`` addresses, through the front ends' room."""
    assert room.final(speaker, text, unsure=unsure) is not None
    return room.live.engine.state.verdict().addressees


def test_an_unsure_word_may_be_a_roster_name_a_sure_one_is_not() -> None:
    """Real recognizer mishearings of roster names (names_heard): written with confidence
    they stay words; unsure, they are matched to the name the speaker said."""
    # "yes man" for Yasmin: two everyday words never join into a name when written surely
    room = _room("Yasmin", "Bob", "Carol")
    line = "yes man can you send me the figures"
    assert _addressed(room, "bob", line) == ()
    room = _room("Yasmin", "Bob", "Carol")
    assert _addressed(room, "bob", line, unsure=("yes", "man")) == ("yasmin",)
    # a word the recognizer was sure of is read as written, however near a name it sounds
    room = _room("Yasmin", "Bob", "Carol")
    assert _addressed(room, "bob", line, unsure=("can",)) == ()


def test_unsure_words_near_no_roster_name_call_no_one() -> None:
    room = _room("Yasmin", "Bob", "Carol")
    line = "well this is the kickoff meeting for our project"
    assert _addressed(room, "bob", line, unsure=("well", "this", "kickoff")) == ()


@pytest.mark.slow
def test_whisper_word_confidences_give_the_unsure_words() -> None:
    voice = _neural()
    from polylogue.adapters.voice.recognition import UNSURE_BELOW, unsure_words

    pcm = voice.PiperVoice().speak("Adeniyi, can you send me the figures?").tobytes()
    r = voice.WhisperRecognizer(word_confidence=True).recognize(pcm)
    assert r.words and all(0.0 <= p <= 1.0 for _, p in r.words)
    everything = unsure_words(r.words, 1.01)
    assert "figures" in everything and "send" in everything
    assert r.unsure(0.0) == ()
    low = {w.lower().strip(",.?!") for w, p in r.words if p < UNSURE_BELOW}
    assert set(r.unsure()) == {x for w in low for x in w.split()}
    # without word confidences a recognition has no words to doubt
    assert voice.WhisperRecognizer().recognize(pcm).unsure() == ()


@pytest.mark.slow
def test_unsure_words_reach_the_gate_through_the_pipeline() -> None:
    """A voice meeting with word confidences: every decision row carries the words the
    recognizer was unsure of, and only words it wrote."""
    voice = _neural()
    people = (Participant("alice", "Alice"), Participant("bob", "Bob"), Participant("dave", "Dave"))
    lines = [("alice", "the budget is due on friday"), ("bob", "dave can you check the logs")]
    utts = tuple(Utterance(who, text, id=f"u{i}") for i, (who, text) in enumerate(lines))
    conv = Conversation("confidence-test", "test", utts, people, roster_known=True)
    m = asyncio.run(
        voice.run_voice_meeting(
            conv, "dave", reply=None, word_confidence=True, decision_timeout_s=60.0
        )
    )
    assert m.rows
    for row in m.rows:
        assert row.unsure is not None
        assert set(row.unsure) <= set(row.recognised.lower().replace(",", " ").split()) | {
            w.strip(".?!") for w in row.recognised.lower().split()
        }
        assert "unsure" in row.to_dict()
    # and without them the rows say nothing about confidences
    plain = asyncio.run(voice.run_voice_meeting(conv, "dave", reply=None, decision_timeout_s=60.0))
    assert plain.rows and all(r.unsure is None and "unsure" not in r.to_dict() for r in plain.rows)


@pytest.fixture(scope="module")
def names_heard():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import names_heard

    return names_heard


def test_confidences_find_misheard_names_on_the_development_half(names_heard) -> None:  # type: ignore[no-untyped-def]
    """On real tiny.en recordings (the development half only), reading the confidences finds
    at least the misheard names the words alone find, and costs few false merges on
    recordings of everyday meeting talk and on names off the roster."""
    nh = names_heard
    recs = nh.read(nh.WORDS_FILE)
    assert all(r.words for r in recs) and {r.split for r in recs} == {"dev", "test"}
    dev = [r for r in recs if r.split == "dev"]
    heard_talk = nh.read_talk(nh.TALK_FILE)
    assert len(heard_talk) >= 100
    from polylogue.adapters.voice.recognition import UNSURE_BELOW

    words = nh.score(dev, heard_talk=heard_talk)
    both = nh.score(dev, unsure_below=UNSURE_BELOW, heard_talk=heard_talk)
    assert both["misheard"] == words["misheard"] >= 80
    assert both["misheard_found"] >= words["misheard_found"] + 0.05
    assert both["misheard_wrong_person"] <= words["misheard_wrong_person"]
    assert both["spelt_right_found"] >= words["spelt_right_found"]
    assert both["heard_talk_false_merges"] <= 0.05
    assert both["off_roster_merges"] <= 0.1
