"""Streaming conversation state and the feature vector of one (pause, target) decision.

This is the single feature implementation used by training, evaluation and the live engine.
:class:`ConversationState` is updated once per arriving utterance (:meth:`observe`: text facts,
turn-yield score, speaker statistics), so a decision at a pause only reads counters and matches
names in the last two utterances: constant work however long the meeting has been.

Only the past is used: who spoke, what they said and when, up to and including the utterance
that just ended. The start time of the next utterance is never seen.

Memory stays flat however long the stream: the state keeps the last two utterances, each
participant's latest utterance, a short window of recent speakers and turns, and counters; names
are matched through one incrementally updated index (:mod:`polylogue.engine.names`).
"""

from __future__ import annotations

import bisect
import copy
import enum
import itertools
import math
import re
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, cast

import numpy as np

from polylogue.conversation import GROUP_ROLE, Participant, RosterDicts, Utterance
from polylogue.engine.blocks import FeatureBlock
from polylogue.engine.names import NameIndex
from polylogue.engine.punctuation import PunctuationModel, has_punctuation, load_punctuation_model
from polylogue.engine.text import TextFacts, hash_keys, text_facts
from polylogue.turntaking.address import (
    NO_ADDRESS,
    Address,
    AddressVerdict,
    NameTerms,
    PriorTurn,
    address_verdict,
    asks_who,
    substantive,
)
from polylogue.turntaking.address_model import AddressModel
from polylogue.turntaking.cues import UtteranceCues, is_cased, utterance_cues

#: The cues of a context-only speaker's words: nobody addressed or referenced.
_NO_CUES = UtteranceCues(addressed={}, referenced={}, annotated=False)

#: A linear model over hashed vocabulary ids -> logit (see polylogue.engine.model).
HashedScorer = Callable[[tuple[int, ...]], float]

_RECENT = 20
_RECENT_TURNS = 8
#: A sentence mark at the end of a word: the utterance was written with punctuation.
_WORD_END_MARK = re.compile(r"[.?!,;:](?=\s|$)")
_CAP = 50.0


class Spoken(enum.Enum):
    """The type of :data:`SPOKEN`."""

    SPOKEN = "spoken"


#: ``present`` for "everyone who has spoken, and the target" (no roster is known).
SPOKEN = Spoken.SPOKEN

FEATURE_NAMES: tuple[str, ...] = (
    # people
    "n_present",
    "n_speakers_seen",
    "log_n_utterances",
    # where the target stands in the recent turn sequence
    "target_spoke_prev_utt",
    "target_is_prev_turn_speaker",
    "target_is_prev2_turn_speaker",
    "target_recency_rank",
    "utts_since_target",
    "turns_since_target",
    "target_never_spoke",
    "target_share_recent",
    "target_share_all",
    "target_word_share_all",
    "target_turn_share",
    # who follows whom
    "p_target_after_speaker",
    "p_target_after_speaker_prior",
    "speaker_yield_rate",
    "target_replies_to_speaker_rate",
    # the current speaker's turn so far
    "run_length",
    "run_words",
    "speaker_share_recent",
    # the words of the current utterance
    "n_words",
    "question_mark",
    "wh_start",
    "aux_start",
    "ask_request",
    "second_person",
    "first_plural",
    "third_person_pronoun",
    "group_address",
    "incomplete",
    "trailing_continuer",
    "ends_terminal",
    "acknowledgement",
    "yield_logit",
    "prev_yield_logit",
    "relation_logit",
    # address and reference of the target and of others
    "target_vocative",
    "target_mentioned",
    "target_mention_start",
    "target_mention_end",
    "target_mention_third_person",
    "target_mentions_count",
    "other_vocative",
    "others_mentioned",
    "target_vocative_prev",
    "target_mentioned_prev",
    "target_mentioned_recent",
    "second_person_to_prev_target",
    "question_to_prev_target",
    "question_to_nobody_named",
    # the recent exchange: who is in it, what the target last said
    "n_active_recent",
    "target_turns_recent",
    "dyad_share_recent",
    "speaker_to_target_recent",
    "target_last_question",
    "target_last_named_speaker",
    "overlap_with_target_last",
    "overlap_with_prev",
    # timing (NaN when the transcript has none)
    "duration",
    "gap_before",
    "speech_rate",
    "time_since_target",
    "target_last_duration",
    "run_seconds",
)
N_FEATURES = len(FEATURE_NAMES)
_IDX = {n: i for i, n in enumerate(FEATURE_NAMES)}

_THIRD_PERSON_BEFORE = frozenset(
    {
        "to",
        "with",
        "about",
        "for",
        "and",
        "or",
        "from",
        "at",
        "like",
        "than",
        "tell",
        "ask",
        "asked",
        "told",
        "call",
        "called",
        "by",
        "of",
        "as",
        "on",
        "is",
        "was",
        "thinks",
        "that",
        "if",
        "when",
        "where",
        "see",
        "saw",
        "met",
        "meet",
        "love",
        "loves",
        "hate",
    }
)
_THIRD_PERSON_AFTER = frozenset(
    {
        "is",
        "was",
        "has",
        "had",
        "said",
        "says",
        "will",
        "would",
        "can",
        "could",
        "did",
        "does",
        "and",
        "thinks",
        "wants",
        "went",
        "got",
        "gets",
        "must",
        "should",
        "might",
        "isn't",
        "wasn't",
        "doesn't",
        "didn't",
        "never",
        "always",
        "just",
        "who",
        "s",
    }
)
_WORD = re.compile(r"[\w'-]+")


@dataclass(slots=True)
class _Utt:
    """Cached per-utterance work."""

    #: position of the utterance in the conversation (0-based)
    index: int
    speaker: str
    text: str
    facts: TextFacts
    yield_logit: float
    start: float | None
    end: float | None
    source: Utterance
    #: The text the features read: as written, or with its final mark put back when the
    #: transcript carries no punctuation (a recognizer's; see polylogue.engine.punctuation).
    heard: str = ""


@dataclass
class ConversationState:
    """Everything the model needs about a conversation so far, updated one utterance at a time."""

    yield_scorer: HashedScorer
    #: Scores the current words crossed with the target's relation to the talk (see relation_of).
    relation_scorer: HashedScorer
    participants: dict[str, Participant] = field(default_factory=dict)
    #: utterances observed so far
    n_utterances: int = 0
    #: the last two utterances (current last)
    window: deque[_Utt] = field(default_factory=lambda: deque(maxlen=2))
    #: each speaker's latest utterance
    last_utt: dict[str, _Utt] = field(default_factory=dict)
    cased: bool = False
    #: Has the transcript shown any punctuation? Until it does, final marks are restored.
    punctuated: bool = False
    punctuation: PunctuationModel = field(default_factory=load_punctuation_model)
    _names: NameIndex = field(default_factory=NameIndex)
    _cue_cache: dict[int, tuple[int, UtteranceCues]] = field(default_factory=dict)
    #: The words participants are called by, for the address verdict (case-blind).
    _terms: NameTerms = field(default_factory=NameTerms)
    #: utterance index -> (name-index version, the address verdict of its words)
    _verdicts: dict[int, tuple[int, AddressVerdict]] = field(default_factory=dict)
    # speaker statistics
    utt_count: Counter[str] = field(default_factory=Counter)
    word_count: Counter[str] = field(default_factory=Counter)
    turn_count: Counter[str] = field(default_factory=Counter)
    #: (from, to) counts of floor changes between different speakers
    transitions: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: utterances of a speaker followed by someone else / by themselves
    yields: Counter[str] = field(default_factory=Counter)
    holds: Counter[str] = field(default_factory=Counter)
    last_index: dict[str, int] = field(default_factory=dict)
    last_turn: dict[str, int] = field(default_factory=dict)
    last_end: dict[str, float] = field(default_factory=dict)
    last_duration: dict[str, float] = field(default_factory=dict)
    #: speaker turns so far, and the speakers of the most recent ones
    n_turns: int = 0
    turn_speakers: deque[str] = field(default_factory=lambda: deque(maxlen=_RECENT_TURNS))
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=_RECENT))
    #: recent mention indices per participant (utterance index of the last mention)
    last_mentioned: dict[str, int] = field(default_factory=dict)
    run_length: int = 0
    run_words: int = 0
    run_start: float | None = None
    #: registered participants who are people (not group pseudo-speakers)
    _n_people: int = 0
    #: sorted latest-utterance indices of people who have spoken (recency rank in O(log n))
    _recency: list[int] = field(default_factory=list)
    #: sum of word_count (kept, not summed per decision: O(1) in the roster)
    _total_words: int = 0
    #: Speakers whose words are context only (a TV, a recorded message, a note-taking bot):
    #: they address and mention nobody, so their words never make someone "addressed
    #: earlier" or "named recently". Set by the live layer's focus; not part of a snapshot.
    context_only: frozenset[str] = frozenset()
    #: Judges the names the address rules leave open (:mod:`polylogue.turntaking.address_model`):
    #: the shipped model, or None for the rulebook alone (kept to compare the two).
    address_model: AddressModel | Literal["shipped"] | None = "shipped"
    #: The roster was given up front (a live layer's ``roster_known``; a benchmark's present
    #: list): two people on it are a two-person room before both have spoken.
    roster_known: bool = False
    #: the participants' dicts of the last snapshot (rebuilt when the roster changes)
    _roster_dicts: RosterDicts = field(default_factory=RosterDicts, repr=False, compare=False)

    def fork(self) -> ConversationState:
        """A copy that observing more utterances does not share with this one (a live probe).

        Containers are copied one level: what they hold (per-utterance records, participants,
        counts, cue caches) is never changed in place. The name index changes in place, so it
        is copied whole; the scorers are the model's and shared.
        """
        new = copy.copy(self)
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, dict | list | set | deque):
                setattr(new, f.name, copy.copy(v))
        new._names = copy.deepcopy(self._names)
        new._terms = self._terms.copy()
        return new

    # ------------------------------------------------------------------ participants & names

    def register(self, people: Iterable[Participant]) -> None:
        """Add participants (roster, present list, a new speaker); names get matchers."""
        new = [p for p in people if p.id not in self.participants]
        if not new:
            return
        for p in new:
            self.participants[p.id] = p
            self._n_people += p.role != GROUP_ROLE
        # Only the newcomers (and anyone whose name they now share) get new matchers.
        self._names.add(new)
        self._terms.add(new)

    def unregister(self, pid: str) -> None:
        """Drop a participant who never spoke (a provisional name resolved to someone else)."""
        if pid in self.utt_count:
            raise ValueError(f"{pid!r} has spoken; a speaker cannot be removed")
        gone = self.participants.pop(pid, None)
        if gone is not None:
            self._n_people -= gone.role != GROUP_ROLE
        self._names.remove(pid)
        self._terms.remove(pid)
        self.last_mentioned.pop(pid, None)

    def _set_cased(self, cased: bool) -> None:
        if cased and not self.cased:
            self.cased = True
            self._names.set_cased(True)

    def _is_person(self, pid: str) -> bool:
        p = self.participants.get(pid)
        return p is not None and p.role != GROUP_ROLE

    @property
    def last(self) -> _Utt:
        """The utterance that just ended."""
        return self.window[-1]

    def cues(self, utt: _Utt) -> UtteranceCues:
        """Address/reference cues of one utterance (cached until the roster changes)."""
        if utt.speaker in self.context_only:
            return _NO_CUES
        version = self._names.version
        hit = self._cue_cache.get(utt.index)
        if hit is not None and hit[0] == version:
            return hit[1]
        u = utt.source
        # Only participants whose name can occur in the words are matched (see NameIndex).
        matchers = {
            pid: m
            for pid in self._names.candidates(u.text)
            if pid != u.speaker
            and self.participants[pid].role != GROUP_ROLE
            and (m := self._names.matcher(pid)) is not None
        }
        # Addressee annotations are not model-visible: cues come from the words alone. The
        # utterance before (when still in the window) tells a bare name answering a question
        # ("Who did you miss the most?" - "Monica.") from calling that person.
        bare = Utterance(speaker=u.speaker, text=u.text)
        before = next((w.source for w in self.window if w.index == utt.index - 1), None)
        c = utterance_cues(
            bare, matchers, present=list(matchers), last_spoke=self.last_index, previous=before
        )
        self._cue_cache[utt.index] = (version, c)
        if len(self._cue_cache) > 8:
            for k in sorted(self._cue_cache)[:-4]:
                del self._cue_cache[k]
        return c

    def verdict(self, utt: _Utt | None = None) -> AddressVerdict:
        """Who the words of ``utt`` (default: the utterance that just ended) address
        (:mod:`polylogue.turntaking.address`): computed when it arrives, again only if the
        roster changed while it is still the last one."""
        utt = utt if utt is not None else (self.window[-1] if self.window else None)
        if utt is None or utt.speaker in self.context_only:
            return NO_ADDRESS
        version = self._names.version
        hit = self._verdicts.get(utt.index)
        if hit is not None and (hit[0] == version or utt is not self.window[-1]):
            return hit[1]
        if utt is not self.window[-1]:
            return NO_ADDRESS  # an older utterance is only looked up, never recomputed
        # Written as a recognizer writes: no mark ends a word (a decimal point does not count).
        prior = replace(self._prior_turn(), recognizer=not _WORD_END_MARK.search(utt.text))
        v = address_verdict(
            utt.heard or utt.text,
            utt.speaker,
            self._terms,
            prior,
            resolve=self.last_index,
            model=self.address_model,
            unsure=utt.source.unsure,
        )
        self._verdicts[utt.index] = (version, v)
        if len(self._verdicts) > 4:
            for k in sorted(self._verdicts)[:-2]:
                del self._verdicts[k]
        return v

    def _dyad_listener(self, speaker: str) -> tuple[str, ...]:
        """The other person of a two-person conversation: on a roster given up front, or once
        both have spoken (a roster learnt from speech may not yet hold the third person the
        words call: "Bob, do you want to start?" before Bob spoke); else ()."""
        if self._n_people > 2:
            return ()
        people = [
            pid
            for pid, p in self.participants.items()
            if p.role != GROUP_ROLE and pid not in self.context_only
        ]
        others = [pid for pid in people if pid != speaker]
        both = self.roster_known or all(self.utt_count[p] for p in people)
        if len(people) == 2 and len(others) == 1 and both:
            return (others[0],)
        return ()

    def _prior_turn(self) -> PriorTurn:
        """The talk before the last utterance, as the address verdict reads it."""
        cur = self.window[-1]
        turns = self.turn_speakers
        before = turns[-2] if len(turns) > 1 else None
        # Third persons' "mm-hmm" or "yeah" between two turns do not take the floor: a "you"
        # question after them still asks whoever spoke before them.
        just_before = before
        back = 2
        while (
            back < len(turns)
            and before is not None
            and before != cur.speaker
            and turns[-back - 1] != cur.speaker
            and before in self.last_utt
            and not substantive(self.last_utt[before].text)
        ):
            back += 1
            before = turns[-back]
        prev = self.window[0] if len(self.window) > 1 else None
        earlier: tuple[str, ...] = ()
        if prev is not None and prev.speaker == cur.speaker:
            hit = self._verdicts.get(prev.index)
            earlier = hit[1].addressees if hit is not None else ()
        return PriorTurn(
            speaker=before,
            text=self.last_utt[before].text if before in self.last_utt else "",
            earlier=earlier,
            just_before=just_before,
            people=self._n_people,
            listeners=self._dyad_listener(cur.speaker),
            question_before=prev is not None
            and prev.speaker != cur.speaker
            and prev.speaker not in self.context_only
            and asks_who(prev.text),
        )

    # ------------------------------------------------------------------ streaming update

    def observe(self, u: Utterance) -> None:
        """Take in the utterance that just ended (per-utterance work, done before the pause)."""
        if u.speaker not in self.participants:
            self.register(
                [Participant(id=u.speaker, name=None if len(u.speaker) < 2 else u.speaker)]
            )
        if not self.cased and is_cased([u]):
            self._set_cased(True)
        if not self.punctuated and has_punctuation(u.text):
            self.punctuated = True
        heard = self.heard(u.text)
        facts = text_facts(heard)
        i = self.n_utterances
        info = _Utt(
            i, u.speaker, u.text, facts, self.yield_scorer(facts.hashed), u.start, u.end, u, heard
        )
        prev = self.window[-1] if self.window else None
        self.n_utterances += 1
        self.window.append(info)
        self.last_utt[u.speaker] = info
        if prev is not None:
            if prev.speaker == u.speaker:
                self.holds[prev.speaker] += 1
            else:
                self.yields[prev.speaker] += 1
                self.transitions[(prev.speaker, u.speaker)] += 1
        if prev is None or prev.speaker != u.speaker:
            self.turn_speakers.append(u.speaker)
            self.n_turns += 1
            self.turn_count[u.speaker] += 1
            self.run_length = 0
            self.run_start = u.start
            self.run_words = 0
        self.run_length += 1
        self.run_words += facts.n_words
        self.utt_count[u.speaker] += 1
        self.word_count[u.speaker] += facts.n_words
        self._total_words += facts.n_words
        if self._is_person(u.speaker):
            old = self.last_index.get(u.speaker)
            if old is not None:
                del self._recency[bisect.bisect_left(self._recency, old)]
            self._recency.append(i)  # i is the largest index so far: stays sorted
        self.last_index[u.speaker] = i
        self.last_turn[u.speaker] = self.n_turns - 1
        if u.end is not None:
            self.last_end[u.speaker] = u.end
        if u.duration is not None:
            self.last_duration[u.speaker] = u.duration
        self.recent.append(u.speaker)
        # Mentions are tracked for the recent-reference feature (cheap: only on name hits).
        cues = self.cues(info)
        for pid in (*cues.addressed, *cues.referenced):
            self.last_mentioned[pid] = i
        self.verdict(info)  # per-utterance work, before the pause

    def heard(self, text: str) -> str:
        """``text`` as the features read it: a recognizer's text (no punctuation anywhere in
        the transcript so far) gets its final mark back, written text is read as written."""
        return text if self.punctuated else self.punctuation.restore(text)

    def observe_all(self, utterances: Iterable[Utterance]) -> None:
        for u in utterances:
            self.observe(u)

    # ------------------------------------------------------------------ decision features

    def features(
        self,
        target: str,
        present: Sequence[str] | Spoken | None,
        relation_keys: list[tuple[int, ...]] | None = None,
    ) -> np.ndarray:
        """Features for "should ``target`` speak now?" at the pause after the last utterance.

        ``present`` None means every registered participant, :data:`SPOKEN` everyone who has
        spoken plus the target (no roster: presence is learnt as people talk): the same
        features as for the list, computed from counters instead of a pass over the roster
        (``decide FILE`` on 20,000 speakers was quadratic).
        """
        if not self.window:
            raise ValueError("no utterance observed yet: there is no pause to decide at")
        f = _Setter()
        n = self.n_utterances
        cur = self.window[-1]
        prev = self.window[0] if n > 1 else None
        speaker = cur.speaker
        if present is None:
            n_present, rank = self._everyone_present(target, speaker, self._n_people)
        elif present is SPOKEN:
            # People who spoke are exactly those in _recency; the target is present too.
            spoke = len(self._recency) + (self._is_person(target) and target not in self.utt_count)
            n_present, rank = self._everyone_present(target, speaker, spoke)
        else:
            assert not isinstance(present, str)
            people = [
                p
                for p in present
                if (q := self.participants.get(p)) is None or q.role != GROUP_ROLE
            ]
            n_present = max(len(set(people) | {target, speaker}), 2)
            # Rank of the target among present listeners by recency of speaking (0 = most
            # recent); listeners tied on recency (none has spoken) share a rank.
            others = {p for p in people if p != speaker} | {target}
            mine = self.last_index.get(target, -1)
            ahead = sum(1 for p in others if self.last_index.get(p, -1) > mine)
            rank = ahead / max(len(others) - 1, 1)
        f["n_present"] = n_present
        # Every speaker is registered when first heard (and speakers are never unregistered).
        f["n_speakers_seen"] = len(self.utt_count)
        f["log_n_utterances"] = math.log1p(n)

        prev_speaker = prev.speaker if prev is not None else None
        f["target_spoke_prev_utt"] = prev_speaker == target
        turns = self.turn_speakers
        n_turns = self.n_turns
        f["target_is_prev_turn_speaker"] = len(turns) > 1 and turns[-2] == target
        f["target_is_prev2_turn_speaker"] = len(turns) > 2 and turns[-3] == target
        last_i = self.last_index.get(target)
        f["target_never_spoke"] = last_i is None
        f["utts_since_target"] = _CAP if last_i is None else min(n - 1 - last_i, _CAP)
        last_t = self.last_turn.get(target)
        f["turns_since_target"] = _CAP if last_t is None else min(n_turns - 1 - last_t, _CAP)
        f["target_recency_rank"] = rank
        recent = self.recent
        f["target_share_recent"] = recent.count(target) / len(recent)
        f["speaker_share_recent"] = recent.count(speaker) / len(recent)
        f["target_share_all"] = self.utt_count[target] / n
        total_words = self._total_words or 1
        f["target_word_share_all"] = self.word_count[target] / total_words
        f["target_turn_share"] = self.turn_count[target] / n_turns

        # Who takes the floor after this speaker, with a prior from the target's turn share
        # so early in a meeting the estimate falls back to "how much does the target talk".
        out_of_speaker = self.yields[speaker]
        prior = (self.turn_count[target] + 1) / (n_turns + n_present)
        to_target = self.transitions[(speaker, target)]
        f["p_target_after_speaker"] = (to_target + 2 * prior) / (out_of_speaker + 2)
        f["p_target_after_speaker_prior"] = prior
        f["speaker_yield_rate"] = (self.yields[speaker] + 1) / (
            self.yields[speaker] + self.holds[speaker] + 2
        )
        from_target = self.transitions[(target, speaker)]
        f["target_replies_to_speaker_rate"] = (from_target + 1) / (self.yields[target] + 2)
        f["run_length"] = min(self.run_length, _CAP)
        f["run_words"] = min(self.run_words, 500)

        facts = cur.facts
        f["n_words"] = min(facts.n_words, 200)
        f["question_mark"] = facts.question_mark
        f["wh_start"] = facts.wh_start
        f["aux_start"] = facts.aux_start
        f["ask_request"] = facts.ask_request
        f["second_person"] = facts.second_person
        f["first_plural"] = facts.first_plural
        f["third_person_pronoun"] = facts.third_person
        f["group_address"] = facts.group_address
        f["incomplete"] = facts.incomplete
        f["trailing_continuer"] = facts.trailing_continuer
        f["ends_terminal"] = facts.ends_terminal
        f["acknowledgement"] = facts.acknowledgement
        f["yield_logit"] = cur.yield_logit
        f["prev_yield_logit"] = prev.yield_logit if prev is not None else 0.0

        cues = self.cues(cur)
        voc = target in cues.addressed
        mentioned = voc or target in cues.referenced
        f["target_vocative"] = voc
        f["target_mentioned"] = mentioned
        if mentioned:
            start, end, third, count = self._mention_shape(target, cur.text)
            f["target_mention_start"] = start
            f["target_mention_end"] = end
            f["target_mention_third_person"] = third
            f["target_mentions_count"] = count
        else:
            f["target_mention_start"] = False
            f["target_mention_end"] = False
            f["target_mention_third_person"] = False
            f["target_mentions_count"] = 0
        f["other_vocative"] = any(p != target for p in cues.addressed)
        f["others_mentioned"] = sum(1 for p in (*cues.addressed, *cues.referenced) if p != target)
        if prev is not None:
            pc = self.cues(prev)
            f["target_vocative_prev"] = target in pc.addressed
            f["target_mentioned_prev"] = target in pc.addressed or target in pc.referenced
        else:
            f["target_vocative_prev"] = False
            f["target_mentioned_prev"] = False
        lm = self.last_mentioned.get(target)
        f["target_mentioned_recent"] = lm is not None and n - 1 - lm <= 5
        to_prev = len(turns) > 1 and turns[-2] == target
        f["second_person_to_prev_target"] = facts.second_person and to_prev
        asks = facts.question_mark or facts.wh_start or facts.aux_start or facts.ask_request
        f["question_to_prev_target"] = asks and to_prev
        f["question_to_nobody_named"] = asks and not cues.addressed and not cues.referenced
        # The same words mean different things for different listeners: "what do you think?"
        # after the target spoke is put to the target; naming them in the third person is not.
        rkeys = hash_keys(facts.keys, relation_of(voc, mentioned, to_prev, last_t, n_turns) + "|")
        f["relation_logit"] = self.relation_scorer(rkeys)
        if relation_keys is not None:
            relation_keys.append(rkeys)

        recent_turns = list(turns)
        f["n_active_recent"] = len(set(recent_turns) | set(recent))
        f["target_turns_recent"] = recent_turns.count(target)
        f["dyad_share_recent"] = sum(1 for s in recent_turns if s in (target, speaker)) / len(
            recent_turns
        )
        f["speaker_to_target_recent"] = sum(
            1 for a, b in itertools.pairwise(recent_turns) if a == speaker and b == target
        )
        if last_i is not None:
            tl = self.last_utt[target]
            tc = self.cues(tl)
            f["target_last_question"] = tl.facts.question_mark or tl.facts.ask_request
            f["target_last_named_speaker"] = speaker in tc.addressed or speaker in tc.referenced
            f["overlap_with_target_last"] = _overlap(facts.content, tl.facts.content)
        else:
            f["target_last_question"] = False
            f["target_last_named_speaker"] = False
            f["overlap_with_target_last"] = 0.0
        f["overlap_with_prev"] = (
            _overlap(facts.content, prev.facts.content) if prev is not None else 0.0
        )

        # Timing of the current and earlier utterances only.
        if cur.start is not None and cur.end is not None:
            dur = max(cur.end - cur.start, 0.0)
            f["duration"] = min(dur, 60.0)
            f["speech_rate"] = min(facts.n_words / dur, 10.0) if dur > 0 else np.nan
            if prev is not None and prev.end is not None:
                f["gap_before"] = max(min(cur.start - prev.end, 10.0), -10.0)
            te = self.last_end.get(target)
            if te is not None:
                f["time_since_target"] = min(max(cur.end - te, -10.0), 600.0)
            td = self.last_duration.get(target)
            if td is not None:
                f["target_last_duration"] = min(td, 60.0)
            if self.run_start is not None:
                f["run_seconds"] = min(max(cur.end - self.run_start, 0.0), 120.0)
        return np.asarray(f.values, dtype=np.float32)

    def _everyone_present(self, target: str, speaker: str, n_people: int) -> tuple[int, float]:
        """n_present and the target's recency rank when ``n_people`` people are present: every
        registered one, or everyone who has spoken plus the target.

        Equal to the general computation with that ``present`` list: people are the present
        non-group participants; the speaker and target join the count if they are not people;
        ``others`` is people minus the speaker plus the target. (Every person who has spoken
        is present in both cases, so the recency list of speakers serves both.)
        """
        speaker_person = self._is_person(speaker)
        target_person = self._is_person(target)
        extras = {
            p for p, person in ((speaker, speaker_person), (target, target_person)) if not person
        }
        n_present = max(n_people + len(extras), 2)
        n_others = n_people - speaker_person + (not (target_person and target != speaker))
        mine = self.last_index.get(target, -1)
        ahead = len(self._recency) - bisect.bisect_right(self._recency, mine)
        if speaker_person and speaker != target and self.last_index.get(speaker, -1) > mine:
            ahead -= 1
        return n_present, ahead / max(n_others - 1, 1)

    def _mention_shape(self, target: str, text: str) -> tuple[bool, bool, bool, int]:
        """Where the target's name sits: utterance start, end, or inside a third-person phrase."""
        m = self._names.matcher(target)
        patterns = [
            getattr(pp, "mention", None)
            for pp in (getattr(m, "own", None), getattr(m, "shared", None))
        ]
        hits = sorted(
            (h for pat in patterns if pat is not None for h in pat.finditer(text)),
            key=lambda h: h.start(),
        )
        if not hits:
            return False, False, False, 0
        words_before = _WORD.findall(text[: hits[0].start()])
        words_after = _WORD.findall(text[hits[-1].end() :])
        at_start = len(words_before) <= 2
        at_end = len(words_after) == 0
        third = False
        for h in hits:
            before = _WORD.findall(text[: h.start()])
            after = _WORD.findall(text[h.end() :])
            tail = text[h.end() : h.end() + 2]
            if (before and before[-1].lower() in _THIRD_PERSON_BEFORE) or tail.startswith("'s"):
                third = True
            if (
                after
                and after[0].lower() in _THIRD_PERSON_AFTER
                and not text[h.end() :].lstrip().startswith(",")
            ):
                third = True
        return at_start, at_end, third, len(hits)


def relation_of(
    vocative: bool, mentioned: bool, prev_turn: bool, last_turn: int | None, n_turns: int
) -> str:
    """The target's relation to the current utterance, for relation-conditioned word weights."""
    if vocative:
        return "voc"
    if mentioned:
        return "ref"
    if prev_turn:
        return "prev"
    if last_turn is None:
        return "new"
    return "recent" if n_turns - 1 - last_turn <= _RECENT_TURNS else "old"


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap of content words (topic continuity between two utterances)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


class _Setter:
    """``f["name"] = value`` on a feature vector (bools become 0/1; unset stays NaN).

    Values gather in a list turned into float32 once: a numpy item store per feature cost more
    than the rest of the row.
    """

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: list[float] = [math.nan] * N_FEATURES

    def __setitem__(self, name: str, value: float | bool | None) -> None:
        self.values[_IDX[name]] = math.nan if value is None else float(value)


def new_state(
    yield_scorer: HashedScorer,
    relation_scorer: HashedScorer,
    participants: Iterable[Participant] = (),
) -> ConversationState:
    state = ConversationState(yield_scorer=yield_scorer, relation_scorer=relation_scorer)
    state.register(participants)
    return state


# ---------------------------------------------------------------------- snapshots (persistence)


def _utt_to_list(u: _Utt) -> list[object]:
    # The text the features read, when a final mark was restored (see ConversationState.heard).
    restored = [u.heard] if u.heard and u.heard != u.text else []
    return [u.index, u.speaker, u.text, u.start, u.end, *restored]


def state_to_dict(state: ConversationState) -> dict[str, object]:
    """A JSON-able snapshot of everything a later decision reads (bounded, like the state).

    Nothing in it is the state's own: observing more does not change a snapshot already taken.
    """
    return {
        "participants": state._roster_dicts(state.participants),
        "n_utterances": state.n_utterances,
        "window": [_utt_to_list(u) for u in state.window],
        "last_utt": [_utt_to_list(u) for u in state.last_utt.values()],
        "cased": state.cased,
        "punctuated": state.punctuated,
        "utt_count": dict(state.utt_count),
        "word_count": dict(state.word_count),
        "turn_count": dict(state.turn_count),
        "transitions": [[a, b, n] for (a, b), n in state.transitions.items()],
        "yields": dict(state.yields),
        "holds": dict(state.holds),
        "last_index": dict(state.last_index),
        "last_turn": dict(state.last_turn),
        "last_end": dict(state.last_end),
        "last_duration": dict(state.last_duration),
        "n_turns": state.n_turns,
        "turn_speakers": list(state.turn_speakers),
        "recent": list(state.recent),
        "last_mentioned": dict(state.last_mentioned),
        "run_length": state.run_length,
        "run_words": state.run_words,
        "run_start": state.run_start,
        # Whom the last two utterances addressed ("Dave." then "Can you check?").
        "window_addressed": [
            [[a.pid, a.kind, a.words] for a in state.verdict(u).addressed] for u in state.window
        ],
    }


def state_from_dict(
    d: dict[str, object], yield_scorer: HashedScorer, relation_scorer: HashedScorer
) -> ConversationState:
    """Rebuild a state from :func:`state_to_dict` (text facts and scores are recomputed)."""
    g = cast(dict[str, Any], d)
    state = new_state(
        yield_scorer, relation_scorer, [Participant.from_dict(p) for p in g["participants"]]
    )
    if g["cased"]:
        state._set_cased(True)

    # A snapshot from before restored marks: punctuated (it read every text as written).
    state.punctuated = bool(g.get("punctuated", True))

    def utt(row: list[Any]) -> _Utt:
        index, speaker, text, start, end = row[:5]
        heard = str(row[5]) if len(row) > 5 else text
        facts = text_facts(heard)
        source = Utterance(speaker=speaker, text=text, start=start, end=end)
        scored = yield_scorer(facts.hashed)
        return _Utt(index, speaker, text, facts, scored, start, end, source, heard)

    state.n_utterances = int(g["n_utterances"])
    window = [utt(r) for r in g["window"]]
    state.window.extend(window)
    by_index = {u.index: u for u in window}
    for r in g["last_utt"]:
        u = by_index.get(r[0]) or utt(r)
        state.last_utt[u.speaker] = u
    state.utt_count.update(g["utt_count"])
    state.word_count.update(g["word_count"])
    state._total_words = sum(state.word_count.values())
    state.turn_count.update(g["turn_count"])
    state.transitions.update({(a, b): n for a, b, n in g["transitions"]})
    state.yields.update(g["yields"])
    state.holds.update(g["holds"])
    state.last_index.update(g["last_index"])
    state._recency = sorted(i for pid, i in state.last_index.items() if state._is_person(pid))
    state.last_turn.update(g["last_turn"])
    state.last_end.update(g["last_end"])
    state.last_duration.update(g["last_duration"])
    state.n_turns = int(g["n_turns"])
    state.turn_speakers.extend(g["turn_speakers"])
    state.recent.extend(g["recent"])
    state.last_mentioned.update(g["last_mentioned"])
    state.run_length = int(g["run_length"])
    state.run_words = int(g["run_words"])
    state.run_start = g["run_start"]
    for u, saved in zip(window, g.get("window_addressed", []), strict=False):
        addressed = tuple(Address(str(p), str(k), str(w)) for p, k, w in saved)
        state._verdicts[u.index] = (-1, AddressVerdict(addressed))
    return state


# ---------------------------------------------------------------------- the base block

#: The features every model reads, first in its row (:mod:`polylogue.engine.blocks`).
BASE_BLOCK: FeatureBlock[ConversationState] = FeatureBlock(
    name="base",
    names=FEATURE_NAMES,
    new_state=new_state,
    row=ConversationState.features,
    snapshot_key="state",
    to_dict=state_to_dict,
    from_dict=state_from_dict,
    # Whether the target is addressed is the state's address verdict
    # (ConversationState.verdict), not read off the row: the row keeps the features the
    # model was trained on.
)
