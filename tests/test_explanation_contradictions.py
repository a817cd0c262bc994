"""No reason contradicts its action: one path from the address verdict and the thresholds to the
reason, in ``LiveConversation``, ``decide``'s plain and ``--json`` output.

The whole test splits run in ``benchmarks/explanation_contradictions.py`` (minutes); here a
sample of each corpus's test split (the first conversation or a few, cut short), both
renderings, every role and operating point and both audiences, through the same audit.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from dataclasses import replace

import pytest
from cli_run import polylogue_process, run_polylogue

from polylogue.conversation import Conversation, Participant
from polylogue.corpora import load_corpus
from polylogue.engine.deployment import Action, Reason, Thresholds
from polylogue.engine.explanation import PauseValues, contradictions, explain
from polylogue.evaluation.explanations import (
    AuditCounts,
    agents_of,
    audit_conversation,
    deployments,
)
from polylogue.rendering import RENDERINGS
from polylogue.turntaking.address import NameTerms, PriorTurn, address_verdict
from polylogue.turntaking.dataset import reader_options
from polylogue.turntaking.dataset.assign import published_splits


def _cut(conv: Conversation, n: int) -> Conversation:
    return replace(conv, utterances=conv.utterances[:n])


def _test_split(corpus: str, options: dict, count: int) -> list[Conversation]:
    groups = published_splits()["splits"][corpus]
    convs = (
        c
        for c in load_corpus(corpus, **reader_options(corpus), **options)
        if groups.get(c.group_id) == "test"
    )
    return list(itertools.islice(convs, count))


def _sample() -> list[tuple[Conversation, int | None]]:
    """(conversation, agents) from the test split of every corpus."""
    ami = _test_split("ami", {"meetings": ["ES2009a"]}, 1)
    icsi = _test_split("icsi", {"meetings": ["Bed011"]}, 1)
    calls = _test_split("earnings21", {"calls": ["4341191"]}, 1)
    friends = _test_split("friends", {"seasons": [1]}, 6)
    molweni = _test_split("molweni", {}, 25)
    irc = list(itertools.islice(load_corpus("irc", splits="test"), 1))
    return [
        (_cut(ami[0], 260), None),
        (_cut(icsi[0], 200), None),
        (_cut(calls[0], 60), None),
        *((c, None) for c in friends),
        *((c, None) for c in molweni),
        (_cut(irc[0], 250), 2),
    ]


@pytest.fixture(scope="module")
def audit() -> AuditCounts:
    counts = AuditCounts()
    deps: dict[str | None, dict] = {}
    for conv, agents in _sample():
        if conv.domain not in deps:
            deps[conv.domain] = deployments(conv.domain)
        for rendering in RENDERINGS:
            audit_conversation(conv, rendering, deps[conv.domain], counts, agents_of(conv, agents))
    return counts


def test_no_reason_contradicts_its_action_on_the_test_splits(audit: AuditCounts) -> None:
    corpora = {c for c, _, _ in audit.decisions}
    assert corpora == {"ami", "icsi", "earnings21", "friends", "molweni", "irc"}
    assert {r for _, r, _ in audit.decisions} == set(RENDERINGS)
    assert len({k for _, _, k in audit.decisions}) == 14  # 7 roles and points x 2 audiences
    assert sum(audit.decisions.values()) > 20_000
    assert audit.total == 0, audit.examples[:3]


def test_the_sample_reaches_every_reason(audit: AuditCounts) -> None:
    """The audit sees each reason a pause can have (else it would check nothing there)."""
    seen: Counter[str] = Counter()
    for (*_, code), n in audit.reasons.items():
        seen[code] += n
    pause_reasons = set(Reason) - {Reason.LONG_SILENCE, Reason.COOLDOWN}
    assert {r.value for r in pause_reasons} <= set(seen), seen


# ----------------------------------------------------------------------------- the checker

PEOPLE = (Participant("dave", "Dave"), Participant("anna", "Anna"), Participant("bob", "Bob"))
NAMES = NameTerms.of(PEOPLE)
POINT = Thresholds(take_floor=0.3, backchannel=0.5, backchannel_margin=1.0)


def _values(text: str, p: float, prior: PriorTurn | None = None, **kw) -> PauseValues:
    verdict = address_verdict(text, "bob", NAMES, prior)
    return PauseValues(
        target="dave",
        p_speak=p,
        p_backchannel=0.0,
        thresholds=kw.pop("thresholds", POINT),
        addressed="dave" in verdict.addressees,
        verdict=verdict,
        **kw,
    )


def _row(v: PauseValues) -> dict:
    why = explain(v)
    return {
        "action": why.action.value,
        "suggested": why.suggested.value,
        "reason": why.text,
        "reason_code": why.reason.value,
        "p_speak": v.p_speak,
        "threshold": why.threshold,
        "addressed": v.addressed,
    }


def test_an_address_below_the_threshold_says_it_overrides_it() -> None:
    row = _row(_values("dave can you check the logs", 0.06))
    assert row["action"] == "SPEAK" and row["reason_code"] == "address-overrides-threshold"
    assert "overrides the threshold" in row["reason"] and "0.06 < threshold 0.30" in row["reason"]
    assert contradictions(row, addressed_only=False) == []
    # What the issue saw: the address alone, P far below the threshold.
    assert "override-unsaid" in contradictions(
        {**row, "reason": "addressed by name", "reason_code": None}, addressed_only=False
    )


def test_a_speak_never_says_someone_else_was_addressed() -> None:
    # The words address Anna; the threshold alone makes the SPEAK.
    row = _row(_values("anna can you check the logs", 0.45))
    assert row["action"] == "SPEAK" and row["reason_code"] == "above-threshold"
    assert "anna" not in row["reason"].lower() and "someone else" not in row["reason"]
    assert contradictions(row, addressed_only=False) == []
    bad = {**row, "reason": "someone else addressed by name, target held the floor just before"}
    assert "speak-says-someone-else" in contradictions(bad, addressed_only=False)
    # Below the threshold the same words are the reason to keep quiet, and say so.
    quiet = _row(_values("anna can you check the logs", 0.1))
    assert quiet["action"] == "SILENT" and "the words address anna (by name" in quiet["reason"]


def test_a_question_to_the_previous_speaker_is_no_name() -> None:
    prior = PriorTurn("anna", "I rewrote the deploy script last week.")
    row = _row(_values("what do you think", 0.1, prior))
    assert "by name" not in row["reason"]
    assert "the words address anna (a question right after they spoke" in row["reason"]


def test_the_address_gate_says_it_held_a_speak_back() -> None:
    row = _row(_values("the build is green again", 0.45, addressed_only=True))
    assert row["action"] == "SILENT" and row["reason_code"] == "address-gate"
    assert row["reason"].startswith("address gate: not addressed")
    assert contradictions(row, addressed_only=True) == []
    assert "gate-unsaid" in contradictions(
        {**row, "reason": "target held the floor just before", "reason_code": None}, True
    )


def test_one_to_one_and_the_observer_say_what_they_are() -> None:
    row = _row(_values("the build is green again", 0.05, one_to_one=True))
    assert row["action"] == "SPEAK" and row["reason"] == "one-to-one: the only other person present"
    assert contradictions(row, addressed_only=False) == []
    # The plain tag the issue saw on such a SPEAK: a cue that argues for silence.
    assert "speak-with-a-reason-against" in contradictions(
        row, False, text="target has not spoken yet, utterance trails off or is very short"
    )
    observer = _row(_values("dave can you check the logs", 0.9, speaks=False))
    assert (observer["action"], observer["suggested"]) == ("SILENT", "SPEAK")
    assert observer["reason"].startswith('observer (would SPEAK: addressed by name ("dave can')
    assert contradictions(observer, addressed_only=False) == []


def test_a_reason_code_must_hold_on_its_values() -> None:
    row = _row(_values("the build is green again", 0.45))
    assert contradictions({**row, "reason_code": "below-threshold"}, False) == [
        "code-gives-another-action",
        "code-below-threshold-false",
    ]
    assert explain(_values("the build is green again", 0.45)).action is Action.SPEAK


# ----------------------------------------------------------------------------- decide

#: Two people at first (Dave and Anna), then Bob: a one-to-one room that becomes a group.
TRANSCRIPT = """Anna: Should I look at the deploy logs this morning?
Dave: They were fine yesterday.
Anna: the migration step timed out again
Bob: Dave, can you check the logs?
Anna: what do you think
Bob: Anna, is the budget done?
Anna: Yes it is.
Bob: So where are we with the release?
"""


@pytest.mark.parametrize(
    "options",
    [[], ["--role", "assistant"], ["--role", "observer"], ["--audience", "adaptive"]],
    ids=["matched", "assistant", "observer", "adaptive"],
)
def test_decide_plain_and_json_give_one_reason(options: list[str]) -> None:
    args = ["decide", "-", "--as", "Dave", *options]
    # The plain output as a piped user sees it: a real process for one case, in-process else.
    run = polylogue_process if not options else run_polylogue
    plain = run(args, stdin=TRANSCRIPT).stdout.decode()
    rows = [
        json.loads(x)
        for x in run_polylogue([*args, "--json"], stdin=TRANSCRIPT).stdout.decode().splitlines()
    ]
    lines = [x for x in plain.splitlines() if x[:1].isdigit()]
    gated = options == ["--role", "assistant"]
    decided = 0
    for line, row in zip(lines, rows, strict=True):
        if row["decision"] is None:
            continue
        decided += 1
        assert line.endswith(f"({row['reason']})"), (line, row)
        tag = line.rsplit("\t| ", 1)[1]
        assert contradictions(row, gated) == [], row
        assert contradictions(row, gated, text=tag) == [], line
    assert decided >= 5
    by_index = {r["index"]: r for r in rows}
    assert by_index[3]["decision"] in ("SPEAK", "SILENT")  # Bob to Dave
    assert by_index[3]["suggested"] == "SPEAK" and "addressed by name" in by_index[3]["reason"]
    if gated:
        assert any(r.get("reason_code") == "address-gate" for r in rows), rows
        assert any("address gate: not addressed" in x for x in lines), plain
    if options == ["--audience", "adaptive"]:
        # Alone with Anna: her question is answered, and the reason says why.
        assert by_index[0]["reason"] == "one-to-one: the only other person present"
        assert by_index[0]["decision"] == "SPEAK"
