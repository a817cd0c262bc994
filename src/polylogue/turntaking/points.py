"""Decision points from conversations (speak-or-stay-silent §3.1-3.2, done causally).

At every utterance boundary t (after utterance u_t, before u_{t+1}) one point is made for each
participant present at that moment other than the speaker of u_t. The label is SPEAK iff that
participant produces u_{t+1}. Context is u_1..u_t exactly as they happened.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import overload

from polylogue.conversation import Conversation, Participant, Utterance
from polylogue.turntaking.chat import chat_address_cues, present_in_window
from polylogue.turntaking.cues import (
    UtteranceCues,
    build_matchers,
    is_cased,
    is_filler_only,
    is_too_short,
    looks_incomplete,
    utterance_cues,
)
from polylogue.turntaking.types import (
    Category,
    Decision,
    DecisionGold,
    DecisionInput,
    DecisionPoint,
)

#: Participant role that marks a pseudo-speaker (several people at once); never a target.
GROUP_ROLE = "group"


@dataclass(frozen=True, slots=True)
class PointOptions:
    """How decision points are made. Every field is recorded in the dataset manifest."""

    #: Minimum characters of the current utterance after removing punctuation.
    min_chars: int = 3
    #: Drop boundaries whose current utterance is only fillers/backchannels.
    drop_fillers: bool = True
    #: Look-back (utterances before the current one) for the fine categories I2/S3.
    fine_recent_speak: int = 3
    fine_recent_silent: int = 2


class ContextView(Sequence[Utterance]):
    """A read-only prefix ``utterances[:end]`` of a conversation without copying it."""

    __slots__ = ("_end", "_utterances")

    def __init__(self, utterances: Sequence[Utterance], end: int) -> None:
        self._utterances = utterances
        self._end = end

    def __len__(self) -> int:
        return self._end

    @overload
    def __getitem__(self, i: int) -> Utterance: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Utterance]: ...
    def __getitem__(self, i: int | slice) -> Utterance | Sequence[Utterance]:
        if isinstance(i, slice):
            start, stop, step = i.indices(self._end)
            if step == 1 and start == 0:
                return ContextView(self._utterances, max(stop, 0))
            return tuple(self._utterances[start:stop:step])
        if i < 0:
            i += self._end
        if not 0 <= i < self._end:
            raise IndexError(i)
        return self._utterances[i]

    def __iter__(self) -> Iterator[Utterance]:
        for i in range(self._end):
            yield self._utterances[i]

    def __repr__(self) -> str:
        return f"ContextView(len={self._end})"


def model_visible(conv: Conversation) -> tuple[Utterance, ...]:
    """The conversation as a model may see it: speaker, text and timing only."""
    return tuple(
        Utterance(speaker=u.speaker, text=u.text, start=u.start, end=u.end, id=u.id)
        for u in conv.utterances
    )


def present_at(
    conv: Conversation, addressed: Sequence[Iterable[str]] | None = None
) -> list[frozenset[str]]:
    """Participants present at each boundary, causally.

    With an attendance roster (``roster_known``) everybody is present throughout. Otherwise a
    participant is present from the first utterance they speak in or are addressed in
    (annotated addressee or vocative, given per utterance in ``addressed``). Being merely
    mentioned does not make someone present: people talk about the absent.
    """
    real = [p.id for p in conv.participants if p.role != GROUP_ROLE]
    if conv.roster_known:
        everyone = frozenset(real)
        return [everyone] * len(conv.utterances)
    real_set = set(real)
    window = conv.metadata.get("presence_window")
    if isinstance(window, int) and window > 0:
        # Chat channels (docs/corpora-chat.md): present = active in the last `window` messages.
        return present_in_window(conv.utterances, real_set, window, addressed)
    seen: set[str] = set()
    out: list[frozenset[str]] = []
    for i, u in enumerate(conv.utterances):
        if u.speaker in real_set:
            seen.add(u.speaker)
        if u.addressees:
            seen.update(a for a in u.addressees if a in real_set)
        if addressed is not None:
            seen.update(a for a in addressed[i] if a in real_set)
        out.append(frozenset(seen))
    return out


def fine_category(
    label: Decision,
    addressed: bool,
    referenced: bool,
    target: str,
    history_speakers: Sequence[str],
    current: Utterance,
    someone_else_addressed: bool,
    opts: PointOptions,
    singled_out: bool = True,
) -> str:
    """The authors' 8-way scheme (reference notes A.4), with sound mention detection.

    SPEAK: I1 addressed; I2 spoke within the last ``fine_recent_speak`` earlier utterances;
    I3 otherwise. SILENT: S2 referenced or singled out; S4 incomplete current utterance;
    S3 spoke within the last ``fine_recent_silent`` earlier utterances; S5 someone else
    explicitly addressed; S1 otherwise.
    """
    if label is Decision.SPEAK:
        if addressed:
            return "I1"
        if target in history_speakers[-opts.fine_recent_speak :]:
            return "I2"
        return "I3"
    if referenced or (addressed and singled_out):
        return "S2"
    if looks_incomplete(current.text):
        return "S4"
    if target in history_speakers[-opts.fine_recent_silent :]:
        return "S3"
    if someone_else_addressed:
        return "S5"
    return "S1"


def coarse_category(
    label: Decision, addressed: bool, referenced: bool, singled_out: bool = True
) -> Category:
    """The paper's four categories.

    A target addressed *on their own* who stays silent was referenced in the strongest way, so
    it is S2. A target addressed only as one of a group (AMI "A,C,D", "(to all)") who stays
    silent is an audience member: S1 unless also named or role-mentioned.
    """
    if label is Decision.SPEAK:
        return Category.I1 if addressed else Category.I2
    if referenced or (addressed and singled_out):
        return Category.S2
    return Category.S1


def relabel(gold: DecisionGold, label: Decision) -> DecisionGold:
    """``gold`` with another decision (e.g. a human's); the categories follow from the cues."""
    if label is gold.label:
        return gold
    category = coarse_category(label, gold.addressed, gold.referenced, not gold.group_address)
    return replace(gold, label=label, category=category, fine_category=category.value)


def boundary_is_decision_point(u: Utterance, opts: PointOptions) -> bool:
    if not u.text.strip():
        return False
    if opts.drop_fillers and is_filler_only(u.text):
        return False
    return not is_too_short(u.text, opts.min_chars)


def conversation_points(
    conv: Conversation, opts: PointOptions | None = None
) -> Iterator[DecisionPoint]:
    """Yield every decision point of one conversation, in order."""
    opts = opts or PointOptions()
    n = len(conv.utterances)
    if n < 2:
        return
    visible = model_visible(conv)
    matchers = build_matchers(conv.participants, is_cased(conv.utterances))
    # Cues are computed against every participant so a vocative can establish presence.
    all_cues = []
    last_spoke: dict[str, int] = {}
    # Chat: a leading nick without punctuation, in any case, is address too (corpora.chat).
    chat_address = chat_address_cues(conv) if conv.domain == "chat" else None
    for i, u in enumerate(conv.utterances):
        cue = utterance_cues(u, matchers, last_spoke=last_spoke)
        all_cues.append(cue if chat_address is None else chat_address(u, cue))
        last_spoke[u.speaker] = i
    presence = present_at(conv, [c.addressed for c in all_cues])
    by_id: dict[str, Participant] = {p.id: p for p in conv.participants}
    speakers = [u.speaker for u in conv.utterances]
    for t in range(n - 1):  # the last utterance has no observed "next"
        current = conv.utterances[t]
        if not boundary_is_decision_point(current, opts):
            continue
        present_ids = presence[t]
        targets = sorted(present_ids - {current.speaker})
        if not targets:
            continue
        cues: UtteranceCues = all_cues[t]
        someone_addressed = bool(cues.addressed)
        nxt = speakers[t + 1]
        present_participants = tuple(by_id[p] for p in sorted(present_ids))
        context = ContextView(visible, t + 1)
        history = speakers[max(0, t - max(opts.fine_recent_speak, opts.fine_recent_silent)) : t]
        for target in targets:
            label = Decision.SPEAK if nxt == target else Decision.SILENT
            addressed = target in cues.addressed
            referenced = target in cues.referenced
            gold = DecisionGold(
                label=label,
                category=coarse_category(label, addressed, referenced, len(cues.addressed) == 1),
                fine_category=fine_category(
                    label,
                    addressed,
                    referenced,
                    target,
                    history,
                    current,
                    someone_addressed and not addressed,
                    opts,
                    len(cues.addressed) == 1,
                ),
                addressed=addressed,
                referenced=referenced,
                address_evidence=cues.addressed.get(target),
                reference_evidence=cues.referenced.get(target),
                next_speaker=nxt,
                group_address=addressed and len(cues.addressed) > 1,
            )
            inp = DecisionInput(
                point_id=f"{conv.id}:{t}:{target}",
                conversation_id=conv.id,
                corpus=conv.corpus,
                domain=conv.domain,
                target=by_id[target],
                present=present_participants,
                context=context,
            )
            yield DecisionPoint(input=inp, gold=gold, group=conv.group_id, index=t)


def prefix_hashes(conv: Conversation) -> list[str]:
    """Running hash of (speaker, text) up to each utterance: equal iff the contexts are equal."""
    h = hashlib.blake2b(digest_size=16)
    out = []
    for u in conv.utterances:
        h.update(u.speaker.encode())
        h.update(b"\x1f")
        h.update(u.text.encode())
        h.update(b"\x1e")
        out.append(h.copy().hexdigest())
    return out


def with_split(point: DecisionPoint, split: str) -> DecisionPoint:
    return replace(point, split=split)
