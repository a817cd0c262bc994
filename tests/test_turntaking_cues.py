"""Rules that define addressed / referenced / filler, on hand-written utterances."""

from __future__ import annotations

import pytest

from polylogue.conversation import Conversation, Participant, Utterance
from polylogue.turntaking.cues import (
    build_matchers,
    is_filler_only,
    is_too_short,
    looks_incomplete,
    utterance_cues,
)
from polylogue.turntaking.points import PointOptions, conversation_points
from polylogue.turntaking.types import Category, Decision

PEOPLE = (
    Participant("A", "Alice", "project manager"),
    Participant("B", "Bob", "marketing expert"),
    Participant("W", "Will"),
    Participant("D"),  # no name: a bare one-letter id must never be matched
)


def cues(text: str, speaker: str = "A", cased: bool = True, addressees=None, note=None):
    m = build_matchers(PEOPLE, cased)
    return utterance_cues(Utterance(speaker, text, addressees=addressees, note=note), m)


@pytest.mark.parametrize(
    "text",
    [
        "Bob, can you check?",
        "Okay Bob. Next slide.",
        "What do you think, Bob?",
        "Thanks Bob!",
        "Bob?",
        "so. Bob, what's the status",
    ],
)
def test_vocatives_address(text: str) -> None:
    assert cues(text).addressed == {"B": "vocative"}


@pytest.mark.parametrize(
    "text",
    ["I told Bob about it yesterday.", "Bob said the budget is fine.", "as Bob's slides show"],
)
def test_third_person_mentions_reference_not_address(text: str) -> None:
    c = cues(text)
    assert c.addressed == {}
    assert c.referenced == {"B": "name"}


def test_role_mention_is_a_reference() -> None:
    c = cues("The marketing expert will present the trends.")
    assert c.referenced == {"B": "role"} or c.referenced.get("B") == "name"
    assert "B" not in c.addressed


def test_single_letter_ids_never_match_words() -> None:
    # "a" the article and "d" must never mention participants A or D.
    c = cues("We need a design and a d-pad, I'd say.", speaker="B")
    assert c.addressed == {} and c.referenced == {}


def test_case_aware_names_in_cased_transcripts() -> None:
    assert "W" not in cues("It will be fine.", speaker="A").referenced
    assert cues("Will, it will be fine.", speaker="A").addressed == {"W": "vocative"}


def test_common_word_names_are_ignored_in_lowercase_transcripts() -> None:
    assert cues("it will be fine", cased=False).referenced == {}
    assert cues("bob can you check", cased=False).referenced == {"B": "name"}


def test_annotation_wins_over_vocative_guess() -> None:
    c = cues("Bob, and Will, listen.", addressees=("W",))
    assert c.addressed == {"W": "annotation"}
    assert c.referenced == {"B": "name"}
    note = cues("Sure.", addressees=("B",), note="(to Bob)")
    assert note.addressed == {"B": "note"}


@pytest.mark.parametrize("text", ["um", "Uh-huh.", "mm-hmm", "Hmm...", "uh, um", "Mm."])
def test_fillers(text: str) -> None:
    assert is_filler_only(text)


@pytest.mark.parametrize("text", ["yeah", "okay", "um, yes", "right."])
def test_not_fillers(text: str) -> None:
    assert not is_filler_only(text)


def test_short_and_incomplete() -> None:
    assert is_too_short("Ok.")  # two characters after punctuation removal
    assert is_too_short("O.k.")
    assert not is_too_short("yes")
    assert looks_incomplete("so we could maybe...")
    assert looks_incomplete("I think that the")
    assert not looks_incomplete("I think that is the right plan.")


def test_points_categories_and_causal_presence() -> None:
    conv = Conversation(
        id="demo",
        corpus="demo",
        participants=PEOPLE[:3],
        utterances=(
            Utterance("A", "Okay, let's start. Bob, how did the test go?"),
            Utterance("B", "It went fine, I think Will has the numbers."),
            Utterance("W", "Yes, a dozen failures in total."),
            Utterance("A", "Thanks Will. Can you send them round?"),
            Utterance("W", "Sure, I'll do it today."),
        ),
        roster_known=False,
    )
    # The first utterance has no earlier context: dropped by default (as in the paper).
    assert "demo:0:B" not in {p.point_id for p in conversation_points(conv)}
    pts = {p.point_id: p for p in conversation_points(conv, PointOptions(keep_no_context=True))}
    # Bob is addressed at t=0 and answers: I1 (presence established by the vocative).
    assert pts["demo:0:B"].gold.category is Category.I1
    # Will is talked about at t=1 but has not spoken or been addressed: not yet present.
    assert "demo:1:W" not in pts
    # t=2: Will spoke; Alice speaks next without being addressed: I2.
    assert pts["demo:2:A"].gold.category is Category.I2
    # t=3: Will addressed by "Thanks Will." and answers.
    assert pts["demo:3:W"].gold.label is Decision.SPEAK
    assert pts["demo:3:W"].gold.category is Category.I1
    # No point ever contains its own next utterance in its context.
    for p in pts.values():
        assert len(p.input.context) == p.index + 1
        assert p.input.current.text == conv.utterances[p.index].text


def test_referenced_but_silent_is_s2() -> None:
    conv = Conversation(
        id="c",
        corpus="demo",
        participants=PEOPLE[:3],
        utterances=(
            Utterance("B", "Morning all."),
            Utterance("W", "Morning."),
            Utterance("A", "Bob's numbers look odd, Will."),
            Utterance("W", "I'll look at them."),
        ),
    )
    pts = {p.point_id: p for p in conversation_points(conv)}
    assert pts["c:2:B"].gold.category is Category.S2
    assert pts["c:2:B"].gold.reference_evidence == "name"
    assert pts["c:2:W"].gold.category is Category.I1


def test_shared_first_names_resolve_to_the_latest_speaker() -> None:
    people = (
        Participant("1", "Brian Smith"),
        Participant("2", "Brian Jones"),
        Participant("3", "Ann Lee"),
    )
    m = build_matchers(people, cased=True)
    u = Utterance("3", "Thanks, Brian. Next question please.")
    assert utterance_cues(u, m, last_spoke={"1": 4, "2": 9}).addressed == {"2": "vocative"}
    assert utterance_cues(u, m, last_spoke={"1": 12, "2": 9}).addressed == {"1": "vocative"}
    # A full name is unique and needs no recency.
    assert utterance_cues(Utterance("3", "Over to Brian Smith."), m).referenced == {"1": "name"}
