"""Several AI agents in one room: seats, one floor, agents hearing each other.

:class:`~polylogue.engine.live.LiveConversation` decides for one agent. A room with several
agents (an assistant, a note-taker, a facilitator) needs each agent's own rule (role,
operating point, focus, audience) *and* one floor: two gates that both say SPEAK at the same
pause would talk over each other, and two agents that answer each other would never stop.

* :class:`AgentRoom` holds the seats. Each seat is a ``LiveConversation`` for its agent, fed
  every event of the room, so a room with one seat decides exactly as that one agent alone.
  Everything an agent says enters every other seat's conversation as that agent's utterance
  (agents hear each other: a follow-up to agent A is A's).
* :func:`arbitrate` is the floor: a pure function from the seats' decisions at one pause to
  the seat that takes the floor now (at most one), the seats that answer after it in turn
  (the ``in-turn`` policy only) and, for every seat, what it does and why.
* Conversational continuity: a line whose words address nobody, after an agent's
  substantive line (the talk is with that agent), is that agent's to answer; no other seat
  takes it ("a follow-up to agent A is A's"). Group words ("you guys", "everyone") open the
  floor to every seat again.
* A loop brake: after :attr:`AgentRoom.brake` consecutive agent turns with no human turn,
  no agent takes the floor until a person speaks.

Seats are added, changed and removed while the room runs; :meth:`AgentRoom.to_dict` and
:meth:`AgentRoom.from_dict` save and restore the whole room.
"""

from __future__ import annotations

import time as _time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from polylogue.conversation import Participant, Utterance
from polylogue.engine.deployment import ROLES, Action, Deployment
from polylogue.engine.live import (
    AgentState,
    EventError,
    LiveConversation,
    LiveDecision,
    _Agent,
    check_audience,
    snapshot_deployment,
)
from polylogue.engine.model import TurnTakingModel
from polylogue.errors import PolylogueInputError
from polylogue.turntaking.address import substantive, to_group, words_of
from polylogue.turntaking.points import PointOptions, boundary_is_decision_point

#: How a line that addresses several agents is answered (:attr:`AgentRoom.policy`):
#:
#: * ``first-named``: the agent named first answers; the others stay silent;
#: * ``in-turn``: the first named answers now, the others after it, in the order named.
FLOOR_POLICIES: tuple[str, ...] = ("first-named", "in-turn")
DEFAULT_FLOOR_POLICY = "first-named"
#: Consecutive agent turns (no person speaking between them) after which agents stop.
DEFAULT_BRAKE = 2
#: A role's weight in the claim to an open floor (a question to the group): the facilitator
#: runs the meeting, so it is asked first; a seat without a role is a plain agent.
ROLE_PRIORITY: dict[str | None, float] = {
    "facilitator": 0.1,
    "assistant": 0.0,
    None: 0.0,
    "observer": 0.0,
}
#: How much a seat's share of the recent open floors it took lowers its claim (a seat that
#: took every one of the last :data:`FAIRNESS_WINDOW` loses this much P(speak)).
FAIRNESS_WEIGHT = 0.2
FAIRNESS_WINDOW = 10
SNAPSHOT_VERSION = 1
#: How many observer decisions a room keeps (the latest ones).
OBSERVER_LOG = 1000


class SeatError(PolylogueInputError):
    """A seat or room setting that cannot be used (names the value and the valid ones)."""


def check_floor_policy(value: Any) -> str:
    if not isinstance(value, str) or value not in FLOOR_POLICIES:
        raise SeatError(
            f"floor policy: unknown value {value!r}; choose one of {', '.join(FLOOR_POLICIES)}"
        )
    return value


def check_brake(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SeatError(f"brake: {value!r} is not an integer >= 1 (consecutive agent turns)")
    return value


@dataclass(frozen=True)
class SeatSpec:
    """One agent seat: who the agent is and its own rule."""

    #: The seat's id (``seat`` in room events; not a person's id).
    id: str
    #: The name people call the agent by (defaults to the id).
    name: str | None = None
    #: Other names that address the agent.
    aliases: tuple[str, ...] = ()
    #: observer, assistant or facilitator (None: the plain point).
    role: str | None = None
    #: The seat's operating point (None: the role's, else the default).
    operating_point: str | None = None
    #: group or adaptive.
    audience: str = "group"
    #: People whose speech is context only for this seat.
    ignored: tuple[str, ...] = ()
    #: When not empty, the only people whose turns this seat answers.
    only: tuple[str, ...] = ()

    def participant(self) -> Participant:
        # An id that is one word ("Ada") is what people call the agent, as for one agent's
        # placeholder; a one-letter id or a label of several words (a corpus's "B", "Grad C")
        # is not a name.
        word = len(self.id) > 1 and self.id.isalpha()
        name = self.name or (self.id if word else None)
        return Participant(id=self.id, name=name, aliases=self.aliases)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "aliases": list(self.aliases),
            "role": self.role,
            "operating_point": self.operating_point,
            "audience": self.audience,
            "ignored": list(self.ignored),
            "only": list(self.only),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SeatSpec:
        """From a JSON-like mapping; one error naming the field for anything unusable."""
        if not isinstance(d, Mapping):
            raise SeatError(f"seat: {d!r} is not an object")
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(d) - known)
        if unknown:
            raise SeatError(
                f"seat: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        sid = d.get("id")
        if not isinstance(sid, str) or not sid.strip():
            raise SeatError(f"seat id: {sid!r} is not a non-empty string")
        for key in ("name", "role", "operating_point"):
            v = d.get(key)
            if v is not None and not isinstance(v, str):
                raise SeatError(f"seat {sid!r}: {key} {v!r} is not a string")
        role = d.get("role")
        if role is not None and role not in ROLES:
            raise SeatError(
                f"seat {sid!r}: role {role!r} is unknown; choose one of {', '.join(ROLES)}"
            )
        lists: dict[str, tuple[str, ...]] = {}
        for key in ("aliases", "ignored", "only"):
            v = d.get(key, [])
            if not isinstance(v, list | tuple) or not all(isinstance(x, str) for x in v):
                raise SeatError(f"seat {sid!r}: {key} {v!r} is not a list of strings")
            lists[key] = tuple(v)
        try:
            audience = check_audience(d.get("audience", "group"))
        except EventError as e:
            raise SeatError(f"seat {sid!r}: {e}") from None
        return cls(
            sid,
            d.get("name"),
            lists["aliases"],
            role,
            d.get("operating_point"),
            audience,
            lists["ignored"],
            lists["only"],
        )


# --------------------------------------------------------------------------- arbitration


@dataclass(frozen=True)
class Bid:
    """What one seat's own rule says at a pause: the input of :func:`arbitrate`."""

    seat: str
    #: The seat's action (None: not a decision point for this seat).
    action: Action | None
    #: What the rule says before a role that never speaks silences it.
    suggested: Action | None
    p_speak: float
    #: The words put the turn to this seat (by name, "you" follow-up, two-person question).
    addressed: bool
    #: Where the words name this seat among the addressees (0: first), None: not named.
    named_at: int | None
    role: str | None
    #: Share of the recent open floors this seat took (the fairness term).
    share: float = 0.0

    @property
    def wants(self) -> bool:
        return self.action is Action.SPEAK

    @property
    def claim(self) -> float:
        """The strength of the seat's claim to an open floor."""
        return self.p_speak + ROLE_PRIORITY.get(self.role, 0.0) - FAIRNESS_WEIGHT * self.share


@dataclass(frozen=True)
class Arbitration:
    """Who wanted the floor at one pause, who got it and why."""

    #: The seat that takes the floor now (at most one).
    granted: str | None
    #: Seats that answer after it, in order (``in-turn`` policy).
    queued: tuple[str, ...]
    #: Seats whose own rule said SPEAK (observers' "would speak" included, marked).
    wanted: tuple[str, ...]
    #: Every seat's final action and the reason.
    actions: dict[str, Action | None]
    reasons: dict[str, str]
    reason: str
    #: True when the pause came under one of the room's floor rules (someone holds the floor,
    #: the loop brake) rather than the seats' claims.
    blocked: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "granted": self.granted,
            "queued": list(self.queued),
            "wanted": list(self.wanted),
            "reason": self.reason,
            "seats": {
                s: {"action": None if a is None else a.value, "reason": self.reasons[s]}
                for s, a in self.actions.items()
            },
        }


def arbitrate(
    bids: Sequence[Bid],
    policy: str = DEFAULT_FLOOR_POLICY,
    floor_holder: str | None = None,
    braked: bool = False,
    in_turn: str | None = None,
    partner: str | None = None,
) -> Arbitration:
    """The floor at one pause: at most one seat takes it.

    ``floor_holder``: a person or agent who holds the floor (speaking now): nobody starts.
    ``braked``: the loop brake is on (too many agent turns with no person between them):
    nobody starts. ``in_turn``: a seat a person addressed together with the agent that just
    answered (``in-turn`` policy): its turn now, whatever its own rule or the brake says.
    Otherwise seats the words address win over seats they do not (several
    addressed: ``policy``). With nobody addressed, ``partner``: the seat the speaker is
    talking with (the last substantive line before this one was its agent's, and the words
    do not turn to the group): it answers if its own rule says so, and no other seat does
    (a follow-up to agent A is A's). Else the strongest claim (:attr:`Bid.claim`).
    Seats that do not take the floor keep a backchannel their rule gave, never SPEAK.
    """
    check_floor_policy(policy)
    wanted = tuple(b.seat for b in bids if b.wants or b.suggested is Action.SPEAK)
    actions: dict[str, Action | None] = {}
    reasons: dict[str, str] = {}
    for b in bids:
        if b.action is None:
            actions[b.seat], reasons[b.seat] = None, "not a decision point"
        elif b.suggested is Action.SPEAK and not b.wants:
            actions[b.seat], reasons[b.seat] = b.action, "observer (would speak)"
        else:
            actions[b.seat] = b.action
            reasons[b.seat] = "its own rule" if b.action is not Action.SPEAK else "wanted"
    speakers = [b for b in bids if b.wants]

    def deny(seats: Iterable[Bid], why: str) -> None:
        for b in seats:
            actions[b.seat], reasons[b.seat] = Action.SILENT, why

    if in_turn is not None and floor_holder is None:
        deny((b for b in speakers if b.seat != in_turn), f"{in_turn} answers in turn")
        actions[in_turn], reasons[in_turn] = Action.SPEAK, "addressed: its turn"
        return Arbitration(in_turn, (), wanted, actions, reasons, f"{in_turn} answers in turn")
    if floor_holder is not None or braked:
        why = f"{floor_holder} holds the floor" if floor_holder is not None else "loop brake"
        deny(speakers, why)
        return Arbitration(None, (), wanted, actions, reasons, why, blocked=True)
    if not speakers:
        return Arbitration(None, (), wanted, actions, reasons, "no seat wants the floor")
    named = sorted((b for b in bids if b.addressed), key=_named_order)
    if named:
        # The words put the turn to these seats: nobody else answers them.
        unnamed = [b for b in speakers if not b.addressed]
        who = ", ".join(b.seat for b in named)
        deny(unnamed, f"the words address {who}")
        ready = [b for b in named if b.wants]
        if not ready:
            return Arbitration(
                None, (), wanted, actions, reasons, f"{who} addressed; none takes the floor"
            )
        first, rest = ready[0], ready[1:]
        reasons[first.seat] = "addressed" + (" first" if len(ready) > 1 else "")
        if policy == "in-turn":
            for b in rest:
                actions[b.seat], reasons[b.seat] = Action.SILENT, f"answers after {first.seat}"
            queued = tuple(b.seat for b in rest)
            why = f"{first.seat} addressed" + (
                f"; then {', '.join(queued)} in turn" if queued else ""
            )
            return Arbitration(first.seat, queued, wanted, actions, reasons, why)
        deny(rest, f"{first.seat} was named first")
        return Arbitration(first.seat, (), wanted, actions, reasons, f"{first.seat} addressed")
    if partner is not None and any(b.seat == partner for b in bids):
        # The person is talking with this seat's agent: another agent would cut in.
        mine = [b for b in speakers if b.seat == partner]
        deny((b for b in speakers if b.seat != partner), f"the talk is with {partner}")
        if not mine:
            return Arbitration(
                None, (), wanted, actions, reasons, f"the talk is with {partner}; it stays silent"
            )
        reasons[partner] = "the talk is with it"
        return Arbitration(
            partner, (), wanted, actions, reasons, f"the talk is with {partner} (continuity)"
        )
    best = max(speakers, key=lambda b: (b.claim, -bids.index(b)))
    reasons[best.seat] = f"strongest claim {best.claim:.3f}"
    others = [b for b in speakers if b is not best]
    for b in others:
        actions[b.seat] = Action.SILENT
        reasons[b.seat] = f"weaker claim {b.claim:.3f} than {best.seat}"
    why = "open floor: " + ", ".join(f"{b.seat} {b.claim:.3f}" for b in speakers)
    return Arbitration(best.seat, (), wanted, actions, reasons, why)


def _named_order(b: Bid) -> tuple[int, int]:
    # Named seats in the order the words name them; a "you" follow-up (addressed, not named)
    # after every named one.
    return (0, b.named_at) if b.named_at is not None else (1, 0)


# --------------------------------------------------------------------------- the room


@dataclass(frozen=True)
class RoomDecision:
    """One pause in the room: every seat's own decision and the arbitration over them."""

    index: int
    speaker: str
    decisions: dict[str, LiveDecision]
    arbitration: Arbitration
    #: Seconds spent in the seats' decisions and in the arbitration.
    decide_s: float = 0.0
    arbitrate_s: float = 0.0

    def action(self, seat: str) -> Action | None:
        return self.arbitration.actions.get(seat)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "speaker": self.speaker,
            "arbitration": self.arbitration.to_dict(),
            "seats": {s: d.to_dict() for s, d in self.decisions.items()},
        }


@dataclass
class _Seat:
    spec: SeatSpec
    live: LiveConversation


@dataclass
class AgentRoom:
    """One conversation with several agent seats and one floor.

    ``people``: the human participants (a seat may not be one of them). Every event goes to
    every seat's conversation; :meth:`utterance` and :meth:`agent_said` return the
    arbitrated decision.
    """

    model: TurnTakingModel
    people: list[Participant]
    policy: str = DEFAULT_FLOOR_POLICY
    brake: int = DEFAULT_BRAKE
    #: The deployment domain every seat's thresholds are read for (None: the default).
    domain: str | None = None
    seats: dict[str, _Seat] = field(default_factory=dict)
    #: consecutive agent turns since the last human turn
    agent_run: int = 0
    #: the seat that spoke last (an agent's consecutive lines are one turn)
    last_agent: str | None = None
    #: the seat granted the floor and not yet heard from; seats queued after it
    floor: str | None = None
    queue: list[str] = field(default_factory=list)
    #: the seats that took the recent open floors (the fairness term)
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=FAIRNESS_WINDOW))
    #: the speakers of the last substantive lines, latest last, each once (two kept): whom
    #: the next speaker is talking with (conversational continuity)
    talk: list[str] = field(default_factory=list)
    #: people speaking now (an interim transcript not yet final)
    speaking: dict[str, str] = field(default_factory=dict)
    #: what the observers would have done at each of their decision points (seat, index,
    #: the action their rule gives, reason), the latest :data:`OBSERVER_LOG` of them
    log: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=OBSERVER_LOG))

    def __post_init__(self) -> None:
        check_floor_policy(self.policy)
        check_brake(self.brake)
        ids = [p.id for p in self.people]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise SeatError(f"people: {', '.join(dup)} given twice")

    @classmethod
    def start(
        cls,
        people: Iterable[Participant],
        seats: Iterable[SeatSpec],
        model: TurnTakingModel | None = None,
        policy: str = DEFAULT_FLOOR_POLICY,
        brake: int = DEFAULT_BRAKE,
        domain: str | None = None,
    ) -> AgentRoom:
        """A room with ``people`` present and ``seats``; one error and no room for a bad one."""
        if model is None:
            model = Deployment.resolve(domain=domain).model
        room = cls(model, list(people), check_floor_policy(policy), check_brake(brake), domain)
        specs = list(seats)
        ids = [s.id for s in specs]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise SeatError(
                f"seat id(s) {', '.join(map(repr, dup))} given twice; seat ids: {', '.join(ids)}"
            )
        # Seats known up front all start on the whole roster (as each agent's own session
        # would); a seat added later hears the talk so far from a copy of another's.
        everyone = [*room.people, *(spec.participant() for spec in specs)]
        for spec in specs:
            room._check_new(spec)
            live = LiveConversation.start(spec.id, everyone, deployment=room._deployment(spec))
            _set_seat_options(live, spec)
            room.seats[spec.id] = _Seat(spec, live)
        return room

    # ----------------------------------------------------------------- seats

    def _human_matching(self, spec: SeatSpec) -> Participant | None:
        keys = {k.strip().lower() for k in (spec.id, spec.name, *spec.aliases) if k}
        for p in self.people:
            if keys & {k.strip().lower() for k in (p.id, p.name, *p.aliases) if k}:
                return p
        return None

    def _check_new(self, spec: SeatSpec) -> None:
        if spec.id in self.seats:
            raise SeatError(f"seat {spec.id!r} exists already; seats: {', '.join(self.seats)}")
        person = self._human_matching(spec)
        if person is not None:
            raise SeatError(
                f"seat {spec.id!r} names {person.id!r}, a person in the room; people: "
                + ", ".join(p.id for p in self.people)
            )
        keys = {k.strip().lower() for k in (spec.id, spec.name, *spec.aliases) if k}
        for other in self.seats.values():
            o = other.spec
            if keys & {k.strip().lower() for k in (o.id, o.name, *o.aliases) if k}:
                raise SeatError(f"seat {spec.id!r}: its name is seat {o.id!r}'s too")

    def _deployment(self, spec: SeatSpec) -> Deployment:
        try:
            return Deployment.resolve(
                model=self.model,
                domain=self.domain,
                role=spec.role,
                operating_point=spec.operating_point,
            )
        except PolylogueInputError as e:
            raise SeatError(f"seat {spec.id!r}: {e}") from None

    def add_seat(self, spec: SeatSpec) -> None:
        """A new agent seat. It hears the conversation so far (an existing seat's state is
        copied); one error naming the value, and the room unchanged, for a bad seat."""
        self._check_new(spec)
        dep = self._deployment(spec)
        me = spec.participant()
        if self.seats:
            live = _rebind(next(iter(self.seats.values())).live.fork(), dep, spec)
        else:
            live = LiveConversation.start(spec.id, [*self.people, me], deployment=dep)
        _set_seat_options(live, spec)  # may refuse the seat: nothing else has changed yet
        for s in self.seats.values():
            s.live.join([me])
        self.seats[spec.id] = _Seat(spec, live)

    def change_seat(self, seat: str, **changes: Any) -> SeatSpec:
        """Change a seat's role, operating point, audience or focus (one error naming the
        value, and the seat unchanged, for a bad one)."""
        s = self._seat(seat)
        allowed = ("role", "operating_point", "audience", "ignored", "only")
        unknown = sorted(set(changes) - set(allowed))
        if unknown:
            raise SeatError(
                f"seat {seat!r}: cannot change {', '.join(unknown)}; changeable: "
                + ", ".join(allowed)
            )
        spec = SeatSpec.from_dict({**s.spec.to_dict(), **changes})
        dep = self._deployment(spec)
        trial = s.live.fork()
        trial.deployment = dep
        _set_seat_options(trial, spec)  # raises before anything changes
        s.live.deployment = dep
        _set_seat_options(s.live, spec)
        s.spec = spec
        return spec

    def remove_seat(self, seat: str) -> None:
        """Remove a seat; a seat holding the floor (speaking, or granted it and not yet heard)
        cannot be removed."""
        s = self._seat(seat)
        if s.live.agent.state is AgentState.SPEAKING or self.floor == seat:
            raise SeatError(f"seat {seat!r} holds the floor; remove it after it has spoken")
        del self.seats[seat]
        self.queue = [q for q in self.queue if q != seat]
        for other in self.seats.values():
            other.live.leave(s.live.agent.pid)

    def _seat(self, seat: str) -> _Seat:
        if seat not in self.seats:
            raise SeatError(f"seat {seat!r} is not in the room; seats: {', '.join(self.seats)}")
        return self.seats[seat]

    def set_policy(self, policy: str) -> None:
        self.policy = check_floor_policy(policy)

    def set_brake(self, brake: int) -> None:
        self.brake = check_brake(brake)

    def _seat_of(self, label: str) -> str | None:
        for sid, s in self.seats.items():
            if label in (sid, s.spec.name) or label == s.live.agent.pid:
                return sid
        return None

    # ----------------------------------------------------------------- events

    def interim(self, speaker: str, text: str) -> None:
        """A person is speaking (a partial transcript): they hold the floor until final."""
        if text.strip():
            self.speaking[speaker] = text
        else:
            self.speaking.pop(speaker, None)

    def agent_speech(self, seat: str, speaking: bool, time: float | None = None) -> None:
        """A seat's agent starts speaking (the floor is its own until :meth:`agent_said`)."""
        s = self._seat(seat)
        s.live.agent_speech(speaking, time)

    def utterance(self, u: Utterance) -> RoomDecision:
        """A final utterance: a person's, or (its label naming a seat) an agent's."""
        seat = self._seat_of(u.speaker)
        if seat is not None:
            return self.agent_said(seat, u.text, u.start, u.end)
        t0 = _time.perf_counter()
        decisions = {sid: s.live.utterance(u) for sid, s in self.seats.items()}
        return self._after_person(u, decisions, t0, _time.perf_counter())

    def agent_said(
        self, seat: str, text: str, start: float | None = None, end: float | None = None
    ) -> RoomDecision:
        """A seat's agent has said ``text``: its own conversation records its speech; every
        other seat hears it as that agent's utterance and decides on it."""
        s = self._seat(seat)
        t0 = _time.perf_counter()
        if s.live.agent.state is not AgentState.SPEAKING:
            s.live.agent_speech(True, start)
        s.live.agent_speech(False, end, text)
        heard = Utterance(s.live.agent.pid, text, start, end)
        decisions = {sid: o.live.utterance(heard) for sid, o in self.seats.items() if sid != seat}
        return self._after_agent(seat, text, decisions, t0, _time.perf_counter())

    def heard(self, u: Utterance, decisions: Mapping[str, LiveDecision | None]) -> RoomDecision:
        """The floor over decisions each seat's own conversation made elsewhere: for seats
        whose ``LiveConversation`` a front end feeds itself (an adapter's gate, attached
        with :meth:`attach`). ``u`` is the line just heard (a person's, or a seat's agent's);
        ``decisions`` maps each seat to its decision on it (None or absent: none, as for a
        seat's own line). The room's floor state moves on exactly as in :meth:`utterance`."""
        t = _time.perf_counter()
        seat = self._seat_of(u.speaker)
        index = next((d.index for d in decisions.values() if d is not None), -1)
        full = {
            sid: decisions.get(sid)
            or LiveDecision(index, u.speaker, None, "no decision", s.live.agent.state)
            for sid, s in self.seats.items()
            if sid != seat
        }
        if seat is not None:
            return self._after_agent(seat, u.text, full, t, t)
        return self._after_person(u, full, t, t)

    def attach(self, spec: SeatSpec, live: LiveConversation) -> None:
        """A seat whose conversation a front end feeds (an adapter's gate): the room only
        arbitrates over its decisions (:meth:`heard`); the same checks as :meth:`add_seat`."""
        self._check_new(spec)
        if live.agent.pid != spec.participant().id:
            raise SeatError(
                f"seat {spec.id!r}: the conversation decides for {live.agent.pid!r}, not for it"
            )
        self.seats[spec.id] = _Seat(spec, live)

    def _after_person(
        self, u: Utterance, decisions: dict[str, LiveDecision], t0: float, t1: float
    ) -> RoomDecision:
        self.speaking.pop(u.speaker, None)
        if boundary_is_decision_point(u, _point_options(self)):
            self.agent_run, self.last_agent = 0, None
        self.floor, self.queue = None, []
        return self._arbitrate(u.speaker, u.text, decisions, t0, t1)

    def _after_agent(
        self, seat: str, text: str, decisions: dict[str, LiveDecision], t0: float, t1: float
    ) -> RoomDecision:
        s = self.seats[seat]
        pid = s.live.agent.pid
        # The speaking seat decides nothing on its own words.
        decisions[seat] = LiveDecision(
            s.live.index - 1, pid, None, "target is speaking", s.live.agent.state
        )
        if self.last_agent != seat:
            self.agent_run += 1
            self.last_agent = seat
        turn = None
        if self.floor == seat:
            self.floor = None
            turn = self.queue.pop(0) if self.queue else None
        return self._arbitrate(pid, text, decisions, t0, t1, turn)

    def _arbitrate(
        self,
        speaker: str,
        text: str,
        decisions: dict[str, LiveDecision],
        t0: float,
        t1: float,
        turn: str | None = None,
    ) -> RoomDecision:
        bids = [self._bid(sid, decisions[sid]) for sid in self.seats]
        holder = self._floor_holder(speaker)
        braked = self.agent_run >= self.brake
        partner = self.talking_with(speaker, text)
        arb = arbitrate(bids, self.policy, holder, braked, turn, partner)
        t2 = _time.perf_counter()
        if substantive(text):
            self.talk = [*(s for s in self.talk if s != speaker), speaker][-2:]
        if arb.granted is not None:
            self.floor = arb.granted
            if turn is None:
                self.queue = list(arb.queued)
            if partner is None and not any(b.addressed for b in bids):
                # an open floor taken on claims (the fairness term counts these only)
                self.recent.append(arb.granted)
        index = next(iter(decisions.values())).index if decisions else -1
        for sid, d in decisions.items():
            observer = not self.seats[sid].live.deployment.speaks
            if observer and d.suggested is not None:
                self.log.append(
                    {"seat": sid, "index": d.index, "would": d.suggested.value, "reason": d.reason}
                )
        return RoomDecision(index, speaker, decisions, arb, t1 - t0, t2 - t1)

    def _bid(self, sid: str, d: LiveDecision) -> Bid:
        e = d.engine
        named_at = None
        if e is not None:
            pid = self.seats[sid].live.agent.pid
            names = e.address.addressees
            named_at = names.index(pid) if pid in names else None
        share = self.recent.count(sid) / FAIRNESS_WINDOW if self.recent else 0.0
        return Bid(
            sid,
            d.action,
            d.suggested,
            d.p_speak or 0.0,
            bool(e is not None and e.addressed),
            named_at,
            self.seats[sid].spec.role,
            share,
        )

    def talking_with(self, speaker: str, text: str) -> str | None:
        """The seat ``speaker`` is talking with: the last substantive line before this one by
        anyone else was its agent's (None: a person's, or the words turn to the group)."""
        before = next((s for s in reversed(self.talk) if s != speaker), None)
        seat = None if before is None else self._seat_of(before)
        if seat is None or to_group(words_of(text)):
            return None
        return seat

    def _floor_holder(self, speaker: str) -> str | None:
        for sid, s in self.seats.items():
            if s.live.agent.state is AgentState.SPEAKING:
                return sid
        others = [p for p in self.speaking if p != speaker]
        return others[0] if others else None

    # ----------------------------------------------------------------- persistence

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": SNAPSHOT_VERSION,
            "people": [_participant_dict(p) for p in self.people],
            "policy": self.policy,
            "brake": self.brake,
            "domain": self.domain,
            "agent_run": self.agent_run,
            "last_agent": self.last_agent,
            "floor": self.floor,
            "queue": list(self.queue),
            "recent": list(self.recent),
            "talk": list(self.talk),
            "speaking": dict(self.speaking),
            "log": list(self.log),
            "seats": [
                {"spec": s.spec.to_dict(), "live": s.live.to_dict()} for s in self.seats.values()
            ],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], model: TurnTakingModel | None = None) -> AgentRoom:
        if not isinstance(d, Mapping) or d.get("version") != SNAPSHOT_VERSION:
            v = d.get("version") if isinstance(d, Mapping) else None
            raise SeatError(f"room snapshot version {v!r}; this polylogue reads {SNAPSHOT_VERSION}")
        try:
            people = [Participant(**p) for p in d["people"]]
            room = cls(
                model or Deployment.resolve(domain=d["domain"]).model,
                people,
                check_floor_policy(d["policy"]),
                check_brake(d["brake"]),
                d["domain"],
            )
            room.agent_run = int(d["agent_run"])
            room.last_agent = d["last_agent"]
            room.floor = d["floor"]
            room.queue = list(d["queue"])
            room.recent.extend(d["recent"])
            room.talk = [str(x) for x in d.get("talk", [])]
            room.speaking = dict(d["speaking"])
            room.log.extend(d["log"])
            for seat in d["seats"]:
                spec = SeatSpec.from_dict(seat["spec"])
                dep = snapshot_deployment(seat["live"], room.model)
                room.seats[spec.id] = _Seat(spec, LiveConversation.from_dict(seat["live"], dep))
        except (KeyError, TypeError, ValueError) as e:
            raise SeatError(f"room snapshot: bad or missing {e}") from None
        return room


def _participant_dict(p: Participant) -> dict[str, Any]:
    return {"id": p.id, "name": p.name, "role": p.role, "aliases": list(p.aliases)}


def _point_options(room: AgentRoom) -> PointOptions:
    return next(iter(room.seats.values())).live.point_options if room.seats else PointOptions()


def _rebind(live: LiveConversation, dep: Deployment, spec: SeatSpec) -> LiveConversation:
    """A copy of another seat's conversation made this seat's: same talk, this agent."""
    me = spec.participant()
    live.join([me])
    live.deployment = dep
    live.agent = _Agent(spec.id, me.id, provisional=False)
    live.last_unaddressed_speak = None
    live._warned = False
    live.warnings = []
    live.focus = replace(live.focus, ignored=(), only=())
    return live


def _set_seat_options(live: LiveConversation, spec: SeatSpec) -> None:
    try:
        live.set_audience(spec.audience)
        live.set_focus(spec.ignored, spec.only)
    except PolylogueInputError as e:
        raise SeatError(f"seat {spec.id!r}: {e}") from None
