"""Decision-point types: what a model may see, kept apart from what it is scored against.

A :class:`DecisionPoint` pairs a :class:`DecisionInput` (model-visible) with a
:class:`DecisionGold` (label-bearing). Only ``DecisionInput`` objects cross into
``polylogue.models``; the evaluation runner joins predictions back to gold by ``point_id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from polylogue.conversation import Participant, Utterance


class Decision(StrEnum):
    SPEAK = "SPEAK"
    SILENT = "SILENT"


class Outcome(StrEnum):
    """What a listener did at a pause (three outcomes; see docs/benchmark.md)."""

    TAKE_FLOOR = "TAKE_FLOOR"
    BACKCHANNEL = "BACKCHANNEL"
    SILENT = "SILENT"

    @property
    def decision(self) -> Decision:
        """The floor decision: only taking the floor is SPEAK (a backchannel is SILENT)."""
        return Decision.SPEAK if self is Outcome.TAKE_FLOOR else Decision.SILENT


OUTCOMES: tuple[Outcome, ...] = (Outcome.TAKE_FLOOR, Outcome.BACKCHANNEL, Outcome.SILENT)


class Category(StrEnum):
    """Benchmark categories: the paper's four (speak-or-stay-silent §3) plus SA.

    I1 and SA are the two sides of individual, explicit address; a group address counts as
    not individually addressed on both sides (I2 when the target takes the floor, S1 when not).
    """

    I1 = "I1"  # takes the floor, individually and explicitly addressed
    I2 = "I2"  # takes the floor, not individually addressed: contextual intervention
    S1 = "S1"  # silent, not referenced
    S2 = "S2"  # silent, referenced (named, role mentioned, talked about) but not addressed
    #: silent, not addressed or referenced, but in the exchange: the target spoke in one of
    #: the two speaker turns before the current one, so is no bystander (the paper's S1 is)
    S3 = "S3"
    SA = "SA"  # silent although individually and explicitly addressed

    @property
    def decision(self) -> Decision:
        return Decision.SPEAK if self.value.startswith("I") else Decision.SILENT

    @property
    def four_way(self) -> Category:
        """The paper's four categories: SA is a silence with the strongest reference (S2), and
        S3 (a silent participant of the exchange) is S2 as in the authors' released mapping,
        whose S2 holds every silent target who spoke in the last two turns."""
        return Category.S2 if self in (Category.SA, Category.S3) else self


#: Every category a point can have (per-category metrics, Table 1).
CATEGORIES: tuple[Category, ...] = (
    Category.I1,
    Category.I2,
    Category.S1,
    Category.S2,
    Category.S3,
    Category.SA,
)
#: The paper's four (balanced training batches, paper-protocol builds).
PAPER_CATEGORIES: tuple[Category, ...] = (Category.I1, Category.I2, Category.S1, Category.S2)


@dataclass(frozen=True, slots=True)
class DecisionInput:
    """Everything a model may use at one pause.

    ``context`` holds every utterance up to and including the one that just ended
    (``context[-1]`` is the *current* utterance). Context utterances carry speaker, text and
    timing only: addressee annotations, dialogue-act labels and stage notes are stripped.
    """

    point_id: str
    conversation_id: str
    corpus: str
    domain: str
    target: Participant
    #: Participants present at the pause (causal: from attendance metadata or seen so far).
    present: tuple[Participant, ...]
    context: Sequence[Utterance]

    @property
    def current(self) -> Utterance:
        return self.context[-1]

    @property
    def history(self) -> Sequence[Utterance]:
        return self.context[:-1]

    @property
    def pause_time(self) -> float | None:
        return self.current.end

    def to_dict(self, max_context: int | None = None) -> dict[str, Any]:
        ctx = self.context if max_context is None else self.context[-max_context:]
        return {
            "point_id": self.point_id,
            "conversation_id": self.conversation_id,
            "corpus": self.corpus,
            "domain": self.domain,
            "target": self.target.to_dict(),
            "present": [p.to_dict() for p in self.present],
            "context": [
                {"speaker": u.speaker, "text": u.text, "start": u.start, "end": u.end} for u in ctx
            ],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DecisionInput:
        return cls(
            point_id=str(d["point_id"]),
            conversation_id=str(d["conversation_id"]),
            corpus=str(d["corpus"]),
            domain=str(d.get("domain") or "meeting"),
            target=Participant.from_dict(d["target"]),
            present=tuple(Participant.from_dict(p) for p in d["present"]),
            context=tuple(Utterance.from_dict(u) for u in d["context"]),
        )


@dataclass(frozen=True, slots=True)
class DecisionGold:
    """Label-bearing fields. Never shown to a model.

    ``label`` is the floor decision (SPEAK iff ``outcome`` is TAKE_FLOOR). ``paper_category``
    is the authors' released four-way mapping (reference notes D.4: their S2 also holds
    targets who spoke in the last two turns), kept so Table 1 can be compared side by side.
    """

    label: Decision
    category: Category
    #: The authors' finer 8-way scheme (I1, I2, I3, S1..S5), see docs/benchmark.md.
    fine_category: str
    addressed: bool
    referenced: bool
    #: Why the target counts as addressed: "annotation", "note", "vocative", "role" or None.
    address_evidence: str | None
    #: Why the target counts as referenced: "name", "role", "third-person" or None.
    reference_evidence: str | None
    next_speaker: str | None
    #: Addressed together with others (a group address) rather than singled out.
    group_address: bool = False
    #: Three outcomes (v2); builds before v2 only knew SPEAK/SILENT.
    outcome: Outcome | None = None
    #: The authors' four-way category (I1/I2/S1/S2 as in their released data).
    paper_category: str | None = None
    #: The pause: when it began (s, None untimed) and how long nobody spoke (None untimed).
    pause_time: float | None = None
    pause_s: float | None = None
    #: The target spoke in one of the two speaker turns before the current one (v2.1).
    in_exchange: bool = False

    @property
    def floor_outcome(self) -> Outcome:
        """``outcome``, or the label's outcome for builds without one."""
        if self.outcome is not None:
            return self.outcome
        return Outcome.TAKE_FLOOR if self.label is Decision.SPEAK else Outcome.SILENT

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label.value,
            "category": self.category.value,
            "fine_category": self.fine_category,
            "addressed": self.addressed,
            "referenced": self.referenced,
            "address_evidence": self.address_evidence,
            "reference_evidence": self.reference_evidence,
            "next_speaker": self.next_speaker,
            "group_address": self.group_address,
            "outcome": None if self.outcome is None else self.outcome.value,
            "paper_category": self.paper_category,
            "pause_time": self.pause_time,
            "pause_s": self.pause_s,
            "in_exchange": self.in_exchange,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DecisionGold:
        return cls(
            label=Decision(d["label"]),
            category=Category(d["category"]),
            fine_category=str(d.get("fine_category") or d["category"]),
            addressed=bool(d.get("addressed")),
            referenced=bool(d.get("referenced")),
            address_evidence=d.get("address_evidence"),
            reference_evidence=d.get("reference_evidence"),
            next_speaker=d.get("next_speaker"),
            group_address=bool(d.get("group_address", False)),
            outcome=Outcome(d["outcome"]) if d.get("outcome") else None,
            paper_category=d.get("paper_category"),
            pause_time=_opt(d.get("pause_time")),
            pause_s=_opt(d.get("pause_s")),
            in_exchange=bool(d.get("in_exchange", False)),
        )


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)


@dataclass(frozen=True, slots=True)
class DecisionPoint:
    """A labelled pause: model input + gold + bookkeeping."""

    input: DecisionInput
    gold: DecisionGold
    #: The grouping unit for splits and bootstrap (meeting, episode, call).
    group: str
    #: Index of the current utterance in the conversation.
    index: int
    split: str | None = None

    @property
    def point_id(self) -> str:
        return self.input.point_id
