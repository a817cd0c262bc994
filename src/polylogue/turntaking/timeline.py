"""Speech-activity timelines, real pauses and what each listener does after them.

A *decision point* is a moment where an agent has to decide. In a timed corpus that is a real
pause: the end ``T`` of a stretch of speech after which **nobody** speaks for at least ``gap``
seconds. Speech that lies inside someone else's speech (a backchannel under a long turn) ends
no pause, because the other speaker is still talking. In an untimed corpus (Friends scripts,
QMSum text) the only moments known are utterance boundaries, so those are used.

Timed conversations are put in *end order* (by the time each utterance finished): then the
context at a pause (everything finished by ``T``) is a prefix, its last element is the speech
that just ended, and nothing in it starts after the pause. A pause also splits the start
order at the same place (all speech before ``T`` started before ``T``, all after starts after
``T + gap``), which makes the scan linear.

Outcomes per listener at a pause (see docs/benchmark.md):

* ``TAKE_FLOOR``: the listener is the first to start speech after the pause that is not a
  backchannel.
* ``BACKCHANNEL``: the listener's first speech after the pause is only an acknowledgement, it
  starts before the first stretch of the floor holder after the pause ends (and before the
  next pause), and somebody else holds the floor.
* ``SILENT``: anything else.

Backchannels are AMI dialogue acts of type ``bck`` where the corpus annotates dialogue-act
types; elsewhere a lexical + timing rule (:func:`polylogue.turntaking.cues.is_lexical_backchannel`,
at most ``BACKCHANNEL_MAX_S`` long when timed) that also requires the previous speaker to go on:
a "yeah" after which somebody else starts is an answer, so it takes the floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from polylogue.conversation import DEFAULT_GAP_S, Conversation, Utterance, effective_gap
from polylogue.turntaking.cues import is_lexical_backchannel
from polylogue.turntaking.types import Outcome

#: A lexical backchannel in a timed corpus lasts at most this long.
BACKCHANNEL_MAX_S = 1.5
#: AMI dialogue-act type of a backchannel (``ontologies/da-types.xml``).
BACKCHANNEL_ACT = "bck"


@dataclass(frozen=True, slots=True)
class Boundary:
    """One decision moment of a conversation.

    ``index`` is the position of the utterance that just ended (``context[-1]``); ``time`` the
    pause moment (``None`` when untimed) and ``silence`` how long nobody spoke after it.
    ``outcomes`` holds every participant who took the floor or backchannelled (everyone else
    was silent); ``next_speaker`` is whoever holds the floor after the pause (possibly the
    same speaker going on).
    """

    index: int
    time: float | None
    silence: float | None
    outcomes: dict[str, Outcome]
    next_speaker: str | None


def is_timed(conv: Conversation) -> bool:
    """Every utterance has a start and an end, and no end precedes its start."""
    return bool(conv.utterances) and all(
        u.start is not None and u.end is not None and u.end >= u.start for u in conv.utterances
    )


def end_ordered(conv: Conversation) -> Conversation:
    """``conv`` with utterances in the order they finished (ties: start, speaker, position)."""
    order = sorted(
        range(len(conv.utterances)),
        key=lambda i: (
            conv.utterances[i].end,
            conv.utterances[i].start,
            conv.utterances[i].speaker,
            i,
        ),
    )
    if order == list(range(len(order))):
        return replace(conv, metadata={**conv.metadata, "order": "end"})
    return replace(
        conv,
        utterances=tuple(conv.utterances[i] for i in order),
        metadata={**conv.metadata, "order": "end"},
    )


def has_dialogue_act_types(conv: Conversation) -> bool:
    return any(u.dialogue_act is not None for u in conv.utterances)


#: Backchannel evidence per utterance (:func:`backchannel_candidates`).
NOT_BACKCHANNEL, LEXICAL, ANNOTATED = 0, 1, 2


def backchannel_candidates(conv: Conversation, timed: bool) -> list[int]:
    """Per utterance: could it be a backchannel, and on what evidence.

    ``ANNOTATED``: an AMI act of type ``bck`` (the annotators heard it as one). ``LEXICAL``:
    any other utterance made only of acknowledgement words and fillers, at most
    ``BACKCHANNEL_MAX_S`` long when timed (:func:`cues.is_lexical_backchannel`); it counts only
    when the previous speaker goes on (:func:`_outcomes`). One rule for every corpus: AMI's
    untagged "Okay" or "Mm" after which the speaker goes on is a backchannel too.
    """
    annotated = has_dialogue_act_types(conv)
    out = []
    for u in conv.utterances:
        if annotated and u.dialogue_act == BACKCHANNEL_ACT:
            out.append(ANNOTATED)
            continue
        short = not timed or (u.duration is not None and u.duration <= BACKCHANNEL_MAX_S)
        out.append(LEXICAL if short and is_lexical_backchannel(u.text) else NOT_BACKCHANNEL)
    return out


def pause_boundaries(
    conv: Conversation,
    gap: float = DEFAULT_GAP_S,
    backchannels: bool = True,
    asked: Sequence[frozenset[str] | None] | None = None,
) -> list[Boundary]:
    """Real pauses of a timed, end-ordered conversation (see :func:`end_ordered`).

    ``asked`` (per utterance: who a question is put to, empty = everyone; None: no question)
    makes an acknowledgement after a question an answer (a floor take)."""
    utts = conv.utterances
    n = len(utts)
    if n < 2:
        return []
    starts = [float(u.start) for u in utts]  # type: ignore[arg-type]
    ends = [float(u.end) for u in utts]  # type: ignore[arg-type]
    suffix_min = [0.0] * (n + 1)
    suffix_min[n] = float("inf")
    for i in range(n - 1, -1, -1):
        suffix_min[i] = min(starts[i], suffix_min[i + 1])
    eff = effective_gap(gap)
    pauses = [i for i in range(n - 1) if suffix_min[i + 1] - ends[i] >= eff]
    # Speech that starts at the same moment: the longer stretch first, so a short "Um" said
    # with a real turn never takes the floor from it.
    start_order = sorted(range(n), key=lambda i: (starts[i], -ends[i], utts[i].speaker, i))
    bc = backchannel_candidates(conv, timed=True) if backchannels else [NOT_BACKCHANNEL] * n
    out: list[Boundary] = []
    for k, i in enumerate(pauses):
        window_end = pauses[k + 1] + 1 if k + 1 < len(pauses) else n
        out.append(
            _outcomes(
                i,
                ends[i],
                suffix_min[i + 1] - ends[i],
                utts,
                start_order,
                (i + 1, n, window_end),
                bc,
                asked[i] if asked is not None else None,
            )
        )
    return out


def utterance_boundaries(
    conv: Conversation,
    backchannels: bool = True,
    asked: Sequence[frozenset[str] | None] | None = None,
) -> list[Boundary]:
    """Utterance boundaries of an untimed conversation (the paper's decision moments)."""
    utts = conv.utterances
    n = len(utts)
    bc = backchannel_candidates(conv, timed=False) if backchannels else [NOT_BACKCHANNEL] * n
    out: list[Boundary] = []
    order = range(n)
    for i in range(n - 1):
        # Only the next utterance is known to follow the boundary; the one after it tells
        # whether the previous speaker went on after a backchannel.
        out.append(
            _outcomes(
                i,
                None,
                None,
                utts,
                order,
                (i + 1, min(n, i + 3), i + 2),
                bc,
                asked[i] if asked is not None else None,
            )
        )
    return out


def _outcomes(
    i: int,
    time: float | None,
    silence: float | None,
    utts: Sequence[Utterance],
    order: Sequence[int],
    span: tuple[int, int, int],
    bc: Sequence[int],
    asked: frozenset[str] | None,
) -> Boundary:
    """Outcomes at boundary ``i``. ``order[lo:hi]`` is the speech after it in start order and
    ``order[lo:window_hi]`` the part before the next decision moment (indices, not copies:
    slicing per boundary would make long transcripts quadratic). ``asked``: who the current
    utterance's question is put to (empty: everyone), None when it asks nothing."""
    lo, hi, window_hi = span
    current = utts[i].speaker

    def kind(j: int) -> int:
        k = bc[j]
        # An acknowledgement from someone a question is put to answers it.
        if k == LEXICAL and asked is not None and (not asked or utts[j].speaker in asked):
            return NOT_BACKCHANNEL
        return k

    first_real = next((order[k] for k in range(lo, hi) if not kind(order[k])), None)
    # Lexical rule: an acknowledgement only counts as a backchannel when the previous speaker
    # goes on; otherwise the first speech after the pause that no annotator tagged as a
    # backchannel takes the floor (a "Yeah." after which somebody else starts is an answer).
    lexical_count = first_real is not None and utts[first_real].speaker == current
    if not lexical_count:
        first_real = next((order[k] for k in range(lo, hi) if kind(order[k]) != ANNOTATED), None)
    outcomes: dict[str, Outcome] = {}
    holder = utts[first_real].speaker if first_real is not None else None
    if holder is not None and holder != current:
        outcomes[holder] = Outcome.TAKE_FLOOR
    # A backchannel answers this pause only if it starts before the first stretch of the
    # floor holder ends; later ones acknowledge that new speech, not the pause.
    deadline = utts[first_real].end if first_real is not None else None
    seen: set[str] = set()
    for k in range(lo, window_hi):
        j = order[k]
        start = utts[j].start
        if deadline is not None and start is not None and start > deadline:
            break
        spk = utts[j].speaker
        if spk in seen or spk == current:
            continue
        seen.add(spk)
        kj = kind(j)
        if spk not in outcomes and (kj == ANNOTATED or (kj == LEXICAL and lexical_count)):
            outcomes[spk] = Outcome.BACKCHANNEL
    return Boundary(index=i, time=time, silence=silence, outcomes=outcomes, next_speaker=holder)


def pause_counts(conv: Conversation, gaps: Sequence[float]) -> dict[float, int]:
    """Number of real pauses for each gap (for the documentation's 0/200/500 ms table)."""
    if not is_timed(conv):
        return dict.fromkeys(gaps, 0)
    ordered = end_ordered(conv)
    return {g: len(pause_boundaries(ordered, g, backchannels=False)) for g in gaps}
