"""The real-time decision engine: observe utterances as they end, decide at the pause.

>>> engine = TurnTakingEngine.load()                                # doctest: +SKIP
>>> engine.observe(Utterance("alice", "Bob, can you take that?"))   # doctest: +SKIP
>>> engine.decide("bob").p_speak                                    # doctest: +SKIP
0.93

``observe`` does the per-utterance work (text analysis, turn-yield score, speaker statistics)
while the next speaker is still talking; ``decide`` only assembles one feature row from
counters and runs the trees, so its cost does not grow with the length of the meeting. The engine
returns probabilities only: thresholds and actions belong to the deployment
(:mod:`polylogue.engine.deployment`) and the live policy (:mod:`polylogue.engine.live`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from polylogue.conversation import GROUP_ROLE, Participant, Utterance
from polylogue.engine.blocks import BlockState
from polylogue.engine.features import (
    FEATURE_NAMES,
    N_FEATURES,
    SPOKEN,
    ConversationState,
    Spoken,
)
from polylogue.engine.model import TurnTakingModel, load_model
from polylogue.turntaking.address import NO_ADDRESS, AddressVerdict

#: Readable phrases for binary features that, when set, explain a decision.
CUE_PHRASES: dict[str, str] = {
    "target_vocative": "addressed by name",
    "target_mention_third_person": "named in the third person",
    "target_mentioned": "named",
    "other_vocative": "someone else addressed by name",
    "question_to_prev_target": "question put to the previous speaker (the target)",
    "second_person_to_prev_target": "'you' right after the target spoke",
    "question_to_nobody_named": "open question, nobody named",
    "target_is_prev_turn_speaker": "target held the floor just before",
    # looks_incomplete(): trailing off, cut off, or two words at most.
    "incomplete": "utterance trails off or is very short",
    "trailing_continuer": "ends on a continuer (and/so/um)",
    "acknowledgement": "short acknowledgement",
    "group_address": "addressed to the group",
    "target_vocative_prev": "addressed by name one utterance earlier",
    "target_never_spoke": "target has not spoken yet",
    # Not features: how the address verdict puts the turn to someone else without a name.
    "other_follow_up": "question put to someone else (the previous speaker)",
    "other_vocative_prev": "someone else addressed one utterance earlier",
    "dyad_question": "a question in a two-person room (the target is the other person)",
    "other_dyad_question": "a question in a two-person room, to the other person",
    "off_roster": "someone off the roster called (a term of address, not a name)",
}


_QUESTION_CUES = frozenset({"question_to_prev_target", "question_to_nobody_named"})
#: Cues about address: the address verdict says these, not the feature row (the row keeps the
#: features the model was trained on, which read punctuation and capitals).
_ADDRESS_CUES = frozenset(
    {
        "target_vocative",
        "target_mention_third_person",
        "target_mentioned",
        "other_vocative",
        "question_to_prev_target",
        "second_person_to_prev_target",
        "question_to_nobody_named",
        "target_vocative_prev",
    }
)


def address_phrase(verdict: AddressVerdict, target: str) -> str | None:
    """The one explanation of the target's address at this pause (a ``CUE_PHRASES`` value)."""
    mine = verdict.of(target)
    if mine is not None:
        if mine.kind == "follow-up":
            return CUE_PHRASES["question_to_prev_target"]
        if mine.kind == "you-after":
            return CUE_PHRASES["second_person_to_prev_target"]
        if mine.kind == "earlier-in-turn":
            return CUE_PHRASES["target_vocative_prev"]
        if mine.kind == "dyad-question":
            return CUE_PHRASES["dyad_question"]
        return CUE_PHRASES["target_vocative"]
    if verdict.addressed:
        # "by name" only where a name did it: a follow-up to the previous speaker names nobody.
        kind = verdict.addressed[0].kind
        if kind in ("follow-up", "you-after"):
            return CUE_PHRASES["other_follow_up"]
        if kind == "earlier-in-turn":
            return CUE_PHRASES["other_vocative_prev"]
        if kind == "dyad-question":
            return CUE_PHRASES["other_dyad_question"]
        return CUE_PHRASES["other_vocative"]
    if verdict.mention_of(target) is not None:
        return CUE_PHRASES["target_mention_third_person"]
    if verdict.off_roster:
        return CUE_PHRASES["off_roster"]
    return None


@dataclass(frozen=True)
class EngineDecision:
    """The answer at one pause for one target."""

    target: str
    #: P(take the floor); what to do with it is the deployment's choice
    #: (:mod:`polylogue.engine.deployment`), applied by the live policy.
    p_speak: float
    #: Readable cues that hold at this pause (see ``CUE_PHRASES``) and key quantities.
    cues: dict[str, Any]
    #: Top feature contributions to the log-odds (only when asked with ``explain=True``).
    contributions: tuple[tuple[str, float], ...] = ()
    latency_s: float = 0.0
    features: dict[str, float] = field(default_factory=dict, repr=False)
    #: The words put the turn to the target: named as addressee, introduced, or asked a
    #: "you" question right after the target spoke (``address``).
    addressed: bool = False
    #: P(backchannel): a short acknowledgement while the speaker keeps the floor.
    p_backchannel: float = 0.0
    #: The address verdict of the utterance (:mod:`polylogue.turntaking.address`).
    address: AddressVerdict = NO_ADDRESS

    @property
    def p_silent(self) -> float:
        """P(stay silent) = 1 - P(take floor) - P(backchannel)."""
        return max(0.0, 1.0 - self.p_speak - self.p_backchannel)


def describe_cues(
    x: np.ndarray, verdict: AddressVerdict = NO_ADDRESS, target: str | None = None
) -> dict[str, Any]:
    """Cues behind a decision: the address verdict of the words for ``target`` (one phrase,
    first, and ``address``), then the other cues read off its feature row."""
    row = x.tolist()
    # The question features also fire on an auxiliary opener ("Will do.") or a "What"
    # exclamation ("What a deal."); a reader is only told "question" when the words clearly
    # ask one: a question mark, a request ("can you"), or a wh-word not closed by "." or "!".
    terminal = row[_DESCRIBE_IDX["ends_terminal"]] == 1.0
    asks = (
        row[_DESCRIBE_IDX["question_mark"]] == 1.0
        or row[_DESCRIBE_IDX["ask_request"]] == 1.0
        or (row[_DESCRIBE_IDX["wh_start"]] == 1.0 and not terminal)
    )
    active = [
        phrase
        for i, name, phrase in _CUE_IDX
        if row[i] == 1.0
        and name not in _ADDRESS_CUES
        # "Aren't we done with that?", "Wow, it really is!": a closed sentence does not
        # trail off on its last word.
        and not (name == "trailing_continuer" and terminal)
    ]
    said = address_phrase(verdict, target) if target is not None else None
    if said is not None:
        active.insert(0, said)
    elif asks and not verdict.addressed and not verdict.mentioned:
        active.insert(0, CUE_PHRASES["question_to_nobody_named"])
    return {
        "active": active,
        "address": verdict.to_dict(target),
        "backchannel": _backchannel_cue(row, terminal),
        "turn_yield_logit": round(row[_DESCRIBE_IDX["yield_logit"]], 2),
        "p_target_after_speaker": round(row[_DESCRIBE_IDX["p_target_after_speaker"]], 3),
        "utterances_since_target_spoke": int(row[_DESCRIBE_IDX["utts_since_target"]]),
        "people_present": int(row[_DESCRIBE_IDX["n_present"]]),
    }


def _backchannel_cue(row: list[float], terminal: bool) -> str:
    """Why a short acknowledgement (not a floor take) fits here: the speaker keeps the floor."""
    parts = []
    if row[_DESCRIBE_IDX["trailing_continuer"]] == 1.0 and not terminal:
        parts.append("the speaker paused on a continuer")
    elif row[_DESCRIBE_IDX["incomplete"]] == 1.0 and not terminal:
        parts.append("the utterance trails off")
    run = int(row[_DESCRIBE_IDX["run_length"]])
    if run >= 2:
        parts.append(f"the speaker is mid-telling ({run} utterances in a row)")
    if row[_DESCRIBE_IDX["yield_logit"]] < 0:
        parts.append("the words do not hand the floor over")
    return "a short acknowledgement fits: " + (
        ", ".join(parts) if parts else "the speaker keeps the floor"
    )


# Feature positions read by describe_cues (looked up once, not per decision).
_CUE_IDX = [
    (FEATURE_NAMES.index(name), name, phrase)
    for name, phrase in CUE_PHRASES.items()
    if name in FEATURE_NAMES
]
_DESCRIBE_IDX = {
    n: FEATURE_NAMES.index(n)
    for n in (
        "yield_logit",
        "p_target_after_speaker",
        "utts_since_target",
        "n_present",
        "question_mark",
        "ask_request",
        "wh_start",
        "ends_terminal",
        "trailing_continuer",
        "incomplete",
        "run_length",
    )
}


class TurnTakingEngine:
    """Streaming turn-taking decisions for one conversation.

    One state per feature block of the model (:mod:`polylogue.engine.blocks`), base first;
    every utterance goes to each and a decision row is their rows side by side.
    """

    def __init__(self, model: TurnTakingModel, participants: Iterable[Participant] = ()) -> None:
        self.model = model
        #: The model's blocks, looked up once (a decision loops over them).
        self.blocks = model.blocks
        self._rows = tuple(b.row for b in self.blocks)
        self.use_states(self._new_states(participants))
        self._address_readers = address_readers(self.blocks)

    def _new_states(self, participants: Iterable[Participant]) -> list[BlockState]:
        people = list(participants)
        m = self.model
        return [b.new_state(m.yield_model, m.relation_model, people) for b in self.blocks]

    def use_states(self, states: list[BlockState]) -> None:
        """Continue from these block states (one per block of the model, in its order)."""
        if len(states) != len(self.blocks):
            raise ValueError(f"{len(states)} states for {len(self.blocks)} feature blocks")
        self.states = states
        #: The base block's state (always first): who is here, what was said, the speaker
        #: statistics. An attribute, not a property: it is read several times per pause.
        self.state = cast(ConversationState, states[0])

    @classmethod
    def load(
        cls,
        participants: Iterable[Participant] = (),
        model_dir: str | Path | None = None,
        domain: str | None = None,
    ) -> TurnTakingEngine:
        """The engine on a model folder (None: the shipped model of ``domain``)."""
        return cls(load_model(model_dir, domain), participants)

    @property
    def participants(self) -> dict[str, Participant]:
        return self.state.participants

    def add_participants(self, people: Iterable[Participant]) -> None:
        people = list(people)
        for s in self.states:
            s.register(people)

    def reset(self, participants: Iterable[Participant] = ()) -> None:
        """Start the conversation over (keeps the model)."""
        self.use_states(self._new_states(participants))

    def fork(self) -> TurnTakingEngine:
        """A copy to observe and decide on without changing this engine (the model is shared)."""
        new = copy.copy(self)
        new.use_states([s.fork() for s in self.states])
        return new

    def observe(self, utterance: Utterance) -> float:
        """Take in an utterance that just ended; returns the seconds the cached work took."""
        start = time.perf_counter()
        for s in self.states:
            s.observe(utterance)
        return time.perf_counter() - start

    def listeners(self) -> list[str]:
        """Everyone known except the current speaker and group pseudo-speakers."""
        if not self.state.n_utterances:
            return []
        speaker = self.state.last.speaker
        return [
            pid
            for pid, p in self.state.participants.items()
            if pid != speaker and p.role != GROUP_ROLE
        ]

    def decide(
        self, target: str, present: Sequence[str] | Spoken | None = None, explain: bool = False
    ) -> EngineDecision:
        """Should ``target`` speak now, at the pause after the last observed utterance?"""
        start = time.perf_counter()
        if target not in self.state.participants:
            newcomer = Participant(id=target, name=target if len(target) > 1 else None)
            self.add_participants([newcomer])
        # None: everyone registered is present, SPOKEN: everyone who spoke (both computed from
        # counters, O(1) in the roster).
        people = present if present is None or present is SPOKEN else list(present)
        states = self.states
        if len(states) == 1:  # one block: no list to build nor rows to join at the pause
            x = self._rows[0](states[0], target, people, None)[None, :]
        else:
            rows = [row(s, target, people, None) for row, s in zip(self._rows, states, strict=True)]
            x = np.concatenate(rows)[None, :]
        outcomes = self.model.outcomes(x)
        p = float(outcomes.take_floor[0])
        p_back = float(outcomes.backchannel[0])
        latency = time.perf_counter() - start
        contributions: tuple[tuple[str, float], ...] = ()
        if explain:
            contrib = self.model.contributions(x[0])[:-1]
            order = np.argsort(-np.abs(contrib))[:5]
            names = self.model.feature_names
            contributions = tuple((names[i], round(float(contrib[i]), 3)) for i in order)
        verdict = self.state.verdict()
        return EngineDecision(
            target=target,
            p_speak=p,
            cues=describe_cues(x[0, :N_FEATURES], verdict, target),
            contributions=contributions,
            latency_s=latency,
            features=dict(zip(self.model.feature_names, x[0].tolist(), strict=True))
            if explain
            else {},
            addressed=addressed_at(verdict, target, x[0], self._address_readers),
            p_backchannel=p_back,
            address=verdict,
        )


#: A block's address reader and its columns in a row (None: the whole row).
AddressReaders = Sequence[tuple[Callable[[np.ndarray], bool], slice | None]]


def address_readers(blocks: Sequence[Any]) -> AddressReaders:
    """Each block that can say "addressed" from its columns (the chat block's nick address),
    with its columns in a row."""
    return [
        (b.addressed, None if start == 0 else slice(start, start + b.width))
        for b, start in zip(blocks, _starts(blocks), strict=True)
        if b.addressed is not None
    ]


def addressed_at(
    verdict: AddressVerdict, target: str, row: np.ndarray, readers: AddressReaders = ()
) -> bool:
    """Is ``target`` addressed at this pause? The address verdict of the words, or a further
    block's columns of the row (a chat nick). The one test of address for every front end,
    ``eval`` included."""
    if target in verdict.addressees:
        return True
    return any(read(row if columns is None else row[columns]) for read, columns in readers)


def _starts(blocks: Sequence[Any]) -> list[int]:
    """The first column of each block in a row."""
    out, at = [], 0
    for b in blocks:
        out.append(at)
        at += b.width
    return out
