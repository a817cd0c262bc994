"""Build new MeetingToM-style items from the AMI manual annotations (``polylogue tom build``).

The paper's construction (Appendix B.1) mines candidate spans per task from annotated meetings,
instantiates non-overlapping clips within each meeting (5 s for STATE, 50 s for YOU and
CONSENSUS), fills fixed question templates, and leaves the answers to two human annotators plus
an adjudicator. This module does the mining and the templates from what the AMI release in
``shared/data/ami`` holds, and proposes candidate answers; the answers become gold only after
``polylogue annotate`` (two annotators, adjudication, ``export --adjudicated``).

Per task, where candidates come from and how the proposed answers are obtained:

* **YOU**: every word "you" of a participant. An act with an ``addressee`` annotation gives Q1
  (one other letter, or MULTIPLE for several); else a you-usage annotation (Gupta et al.)
  drops generic and discourse-marker uses and gives MULTIPLE for plural ones; else the target
  of an adjacency pair whose source is the act; else the first other speaker within 6 s (a
  rule). Unresolvable cases are not kept (the paper keeps cases "whose addressees can be
  resolved"). Q2 asks the proposed addressee's attitude, as the release's Q2 does (so the joint
  prompt, and annotators who read both questions, see Q1's proposal; ``q2_subject="addressee"``
  writes "the addressee" instead, as the paper's Eq. 3 conditions on the addressee); its
  proposal is the adjacency-pair type of the addressee's reply (POS -> SUPPORT, NEG ->
  OPPOSE, UNC -> UNCERTAIN, PART/ELA -> NEUTRAL), else the reply's dialogue-act type (be.pos
  or agreeing assess -> SUPPORT, be.neg -> OPPOSE, else NEUTRAL).
  The "you" sits 15 s into the 50-s window, as in 168 of the 300 release items.
* **CONSENSUS**: anchors are the ends of AMI decision spans (``decision/manual``) and
  moments where two or more participants agree within 15 s (be.pos, agreeing assess, or
  positive adjacency pairs); the window covers 35 s before and 15 s after. The proposal counts
  positive and negative stance acts per participant: >= 2 agreeing and nobody negative ->
  TRUE_CONSENSUS; >= 2 agreeing and exactly one other participant negative ->
  PSEUDO_CONSENSUS with that participant as the dissenter; >= 2 negative participants or more
  negative than positive acts -> NO_CONSENSUS; else UNCERTAIN. No AMI layer annotates
  consensus quality, so every CONSENSUS proposal is a rule.
* **STATE**: a 50-s source window starting 1 s before an anchor act of the target, split into
  its first and last 5 s (two records, as in the release). Anchors are the target's acts,
  preferring the rarer states' cues (be.neg, el.und, stall/fragment, be.pos, inform/suggest,
  then silence). Each 5-s window's proposal follows the paper's Table 7 (AMI cues per state):
  negative act -> COGNITIVE_CONFLICT, elicit-understanding -> CONFUSED_BEWILDERMENT, only
  stalls/fragments/fillers -> HESITATION, positive act or agreeing backchannel ->
  SUPPORTIVE_ENDORSEMENT, >= 1 s of inform/suggest/offer/elicit -> ACTIVE_ENGAGEMENT, silent
  while others talk -> FOCUSED_LISTENING, silent through the whole source window ->
  DISENGAGED_WITHDRAWAL. Visual cues are not in this AMI copy, so these are rules too.

Output: a folder in the release's own format (``state.jsonl``, ``you.jsonl``,
``consensus.jsonl``, ``reconstruction.jsonl``) whose ``answers`` are the proposals, plus
``proposals.jsonl`` (per record and question: the proposal, its source ``ami:...`` or
``rule:...`` and the evidence) and ``build.json`` (options, meetings, the release-overlap
check, counts). Meetings the release uses are excluded by default and the exclusion is
checked on the output. The close-up camera of each letter is only known for sessions whose
series the release covers (it is constant within a series there); elsewhere
``closeup_to_agent`` is left empty and media must be mapped by hand.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from polylogue.conversation import Utterance
from polylogue.corpora._xml import NITE_ID, child_elements, element_refs, parse_xml, pointer_ref
from polylogue.corpora.ami import AmiWord, ami_meetings, ami_series, release_dir
from polylogue.errors import PolylogueInputError
from polylogue.tom.records import (
    CLOSEUP_VIEWS,
    CONS_Q1_LABELS,
    CONS_Q2_LABELS,
    PARTICIPANT_LETTERS,
    RECONSTRUCTION_FILE,
    STATE_LABELS,
    TASK_FILES,
    YOU_Q1_LABELS,
    YOU_Q2_LABELS,
    ToMTask,
    load_tom_benchmark,
)
from polylogue.tom.transcript import DISCOURSE_MARKERS, AmiSessions

PROPOSALS_FILE = "proposals.jsonl"
BUILD_FILE = "build.json"

#: Question templates of the release (B.2), filled per item.
STATE_TEMPLATE = "What is participant {target}'s state in the given video?"
YOU_Q1_TEMPLATE = (
    "In this clip, when {speaker} says 'you' around {time}s, who specifically is {speaker} "
    "referring to?"
)
YOU_Q2_TEMPLATE = "What is {subject}'s attitude toward {speaker}'s statement?"
CONS_Q1_TEXT = "What is the quality of group consensus at this moment?"
CONS_Q2_TEXT = "If pseudo-consensus, who appears to have weak buy-in or hidden disagreement?"

#: you-usage types (youUsages/00README.txt): NXT ontology id -> use.
YOU_USAGE = {
    "you_11": "singular",
    "you_12": "plural",
    "you_121": "plural",
    "you_122": "plural",
    "you_2": "generic",
    "you_3": "discourse",
}
#: Adjacency-pair types (ontologies/ap-types.xml).
AP_TYPES = {"apt_1": "POS", "apt_2": "NEG", "apt_3": "UNC", "apt_4": "PART", "apt_5": "ELA"}
AP_ATTITUDE = {
    "POS": "SUPPORT",
    "NEG": "OPPOSE",
    "UNC": "UNCERTAIN",
    "PART": "NEUTRAL",
    "ELA": "NEUTRAL",
}
_AGREE = re.compile(r"\b(yeah|yes|yep|okay|ok|sure|right|agree|agreed|good|great|exactly|fine)\b")
_FLOOR_ACTS = frozenset({"inf", "sug", "off", "el.inf", "el.sug", "el.ass", "ass"})


class BuildError(PolylogueInputError):
    """Bad build input: unknown meeting, overlap with the release, unusable options."""


@dataclass(frozen=True, slots=True)
class ToMBuildOptions:
    tasks: tuple[str, ...] = ("state", "you", "consensus")
    #: AMI meetings to mine (default: every four-person meeting of this AMI copy).
    meetings: tuple[str, ...] | None = None
    #: Leave out every meeting that the release (``release``) uses.
    exclude_release: bool = True
    window_s: float = 50.0
    you_at_s: float = 15.0
    state_s: float = 5.0
    #: Most items per task and meeting (windows of one task never overlap within a meeting).
    per_meeting: int = 6
    #: Next-speaker rule for YOU Q1 when no annotation resolves the addressee.
    reply_s: float = 6.0
    #: YOU Q2 names the proposed addressee as the release does ("proposal"; annotators and a
    #: joint prompt then see Q1's proposal in Q2's text), or says "the addressee" ("addressee").
    q2_subject: str = "proposal"

    def __post_init__(self) -> None:
        bad = [t for t in self.tasks if t not in {t.value for t in ToMTask}]
        if bad:
            raise BuildError(f"unknown task(s) {bad}")
        if not 0 < self.you_at_s < self.window_s or self.state_s * 2 > self.window_s:
            raise BuildError("windows: need 0 < you_at_s < window_s and 2 * state_s <= window_s")
        if self.per_meeting < 1:
            raise BuildError("per_meeting must be at least 1")
        if self.q2_subject not in ("proposal", "addressee"):
            raise BuildError(
                f"q2_subject must be 'proposal' or 'addressee', not {self.q2_subject!r}"
            )


@dataclass(frozen=True, slots=True)
class Proposal:
    """A proposed answer of one question, where it comes from, and why."""

    answer: str
    source: str  # "ami:<layer>" when an AMI annotation determines it, else "rule:<name>"
    evidence: str


@dataclass(frozen=True, slots=True)
class BuiltItem:
    task: ToMTask
    session: str
    bundle_name: str
    start: float
    end: float
    questions: dict[str, tuple[str, tuple[str, ...]]]
    proposals: dict[str, Proposal]
    #: STATE only.
    target: str | None = None
    window_index: int | None = None
    source_bundle_name: str | None = None

    @property
    def id(self) -> str:
        return f"{self.task.value}:{self.bundle_name}"


@dataclass
class BuildResult:
    folder: Path
    items: list[BuiltItem]
    meetings: list[str]
    excluded: list[str]
    counts: dict[str, dict[str, int]] = field(default_factory=dict)


# ----------------------------------------------------------------------------- AMI layers


@dataclass
class MeetingLayers:
    """Everything one meeting contributes: acts, words and the optional annotation layers."""

    meeting: str
    acts: list[Utterance]
    words: list[AmiWord]
    #: "you" word id -> usage (singular/plural/generic/discourse), where annotated.
    you_usage: dict[str, str]
    #: (source act id, target act id, type POS/NEG/UNC/PART/ELA).
    adjacency: list[tuple[str, str, str]]
    #: Decision spans (start, end) in seconds.
    decisions: list[tuple[float, float]]

    def __post_init__(self) -> None:
        self.by_id = {u.id: u for u in self.acts if u.id}
        self.replies: dict[str, list[tuple[Utterance, str]]] = defaultdict(list)
        self.incoming: dict[str, list[str]] = defaultdict(list)
        for src, tgt, kind in self.adjacency:
            if src in self.by_id and tgt in self.by_id:
                self.replies[src].append((self.by_id[tgt], kind))
                self.incoming[tgt].append(kind)

    @property
    def end(self) -> float:
        """Last annotated word end (the meeting's talk ends here)."""
        return max((w.end for w in self.words if w.end is not None), default=0.0)

    def window_start(self, wanted: float, length: float) -> float:
        """``wanted`` moved into the meeting: not before 0, not running past its last word."""
        return max(0.0, min(wanted, self.end - length))

    def acts_between(self, start: float, end: float) -> list[Utterance]:
        return [u for u in self.acts if u.start is not None and start <= u.start < end]

    def act_of_word(self, word: AmiWord) -> Utterance | None:
        t = word.start
        if t is None:
            return None
        for u in self.acts:
            if (
                u.speaker == word.speaker
                and u.start is not None
                and u.end is not None
                and u.start - 1e-6 <= t <= u.end + 1e-6
            ):
                return u
        return None


def _read_you_usage(rel: Path, meeting: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted((rel / "youUsages").glob(f"{meeting}.*.you.xml")):
        for el in child_elements(parse_xml(path)):
            ptr = pointer_ref(el, "type", path)
            usage = YOU_USAGE.get(ptr.start) if ptr is not None else None
            for ref in element_refs(el, path):
                if usage is not None:
                    out[ref.start] = usage
    return out


def _read_adjacency(rel: Path, meeting: str) -> list[tuple[str, str, str]]:
    path = rel / "dialogueActs" / f"{meeting}.adjacency-pairs.xml"
    if not path.is_file():
        return []
    out = []
    for el in child_elements(parse_xml(path)):
        kind, src, tgt = pointer_ref(el, "type", path), None, None
        src_ref, tgt_ref = pointer_ref(el, "source", path), pointer_ref(el, "target", path)
        src = src_ref.start if src_ref is not None else None
        tgt = tgt_ref.start if tgt_ref is not None else None
        if kind is not None and src and tgt and kind.start in AP_TYPES:
            out.append((src, tgt, AP_TYPES[kind.start]))
    return out


def _read_decisions(rel: Path, meeting: str, words: Sequence[AmiWord]) -> list[tuple[float, float]]:
    path = rel / "decision" / "manual" / f"{meeting}.decision.xml"
    if not path.is_file():
        return []
    times = {w.word_id: (w.start, w.end) for w in words}
    out = []
    for el in child_elements(parse_xml(path)):
        if el.get(NITE_ID) is None:
            continue
        ts: list[float] = []
        for ref in element_refs(el, path):
            for wid in (ref.start, ref.end):
                s, e = times.get(wid or "", (None, None))
                ts += [t for t in (s, e) if t is not None]
        if ts:
            out.append((min(ts), max(ts)))
    return sorted(out)


def load_layers(sessions: AmiSessions, meeting: str) -> MeetingLayers:
    rel = release_dir(sessions.folder)
    conv = sessions.conversation(meeting)
    words = sessions.words(meeting)
    acts = [u for u in conv.utterances if u.start is not None and u.end is not None]
    return MeetingLayers(
        meeting=meeting,
        acts=acts,
        words=words,
        you_usage=_read_you_usage(rel, meeting),
        adjacency=_read_adjacency(rel, meeting),
        decisions=_read_decisions(rel, meeting, words),
    )


# ----------------------------------------------------------------------------- stance of acts


def _positive(u: Utterance, layers: MeetingLayers) -> bool:
    if u.dialogue_act == "be.pos" or "POS" in layers.incoming.get(u.id or "", ()):
        return True
    agreeing = _AGREE.search(u.text.lower()) is not None
    return u.dialogue_act in ("ass", "bck") and agreeing and " not " not in f" {u.text.lower()} "


def _negative(u: Utterance, layers: MeetingLayers) -> bool:
    return u.dialogue_act == "be.neg" or "NEG" in layers.incoming.get(u.id or "", ())


# ----------------------------------------------------------------------------- YOU


@dataclass(frozen=True, slots=True)
class _Candidate:
    rank: int  # higher = better grounded in annotation
    time: float  # anchor time (session seconds)
    start: float
    end: float
    payload: dict[str, Any]


def _you_candidates(layers: MeetingLayers, opts: ToMBuildOptions) -> list[_Candidate]:
    out = []
    for w in layers.words:
        if w.text.lower() != "you" or w.start is None or w.speaker not in PARTICIPANT_LETTERS:
            continue
        usage = layers.you_usage.get(w.word_id)
        if usage in ("generic", "discourse"):
            continue  # not an address: the paper keeps addressed uses only
        act = layers.act_of_word(w)
        if act is None:
            continue
        q1 = _you_addressee(w, act, usage, layers, opts)
        if q1 is None:
            continue
        start = layers.window_start(w.start - opts.you_at_s, opts.window_s)
        rank = {"ami:addressee": 3, "ami:you-usage": 2, "ami:adjacency-pair": 1}.get(q1.source, 0)
        out.append(
            _Candidate(
                rank, w.start, start, start + opts.window_s, {"word": w, "act": act, "q1": q1}
            )
        )
    return out


def _you_addressee(
    word: AmiWord, act: Utterance, usage: str | None, layers: MeetingLayers, opts: ToMBuildOptions
) -> Proposal | None:
    speaker = word.speaker
    if act.addressees is not None:
        others = [a for a in act.addressees if a != speaker and a in PARTICIPANT_LETTERS]
        if not others:
            return None
        answer = others[0] if len(others) == 1 else "MULTIPLE"
        return Proposal(answer, "ami:addressee", f"act {act.id} addressee={','.join(others)}")
    if usage == "plural":
        return Proposal("MULTIPLE", "ami:you-usage", f"you-usage of {word.word_id}: plural")
    replies = [u for u, _ in layers.replies.get(act.id or "", ()) if u.speaker != speaker]
    if replies:
        first = min(replies, key=lambda u: u.start or 0.0)
        return Proposal(
            first.speaker, "ami:adjacency-pair", f"act {act.id} is answered by act {first.id}"
        )
    assert word.start is not None
    after = [
        u
        for u in layers.acts_between(word.start, word.start + opts.reply_s)
        if u.speaker != speaker and u.speaker in PARTICIPANT_LETTERS
    ]
    if not after:
        return None
    return Proposal(
        after[0].speaker,
        "rule:next-speaker",
        f"first other speaker within {opts.reply_s:g} s of the 'you'"
        + (" (you-usage: singular)" if usage == "singular" else ""),
    )


def _you_attitude(
    word: AmiWord, act: Utterance, addressee: str, end: float, layers: MeetingLayers
) -> Proposal:
    assert word.start is not None
    who = set(PARTICIPANT_LETTERS) - {word.speaker} if addressee == "MULTIPLE" else {addressee}
    for reply, kind in sorted(layers.replies.get(act.id or "", ()), key=lambda x: x[0].start or 0):
        if reply.speaker in who:
            return Proposal(
                AP_ATTITUDE[kind], "ami:adjacency-pair", f"{reply.id} answers {act.id} ({kind})"
            )
    responses = [u for u in layers.acts_between(word.start, end) if u.speaker in who]
    for u in responses:
        if _negative(u, layers):
            return Proposal("OPPOSE", "rule:dialogue-acts", f"{u.id} ({u.dialogue_act})")
    for u in responses:
        if _positive(u, layers):
            return Proposal("SUPPORT", "rule:dialogue-acts", f"{u.id} ({u.dialogue_act})")
    if responses:
        return Proposal("NEUTRAL", "rule:dialogue-acts", f"{len(responses)} non-polar act(s)")
    return Proposal("NEUTRAL", "rule:dialogue-acts", "no reply in the window")


# ----------------------------------------------------------------------------- CONSENSUS


def _consensus_candidates(layers: MeetingLayers, opts: ToMBuildOptions) -> list[_Candidate]:
    before = opts.window_s - 15.0
    anchors: list[tuple[int, float, str]] = [
        (2, end, f"decision span {start:.1f}-{end:.1f} s") for start, end in layers.decisions
    ]
    positives = [u for u in layers.acts if _positive(u, layers)]
    for i, u in enumerate(positives):
        assert u.start is not None
        near = {v.speaker for v in positives[i:] if (v.start or 0.0) - u.start <= 15.0}
        if len(near) >= 2:
            anchors.append((1, u.start, f"agreement by {','.join(sorted(near))} within 15 s"))
    out = []
    for rank, t, why in anchors:
        start = layers.window_start(t - before, opts.window_s)
        out.append(_Candidate(rank, t, start, start + opts.window_s, {"why": why}))
    return out


def _consensus_proposal(
    layers: MeetingLayers, start: float, end: float
) -> tuple[Proposal, Proposal]:
    pos: Counter[str] = Counter()
    neg: Counter[str] = Counter()
    for u in layers.acts_between(start, end):
        if u.speaker not in PARTICIPANT_LETTERS:
            continue
        if _negative(u, layers):
            neg[u.speaker] += 1
        elif _positive(u, layers):
            pos[u.speaker] += 1
    why = f"positive acts {dict(sorted(pos.items()))}, negative acts {dict(sorted(neg.items()))}"
    none = Proposal("NONE", "rule:stance-counts", why)
    if len(neg) >= 2 or sum(neg.values()) > sum(pos.values()):
        return Proposal("NO_CONSENSUS", "rule:stance-counts", why), none
    agreeing = set(pos) - set(neg)
    if len(agreeing) >= 2 and not neg:
        return Proposal("TRUE_CONSENSUS", "rule:stance-counts", why), none
    if len(agreeing) >= 2 and len(neg) == 1:
        dissenter = next(iter(neg))
        return (
            Proposal("PSEUDO_CONSENSUS", "rule:stance-counts", why),
            Proposal(dissenter, "rule:stance-counts", f"the one negative participant; {why}"),
        )
    return Proposal("UNCERTAIN", "rule:stance-counts", why), none


# ----------------------------------------------------------------------------- STATE

#: Anchor priority of the target's acts (rarer states first), by dialogue-act type.
_STATE_ANCHORS = {"be.neg": 6, "el.und": 5, "stl": 4, "fra": 4, "be.pos": 3, "und": 3}


def _state_candidates(layers: MeetingLayers, opts: ToMBuildOptions) -> list[_Candidate]:
    out = []
    for u in layers.acts:
        if u.speaker not in PARTICIPANT_LETTERS or u.start is None:
            continue
        rank = _STATE_ANCHORS.get(u.dialogue_act or "", 1 if u.dialogue_act in _FLOOR_ACTS else 0)
        if rank == 0:
            continue
        start = layers.window_start(u.start - 1.0, opts.window_s)
        out.append(
            _Candidate(rank, u.start, start, start + opts.window_s, {"target": u.speaker, "act": u})
        )
    return out


def _state_proposal(
    layers: MeetingLayers, target: str, start: float, end: float, source: tuple[float, float]
) -> Proposal:
    own = [u for u in layers.acts if u.speaker == target and _overlaps(u, start, end)]
    talk = sum(_overlap_s(u, start, end) for u in own)
    acts = [u.dialogue_act or "" for u in own]
    desc = f"{target} acts {acts or 'none'}, {talk:.1f} s of speech in the window"
    if any(_negative(u, layers) for u in own):
        return Proposal("COGNITIVE_CONFLICT", "rule:acts", desc)
    if "el.und" in acts:
        return Proposal("CONFUSED_BEWILDERMENT", "rule:acts", desc)
    if own and all(a in ("stl", "fra") or _fillers_only(u) for a, u in zip(acts, own, strict=True)):
        return Proposal("HESITATION", "rule:acts", desc)
    if any(_positive(u, layers) for u in own):
        return Proposal("SUPPORTIVE_ENDORSEMENT", "rule:acts", desc)
    if talk >= 1.0 and any(a in _FLOOR_ACTS for a in acts):
        return Proposal("ACTIVE_ENGAGEMENT", "rule:speaking-time", desc)
    if not own:
        others = [u for u in layers.acts if u.speaker != target and _overlaps(u, start, end)]
        silent_all = not any(u.speaker == target and _overlaps(u, *source) for u in layers.acts)
        if silent_all:
            return Proposal(
                "DISENGAGED_WITHDRAWAL", "rule:speaking-time", f"{target} silent for the 50 s"
            )
        if others:
            return Proposal(
                "FOCUSED_LISTENING", "rule:speaking-time", f"{target} silent, others talk"
            )
    return Proposal("FOCUSED_LISTENING", "rule:speaking-time", desc)


def _overlaps(u: Utterance, start: float, end: float) -> bool:
    return u.start is not None and u.end is not None and u.start < end and u.end > start


def _overlap_s(u: Utterance, start: float, end: float) -> float:
    assert u.start is not None and u.end is not None
    return max(0.0, min(u.end, end) - max(u.start, start))


def _fillers_only(u: Utterance) -> bool:
    words = [w.strip(".,?!").lower() for w in u.text.split()]
    return bool(words) and all(w in DISCOURSE_MARKERS for w in words)


# ----------------------------------------------------------------------------- selection


def _select(cands: Sequence[_Candidate], limit: int) -> list[_Candidate]:
    """Best-grounded first, then earliest; no two chosen windows overlap."""
    chosen: list[_Candidate] = []
    for c in sorted(cands, key=lambda c: (-c.rank, c.time)):
        if len(chosen) >= limit:
            break
        if all(c.end <= o.start or c.start >= o.end for o in chosen):
            chosen.append(c)
    return sorted(chosen, key=lambda c: c.start)


def _fmt_time(t: float) -> str:
    return f"{t:.1f}"


def build_meeting(layers: MeetingLayers, opts: ToMBuildOptions) -> list[BuiltItem]:
    """Items of one meeting for the requested tasks."""
    m = layers.meeting
    items: list[BuiltItem] = []
    if "state" in opts.tasks:
        for n, c in enumerate(_select(_state_candidates(layers, opts), opts.per_meeting), 1):
            target = c.payload["target"]
            source = f"{m}_state{n:04d}"
            for k, w0 in enumerate((c.start, c.end - opts.state_s)):
                prop = _state_proposal(layers, target, w0, w0 + opts.state_s, (c.start, c.end))
                items.append(
                    BuiltItem(
                        task=ToMTask.STATE,
                        session=m,
                        bundle_name=f"{source}_w{k}",
                        start=w0,
                        end=w0 + opts.state_s,
                        questions={"Q1": (STATE_TEMPLATE.format(target=target), STATE_LABELS)},
                        proposals={"Q1": prop},
                        target=target,
                        window_index=k,
                        source_bundle_name=source,
                    )
                )
    if "you" in opts.tasks:
        for n, c in enumerate(_select(_you_candidates(layers, opts), opts.per_meeting), 1):
            word, act, q1 = c.payload["word"], c.payload["act"], c.payload["q1"]
            speaker = word.speaker
            q1_text = YOU_Q1_TEMPLATE.format(speaker=speaker, time=_fmt_time(word.start - c.start))
            subject = q1.answer if opts.q2_subject == "proposal" else "the addressee"
            q2_text = YOU_Q2_TEMPLATE.format(subject=subject, speaker=speaker)
            items.append(
                BuiltItem(
                    task=ToMTask.YOU,
                    session=m,
                    bundle_name=f"{m}_you{n:04d}",
                    start=c.start,
                    end=c.end,
                    questions={"Q1": (q1_text, YOU_Q1_LABELS), "Q2": (q2_text, YOU_Q2_LABELS)},
                    proposals={"Q1": q1, "Q2": _you_attitude(word, act, q1.answer, c.end, layers)},
                )
            )
    if "consensus" in opts.tasks:
        for n, c in enumerate(_select(_consensus_candidates(layers, opts), opts.per_meeting), 1):
            p1, p2 = _consensus_proposal(layers, c.start, c.end)
            p1 = Proposal(p1.answer, p1.source, f"{c.payload['why']}; {p1.evidence}")
            items.append(
                BuiltItem(
                    task=ToMTask.CONSENSUS,
                    session=m,
                    bundle_name=f"{m}_consensus{n:04d}",
                    start=c.start,
                    end=c.end,
                    questions={
                        "Q1": (CONS_Q1_TEXT, CONS_Q1_LABELS),
                        "Q2": (CONS_Q2_TEXT, CONS_Q2_LABELS),
                    },
                    proposals={"Q1": p1, "Q2": p2},
                )
            )
    return items


# ----------------------------------------------------------------------------- release format


def release_sessions(folder: str | Path) -> set[str]:
    bench = load_tom_benchmark(folder)
    return {r.item.session_id for r in bench.all_records()}


def release_closeups(folder: str | Path) -> dict[str, dict[str, str]]:
    """Series -> close-up view -> letter, where every release session of the series agrees."""
    bench = load_tom_benchmark(folder)
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in bench.all_records():
        recon = r.item.reconstruction
        for view, agent in recon.closeup_to_agent.items():
            seen[ami_series(r.item.session_id)][view].add(agent)
        if recon.target_view and recon.target_agent:
            seen[ami_series(r.item.session_id)][recon.target_view].add(recon.target_agent)
    out = {}
    for series, views in seen.items():
        if set(views) == set(CLOSEUP_VIEWS) and all(len(v) == 1 for v in views.values()):
            out[series] = {v: next(iter(a)) for v, a in sorted(views.items())}
    return out


def _mosaic(task: ToMTask) -> dict[str, Any]:
    m: dict[str, Any] = {
        "layout": "2x2",
        "top_left": "Closeup1",
        "top_right": "Closeup2",
        "bottom_left": "Closeup3",
        "bottom_right": "Closeup4",
    }
    if task is ToMTask.CONSENSUS:
        m |= {"tile_width": 640, "tile_height": 360, "output_width": 1280, "output_height": 720}
    return m


def item_record(item: BuiltItem) -> dict[str, Any]:
    """The task-file line (B.2 key order), answers = the proposals."""
    d: dict[str, Any] = {"id": item.id, "task": item.task.value, "bundle_name": item.bundle_name}
    if item.source_bundle_name is not None:
        d["source_bundle_name"] = item.source_bundle_name
    d["session_id"] = item.session
    if item.window_index is not None:
        d["window_index"] = item.window_index
    d["answers"] = {q: p.answer for q, p in item.proposals.items()}
    d["questions"] = {q: {"text": t, "options": list(o)} for q, (t, o) in item.questions.items()}
    return d


def reconstruction_record(item: BuiltItem, closeups: Mapping[str, str]) -> dict[str, Any]:
    """The reconstruction line; close-up mapping only where the release fixes it."""
    window = {
        "start": round(item.start, 3),
        "end": round(item.end, 3),
        "duration": round(item.end - item.start, 3),
    }
    d: dict[str, Any] = {
        "id": item.id,
        "task": item.task.value,
        "bundle_name": item.bundle_name,
        "session_id": item.session,
    }
    if item.task is ToMTask.STATE:
        view = next((v for v, a in closeups.items() if a == item.target), None)
        d |= {
            "source_bundle_name": item.source_bundle_name,
            "window_index": item.window_index,
            "target_agent": item.target,
            "target_view": view,
            "source_window": window,
            "required_views": [view] if view else [],
        }
        return d
    d |= {
        "source_window": window,
        "questions": sorted(item.questions),
        "required_views": (["Corner"] if item.task is ToMTask.YOU else []) + list(CLOSEUP_VIEWS),
        "mosaic": _mosaic(item.task),
        "closeup_to_agent": dict(closeups),
    }
    return d


def write_release(
    items: Sequence[BuiltItem], out: Path, closeups: Mapping[str, Mapping[str, str]]
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    by_task: dict[ToMTask, list[BuiltItem]] = defaultdict(list)
    for it in items:
        by_task[it.task].append(it)
    for task in ToMTask:  # every task file, empty or not, so load_tom_benchmark reads the folder
        with open(out / TASK_FILES[task], "w", encoding="utf-8") as f:
            for it in by_task.get(task, []):
                f.write(json.dumps(item_record(it)) + "\n")
    with open(out / RECONSTRUCTION_FILE, "w", encoding="utf-8") as f:
        for task in ToMTask:
            for it in by_task.get(task, []):
                mapping = closeups.get(ami_series(it.session), {})
                f.write(json.dumps(reconstruction_record(it, mapping)) + "\n")
    with open(out / PROPOSALS_FILE, "w", encoding="utf-8") as f:
        for it in items:
            row = {"id": it.id, "proposals": {q: asdict(p) for q, p in it.proposals.items()}}
            f.write(json.dumps(row) + "\n")


# ----------------------------------------------------------------------------- entry point


def default_meetings(ami_folder: str | Path) -> list[str]:
    """Scenario meetings (ES, IS, TS) of this AMI copy with four speakers A-D, as the paper
    uses scenario-based product-design meetings."""
    rel = release_dir(ami_folder)
    out = []
    for m in ami_meetings(ami_folder):
        if m[:2] not in ("ES", "IS", "TS"):
            continue
        letters = {p.name.split(".")[1] for p in (rel / "words").glob(f"{m}.*.words.xml")}
        if letters == set(PARTICIPANT_LETTERS):
            out.append(m)
    return out


def build_items(
    ami_folder: str | Path,
    out: str | Path,
    options: ToMBuildOptions | None = None,
    release_folder: str | Path | None = None,
) -> BuildResult:
    """Mine, propose, write the release-format folder, and check it against the release."""
    opts = options or ToMBuildOptions()
    if release_folder is None:
        from polylogue.paths import corpus_dir

        release_folder = corpus_dir("meetingtom")
    used = release_sessions(release_folder)
    available = default_meetings(ami_folder)
    wanted = list(opts.meetings) if opts.meetings is not None else available
    unknown = [m for m in wanted if m not in available]
    if unknown:
        raise BuildError(f"not four-person AMI meetings of {ami_folder}: {', '.join(unknown)}")
    excluded = sorted(m for m in wanted if m in used) if opts.exclude_release else []
    meetings = [m for m in wanted if m not in excluded]
    if not meetings:
        raise BuildError("no meetings left to mine (all are used by the release)")
    sessions = AmiSessions(ami_folder)
    items: list[BuiltItem] = []
    for m in meetings:
        items.extend(build_meeting(load_layers(sessions, m), opts))
    overlap = sorted({it.session for it in items} & used)
    if opts.exclude_release and overlap:  # the guarantee the default makes, checked on output
        raise BuildError(f"built items use release meetings: {', '.join(overlap)}")
    folder = Path(out)
    closeups = release_closeups(release_folder)
    write_release(items, folder, closeups)
    counts = _counts(items)
    manifest = {
        "kind": "meetingtom-build",
        "note": "answers are machine proposals, not gold: annotate with `polylogue annotate`",
        "options": {**asdict(opts), "meetings": list(opts.meetings) if opts.meetings else None},
        "ami": str(Path(ami_folder).resolve()),
        "release": str(Path(release_folder).resolve()),
        "meetings": meetings,
        "excluded_release_meetings": excluded,
        "release_overlap": overlap,
        "closeup_mapping_from_release": sorted({ami_series(m) for m in meetings} & set(closeups)),
        "counts": counts,
    }
    (folder / BUILD_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return BuildResult(folder, items, meetings, excluded, counts)


def _counts(items: Iterable[BuiltItem]) -> dict[str, dict[str, int]]:
    """Per task.question: proposed labels, and (keys ``source:...``) where they come from."""
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for it in items:
        for q, p in it.proposals.items():
            out[f"{it.task.value}.{q}"][p.answer] += 1
            out[f"{it.task.value}.{q}"][f"source:{p.source}"] += 1
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}
