"""Explanations a user would catch out (issue 23 item 5), on the quoted lines, with the real
shipped model and engine."""

from __future__ import annotations

from polylogue.conversation import Utterance
from polylogue.corpora.friends import participant_for
from polylogue.engine.engine import TurnTakingEngine

PEOPLE = ["Ross Geller", "Rachel Green", "Chandler Bing", "Monica Geller", "Joey Tribbiani"]


def _active(lines: list[tuple[str, str]], target: str) -> list[str]:
    engine = TurnTakingEngine.load([participant_for(p) for p in PEOPLE])
    for speaker, text in lines:
        engine.observe(Utterance(speaker, text))
    return list(engine.decide(target).cues["active"])


def test_a_closed_sentence_does_not_end_on_a_continuer() -> None:
    for line in ("Aren't we done with that?", "Wow, it really is!"):
        active = _active([("Ross Geller", "We're done."), ("Rachel Green", line)], "Ross Geller")
        assert "ends on a continuer (and/so/um)" not in active, line
    # An open one does.
    active = _active(
        [("Ross Geller", "We're done."), ("Rachel Green", "Well we could and")], "Ross Geller"
    )
    assert "ends on a continuer (and/so/um)" in active


def test_an_exclamation_is_no_question() -> None:
    active = _active(
        [("Ross Geller", "Two for one."), ("Rachel Green", "What a deal.")], "Ross Geller"
    )
    assert not [a for a in active if "question" in a]
    active = _active(
        [("Ross Geller", "Two for one."), ("Rachel Green", "What do you mean?")], "Ross Geller"
    )
    assert "question put to the previous speaker (the target)" in active


def test_a_bare_name_answering_a_question_addresses_nobody() -> None:
    # Joey: "Who did you miss the most?" - Chandler: "Monica."
    lines = [("Joey Tribbiani", "Who did you miss the most?"), ("Chandler Bing", "Monica.")]
    assert "addressed by name" not in _active(lines, "Monica Geller")
    assert "someone else addressed by name" not in _active(lines, "Joey Tribbiani")
    # Calling her is address.
    calls = [("Joey Tribbiani", "I'm hungry."), ("Chandler Bing", "Monica.")]
    assert "addressed by name" in _active(calls, "Monica Geller")


def test_a_name_inside_a_question_to_someone_else_is_not_address() -> None:
    # Rachel to Ross (who just spoke): "Where's Chandler?"
    lines = [("Ross Geller", "Hey."), ("Rachel Green", "Where's Chandler?")]
    assert "someone else addressed by name" not in _active(lines, "Ross Geller")
    assert "addressed by name" not in _active(lines, "Chandler Bing")


def test_a_question_to_the_previous_speaker_is_not_by_name() -> None:
    # Rachel asks Ross (who just spoke) a "you" question that names nobody: for Chandler the
    # words address someone else, and not by name.
    lines = [
        ("Ross Geller", "I rewrote the whole speech last night."),
        ("Rachel Green", "what do you think"),
    ]
    active = _active(lines, "Chandler Bing")
    assert "someone else addressed by name" not in active
    assert active[0] == "question put to someone else (the previous speaker)"
