"""The live policy around the engine: one object per conversation that an agent feeds events.

:class:`TurnTakingEngine` answers "P(the target speaks now)" at a pause. A live agent needs
more, and every front end (``polylogue decide``, ``polylogue serve``, the LiveKit and Pipecat
adapters) must behave the same, so all of it lives here:

* which pauses are decision points (not after backchannels, fillers or too-short utterances);
* who is present (participants join and leave; without a roster, whoever has spoken);
* resolving the agent's name (``--as Eileen`` finds "Eileen Park" even when she speaks later);
* the agent's own speech (its utterances are observed, never decided on; while it speaks a
  human's speech asks for a barge-in decision: yield or continue);
* interim (partial) transcripts, which never touch the conversation state: only the final
  transcript of an utterance is observed;
* the audience (:data:`AUDIENCES`): ``adaptive`` answers the one other person present as a
  one-to-one assistant and applies the role's group rules once two or more people are there;
* focus: participants whose speech is context only (``ignored``: a TV, a recorded message, a
  note-taking bot) or the only ones the agent answers (``only``);
* resets, and the policy: the deployment's three-outcome rule
  (:mod:`polylogue.engine.deployment`: operating point, domain, role) applied to the engine's
  probabilities, per-state floor thresholds (agent speaking / agent just spoke) and a cooldown
  between unaddressed interjections. This is the one place probabilities become actions.

Times are conversation seconds taken from the events (utterance ends, event times); a stream
without times never triggers the time-based rules.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import Field, InitVar, dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

from polylogue.conversation import GROUP_ROLE, Participant, Utterance, name_key
from polylogue.engine.bargein import BargeInDecision, BargeInModel, load_barge_in_model
from polylogue.engine.deployment import (
    DEFAULT_OPERATING_POINT,
    ROLES,
    Action,
    Deployment,
    Reason,
    Thresholds,
)
from polylogue.engine.engine import EngineDecision, TurnTakingEngine
from polylogue.engine.explanation import (
    Explanation,
    PauseValues,
    explain,
    explain_silence,
    rule_for,
)
from polylogue.engine.features import SPOKEN, Spoken
from polylogue.engine.model import TurnTakingModel
from polylogue.errors import PolylogueInputError
from polylogue.turntaking.address import asks_by_words, directed_to_listener
from polylogue.turntaking.points import PointOptions, boundary_is_decision_point


class AgentState(StrEnum):
    IDLE = "idle"
    SPEAKING = "speaking"
    JUST_SPOKE = "just_spoke"


class EventError(PolylogueInputError):
    """A live event that cannot be applied (unknown participant, bad times, ...)."""


#: How the agent treats the people present (``LiveConversation.audience``):
#:
#: * ``group``: the role's rules always (the default);
#: * ``adaptive``: with exactly one other person present, every completed turn of theirs that
#:   addresses nobody else is answered (SPEAK at each decision point); with two or more, the
#:   role's rules. Ignored participants (:class:`Focus`) are not people here.
AUDIENCES: tuple[str, ...] = ("group", "adaptive")
DEFAULT_AUDIENCE = "group"


def check_audience(value: Any) -> str:
    """``value`` if it is one of :data:`AUDIENCES`, else one error naming it and the choices."""
    if not isinstance(value, str) or value not in AUDIENCES:
        raise EventError(f"audience: unknown value {value!r}; choose one of {', '.join(AUDIENCES)}")
    return value


def addresses_nobody_else(d: EngineDecision) -> bool:
    """The words of the utterance just decided on put the turn to nobody but the agent: the
    agent addressed, or nobody else named or called ("honey can you get the door" calls
    someone off the roster, and is not for the agent). The one test of "addresses nobody
    else" the ``adaptive`` audience applies."""
    return d.addressed or not (d.address.addressed or d.address.off_roster)


def pause_values(
    d: EngineDecision,
    deployment: Deployment,
    thresholds: Thresholds | None = None,
    cooling: float | None = None,
    one_to_one: bool = False,
) -> PauseValues:
    """What the action at a pause is chosen from: the engine's answer, the deployment's point
    (``thresholds``: the policy's for the agent's state, else the deployment's), and the live
    state's gates (see :mod:`polylogue.engine.explanation`)."""
    return PauseValues(
        target=d.target,
        p_speak=d.p_speak,
        p_backchannel=d.p_backchannel,
        thresholds=thresholds or deployment.thresholds,
        addressed=d.addressed,
        verdict=d.address,
        addressed_only=deployment.addressed_only,
        speaks=deployment.speaks,
        backchannel_cue=d.cues.get("backchannel") or "a short acknowledgement fits",
        cooling=cooling,
        one_to_one=one_to_one,
    )


@dataclass(frozen=True)
class Focus:
    """Whose speech the agent answers: ``ignored`` participants are context only (no decision
    after their words); a non-empty ``only`` answers nobody else. Participant ids."""

    ignored: tuple[str, ...] = ()
    only: tuple[str, ...] = ()

    def skips(self, pid: str) -> str | None:
        """Why no decision follows an utterance of ``pid`` (None: decide as usual)."""
        if pid in self.ignored:
            return "ignored speaker (context only)"
        if self.only and pid not in self.only:
            return "not in focus (the agent answers only " + ", ".join(self.only) + ")"
        return None

    def to_dict(self) -> dict[str, list[str]]:
        return {"ignored": list(self.ignored), "only": list(self.only)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Focus:
        return cls(tuple(map(str, d["ignored"])), tuple(map(str, d["only"])))


#: Policy fields of earlier versions that now belong to the deployment, and where they went.
_MOVED_TO_DEPLOYMENT = {
    "mode": "operating_point ('addressed-only') or role",
    "threshold": "threshold",
    "backchannel_threshold": "operating_point (each point has its backchannel threshold)",
}


@dataclass(frozen=True)
class Policy:
    """How the live state bends the deployment's decision (thresholds: calibrated P(speak)).

    The operating point, domain and raw threshold are the deployment's
    (:class:`~polylogue.engine.deployment.Deployment`); the policy only adds what depends on
    the agent's own state and the clock.
    """

    #: Floor threshold while the agent is speaking (None: the deployment's).
    threshold_speaking: float | None = None
    #: Floor threshold within ``just_spoke_s`` seconds after the agent stopped (None: the
    #: deployment's).
    threshold_just_spoke: float | None = None
    just_spoke_s: float = 3.0
    #: No two unaddressed interjections within this many seconds (0: no cooldown).
    cooldown_s: float = 0.0
    #: Warn once when the agent's name has matched nobody after this many utterances.
    warn_after: int = 20

    def __post_init__(self) -> None:
        for name in ("threshold_speaking", "threshold_just_spoke"):
            v = getattr(self, name)
            if v is not None and not 0.0 <= v <= 1.0:
                raise PolylogueInputError(f"policy {name}={v}: must be between 0 and 1")
        for name in ("cooldown_s", "just_spoke_s"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:  # NaN would silently switch the rule off
                raise PolylogueInputError(f"policy {name}={v}: must be a finite number >= 0")
        if self.warn_after < 1:
            raise PolylogueInputError(f"policy warn_after={self.warn_after}: must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Policy:
        moved = [k for k in d if k in _MOVED_TO_DEPLOYMENT]
        if moved:
            where = "; ".join(f"policy.{k} -> deployment {_MOVED_TO_DEPLOYMENT[k]}" for k in moved)
            raise PolylogueInputError(f"policy field(s) moved to the deployment: {where}")
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise PolylogueInputError(
                f"unknown policy field(s): {', '.join(sorted(unknown))} "
                f"(known: {', '.join(cls.__dataclass_fields__)})"
            )
        for k, v in d.items():
            _check_policy_type(k, v)
        return cls(**d)


def _check_policy_type(name: str, v: Any) -> None:
    """A policy field from JSON: the declared type, no numeric strings, no NaN/Infinity."""
    nullable = name.startswith("threshold_")
    if v is None and nullable:
        return
    if name == "warn_after":
        ok = isinstance(v, int) and not isinstance(v, bool)
        want = "an integer"
    else:
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        want = "a finite number" + (" or null" if nullable else "")
    if not ok:
        raise PolylogueInputError(f"policy.{name}: {v!r} is not {want}")


@dataclass(frozen=True)
class LiveDecision:
    """What the agent should do after one final utterance (``action`` None: not a pause)."""

    index: int
    speaker: str
    #: What the agent does now (an observer's is always SILENT; None: not a decision point).
    action: Action | None
    reason: str
    agent_state: AgentState
    p_speak: float | None = None
    #: The floor threshold applied (the deployment's, or the policy's for the agent's state).
    threshold: float | None = None
    engine: EngineDecision | None = None
    #: Set when the utterance was spoken while the agent was speaking.
    barge_in: BargeInDecision | None = None
    #: What the rule says before a role that never speaks (observer) silences it.
    suggested: Action | None = None
    #: The rule's reason (:class:`~polylogue.engine.deployment.Reason`; None: no decision).
    reason_code: Reason | None = None

    @classmethod
    def of(
        cls,
        index: int,
        speaker: str,
        why: Explanation,
        agent_state: AgentState,
        engine: EngineDecision | None = None,
        barge_in: BargeInDecision | None = None,
    ) -> LiveDecision:
        """A decision whose action, suggestion and reason are one explanation's."""
        return cls(
            index,
            speaker,
            why.action,
            why.text,
            agent_state,
            None if engine is None else engine.p_speak,
            why.threshold,
            engine,
            barge_in,
            why.suggested,
            why.reason,
        )

    @property
    def p_backchannel(self) -> float | None:
        return None if self.engine is None else self.engine.p_backchannel

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "speaker": self.speaker,
            "action": None if self.action is None else self.action.value,
            "suggested": None if self.suggested is None else self.suggested.value,
            "reason": self.reason,
            "reason_code": None if self.reason_code is None else self.reason_code.value,
            "agent_state": self.agent_state.value,
            "p_speak": None if self.p_speak is None else round(self.p_speak, 4),
            "threshold": self.threshold,
        }
        if self.engine is not None:
            out["p_backchannel"] = round(self.engine.p_backchannel, 4)
            out["cues"] = self.engine.cues
            out["addressed"] = self.engine.addressed
            out["address"] = self.engine.cues.get("address")
            out["latency_ms"] = round(self.engine.latency_s * 1000, 3)
        if self.barge_in is not None:
            out["barge_in"] = self.barge_in.to_dict()
        return out


def _name_keys(p: Participant) -> set[str]:
    """Lower-cased names a participant answers to: id, name, aliases, the name's first word."""
    keys = {p.id.lower()}
    for n in (p.name, *p.aliases):
        if n and n.strip():
            keys.add(n.strip().lower())
    if p.name and len(p.name.split()) > 1:
        keys.add(p.name.split()[0].lower())
    return keys


def participant_for_label(label: str) -> Participant:
    """A participant first met as a speaker label ("Eileen Park" also answers to "Eileen")."""
    words = label.split()
    return Participant(id=label, name=label, aliases=(words[0],) if len(words) > 1 else ())


class NameBook:
    """Case-insensitive lookup of participants by id, name, alias or first name (O(1))."""

    def __init__(self) -> None:
        self._exact: dict[str, str] = {}
        self._by_key: dict[str, set[str]] = {}
        #: what each name looks like (:func:`name_key`) -> participants
        self._by_look: dict[str, set[str]] = {}
        #: look-alike spellings already reported (one warning each)
        self.noted: set[str] = set()

    def __deepcopy__(self, memo: dict[int, Any]) -> NameBook:
        new = NameBook()
        new._exact = dict(self._exact)
        new._by_key = {k: set(v) for k, v in self._by_key.items()}
        new._by_look = {k: set(v) for k, v in self._by_look.items()}
        new.noted = set(self.noted)
        return new

    def add(self, p: Participant) -> None:
        self._exact[p.id] = p.id
        for k in _name_keys(p):
            self._by_key.setdefault(k, set()).add(p.id)
            self._by_look.setdefault(name_key(k), set()).add(p.id)

    def remove(self, p: Participant) -> None:
        self._exact.pop(p.id, None)
        for k in _name_keys(p):
            for book, key in ((self._by_key, k), (self._by_look, name_key(k))):
                s = book.get(key)
                if s is not None:
                    s.discard(p.id)
                    if not s:
                        del book[key]

    def lookalikes(self, name: str) -> set[str]:
        """Everyone a spelling *looks like* (another script's letters, fullwidth, invisible
        characters): for a label :meth:`matches` does not know."""
        return set(self._by_look.get(name_key(name), ()))

    def matches(self, name: str) -> set[str]:
        """Everyone ``name`` can refer to (an exact id wins outright)."""
        if name in self._exact:
            return {name}
        return set(self._by_key.get(name.strip().lower(), ()))


@dataclass
class _Agent:
    spec: str  # the name the agent was given as
    pid: str
    provisional: bool  # no participant matched yet: a placeholder with the given name
    state: AgentState = AgentState.IDLE
    started_at: float | None = None
    stopped_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in _AGENT_FIELDS} | {"state": self.state.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> _Agent:
        return cls(
            str(d["spec"]),
            str(d["pid"]),
            bool(d["provisional"]),
            AgentState(d["state"]),
            d["started_at"],
            d["stopped_at"],
        )


_AGENT_FIELDS = tuple(f.name for f in fields(_Agent))


def _same(v: Any) -> Any:
    return v


@dataclass(frozen=True)
class _Saved:
    """How one attribute of a live conversation goes into a snapshot and comes back."""

    key: str
    encode: Callable[[Any], Any] = _same
    decode: Callable[[Any], Any] = _same


def _saved(
    key: str, encode: Callable[[Any], Any] = _same, decode: Callable[[Any], Any] = _same
) -> dict[str, _Saved]:
    """Field metadata: the snapshot carries this attribute under ``key``."""
    return {"snapshot": _Saved(key, encode, decode)}


_POINT_OPTION_FIELDS = tuple(f.name for f in fields(PointOptions))


def _point_options_to_dict(o: PointOptions) -> dict[str, Any]:
    return {n: getattr(o, n) for n in _POINT_OPTION_FIELDS}


def _point_options_from_dict(d: dict[str, Any]) -> PointOptions:
    return PointOptions(**d)


def _saved_fields(cls: type) -> tuple[tuple[Field[Any], _Saved], ...]:
    return tuple((f, f.metadata["snapshot"]) for f in fields(cls) if "snapshot" in f.metadata)


_SPEAKING = re.compile(r"\S")


@dataclass
class LiveConversation:
    """One conversation as an agent lives it: feed events, get decisions.

    Every attribute a snapshot carries is declared once below with :func:`_saved` (its key
    and, where it is not plain JSON, how it is written and read); :meth:`to_dict` and
    :meth:`from_dict` loop over those declarations. The engine's state is saved block by block,
    each under its feature block's key (:mod:`polylogue.engine.blocks`); the deployment as its
    options (:func:`snapshot_deployment`).
    """

    #: The model, domain, operating point and role (the thresholds come from here only).
    deployment: Deployment
    agent_name: str
    policy: Policy = field(
        default_factory=Policy, metadata=_saved("policy", Policy.to_dict, Policy.from_dict)
    )
    #: Not saved: a restored conversation uses the shipped barge-in model.
    barge_in_model: BargeInModel | None = None
    point_options: PointOptions = field(
        default_factory=PointOptions,
        metadata=_saved("point_options", _point_options_to_dict, _point_options_from_dict),
    )
    #: With a known roster, is an unknown speaker an error (True) or a newcomer (False)?
    strict_roster: bool = field(default=False, metadata=_saved("strict_roster", decode=bool))
    #: Also compute the top feature contributions of each decision (costs about as much as
    #: the decision itself; the CLI shows them, a live service usually does not need them).
    explain: bool = field(default=False, metadata=_saved("explain", decode=bool))
    #: ``group`` or ``adaptive`` (:data:`AUDIENCES`); change it with :meth:`set_audience`.
    audience: str = field(
        default=DEFAULT_AUDIENCE, metadata=_saved("audience", decode=check_audience)
    )

    # The state as events move it on (not constructor arguments).
    #: the agent: its name, participant, own speech state
    agent: _Agent = field(init=False, metadata=_saved("agent", _Agent.to_dict, _Agent.from_dict))
    #: participants who joined and have not left (roster mode), in join order
    present: dict[str, None] = field(
        init=False, default_factory=dict, metadata=_saved("present", list, dict.fromkeys)
    )
    roster_known: bool = field(
        init=False, default=False, metadata=_saved("roster_known", decode=bool)
    )
    #: the "agent's name matched nobody" warning was given
    _warned: bool = field(init=False, default=False, metadata=_saved("warned", decode=bool))
    #: latest interim text per speaker (never observed by the engine)
    interim: dict[str, str] = field(
        init=False, default_factory=dict, metadata=_saved("interim", dict, dict)
    )
    clock: float | None = field(init=False, default=None, metadata=_saved("clock"))
    last_unaddressed_speak: float | None = field(
        init=False, default=None, metadata=_saved("last_unaddressed_speak")
    )
    index: int = field(init=False, default=0, metadata=_saved("index", decode=int))
    #: whose speech is context only, or the only speech answered (:meth:`set_focus`)
    focus: Focus = field(
        init=False, default_factory=Focus, metadata=_saved("focus", Focus.to_dict, Focus.from_dict)
    )
    #: warnings not yet shown (a front end drains them; not saved)
    warnings: list[str] = field(init=False, default_factory=list)
    engine: TurnTakingEngine = field(init=False)
    names: NameBook = field(init=False)

    #: Participants known when the conversation starts (registered, not yet present).
    known: InitVar[Iterable[Participant]] = ()
    #: A snapshot to continue from (:meth:`from_dict`; already upgraded to this version).
    snapshot: InitVar[dict[str, Any] | None] = None

    def __post_init__(self, known: Iterable[Participant], snapshot: dict[str, Any] | None) -> None:
        if snapshot is None:
            self.engine = self.deployment.engine(known)
        else:
            self.engine = _restored_engine(snapshot, self.deployment)
        self.names = NameBook()
        for p in self.engine.participants.values():
            self.names.add(p)
        if snapshot is None:
            self.agent = self._bind_agent(self.agent_name)
        else:
            for f, saved in _LIVE_FIELDS:
                if not f.init:
                    setattr(self, f.name, _read(snapshot, saved))
        if self.barge_in_model is None:
            self.barge_in_model = load_barge_in_model()
        self._apply_focus()

    # ----------------------------------------------------------------- construction helpers

    @classmethod
    def start(
        cls,
        agent: str,
        participants: Iterable[Participant] = (),
        policy: Policy | None = None,
        deployment: Deployment | None = None,
        roster_known: bool = True,
    ) -> LiveConversation:
        """A conversation whose ``participants`` are known up front (all present when
        ``roster_known``), or learnt as people talk (none given). ``deployment`` defaults to
        the shipped model at the product operating point."""
        people = list(participants)
        live = cls(deployment or Deployment.resolve(), agent, policy or Policy(), known=people)
        if people and roster_known:
            live.join(people)
        return live

    def set_role(self, role: str | None) -> None:
        """Switch the role at run time: the same thresholds and gate as that role given at
        creation (``observer`` logs decisions and never speaks; ``None``: the conversation's
        own point). An unknown role changes nothing."""
        self.deployment = self.deployment.with_role(role)

    def set_audience(self, audience: str) -> None:
        """``group`` or ``adaptive`` from now on (:data:`AUDIENCES`); a bad value changes
        nothing."""
        self.audience = check_audience(audience)

    def set_focus(self, ignored: Iterable[str] = (), only: Iterable[str] = ()) -> Focus:
        """Replace the focus: ``ignored`` participants' speech is context only, and a
        non-empty ``only`` is the list of the only participants answered (ids, names or
        aliases of known participants). Empty lists clear it. One error naming the unknown
        participant and the known ones, and nothing changed, if a name is not known, is the
        agent, or is in both lists."""
        ignored_ids = tuple(dict.fromkeys(self._focus_id(n, "ignored") for n in ignored))
        only_ids = tuple(dict.fromkeys(self._focus_id(n, "only") for n in only))
        both = sorted(set(ignored_ids) & set(only_ids))
        if both:
            raise EventError(f"focus: {', '.join(both)} cannot be both ignored and the only ones")
        self.focus = Focus(ignored_ids, only_ids)
        self._apply_focus()
        return self.focus

    def _apply_focus(self) -> None:
        # Ignored speakers' words stay context for the turn sequence, but they address and
        # name nobody: a TV saying "Dave" does not make Dave "addressed earlier".
        self.engine.state.context_only = frozenset(self.focus.ignored)

    def _focus_id(self, name: Any, field_name: str) -> str:
        pid = self._lookup(name) if isinstance(name, str) and name.strip() else None
        if pid is None or pid == self.agent.pid:
            known = [p for p in self.engine.participants if p != self.agent.pid]
            what = "is the agent itself" if pid is not None else "is not a participant"
            raise EventError(
                f"focus.{field_name}: {name!r} {what}; known participants: "
                + (", ".join(known) or "none yet (join them first)")
            )
        return pid

    def humans_present(self) -> list[str]:
        """The people present apart from the agent and ignored participants (with a roster:
        who joined and has not left; without one: who has spoken)."""
        who = self.present if self.roster_known else self.engine.state.utt_count
        return [p for p in who if p != self.agent.pid and p not in self.focus.ignored]

    def alone_with(self, speaker: str) -> bool:
        """Is ``speaker`` the only other person present (ignored participants aside)?"""
        # Whoever speaks is evidently here, on the roster's present list or not.
        return {*self.humans_present(), speaker} == {speaker}

    def _one_to_one(self, d: EngineDecision, speaker: str) -> bool:
        """Answer as a one-to-one assistant (``adaptive`` audience, one other person present,
        words turned to the agent)? False: the role's rules."""
        return self.audience == "adaptive" and self.turned_to_agent(d, speaker)

    def turned_to_agent(self, d: EngineDecision, speaker: str) -> bool:
        """Would a one-to-one assistant answer the utterance just decided on? ``speaker`` is
        the only other person present, the words address nobody else, and they turn to the
        agent: addressed or named, or a question, a request, a need, a "you", or a reply to the
        agent's own question (:func:`polylogue.turntaking.address.directed_to_listener`);
        not thinking aloud, narration or text read out."""
        if not (self.alone_with(speaker) and addresses_nobody_else(d)):
            return False
        if d.addressed or any(a.pid == self.agent.pid for a in d.address.mentioned):
            return True  # with two people, the agent's name is said to the agent
        cs = self.engine.state
        if not cs.window:
            return False
        current = cs.window[-1]
        agent = cs.last_utt.get(self.agent.pid)
        turns = list(cs.turn_speakers)
        # The agent held the turn just before this speaker's: a reply to its question.
        asked = (
            agent is not None
            and len(turns) >= 2
            and turns[-1] == speaker
            and turns[-2] == self.agent.pid
            and asks_by_words(agent.heard or agent.text)
        )
        return directed_to_listener(current.heard or current.text, listener_asked=asked)

    def _bind_agent(self, spec: str) -> _Agent:
        found = self.names.matches(spec)
        if len(found) == 1:
            return _Agent(spec, next(iter(found)), provisional=False)
        if len(found) > 1:
            names = ", ".join(sorted(self.engine.participants[p].display_name for p in found))
            raise PolylogueInputError(f"agent name {spec!r} is ambiguous: {names}")
        placeholder = Participant(id=spec, name=spec if len(spec) > 1 else None)
        self.engine.add_participants([placeholder])
        self.names.add(placeholder)
        return _Agent(spec, spec, provisional=True)

    def _register(self, people: Iterable[Participant]) -> None:
        people = list(people)
        if self.agent.provisional and any(p.id == self.agent.pid for p in people):
            # The placeholder's own id arrives with a real description: take that one.
            self._drop_placeholder()
            self.agent.provisional = False
        new = [p for p in people if p.id not in self.engine.participants]
        if not new:
            return
        if self.agent.provisional:
            key = self.agent.spec.strip().lower()
            hits = [p for p in new if key in _name_keys(p) and p.id != self.agent.pid]
            if len(hits) == 1:
                # The agent's real participant has arrived: drop the placeholder (it never
                # spoke, so nothing but its name was recorded) and decide for the real one.
                self._drop_placeholder()
                self.agent.pid = hits[0].id
                self.agent.provisional = False
        self.engine.add_participants(new)
        for p in new:
            self.names.add(p)

    def _drop_placeholder(self) -> None:
        placeholder = self.engine.participants[self.agent.pid]
        self.engine.state.unregister(placeholder.id)
        self.names.remove(placeholder)
        self.present.pop(placeholder.id, None)

    # ----------------------------------------------------------------- events

    def join(self, people: Iterable[Participant]) -> None:
        """Participants are now present (a roster is known from the first join on)."""
        people = list(people)
        self._register(people)
        self.roster_known = True
        for p in people:
            pid = next(iter(self.names.matches(p.id)))
            self.present[pid] = None

    def leave(self, who: str) -> None:
        pid = self._lookup(who)
        if pid is None:
            raise EventError(f"leave: {who!r} is not a participant")
        self.present.pop(pid, None)

    def reset(self) -> None:
        """Forget the talk so far (a new topic or meeting); keep the roster and the policy."""
        people = list(self.engine.participants.values())
        self.engine.reset(people)
        self._apply_focus()
        self.interim.clear()
        self.last_unaddressed_speak = None
        self.agent.state = AgentState.IDLE
        self.agent.stopped_at = None
        self.index = 0

    def agent_speech(self, speaking: bool, time: float | None = None, text: str = "") -> None:
        """The agent's own voice starts (True) or stops (False); ``text``: what it said."""
        self._tick(time)
        if speaking:
            self.agent.state = AgentState.SPEAKING
            self.agent.started_at = self.clock
            return
        self.agent.state = AgentState.JUST_SPOKE
        self.agent.stopped_at = self.clock
        if text.strip():
            self.engine.observe(Utterance(self.agent.pid, text, end=time))
            self.index += 1

    def speaker_id(self, label: str) -> str:
        """The participant an utterance's speaker label names (registered if new)."""
        pid = self._lookup(label)
        if pid is not None:
            return pid
        if self.roster_known and self.strict_roster:
            raise EventError(f"speaker {label!r} is not a participant")
        alike = self.names.lookalikes(label)
        if len(alike) == 1:  # one person, not a second one who prints the same
            pid = next(iter(alike))
            if label not in self.names.noted:
                self.names.noted.add(label)
                self.warnings.append(
                    f"speaker {label!a} looks like {pid!a} (letters of another script, "
                    "fullwidth or invisible characters): both spellings are one person"
                )
            return pid
        self._register([participant_for_label(label)])
        pid = self._lookup(label)
        assert pid is not None
        return pid

    def silence(self, time: float) -> LiveDecision | None:
        """Nobody has spoken from the last utterance's end up to ``time`` (conversation s).

        A role with a silence limit (the facilitator) steps in once per silence: SPEAK with
        reason "long silence"; other roles, a silence that is still short, an agent that is
        speaking or absent, or a silence it already stepped into give None.
        """
        self._tick(time)
        limit = self.deployment.silence_s
        cs = self.engine.state
        if limit is None or not cs.n_utterances or self.clock is None:
            return None
        last = cs.last
        ended = last.end if last.end is not None else last.start
        if ended is None or self.clock - ended < limit:
            return None
        if self.agent.state is AgentState.SPEAKING or last.speaker == self.agent.pid:
            return None
        if self.roster_known and self.agent.pid not in self.present:
            return None
        if self.last_unaddressed_speak is not None and self.last_unaddressed_speak >= ended:
            return None  # already stepped into this silence
        self.last_unaddressed_speak = self.clock
        dep = self.deployment
        why = explain_silence(self.clock - ended, dep.speaks, dep.take_floor_threshold)
        decision = LiveDecision.of(self.index, self.agent.pid, why, self._agent_state())
        return replace(decision, threshold=None)  # no probability was compared with it

    def interim_utterance(
        self, speaker: str, text: str, time: float | None = None
    ) -> BargeInDecision | None:
        """A partial transcript: kept aside; while the agent speaks, a barge-in decision."""
        pid = self.speaker_id(speaker)
        self._tick(time)
        self.interim[pid] = text
        if pid == self.agent.pid or not _SPEAKING.search(text):
            return None
        return self._barge_in(text)

    def utterance(self, u: Utterance) -> LiveDecision:
        """A final utterance (replacing any interim of the same speaker): observe, then decide."""
        if u.start is not None and u.end is not None and u.end < u.start:
            raise EventError(f"utterance ends ({u.end}) before it starts ({u.start})")
        pid = self.speaker_id(u.speaker)
        if pid == self.agent.pid:
            self.agent.provisional = False  # the agent's name is now a speaker's
        u = replace(u, speaker=pid, addressees=None)
        self.interim.pop(pid, None)
        self._tick(u.end if u.end is not None else u.start)
        barge = None
        if self.agent.state is AgentState.SPEAKING and pid != self.agent.pid:
            barge = self._barge_in(u.text)
        self.engine.state.roster_known = self.roster_known
        self.engine.observe(u)
        index = self.index
        self.index += 1
        self._maybe_warn()
        state = self._agent_state()
        if pid == self.agent.pid:
            return LiveDecision(index, pid, None, "target is speaking", state)
        if not boundary_is_decision_point(u, self.point_options):
            return LiveDecision(index, pid, None, "backchannel or too short", state, barge_in=barge)
        if self.roster_known and self.agent.pid not in self.present:
            return LiveDecision(index, pid, None, "agent not present", state, barge_in=barge)
        skipped = self.focus.skips(pid)
        if skipped is not None:
            return LiveDecision(index, pid, None, skipped, state, barge_in=barge)
        return self._decide(index, pid, state, barge)

    # ----------------------------------------------------------------- policy

    def _decide(
        self, index: int, speaker: str, state: AgentState, barge: BargeInDecision | None
    ) -> LiveDecision:
        cs = self.engine.state
        agent = self.agent.pid
        present: list[str] | Spoken | None
        if self.roster_known:
            everyone = len(self.present) + (agent not in self.present) == len(cs.participants)
            present = None if everyone else [*self.present, agent]
        else:
            # Without a roster, whoever has spoken (and the agent) is present.
            everyone = len(cs.utt_count) + (agent not in cs.utt_count) == len(cs.participants)
            present = None if everyone else SPOKEN
        d = self.engine.decide(agent, present=present, explain=self.explain)
        pol, dep = self.policy, self.deployment
        own = {
            AgentState.IDLE: None,
            AgentState.SPEAKING: pol.threshold_speaking,
            AgentState.JUST_SPOKE: pol.threshold_just_spoke,
        }[state]
        cooling = (
            pol.cooldown_s > 0
            and self.clock is not None
            and self.last_unaddressed_speak is not None
            and self.clock - self.last_unaddressed_speak < pol.cooldown_s
        )
        # The action and its reason come out of one function of these values (a reason
        # cannot contradict its action): see polylogue.engine.explanation.
        values = pause_values(
            d,
            dep,
            None if own is None else replace(dep.thresholds, take_floor=own),
            cooling=pol.cooldown_s if cooling else None,
            one_to_one=self._one_to_one(d, speaker),
        )
        why = explain(values)
        # An unaddressed interjection starts the cooldown (also one a one-to-one room answers).
        if rule_for(replace(values, one_to_one=False)) is Reason.ABOVE_THRESHOLD:
            self.last_unaddressed_speak = self.clock
        return LiveDecision.of(index, speaker, why, state, d, barge)

    def _barge_in(self, text: str) -> BargeInDecision:
        assert self.barge_in_model is not None
        a = self.agent
        speaking_s = (
            None if a.started_at is None or self.clock is None else self.clock - a.started_at
        )
        return self.barge_in_model.decide(text, speaking_s)

    def _agent_state(self) -> AgentState:
        a = self.agent
        if a.state is AgentState.JUST_SPOKE and (
            a.stopped_at is None
            or self.clock is None
            or self.clock - a.stopped_at > self.policy.just_spoke_s
        ):
            a.state = AgentState.IDLE
        return a.state

    def _tick(self, t: float | None) -> None:
        if t is None:
            return
        if t != t or t in (float("inf"), float("-inf")):
            raise EventError(f"time {t!r} is not a finite number")
        self.clock = t if self.clock is None else max(self.clock, t)

    def _lookup(self, name: str) -> str | None:
        found = self.names.matches(name)
        if len(found) == 1:
            return next(iter(found))
        if len(found) > 1:
            # A first name two people share: prefer an exact id/name over the ambiguity.
            exact = [
                pid
                for pid in found
                if name.strip().lower()
                in {pid.lower(), (self.engine.participants[pid].name or "").lower()}
            ]
            if len(exact) == 1:
                return exact[0]
            # Still ambiguous (two "Bob"s): the one who spoke most recently, as for names
            # in the words; never an error in the middle of a live stream.
            last = self.engine.state.last_index
            order = {pid: i for i, pid in enumerate(self.engine.participants)}
            return max(found, key=lambda pid: (last.get(pid, -1), -order.get(pid, 0)))
        return None

    def _maybe_warn(self) -> None:
        if self._warned or not self.agent.provisional or self.index < self.policy.warn_after:
            return
        self._warned = True
        speakers = [
            p.display_name
            for pid, p in self.engine.participants.items()
            if pid != self.agent.pid and p.role != GROUP_ROLE
        ][:8]
        self.warnings.append(
            f"warning: {self.agent.spec!r} has not appeared after {self.index} utterances; "
            f"deciding for a participant of that name who has not spoken "
            f"(speakers so far: {', '.join(speakers)})"
        )

    # ----------------------------------------------------------------- persistence

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot: restoring it continues exactly where this one stands."""
        out: dict[str, Any] = {
            "version": SNAPSHOT_VERSION,
            "deployment": self.deployment.options(),
        }
        for f, saved in _LIVE_FIELDS:
            out[saved.key] = saved.encode(getattr(self, f.name))
        for block, state in zip(self.engine.blocks, self.engine.states, strict=True):
            out[block.snapshot_key] = block.to_dict(state)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any], deployment: Deployment) -> LiveConversation:
        """Restore a snapshot onto ``deployment`` (rebuilt from the snapshot's options with
        :func:`snapshot_deployment`, which may reuse an already loaded model). A snapshot of
        an older version is upgraded, or refused with :class:`SnapshotError`."""
        d = upgrade_snapshot(d)
        options = {f.name: _read(d, saved) for f, saved in _LIVE_FIELDS if f.init}
        agent = _read(d, _Saved("agent", decode=_Agent.from_dict))
        return cls(deployment, agent.spec, **options, snapshot=d)

    def fork(self) -> LiveConversation:
        """An independent copy to try an event on without touching this conversation (the
        LiveKit adapter's probe of a growing transcript). The engine forks itself; the
        attributes a snapshot carries are copied (they are small); the deployment, model,
        barge-in model and options never change in place and are shared."""
        new = copy.copy(self)
        new.engine = self.engine.fork()
        new.names = copy.deepcopy(self.names)
        new.warnings = list(self.warnings)
        for f, _ in _LIVE_FIELDS:
            if not f.init:  # each holds only immutable values: one level is a full copy
                setattr(new, f.name, copy.copy(getattr(self, f.name)))
        return new


#: The snapshot's declarations, read once (serve writes a snapshot after every event).
_LIVE_FIELDS = _saved_fields(LiveConversation)


def _read(d: dict[str, Any], saved: _Saved) -> Any:
    """One attribute of a snapshot, or one error naming the key."""
    if saved.key not in d:
        raise SnapshotError(f"live-conversation snapshot lacks {saved.key!r}")
    try:
        return saved.decode(d[saved.key])
    except (KeyError, TypeError, ValueError, PolylogueInputError) as e:
        raise SnapshotError(f"live-conversation snapshot: bad {saved.key!r} ({e})") from None


def _restored_engine(d: dict[str, Any], deployment: Deployment) -> TurnTakingEngine:
    """The engine with each of its model's blocks' states read from the snapshot."""
    engine = deployment.engine()
    model = engine.model
    states = []
    for block in engine.blocks:
        saved = _read(d, _Saved(block.snapshot_key))
        try:
            states.append(block.from_dict(saved, model.yield_model, model.relation_model))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise SnapshotError(
                f"live-conversation snapshot: bad {block.snapshot_key!r} ({e!r})"
            ) from None
    engine.use_states(states)
    return engine


#: The snapshot format written now. Version 4 saves the audience and the focus, and only the
#: operating point asked for (not the one a role chose); version 3 saves the decision-point
#: options; versions 2 and 3 are upgraded on reading; version 1 (one threshold, before the
#: deployment layer) is refused.
SNAPSHOT_VERSION = 4


class SnapshotError(PolylogueInputError):
    """A stored live-conversation snapshot this version cannot continue."""


def _v2_to_v3(d: dict[str, Any]) -> dict[str, Any]:
    # Version 2 always ran with the default decision-point options.
    return {**d, "version": 3, "point_options": _point_options_to_dict(PointOptions())}


def _v3_to_v4(d: dict[str, Any]) -> dict[str, Any]:
    # Version 3 had no audience or focus, and stored the resolved point: a point equal to the
    # role's preset was the role's choice, not the session's own.
    options = dict(d.get("deployment") or {})
    role = options.get("role")
    preset = ROLES[role].operating_point if isinstance(role, str) and role in ROLES else None
    if options.get("operating_point") == (preset or DEFAULT_OPERATING_POINT):
        options["operating_point"] = None
    return {
        **d,
        "version": 4,
        "deployment": options,
        "audience": DEFAULT_AUDIENCE,
        "focus": Focus().to_dict(),
    }


#: version -> the step to the next version (applied until SNAPSHOT_VERSION).
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {2: _v2_to_v3, 3: _v3_to_v4}


def upgrade_snapshot(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` in the current snapshot version, or :class:`SnapshotError` naming its version."""
    if not isinstance(d, dict):
        raise SnapshotError(f"live-conversation snapshot is a {type(d).__name__}, not an object")
    version = d.get("version")
    while version != SNAPSHOT_VERSION:
        step = _UPGRADES.get(version) if isinstance(version, int) else None
        if step is None:
            readable = ", ".join(str(v) for v in (*sorted(_UPGRADES), SNAPSHOT_VERSION))
            raise SnapshotError(
                f"live-conversation snapshot version {version!r}; this polylogue reads versions "
                f"{readable} (a session saved by another version: create it again)"
            )
        d = step(d)
        version = d["version"]
    return d


def snapshot_deployment(d: dict[str, Any], model: TurnTakingModel | None = None) -> Deployment:
    """The deployment a snapshot was taken with (``model``: an already loaded one to reuse)."""
    d = upgrade_snapshot(d)
    return Deployment.from_options(d.get("deployment", {}), model=model)
