"""Is a test split part of a model's training data?

A small build (``polylogue build --limit-conversations 20``) splits its few conversations
afresh, so its test split can hold conversations the shipped model was trained on (AMI
ES2004 is in the shipped model's train split): scores on it look better than on the real
held-out test. The shipped model records its training conversations per benchmark in
``model.json`` (``trained_on.<bench>.train_conversations``, with the build's ``data_hash``);
``eval`` records the overlap in the run manifest and warns, and ``report`` repeats it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from polylogue.turntaking.types import DecisionPoint

#: Run-manifest key holding :meth:`TrainingOverlap.to_dict`.
MANIFEST_KEY = "training_overlap"


@dataclass(frozen=True, slots=True)
class TrainingOverlap:
    """Test points whose conversation the model was trained on."""

    conversations: tuple[str, ...]
    points: int
    total_points: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversations": list(self.conversations),
            "points": self.points,
            "total_points": self.total_points,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainingOverlap:
        return cls(
            tuple(str(c) for c in d.get("conversations") or ()),
            int(d.get("points") or 0),
            int(d.get("total_points") or 0),
        )

    def message(self, model: str = "the default model") -> str:
        shown = ", ".join(self.conversations[:5]) + (" …" if len(self.conversations) > 5 else "")
        return (
            f"{self.points:,} of {self.total_points:,} points ({len(self.conversations)} "
            f"conversations: {shown}) are in {model}'s training data: these scores are not "
            "held-out (a --limit-conversations build splits afresh; evaluate on the full build)"
        )


def training_conversations(metadata: Mapping[str, Any]) -> set[str] | None:
    """Conversation ids a model was trained on, or None when its ``model.json`` predates the
    record (``trained_on.*.train_conversations``)."""
    trained_on = metadata.get("trained_on") or {}
    found: set[str] | None = None
    for info in trained_on.values():
        ids = info.get("train_conversations") if isinstance(info, Mapping) else None
        if ids is not None:
            found = (found or set()) | {str(i) for i in ids}
    return found


def training_overlap(
    metadata: Mapping[str, Any], points: Sequence[DecisionPoint]
) -> TrainingOverlap | None:
    """The part of ``points`` from conversations the model trained on (None: none, or the
    model does not record its training conversations)."""
    trained = training_conversations(metadata)
    if not trained:
        return None
    hit = [p.input.conversation_id for p in points if p.input.conversation_id in trained]
    if not hit:
        return None
    return TrainingOverlap(tuple(sorted(set(hit))), len(hit), len(points))
