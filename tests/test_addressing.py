"""Addressing tasks (addressee, next speaker, responder) on the real chat corpora."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from polylogue.addressing import Task, evaluate_task, examples
from polylogue.addressing.baselines import make_mention, previous_speaker, same_speaker
from polylogue.cli import app
from polylogue.conversation import Conversation, Participant, Utterance
from polylogue.corpora.irc import read_irc
from polylogue.corpora.molweni import read_molweni
from polylogue.paths import corpus_dir


@pytest.fixture(scope="module")
def molweni_test() -> list[Conversation]:
    return list(read_molweni(corpus_dir("molweni"), "test"))


@pytest.fixture(scope="module")
def irc_dev_two() -> list[Conversation]:
    root = corpus_dir("ubuntu-irc-disentanglement")
    return list(read_irc(root, "dev", files=["2004-11-15_03", "2005-06-27_12"]))


def _chat(*lines: tuple[str, str, tuple[str, ...] | None]) -> Conversation:
    utts = tuple(Utterance(speaker=s, text=t, addressees=a) for s, t, a in lines)
    names = dict.fromkeys(s for s, _, _ in lines)
    return Conversation(
        id="c",
        corpus="irc",
        utterances=utts,
        participants=tuple(Participant(id=n, name=n, aliases=(n.lower(),)) for n in names),
        domain="chat",
        metadata={"reply_to": [[], [0], [1], [0]]},
    )


def test_examples_are_causal_and_gold_comes_from_annotation() -> None:
    conv = _chat(
        ("Alice", "anyone know grub?", ()),
        ("Bob", "alice what is the error", ("Alice",)),
        ("Alice", "Bob: error 17", ("Bob",)),
        ("Carol", "alice, reinstall it", ("Alice",)),
    )
    addr = list(examples([conv], Task.ADDRESSEE))
    assert [ex.index for ex in addr] == [1, 2, 3]
    # Candidates are people who wrote so far, never the speaker, never someone who writes later.
    assert addr[0].candidates == ("Alice",)
    assert addr[2].candidates == ("Alice", "Bob")
    assert addr[2].gold == {"Alice"}
    nxt = list(examples([conv], Task.NEXT_SPEAKER))
    assert [(ex.index, set(ex.gold)) for ex in nxt] == [
        (0, {"Bob"}),
        (1, {"Alice"}),
        (2, {"Carol"}),
    ]
    assert not nxt[2].gold_in_candidates  # Carol had not written yet
    resp = {ex.index: set(ex.gold) for ex in examples([conv], Task.RESPONDER)}
    assert resp == {0: {"Bob"}, 1: {"Alice"}}
    # Lower-case address without punctuation is recognised; else the previous speaker.
    mention = make_mention()
    assert mention(addr[0]) == "Alice"
    assert mention(addr[2]) == "Alice"
    assert previous_speaker(addr[2]) == "Alice" and same_speaker(nxt[0]) == "Alice"


def test_molweni_addressee_baselines(molweni_test: list[Conversation]) -> None:
    rep = evaluate_task(molweni_test, Task.ADDRESSEE, "molweni/test")
    # Every EDU after the first with a relation to someone else's EDU is an example.
    expected = sum(
        1 for c in molweni_test for u in c.utterances[1:] if u.addressees and u.text.strip()
    )
    assert rep.n_examples == expected and rep.n_conversations == 500
    by = {s.predictor: s for s in rep.scores}
    assert by["previous-speaker"].p_at_1 > by["chance"].p_at_1 + 0.05
    for s in rep.scores:
        assert s.ci_low <= s.p_at_1 <= s.ci_high and s.n == rep.n_examples


def test_irc_mentions_beat_previous_speaker(irc_dev_two: list[Conversation]) -> None:
    rep = evaluate_task(irc_dev_two, Task.ADDRESSEE, "irc/dev")
    by = {s.predictor: s.p_at_1 for s in rep.scores}
    # In a busy channel, the nick prefix is the main cue (Kummerfeld et al. 2019).
    assert by["mention"] > by["previous-speaker"] + 0.2
    assert by["chance"] < 0.05
    assert rep.mean_candidates > 50


def test_cli_writes_reports(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app,
        [
            "addressing",
            "--corpus",
            "molweni",
            "--split",
            "dev",
            "--task",
            "next-speaker",
            "--limit-conversations",
            "40",
            "--out",
            str(tmp_path),
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "report.json").read_text())
    assert data[0]["task"] == "next-speaker" and data[0]["n_conversations"] == 40
    assert "| previous-speaker |" in (tmp_path / "report.md").read_text()
    bad = CliRunner().invoke(app, ["addressing", "--corpus", "molweni", "--split", "train"])
    assert bad.exit_code == 2


def test_turn_taking_model_ranks_next_speakers(molweni_test: list[Conversation]) -> None:
    from polylogue.addressing.model import turn_taking_ranker

    convs = molweni_test[:60]
    exs = list(examples(convs, Task.NEXT_SPEAKER))
    rank = turn_taking_ranker(exs)
    preds = [rank(ex) for ex in exs]
    # Always someone present other than the author, and well above a uniform guess.
    assert all(
        p is None or (p in ex.candidates and p != ex.current.speaker)
        for p, ex in zip(preds, exs, strict=True)
    )
    rep = evaluate_task(convs, Task.NEXT_SPEAKER, "molweni/test", {"model": rank})
    by = {s.predictor: s.p_at_1 for s in rep.scores}
    assert by["model"] > by["chance"] + 0.05
    with pytest.raises(ValueError, match="not addressees"):
        turn_taking_ranker(list(examples(convs, Task.ADDRESSEE)))
