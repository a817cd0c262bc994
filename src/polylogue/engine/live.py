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
* resets, and the policy: ``proactive`` (speak when P(speak) clears the threshold) or
  ``addressed-only``, per-state thresholds (idle / agent speaking / agent just spoke), a
  cooldown between unaddressed interjections, and an optional backchannel band.

Times are conversation seconds taken from the events (utterance ends, event times); a stream
without times never triggers the time-based rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal

from polylogue.conversation import Participant, Utterance
from polylogue.engine.bargein import BargeInDecision, BargeInModel, load_barge_in_model
from polylogue.engine.chat_features import chat_state_from_dict, chat_state_to_dict
from polylogue.engine.engine import EngineDecision, TurnTakingEngine
from polylogue.engine.features import GROUP_ROLE, SPOKEN, Spoken, state_from_dict, state_to_dict
from polylogue.errors import PolylogueInputError
from polylogue.turntaking.points import PointOptions, boundary_is_decision_point


class Action(StrEnum):
    SPEAK = "SPEAK"
    BACKCHANNEL = "BACKCHANNEL"
    SILENT = "SILENT"


class AgentState(StrEnum):
    IDLE = "idle"
    SPEAKING = "speaking"
    JUST_SPOKE = "just_spoke"


class EventError(PolylogueInputError):
    """A live event that cannot be applied (unknown participant, bad times, ...)."""


@dataclass(frozen=True)
class Policy:
    """When the agent takes the floor. Thresholds are on calibrated P(speak)."""

    #: ``proactive``: speak whenever P(speak) clears the threshold; ``addressed-only``: only
    #: when the words put the turn to the agent (named, or asked right after it spoke).
    mode: Literal["proactive", "addressed-only"] = "proactive"
    #: Threshold when the agent is idle (None: the model's tuned threshold).
    threshold: float | None = None
    #: Threshold while the agent is speaking (None: same as idle).
    threshold_speaking: float | None = None
    #: Threshold within ``just_spoke_s`` seconds after the agent stopped (None: same as idle).
    threshold_just_spoke: float | None = None
    just_spoke_s: float = 3.0
    #: No two unaddressed interjections within this many seconds (0: no cooldown).
    cooldown_s: float = 0.0
    #: When set, a SILENT pause whose learned P(backchannel) is at least this becomes
    #: BACKCHANNEL ("mm-hmm"); the model's own suggestion threshold is in
    #: ``model.backchannel_threshold`` (every decision reports ``p_backchannel``).
    backchannel_threshold: float | None = None
    #: Warn once when the agent's name has matched nobody after this many utterances.
    warn_after: int = 20

    def __post_init__(self) -> None:
        if self.mode not in ("proactive", "addressed-only"):
            raise PolylogueInputError(f"policy mode {self.mode!r}: use proactive|addressed-only")
        for name in ("threshold", "threshold_speaking", "threshold_just_spoke"):
            v = getattr(self, name)
            if v is not None and not 0.0 <= v <= 1.0:
                raise PolylogueInputError(f"policy {name}={v}: must be between 0 and 1")
        if self.backchannel_threshold is not None and not 0.0 <= self.backchannel_threshold <= 1:
            raise PolylogueInputError("policy backchannel_threshold: must be between 0 and 1")
        if self.cooldown_s < 0 or self.just_spoke_s < 0:
            raise PolylogueInputError("policy cooldown_s and just_spoke_s must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Policy:
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise PolylogueInputError(f"unknown policy field(s): {', '.join(sorted(unknown))}")
        return cls(**d)


@dataclass(frozen=True)
class LiveDecision:
    """What the agent should do after one final utterance (``action`` None: not a pause)."""

    index: int
    speaker: str
    action: Action | None
    reason: str
    agent_state: AgentState
    p_speak: float | None = None
    threshold: float | None = None
    engine: EngineDecision | None = None
    #: Set when the utterance was spoken while the agent was speaking.
    barge_in: BargeInDecision | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "speaker": self.speaker,
            "action": None if self.action is None else self.action.value,
            "reason": self.reason,
            "agent_state": self.agent_state.value,
            "p_speak": None if self.p_speak is None else round(self.p_speak, 4),
            "threshold": self.threshold,
        }
        if self.engine is not None:
            out["p_backchannel"] = round(self.engine.p_backchannel, 4)
            out["backchannel_suggested"] = self.engine.backchannel
            out["cues"] = self.engine.cues
            out["addressed"] = self.engine.addressed
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

    def add(self, p: Participant) -> None:
        self._exact[p.id] = p.id
        for k in _name_keys(p):
            self._by_key.setdefault(k, set()).add(p.id)

    def remove(self, p: Participant) -> None:
        self._exact.pop(p.id, None)
        for k in _name_keys(p):
            s = self._by_key.get(k)
            if s is not None:
                s.discard(p.id)
                if not s:
                    del self._by_key[k]

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


_SPEAKING = re.compile(r"\S")


@dataclass
class LiveConversation:
    """One conversation as an agent lives it: feed events, get decisions."""

    engine: TurnTakingEngine
    agent_name: str
    policy: Policy = field(default_factory=Policy)
    barge_in_model: BargeInModel | None = None
    point_options: PointOptions = field(default_factory=PointOptions)
    #: With a known roster, is an unknown speaker an error (True) or a newcomer (False)?
    strict_roster: bool = False
    #: Also compute the top feature contributions of each decision (costs about as much as
    #: the decision itself; the CLI shows them, a live service usually does not need them).
    explain: bool = False

    def __post_init__(self) -> None:
        self.names = NameBook()
        for p in self.engine.participants.values():
            self.names.add(p)
        #: participants who joined and have not left (roster mode), in join order
        self.present: dict[str, None] = {}
        self.roster_known = False
        self.warnings: list[str] = []
        self._warned = False
        #: latest interim text per speaker (never observed by the engine)
        self.interim: dict[str, str] = {}
        self.clock: float | None = None
        self.last_unaddressed_speak: float | None = None
        self.index = 0
        self.agent = self._bind_agent(self.agent_name)
        if self.barge_in_model is None:
            self.barge_in_model = load_barge_in_model()

    # ----------------------------------------------------------------- construction helpers

    @classmethod
    def start(
        cls,
        agent: str,
        participants: Iterable[Participant] = (),
        policy: Policy | None = None,
        engine: TurnTakingEngine | None = None,
        roster_known: bool = True,
    ) -> LiveConversation:
        """A conversation whose ``participants`` are known up front (all present when
        ``roster_known``), or learnt as people talk (none given)."""
        people = list(participants)
        engine = engine or TurnTakingEngine.load()
        engine.add_participants(people)
        live = cls(engine=engine, agent_name=agent, policy=policy or Policy())
        if people and roster_known:
            live.join(people)
        return live

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
        self._register([participant_for_label(label)])
        pid = self._lookup(label)
        assert pid is not None
        return pid

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
        pol = self.policy
        base = self.engine.threshold if pol.threshold is None else pol.threshold
        thr = {
            AgentState.IDLE: base,
            AgentState.SPEAKING: pol.threshold_speaking,
            AgentState.JUST_SPOKE: pol.threshold_just_spoke,
        }[state]
        thr = base if thr is None else thr
        cues = d.cues.get("active", [])
        if d.p_speak >= thr:
            action, reason = Action.SPEAK, ", ".join(cues) or "P(speak) above threshold"
            if pol.mode == "addressed-only" and not d.addressed:
                action, reason = Action.SILENT, "not addressed (addressed-only policy)"
            elif (
                not d.addressed
                and pol.cooldown_s > 0
                and self.clock is not None
                and self.last_unaddressed_speak is not None
                and self.clock - self.last_unaddressed_speak < pol.cooldown_s
            ):
                action, reason = Action.SILENT, f"cooldown ({pol.cooldown_s:g} s)"
            elif not d.addressed:
                self.last_unaddressed_speak = self.clock
        else:
            action, reason = Action.SILENT, "P(speak) below threshold"
            if (
                pol.backchannel_threshold is not None
                and d.p_backchannel >= pol.backchannel_threshold
            ):
                action, reason = Action.BACKCHANNEL, "P(backchannel) above threshold"
        return LiveDecision(index, speaker, action, reason, state, d.p_speak, thr, d, barge)

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
        return {
            "version": 1,
            "agent": {
                "spec": self.agent.spec,
                "pid": self.agent.pid,
                "provisional": self.agent.provisional,
                "state": self.agent.state.value,
                "started_at": self.agent.started_at,
                "stopped_at": self.agent.stopped_at,
            },
            "policy": self.policy.to_dict(),
            "present": list(self.present),
            "roster_known": self.roster_known,
            "strict_roster": self.strict_roster,
            "explain": self.explain,
            "warned": self._warned,
            "interim": self.interim,
            "clock": self.clock,
            "last_unaddressed_speak": self.last_unaddressed_speak,
            "index": self.index,
            "threshold": self.engine.threshold,
            "state": state_to_dict(self.engine.state),
            **(
                {"chat_state": chat_state_to_dict(self.engine.chat_state)}
                if self.engine.chat_state is not None
                else {}
            ),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], engine: TurnTakingEngine) -> LiveConversation:
        """Restore a snapshot onto ``engine`` (a fresh engine with the same model)."""
        model = engine.model
        engine.state = state_from_dict(d["state"], model.yield_model, model.relation_model)
        if engine.chat_state is not None:
            if "chat_state" not in d:
                raise ValueError("snapshot lacks the chat state this engine's model reads")
            engine.chat_state = chat_state_from_dict(d["chat_state"])
        engine.threshold = float(d["threshold"])
        live = cls.__new__(cls)
        live.engine = engine
        live.agent_name = d["agent"]["spec"]
        live.policy = Policy.from_dict(d["policy"])
        live.barge_in_model = load_barge_in_model()
        live.point_options = PointOptions()
        live.strict_roster = bool(d.get("strict_roster", False))
        live.explain = bool(d.get("explain", False))
        live.names = NameBook()
        for p in engine.participants.values():
            live.names.add(p)
        live.present = dict.fromkeys(d["present"])
        live.roster_known = bool(d["roster_known"])
        live.warnings = []
        live._warned = bool(d["warned"])
        live.interim = dict(d["interim"])
        live.clock = d["clock"]
        live.last_unaddressed_speak = d["last_unaddressed_speak"]
        live.index = int(d["index"])
        a = d["agent"]
        live.agent = _Agent(
            a["spec"],
            a["pid"],
            bool(a["provisional"]),
            AgentState(a["state"]),
            a["started_at"],
            a["stopped_at"],
        )
        return live
