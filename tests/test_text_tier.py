"""The text tier's input rendering on real conversations, and its loading rules.

The rendering is what the fine-tuned text model was trained on: training renders benchmark
points (``render_point``), the live engine renders its own recent utterances
(``live_pairs``); the two must agree exactly, or the model reads text unlike its training.
"""

from __future__ import annotations

import itertools

import pytest

from polylogue.conversation import Participant, Utterance
from polylogue.corpora import load_corpus
from polylogue.errors import PolylogueInputError
from polylogue.training.engine_models.text_tier import (
    CURRENT_WORDS,
    EARLIER_WORDS,
    MAX_TURNS,
    TARGET_TOKEN,
    TextTier,
    TextTierUnavailable,
    live_pairs,
    load_engine,
    recent_turns,
    render_point,
)


@pytest.fixture(scope="module")
def molweni_dialogues(data_root):
    return list(itertools.islice(load_corpus("molweni", data_root / "molweni"), 40))


def test_recent_turns_merge_speakers_and_keep_the_last_words() -> None:
    utts = [
        Utterance("a", "one two three"),
        Utterance("b", "hello"),
        Utterance("b", " ".join(f"w{i}" for i in range(50))),
        Utterance("c", "ok"),
    ]
    turns = recent_turns(utts, max_turns=2)
    assert [t.speaker for t in turns] == ["b", "c"]
    # b's two utterances are one turn; only its last CURRENT_WORDS words are kept.
    assert turns[0].words[-1] == "w49" and len(turns[0].words) == CURRENT_WORDS
    assert recent_turns(utts)[0].words == ("one", "two", "three")


def test_render_marks_the_target_and_puts_the_newest_turn_first(molweni_dialogues) -> None:
    checked = 0
    for conv in molweni_dialogues:
        speakers = list(dict.fromkeys(u.speaker for u in conv.utterances))
        if len(speakers) < 3:
            continue
        people = {p.id: p for p in conv.participants}
        ctx = conv.utterances[:4]
        target = people[ctx[-2].speaker] if ctx[-2].speaker != ctx[-1].speaker else None
        if target is None:
            continue
        header, body = render_point(ctx, target, conv.participants)
        assert header.startswith(f"{TARGET_TOKEN} {target.display_name}")
        turns = body.split(" | ")
        assert len(turns) <= MAX_TURNS
        # Newest first: the current speaker's label opens the body; the target's turn is marked.
        assert turns[0].startswith(f"{ctx[-1].speaker} : ")
        assert turns[1].startswith(f"{TARGET_TOKEN} : ")
        assert all(len(t.split(" : ", 1)[1].split()) <= EARLIER_WORDS for t in turns[1:])
        checked += 1
    assert checked >= 5


def test_live_rendering_equals_training_rendering(molweni_dialogues) -> None:
    """The engine's inputs at each pause are byte-identical to the benchmark point's."""
    compared = 0
    for conv in molweni_dialogues[:15]:
        roster = {p.id: p for p in conv.participants}
        for k in range(1, len(conv.utterances) + 1):
            ctx = conv.utterances[:k]
            targets = [pid for pid in roster if pid != ctx[-1].speaker]
            live = live_pairs(ctx, roster, targets)
            train = [render_point(ctx, roster[t], conv.participants) for t in targets]
            assert live == train
            compared += len(targets)
    assert compared > 100


def test_render_of_a_lower_case_vocative_keeps_the_name() -> None:
    dave, carol, alice = (
        Participant("dave", "Dave"),
        Participant("carol", "Carol"),
        Participant("alice", "Alice"),
    )
    roster = {p.id: p for p in (dave, carol, alice)}
    ctx = [Utterance("dave", "the job failed again"), Utterance("alice", "dave, can you check?")]
    (h_dave, b_dave), (h_carol, b_carol) = live_pairs(ctx, roster, ["dave", "carol"])
    assert h_dave.startswith("[TARGET] Dave") and h_carol.startswith("[TARGET] Carol")
    assert b_dave == "Alice : dave, can you check? | [TARGET] : the job failed again"
    assert b_carol == "Alice : dave, can you check? | Dave : the job failed again"


def test_unknown_tier_is_a_clear_input_error() -> None:
    with pytest.raises(PolylogueInputError, match="unknown tier 'slow'; choose one of fast, text"):
        load_engine(tier="slow")


def test_fast_tier_is_the_default_engine() -> None:
    from polylogue.engine.engine import TurnTakingEngine

    engine = load_engine()
    assert type(engine) is TurnTakingEngine


def test_a_folder_without_a_text_tier_fails_clearly(tmp_path) -> None:
    with pytest.raises(TextTierUnavailable, match="no text tier here"):
        TextTier.load(tmp_path)
    # None is shipped: asking for the text tier without a folder says so.
    with pytest.raises(TextTierUnavailable, match="no text tier is shipped"):
        load_engine(tier="text")
