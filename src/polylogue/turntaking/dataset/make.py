"""Decision points for conversations: de-duplicated, checked and assigned to splits."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from polylogue.conversation import Conversation
from polylogue.conversation import merge_turns as merge_conversation_turns
from polylogue.errors import PolylogueInputError
from polylogue.turntaking.dataset.assign import assign_splits, paper_splits
from polylogue.turntaking.dataset.options import BuildOptions
from polylogue.turntaking.points import (
    conversation_points,
    prefix_hashes,
    prepare_conversation,
)
from polylogue.turntaking.splits import (
    SPLITS,
)
from polylogue.turntaking.types import (
    DecisionPoint,
)

#: A group counts as addressee-annotated for split stratification when at least this share of
#: its utterances is annotated (AMI has series with 1-3 stray annotations; they are "plain").
ANNOTATED_GROUP_MIN_SHARE = 0.05
#: Conversation metadata key that pins a conversation's group to one benchmark split (the
#: corpus's official test set, e.g. Molweni's ``test`` file); the corpus's other groups are
#: then split over the remaining splits, in proportion to their fractions.
FIXED_SPLIT_KEY = "benchmark_split"


@dataclass
class BenchmarkBuild:
    """The in-memory result of :func:`build_benchmark`."""

    conversations: list[Conversation]
    points: list[DecisionPoint]
    options: BuildOptions
    counts: dict[str, int]

    def split(self, name: str) -> list[DecisionPoint]:
        return [p for p in self.points if p.split == name]


def build_benchmark(
    conversations: Iterable[Conversation],
    options: BuildOptions | None = None,
    on_conversation: Callable[[Conversation], None] | None = None,
) -> BenchmarkBuild:
    """Decision points for ``conversations``, de-duplicated and split per corpus by group."""
    options = options or BuildOptions()
    convs: list[Conversation] = []
    points: list[DecisionPoint] = []
    seen: set[tuple[str, str, str]] = set()
    counts: Counter[str] = Counter()
    conv_ids: set[str] = set()
    # Per group: (utterances with annotated addressees, all utterances).
    annotation: dict[str, list[int]] = {}
    fixed_split: dict[str, str] = {}
    for conv in conversations:
        if conv.id in conv_ids:
            raise PolylogueInputError(
                f"duplicate conversation id {conv.id!r} "
                f"(corpus {conv.corpus}, source {conv.source})"
            )
        conv_ids.add(conv.id)
        if options.merge_turns:
            conv = merge_conversation_turns(conv)
        conv = prepare_conversation(conv, options.points)
        counts[f"decision_moments_{conv.metadata['decision_moments']}"] += 1
        n_annotated = sum(u.addressees is not None for u in conv.utterances)
        if options.require_addressee_annotation and not n_annotated:
            counts["conversations_without_annotation_skipped"] += 1
            continue
        pinned = conv.metadata.get(FIXED_SPLIT_KEY)
        if pinned is not None:
            if pinned not in SPLITS or fixed_split.get(conv.group_id, pinned) != pinned:
                raise PolylogueInputError(
                    f"conversation {conv.id!r} (source {conv.source}): {FIXED_SPLIT_KEY} "
                    f"{pinned!r} is not one of {', '.join(SPLITS)} or conflicts with its group"
                )
            fixed_split[conv.group_id] = pinned
        share = annotation.setdefault(conv.group_id, [0, 0])
        share[0] += n_annotated
        share[1] += len(conv.utterances)
        convs.append(conv)
        counts["conversations"] += 1
        counts["boundaries"] += max(0, len(conv.utterances) - 1)
        hashes = prefix_hashes(conv) if options.dedup else None
        for p in conversation_points(conv, options.points):
            if hashes is not None:
                key = (hashes[p.index], p.input.target.id, p.gold.label.value)
                if key in seen:
                    counts["duplicates_removed"] += 1
                    continue
                seen.add(key)
            points.append(p)
        if on_conversation is not None:
            on_conversation(conv)
    annotated_groups = {
        g for g, (n_ann, n) in annotation.items() if n and n_ann / n >= ANNOTATED_GROUP_MIN_SHARE
    }
    if options.protocol == "paper":
        points = paper_splits(points, options)
    else:
        points = assign_splits(points, options, annotated_groups, fixed_split)
    counts["points"] = len(points)
    return BenchmarkBuild(conversations=convs, points=points, options=options, counts=dict(counts))
