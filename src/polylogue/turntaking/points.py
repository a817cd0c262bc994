"""Decision points from conversations (speak-or-stay-silent §3.1-3.2, done causally).

Where a conversation is fully timed, decision points are *real pauses* (see
:mod:`polylogue.turntaking.timeline`): the end of a stretch of speech after which nobody speaks
for at least ``PointOptions.gap`` seconds. The conversation is put in end order, so the context
at a pause (``utterances[:index + 1]``) is exactly what was said by then and its last
utterance is the speech that just ended. Untimed conversations keep the paper's utterance
boundaries. At each decision point one point is made for each participant present other than
the current speaker; the gold outcome is TAKE_FLOOR, BACKCHANNEL or SILENT and the floor
decision (``label``) is SPEAK iff TAKE_FLOOR.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal, overload

from polylogue.conversation import (
    DEFAULT_GAP_S,
    GROUP_ROLE,
    NON_PERSON_ROLES,
    Conversation,
    Participant,
    Utterance,
)
from polylogue.turntaking.chat import chat_address_cues, present_in_window
from polylogue.turntaking.cues import (
    UtteranceCues,
    build_matchers,
    is_cased,
    is_filler_only,
    is_question,
    is_too_short,
    looks_incomplete,
    says_own_departure,
    utterance_cues,
)
from polylogue.turntaking.timeline import (
    Boundary,
    end_ordered,
    is_timed,
    pause_boundaries,
    utterance_boundaries,
)
from polylogue.turntaking.types import (
    Category,
    Decision,
    DecisionGold,
    DecisionInput,
    DecisionPoint,
    Outcome,
)

Timing = Literal["auto", "pause", "utterance"]


@dataclass(frozen=True, slots=True)
class PointOptions:
    """How decision points are made. Every field is recorded in the dataset manifest."""

    #: Minimum characters of the current utterance after removing punctuation.
    min_chars: int = 3
    #: Drop boundaries whose current utterance is only fillers/backchannels.
    drop_fillers: bool = True
    #: Look-back (speaker turns before the current one) for the fine categories I2/S3 and
    #: the paper-compatible S2 ("spoke in the last two turns").
    fine_recent_speak: int = 3
    fine_recent_silent: int = 2
    #: Decision moments: real pauses ("pause", needs every utterance timed), utterance
    #: boundaries ("utterance") or pauses where the conversation is fully timed ("auto").
    timing: Timing = "auto"
    #: Silence (seconds) after a stretch of speech that makes a pause.
    gap: float = DEFAULT_GAP_S
    #: Tell backchannels apart from taking the floor (False: the paper's next-speaker label).
    backchannels: bool = True
    #: Keep points whose current utterance is the first of the conversation (the paper drops
    #: them: no earlier context).
    keep_no_context: bool = False


#: Utterances per shared block of a context (see :class:`ContextView`).
_BLOCK = 64


class ContextView(Sequence[Utterance]):
    """A read-only prefix of a conversation that holds nothing after its end.

    A model input must not be able to reach the future, not even through private attributes,
    so a view keeps no reference to the whole conversation: it holds the conversation's full
    blocks of ``_BLOCK`` utterances that end before its end (shared between views, so contexts
    stay linear in memory) and a copy of the last, partial block. Build views with
    :class:`Prefixes`.
    """

    __slots__ = ("_blocks", "_end")

    def __init__(self, blocks: tuple[tuple[Utterance, ...], ...], end: int) -> None:
        self._blocks = blocks
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
                stop = max(stop, 0)
                full, rest = divmod(stop, _BLOCK)
                blocks = self._blocks[:full]
                if rest:
                    blocks = (*blocks, self._blocks[full][:rest])
                return ContextView(blocks, stop)
            return tuple(self[k] for k in range(start, stop, step))
        if i < 0:
            i += self._end
        if not 0 <= i < self._end:
            raise IndexError(i)
        return self._blocks[i // _BLOCK][i % _BLOCK]

    def __iter__(self) -> Iterator[Utterance]:
        for block in self._blocks:
            yield from block

    def __repr__(self) -> str:
        return f"ContextView(len={self._end})"


class Prefixes:
    """Context views of one conversation's utterances (``view(end)`` = ``utterances[:end]``)."""

    __slots__ = ("_full", "_utterances")

    def __init__(self, utterances: Sequence[Utterance]) -> None:
        self._utterances = tuple(utterances)
        n = len(self._utterances) // _BLOCK
        self._full = tuple(self._utterances[k * _BLOCK : (k + 1) * _BLOCK] for k in range(n))

    def view(self, end: int) -> ContextView:
        end = max(0, min(end, len(self._utterances)))
        full, rest = divmod(end, _BLOCK)
        blocks = self._full[:full]
        if rest:
            blocks = (*blocks, self._utterances[full * _BLOCK : end])
        return ContextView(blocks, end)


def model_visible(conv: Conversation) -> tuple[Utterance, ...]:
    """The conversation as a model may see it: speaker, text and timing only.

    No utterance ids (AMI's ``+1`` piece suffixes would reveal that a speaker goes on), and no
    times unless they are consistent (:func:`visible_times`): a model's timing features must
    never go negative.
    """
    keep_times = visible_times(conv)
    return tuple(
        Utterance(
            speaker=u.speaker,
            text=u.text,
            start=u.start if keep_times else None,
            end=u.end if keep_times else None,
        )
        for u in conv.utterances
    )


def visible_times(conv: Conversation) -> bool:
    """Times are shown to models when no utterance ends before an earlier one did.

    End-ordered (pause-mode) conversations always qualify; an utterance-boundary conversation
    with overlapping or missing times (AMI dialogue acts, partly aligned Earnings-21 calls)
    does not, since "time since X spoke" could then be negative or undefined.
    """
    last = -math.inf
    for u in conv.utterances:
        if u.start is None or u.end is None or u.end < u.start or u.end < last:
            return False
        last = u.end
    return True


def timing_mode(conv: Conversation, opts: PointOptions) -> Literal["pause", "utterance"]:
    if opts.timing == "utterance":
        return "utterance"
    # Chat messages carry a posting time, not a stretch of speech: every message is a decision
    # moment (docs/corpora-chat.md), whatever its timestamps say.
    if conv.domain == "chat" and opts.timing == "auto":
        return "utterance"
    if is_timed(conv):
        return "pause"
    if opts.timing == "pause":
        raise ValueError(
            f"conversation {conv.id} ({conv.source or conv.corpus}): timing='pause' needs a "
            "start and end time on every utterance"
        )
    return "utterance"


def prepare_conversation(conv: Conversation, opts: PointOptions | None = None) -> Conversation:
    """``conv`` as decision points index it: end-ordered when its pauses are used."""
    opts = opts or PointOptions()
    mode = timing_mode(conv, opts)
    if mode == "pause":
        ordered = end_ordered(conv)
        return replace(ordered, metadata={**ordered.metadata, "decision_moments": "pause"})
    return replace(conv, metadata={**conv.metadata, "decision_moments": "utterance"})


def decision_boundaries(
    conv: Conversation,
    opts: PointOptions,
    asked: Sequence[frozenset[str] | None] | None = None,
) -> list[Boundary]:
    """Decision moments of a prepared conversation (:func:`prepare_conversation`).

    ``asked`` (per utterance, :func:`questions_asked`) makes a reply to a question an answer,
    never a backchannel."""
    if conv.metadata.get("decision_moments") == "pause":
        return pause_boundaries(conv, opts.gap, opts.backchannels, asked)
    return utterance_boundaries(conv, opts.backchannels, asked)


def questions_asked(
    conv: Conversation, all_cues: Sequence[UtteranceCues]
) -> list[frozenset[str] | None]:
    """Per utterance: None if it asks nothing, else who it asks (its addressees; empty: it is
    put to everyone present). An acknowledgement from one of them answers, it does not
    backchannel ("Are you on board?" - "Yes."; "Can I talk to you for a second?" - "Sure.")."""
    return [
        frozenset(c.addressed) if is_question(u.text) else None
        for u, c in zip(conv.utterances, all_cues, strict=True)
    ]


def present_at(
    conv: Conversation, addressed: Sequence[Iterable[str]] | None = None
) -> list[frozenset[str]]:
    """Participants present at each boundary, causally.

    With an attendance roster (``roster_known``) everybody is present throughout. Otherwise a
    participant is present from the first utterance they speak in or are addressed in
    (annotated addressee or vocative, given per utterance in ``addressed``). Being merely
    mentioned does not make someone present: people talk about the absent. A participant whose
    departure a stage note of an utterance records ("(Ross leaves the room)", "(exits)"), or
    who takes leave in words (``cues.says_own_departure``: "I'm gonna go. Bye."), is absent
    after it until they speak or are addressed again. Group pseudo-speakers and voices
    (TV, radio, answering machine: ``NON_PERSON_ROLES``) are never present.
    """
    real = [p.id for p in conv.participants if p.role not in NON_PERSON_ROLES]
    if conv.roster_known:
        everyone = frozenset(real)
        return [everyone] * len(conv.utterances)
    real_set = set(real)
    window = conv.metadata.get("presence_window")
    if isinstance(window, int) and window > 0:
        # Chat channels (docs/corpora-chat.md): present = active in the last `window` messages.
        return present_in_window(conv.utterances, real_set, window, addressed)
    names = _departure_names(conv.participants, real_set)
    seen: set[str] = set()
    out: list[frozenset[str]] = []
    gone: set[str] = set()
    for i, u in enumerate(conv.utterances):
        seen.difference_update(gone)
        if u.speaker in real_set:
            seen.add(u.speaker)
        if u.addressees:
            seen.update(a for a in u.addressees if a in real_set)
        if addressed is not None:
            seen.update(a for a in addressed[i] if a in real_set)
        out.append(frozenset(seen))
        gone = departures(u, names) if u.note else set()
        if u.speaker in real_set and says_own_departure(u.text):
            gone.add(u.speaker)  # "I'm gonna go. Bye.": back once they speak again
    return out


#: A stage note clause that records a departure ("Ross leaves the room", "(exits)"); "to
#: leave" (an intention) and "enters" do not count.
_DEPARTS = re.compile(
    r"(?<!to )\b(?:leaves|leave|exits|exit|storms out|walks out|goes out|runs out)\b", re.I
)
_CLAUSE = re.compile(r"[^.;()]+")
_SUBJECT = re.compile(r"^\s*(?:and\s+|then\s+)?(?:he|she)?\s*(?:just\s+|then\s+)?$", re.I)


def _departure_names(
    participants: Sequence[Participant], real: set[str]
) -> list[tuple[str, re.Pattern[str]]]:
    out = []
    for p in participants:
        if p.id not in real:
            continue
        terms = [t for t in (p.id, p.name) if t and len(t) > 1]
        if terms:
            alt = "|".join(re.escape(t) for t in dict.fromkeys(terms))
            out.append((p.id, re.compile(rf"\b(?:{alt})\b")))
    return out


def departures(u: Utterance, names: Sequence[tuple[str, re.Pattern[str]]]) -> set[str]:
    """Who a stage note of ``u`` says leaves: the people named before a departure verb in one
    clause ("Joey and Phoebe leave for the door"), or the speaker when the clause has no
    subject or "he"/"she" ("(leaves)", "(she exits)"). "They leave" is left alone (who?)."""
    out: set[str] = set()
    for clause in _CLAUSE.findall(u.note or ""):
        m = _DEPARTS.search(clause)
        if m is None:
            continue
        before = clause[: m.start()]
        named = {pid for pid, pat in names if pat.search(before)}
        if named:
            out |= named
        elif _SUBJECT.match(before):
            out.add(u.speaker)
    return out


def fine_category(
    label: Decision,
    addressed: bool,
    referenced: bool,
    target: str,
    recent_turn_speakers: Sequence[str],
    current: Utterance,
    someone_else_addressed: bool,
    opts: PointOptions,
) -> str:
    """The authors' 8-way scheme (reference notes A.4), with sound mention detection.

    ``addressed`` is the authors' notion: the target is among the addressees (alone or in a
    group). SPEAK: I1 addressed; I2 spoke within the last ``fine_recent_speak`` turns; I3
    otherwise. SILENT: S2 referenced and not addressed; S4 incomplete current utterance; S3
    spoke within the last ``fine_recent_silent`` turns; S5 someone else explicitly addressed;
    S1 otherwise. ``recent_turn_speakers`` are the speakers of the turns before the current
    one, oldest first.
    """
    if label is Decision.SPEAK:
        if addressed:
            return "I1"
        if target in recent_turn_speakers[-opts.fine_recent_speak :]:
            return "I2"
        return "I3"
    if referenced and not addressed:
        return "S2"
    if looks_incomplete(current.text):
        return "S4"
    if target in recent_turn_speakers[-opts.fine_recent_silent :]:
        return "S3"
    if someone_else_addressed:
        return "S5"
    return "S1"


def paper_category(
    label: Decision,
    addressed: bool,
    referenced: bool,
    target: str,
    recent_turn_speakers: Sequence[str],
    opts: PointOptions,
) -> str:
    """The authors' released four-way mapping (reference notes D.4).

    I1 = SPEAK and among the addressees (a group address included); I2 = any other SPEAK;
    S2 = SILENT and (referenced but not addressed, *or* spoke in the last two turns);
    S1 = any other SILENT (an addressee who stays silent included).
    """
    if label is Decision.SPEAK:
        return "I1" if addressed else "I2"
    if (referenced and not addressed) or target in recent_turn_speakers[-opts.fine_recent_silent :]:
        return "S2"
    return "S1"


def coarse_category(
    label: Decision,
    addressed: bool,
    referenced: bool,
    singled_out: bool = True,
    in_exchange: bool = False,
) -> Category:
    """The benchmark's categories.

    Individual, explicit address gives I1 when the target takes the floor and SA when not. A
    group address ("A,C,D", "(to all)") is not individual address on either side: I2 when the
    target takes the floor, S1 or S3 when not. A silent target who is referenced (named, role
    mentioned) without being addressed is S2. Any other silent target is S3 when in the
    exchange (spoke in one of the two speaker turns before the current one) and S1, the
    paper's bystander, otherwise.
    """
    individually = addressed and singled_out
    if label is Decision.SPEAK:
        return Category.I1 if individually else Category.I2
    if individually:
        return Category.SA
    if referenced and not addressed:
        return Category.S2
    return Category.S3 if in_exchange else Category.S1


def relabel(gold: DecisionGold, label: Decision) -> DecisionGold:
    """``gold`` with another decision (e.g. a human's); the categories follow from the cues."""
    if label is gold.label:
        return gold
    category = coarse_category(
        label, gold.addressed, gold.referenced, not gold.group_address, gold.in_exchange
    )
    outcome = Outcome.TAKE_FLOOR if label is Decision.SPEAK else Outcome.SILENT
    if label is Decision.SPEAK:
        paper: str | None = "I1" if gold.addressed else "I2"
    else:
        referenced_only = gold.referenced and not gold.addressed
        paper = "S2" if referenced_only or gold.in_exchange else "S1"
    return replace(
        gold,
        label=label,
        category=category,
        fine_category=category.value,
        outcome=outcome,
        paper_category=paper,
    )


def boundary_is_decision_point(u: Utterance, opts: PointOptions) -> bool:
    if not u.text.strip():
        return False
    if opts.drop_fillers and is_filler_only(u.text):
        return False
    return not is_too_short(u.text, opts.min_chars)


def _turn_starts(speakers: Sequence[str]) -> list[int]:
    """For each utterance, the index where its speaker's run (turn) began."""
    out: list[int] = []
    for i, spk in enumerate(speakers):
        out.append(out[i - 1] if i and speakers[i - 1] == spk else i)
    return out


def _recent_turn_speakers(
    speakers: Sequence[str], turn_start: Sequence[int], index: int, k: int
) -> list[str]:
    """Speakers of the ``k`` turns before the one holding utterance ``index``, oldest first."""
    out: list[str] = []
    j = turn_start[index] - 1
    while j >= 0 and len(out) < k:
        out.append(speakers[j])
        j = turn_start[j] - 1
    return out[::-1]


def conversation_points(
    conv: Conversation, opts: PointOptions | None = None
) -> Iterator[DecisionPoint]:
    """Yield every decision point of one conversation, in order.

    ``conv`` is prepared first (:func:`prepare_conversation`); the points' ``index`` and
    context refer to the prepared conversation, which the benchmark folder stores.
    """
    opts = opts or PointOptions()
    if conv.metadata.get("decision_moments") is None:
        conv = prepare_conversation(conv, opts)
    n = len(conv.utterances)
    if n < 2:
        return
    prefixes = Prefixes(model_visible(conv))
    all_cues = _all_cues(conv)
    presence = present_at(conv, [c.addressed for c in all_cues])
    by_id: dict[str, Participant] = {p.id: p for p in conv.participants}
    speakers = [u.speaker for u in conv.utterances]
    turn_start = _turn_starts(speakers)
    look_back = max(opts.fine_recent_speak, opts.fine_recent_silent)
    untimed = conv.metadata.get("decision_moments") != "pause"
    for b in decision_boundaries(conv, opts, questions_asked(conv, all_cues)):
        t = b.index
        current = conv.utterances[t]
        if t == 0 and not opts.keep_no_context:
            continue  # nothing was said before: the paper drops these
        if not boundary_is_decision_point(current, opts):
            continue
        present_ids = presence[t]
        targets = sorted(present_ids - {current.speaker})
        if not targets:
            continue
        cues: UtteranceCues = all_cues[t]
        present_participants = tuple(by_id[p] for p in sorted(present_ids))
        context = prefixes.view(t + 1)
        recent = _recent_turn_speakers(speakers, turn_start, t, look_back)
        joined = _joined_group_line(conv, t + 1, by_id, present_ids) if untimed else frozenset()
        for target in targets:
            gold = _gold(b, target, cues, current, recent, opts, target in joined)
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


def _all_cues(conv: Conversation) -> list[UtteranceCues]:
    """Address and reference cues of every utterance, against every participant (so a
    vocative can establish presence)."""
    matchers = build_matchers(conv.participants, is_cased(conv.utterances))
    all_cues = []
    last_spoke: dict[str, int] = {}
    # Chat: a leading nick without punctuation, in any case, is address too (turntaking.chat).
    chat_address = chat_address_cues(conv) if conv.domain == "chat" else None
    previous = None
    for i, u in enumerate(conv.utterances):
        cue = utterance_cues(u, matchers, last_spoke=last_spoke, previous=previous)
        previous = u
        all_cues.append(cue if chat_address is None else chat_address(u, cue))
        last_spoke[u.speaker] = i
    return all_cues


def _gold(
    b: Boundary,
    target: str,
    cues: UtteranceCues,
    current: Utterance,
    recent: list[str],
    opts: PointOptions,
    joined_group_line: bool = False,
) -> DecisionGold:
    """What ``target`` did at boundary ``b`` and how the moment is categorised.

    ``joined_group_line``: the next line is spoken by several people at once and the target
    is one of them, so the target takes the floor."""
    singled_out = len(cues.addressed) == 1
    outcome = b.outcomes.get(target, Outcome.SILENT)
    if joined_group_line:
        outcome = Outcome.TAKE_FLOOR
    label = outcome.decision
    addressed = target in cues.addressed
    referenced = target in cues.referenced
    in_exchange = target in recent[-opts.fine_recent_silent :]
    return DecisionGold(
        label=label,
        category=coarse_category(label, addressed, referenced, singled_out, in_exchange),
        fine_category=fine_category(
            label,
            addressed,
            referenced,
            target,
            recent,
            current,
            bool(cues.addressed) and not addressed,
            opts,
        ),
        addressed=addressed,
        referenced=referenced,
        address_evidence=cues.addressed.get(target),
        reference_evidence=cues.referenced.get(target),
        next_speaker=b.next_speaker,
        group_address=addressed and not singled_out,
        outcome=outcome,
        paper_category=paper_category(label, addressed, referenced, target, recent, opts),
        pause_time=b.time,
        pause_s=None if b.silence is None else round(b.silence, 3),
        in_exchange=in_exchange,
    )


#: Stage note of a group line naming who spoke it (the Friends JSON reader writes it).
_SPOKEN_TOGETHER = re.compile(r"\(spoken together by ([^)]*)\)")


def _joined_group_line(
    conv: Conversation, j: int, by_id: dict[str, Participant], present: frozenset[str]
) -> frozenset[str]:
    """Who joined utterance ``j`` when a group pseudo-speaker says it: the people present its
    note names, else everyone present (the CSV's ``#ALL#`` lines name nobody)."""
    if j >= len(conv.utterances):
        return frozenset()
    u = conv.utterances[j]
    p = by_id.get(u.speaker)
    if p is None or p.role != GROUP_ROLE:
        return frozenset()
    m = _SPOKEN_TOGETHER.search(u.note or "")
    named = frozenset(n.strip() for n in m.group(1).split(",")) & present if m else frozenset()
    return named or present  # "(spoken together by Both)" names nobody either


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
