"""The ASGI app of ``polylogue serve``: sessions over HTTP and WebSocket, metrics, health.

Protocol (JSON; with a server token, HTTP routes need ``Authorization: Bearer TOKEN``, the
WebSocket upgrade that header or ``?token=``, since browsers cannot set headers on sockets):

* ``POST /v1/sessions`` ``{"agent": "Dave", "participants": [...], "deployment": {"domain"?,
  "operating_point"?, "threshold"?, "role"?}, "policy": {...}}`` -> 201 ``{"session_id": ...,
  "deployment": {...}}``, answered only once the session is stored (``participants``
  optional: without them the roster is learnt; a bad deployment option is a 400 naming the
  option and its valid values).
* ``POST /v1/sessions/{id}/events`` one event or a list -> ``{"results": [...]}``.
* ``WS /v1/sessions/{id}/stream``: send events, receive one result per event, in order.
* ``GET /v1/sessions/{id}`` (includes ``last_seq``), ``DELETE /v1/sessions/{id}``,
  ``GET /healthz``, ``GET /metrics``.

Events: ``{"type": "utterance", "speaker", "text", "start"?, "end"?, "final"?: true}``,
``{"type": "join", "participants": [...]}``, ``{"type": "leave", "participant"}``,
``{"type": "agent_speech", "speaking": bool, "time"?, "text"?}``, ``{"type": "reset"}``,
``{"type": "role", "role": "observer" | "assistant" | "facilitator" | null}``,
``{"type": "audience", "audience": "group" | "adaptive"}``, ``{"type": "focus", "ignored"?:
[...], "only"?: [...]}`` (the session body takes ``audience`` and ``focus`` too); any event may
carry an integer ``"seq"``: echoed back, and an event whose ``seq`` is not above the
session's ``last_seq`` is a resend and is not applied again (``"duplicate": true``). A
result is ``{"ok": true, "seq", "decision"?, "barge_in"?}`` or ``{"ok": false, "seq",
"error"}``; a bad event (or frame) never closes the socket and never touches another session.
See docs/serve-operations.md for the resume protocol and docs/serve.md for the status codes.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import hmac
import json
import logging
import math
import os
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from polylogue.conversation import BadNameError, Participant, Utterance, clean_name
from polylogue.engine.deployment import Deployment, DeploymentError
from polylogue.engine.live import AUDIENCES, LiveConversation, Policy, snapshot_deployment
from polylogue.engine.model import TurnTakingModel, load_model, model_dir_for
from polylogue.errors import PolylogueInputError
from polylogue.serve.guard import RequestGuard, bound_hosts, is_loopback, token_problem
from polylogue.serve.metrics import Metrics
from polylogue.serve.rooms import RoomNotFound, Rooms, room_routes
from polylogue.serve.store import (
    ROSTER_KEY,
    SessionExistsError,
    SessionGoneError,
    SessionLimitError,
    SessionStore,
    StaleSessionError,
    StoreUnavailableError,
)

MAX_TEXT = 10_000
MAX_PARTICIPANTS = 5_000
#: Largest event (WebSocket message or HTTP body), in bytes.
MAX_MESSAGE = 256 * 1024
#: uvicorn's own WebSocket frame limit: above the app's, so a message between the two gets
#: the app's "message too large" result on an open socket; only past this does the socket close.
MAX_WS_FRAME = 4 * MAX_MESSAGE
#: ``seq`` values are integers a JSON client can hold exactly (IEEE doubles: 2**53).
MAX_SEQ = 2**53 - 1
#: Longest integer literal accepted in a message: nothing in the protocol needs more.
MAX_INT_DIGITS = 20
logger = logging.getLogger("polylogue.serve")


class ServeConfigError(PolylogueInputError):
    """A server configuration that is refused (e.g. a public bind without a token)."""


def check_bind(host: str, token: str | None) -> None:
    """Loopback needs no token; any other address needs one. A token given is never weak."""
    problem = token_problem(token) if token else None
    if problem:
        raise ServeConfigError(
            f"the server token (--token or POLYLOGUE_SERVE_TOKEN) {problem}; use a random one, "
            f"for example {secrets.token_urlsafe(24)}"
        )
    if not token and not is_loopback(host):
        raise ServeConfigError(
            f"listening on {host!r} needs a token (random, at least 16 characters; "
            "--token or POLYLOGUE_SERVE_TOKEN); loopback (127.0.0.1) needs none"
        )


class RequestTooLarge(PolylogueInputError):
    """An HTTP body over :data:`MAX_MESSAGE` bytes (answered 413, read no further)."""


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"integer with {len(digits)} digits (at most {MAX_INT_DIGITS})")
    return int(digits)


class _NonFinite(float):
    """``NaN``/``Infinity`` as Python's json reads them, marked so the field can be named."""


def _constant(name: str) -> float:
    return _NonFinite(float(name))


#: A ``\uD800``-``\uDFFF`` escape: maybe a lone surrogate (a pair is joined by the parser).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def load_message(data: str | bytes) -> Any:
    """JSON of one message; ``ValueError`` for anything else (bad UTF-8, huge integers, NaN).

    Integer literals are bounded here, before ``int()`` runs: Python refuses literals over
    4,300 digits with a bare ``ValueError``, and a smaller huge one would overflow later.
    Python's json also reads ``NaN``/``Infinity`` (not JSON) and lone surrogate escapes (not
    text): both are refused here, naming the field, before anything stores them.
    """
    try:
        obj = json.loads(data, parse_int=_bounded_int, parse_constant=_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    if any(c in text for c in "NI") or _SURROGATE_ESCAPE.search(text):
        problem = _unwritable(obj, "")
        if problem:
            raise ValueError(problem)
    return obj


def _unwritable(obj: Any, where: str) -> str | None:
    """The first NaN/Infinity or lone surrogate in a parsed message, with its field."""
    if isinstance(obj, _NonFinite):
        return f"{where or 'value'}: {obj!r} is not a number JSON allows (finite numbers only)"
    if isinstance(obj, str):
        if any("\ud800" <= c <= "\udfff" for c in obj):
            return f"{where or 'value'}: holds a lone surrogate (not Unicode text)"
        return None
    items: Any = (
        obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    )
    for k, v in items:
        key = f"{where}.{k}" if where else str(k)
        if isinstance(k, str) and (found := _unwritable(k, f"{where or 'object'} key")):
            return found
        if found := _unwritable(v, key):
            return found
    return None


# ----------------------------------------------------------------------------- wire models


class _Strict(BaseModel):
    # strict: a wrong JSON type is refused, never coerced ("5" is not a time, 1 not a bool)
    model_config = ConfigDict(extra="forbid", strict=True)


def _usable_name(v: str | None) -> str | None:
    """A name or id that prints as itself: no control characters (NUL, newline), no bidi,
    and something visible once normalised (zero-width spaces, variation selectors and other
    invisible characters alone are one empty name: two of them would be one person)."""
    if v is None:
        return v
    try:
        cleaned = clean_name(v)
    except BadNameError as e:
        raise ValueError(str(e)) from None
    if not cleaned:
        shown = "blank" if not v.strip() else f"{v!a}: only invisible characters"
        raise ValueError(f"name is {shown}")
    return v


def _usable_names(v: list[str]) -> list[str]:
    for name in v:
        _usable_name(name)
    return v


class ParticipantIn(_Strict):
    """A participant: who speaks (``speaker`` of an utterance is one of these ids)."""

    #: The id utterances name as their ``speaker``.
    id: str = Field(min_length=1, max_length=200)
    #: The name people call them by (addresses like "Alice, ..." match it).
    name: str | None = Field(default=None, max_length=200)
    #: Free text (a job, "Operator" on an earnings call); printed, never interpreted otherwise.
    role: str | None = Field(default=None, max_length=200)
    #: Other names that address them ("Professor D" called "Morgan").
    aliases: list[str] = Field(default_factory=list, max_length=20)

    _names = field_validator("id", "name")(_usable_name)
    _aliases = field_validator("aliases")(_usable_names)

    @field_validator("role")
    @classmethod
    def _role_text(cls, v: str | None) -> str | None:
        """A participant's role prints in summaries and logs: checked like a name."""
        try:
            return _usable_name(v)
        except ValueError as e:
            raise ValueError("role text" + str(e).removeprefix("name")) from None

    def to_participant(self) -> Participant:
        return Participant(self.id, self.name, self.role, tuple(self.aliases))


Seq = Annotated[int, Field(strict=True, ge=-MAX_SEQ, le=MAX_SEQ)]


def _finite(v: float | None) -> float | None:
    if v is not None and (not math.isfinite(v) or v < 0):
        raise ValueError("times must be finite, non-negative seconds")
    return v


class UtteranceEvent(_Strict):
    """A person's words; a final one is decided on, an interim one (``final`` false) only
    gets a barge-in answer while the agent speaks."""

    type: Literal["utterance"]
    #: Idempotency number: an event whose ``seq`` is not above the session's ``last_seq`` is
    #: a duplicate, not applied again.
    seq: Seq | None = None
    #: A participant id (one the roster does not list is added, with a warning).
    speaker: str = Field(min_length=1, max_length=200)
    text: str = Field(max_length=MAX_TEXT)
    #: Conversation seconds.
    start: float | None = None
    #: Conversation seconds (not before ``start``).
    end: float | None = None
    #: false: an interim transcript, replaced by the final one; never enters the state.
    final: bool = True

    _times = field_validator("start", "end")(_finite)
    _speaker = field_validator("speaker")(_usable_name)


class JoinEvent(_Strict):
    """Participants join (added to the roster if new) and are present."""

    type: Literal["join"]
    seq: Seq | None = None
    participants: list[ParticipantIn] = Field(min_length=1, max_length=MAX_PARTICIPANTS)


class LeaveEvent(_Strict):
    """A participant leaves (stays on the roster, no longer present)."""

    type: Literal["leave"]
    seq: Seq | None = None
    #: A participant's id, name or alias.
    participant: str = Field(min_length=1, max_length=200)

    _participant = field_validator("participant")(_usable_name)


class AgentSpeechEvent(_Strict):
    """The agent starts or stops talking; its words are observed, never decided on."""

    type: Literal["agent_speech"]
    seq: Seq | None = None
    #: true when the agent starts talking, false when it stops.
    speaking: bool
    #: Conversation seconds.
    time: float | None = None
    #: What the agent said (with ``speaking`` false).
    text: str = Field(default="", max_length=MAX_TEXT)

    _times = field_validator("time")(_finite)


class ResetEvent(_Strict):
    """Forget the talk; keep the roster, the policy and the deployment."""

    type: Literal["reset"]
    seq: Seq | None = None


class SilenceEvent(_Strict):
    """Nobody has spoken up to ``time``: a facilitator steps into a long silence."""

    type: Literal["silence"]
    seq: Seq | None = None
    #: Conversation seconds up to which nobody has spoken.
    time: float

    _times = field_validator("time")(_finite)


def _required(field: str, choices: str) -> Any:
    """A before-validator: ``field`` must be present (an event without its value is a
    mistake, never a silent default); the error names the valid values."""

    def check(cls: Any, data: Any) -> Any:
        if isinstance(data, dict) and field not in data:
            raise ValueError(f"missing; choose one of {choices}")
        return data

    return model_validator(mode="before")(classmethod(check))  # type: ignore[arg-type]


class RoleEvent(_Strict):
    """Switch the session's role at run time (``observer``: decisions logged, never spoken;
    ``null``: back to the session's own point). The ``role`` field is required."""

    type: Literal["role"]
    seq: Seq | None = None
    #: observer, assistant, facilitator, or null.
    role: str | None

    _present = _required(
        "role", "observer, assistant, facilitator, or null (the session's own point)"
    )


class AudienceEvent(_Strict):
    """``group`` or ``adaptive`` from now on (checked by :func:`apply_audience`)."""

    type: Literal["audience"]
    seq: Seq | None = None
    #: group or adaptive.
    audience: Any

    _present = _required("audience", ", ".join(AUDIENCES))


class FocusIn(_Strict):
    """Whose speech is context only (``ignored``) and the only people answered (``only``):
    participant ids, names or aliases, checked against the session by :func:`apply_focus`."""

    #: Participants whose speech is context only: no decision follows it.
    ignored: list[Any] = Field(default_factory=list, max_length=MAX_PARTICIPANTS)
    #: When not empty, the only participants whose turns are answered.
    only: list[Any] = Field(default_factory=list, max_length=MAX_PARTICIPANTS)


class FocusEvent(FocusIn):
    """Replace the session's focus (empty lists: answer everyone again)."""

    type: Literal["focus"]
    seq: Seq | None = None


Event = Annotated[
    UtteranceEvent
    | JoinEvent
    | LeaveEvent
    | AgentSpeechEvent
    | ResetEvent
    | RoleEvent
    | AudienceEvent
    | FocusEvent
    | SilenceEvent,
    Field(discriminator="type"),
]
_EVENT = TypeAdapter(Event)
#: Events that change what the agent may do (role, and any run-time control like it): each is
#: durable before its result is sent (:meth:`Sessions.commit`).
CONTROL_EVENTS: tuple[type[BaseModel], ...] = (RoleEvent, AudienceEvent, FocusEvent)


def seq_gap(last_seq: int | None, seq: int | None) -> int:
    """How many ``seq`` numbers an event skips after ``last_seq`` (0: the next one, or none).

    A jump is applied (a client may number only some events) but flagged in the result
    (``"seq_gap"``), and the numbers it skipped are remembered (:data:`MAX_SKIPPED` jumps):
    an event numbered inside them later is refused (409, naming the next ``seq`` the session
    takes), never answered as a duplicate of an event that was not applied.
    """
    if seq is None or last_seq is None or seq <= last_seq:
        return 0
    return seq - last_seq - 1


class SessionIn(_Strict):
    """The ``POST /v1/sessions`` body: one session per conversation."""

    #: The agent: a participant's id, name, alias or first name (a placeholder until one
    #: matches).
    agent: str = Field(min_length=1, max_length=200)

    _agent = field_validator("agent")(_usable_name)
    #: The roster (empty: speakers are learnt as they speak).
    participants: list[ParticipantIn] = Field(default_factory=list, max_length=MAX_PARTICIPANTS)
    #: ``Policy`` fields (the agent's own state and the clock).
    policy: dict[str, Any] = Field(default_factory=dict)
    #: Deployment options (``domain``, ``operating_point``, ``threshold``, ``role``); the
    #: model folder is the server's (``serve --model-dir``), never a request's.
    deployment: dict[str, Any] = Field(default_factory=dict)
    #: ``group`` (default) or ``adaptive``; see :func:`apply_audience`.
    audience: Any = None
    #: Participants of ``participants`` to ignore or to answer exclusively.
    focus: FocusIn | None = None
    #: The session's id (default: a random one); name it to resume after a lost answer.
    session_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,64}$")

    @field_validator("session_id")
    @classmethod
    def _reachable(cls, v: str | None) -> str | None:
        # URLs resolve "." and ".." segments: /v1/sessions/../events is another path.
        if v in (".", ".."):
            raise ValueError(f"{v!r} is a path segment, not an id (URLs could not reach it)")
        return v


def _validation_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:3]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)


def parse_event(raw: Any) -> Event:
    try:
        return _EVENT.validate_python(raw)
    except ValidationError as e:
        raise PolylogueInputError(f"bad event: {_validation_message(e)}") from None


# ----------------------------------------------------------------------------- sessions

#: Keys of the service's own fields in a stored snapshot (next to the live conversation's).
_LAST_SEQ = "serve_last_seq"
_SKIPPED = "serve_seq_skipped"
_TIME_OFFSET = "serve_time_offset"
#: ``seq`` ranges skipped by jumps that a session remembers (the latest ones).
MAX_SKIPPED = 16
#: A time this much before the session's clock is a clock reset, not overlapping speech.
MAX_TIME_BACK_S = 60.0
#: A time this much after the session's clock is a clock fault (epoch seconds among
#: conversation seconds), not a pause: a live session without events that long has expired
#: (the limit is the larger of this and ``--idle-ttl``).
MAX_TIME_JUMP_S = 3600.0


def in_skipped(skipped: list[tuple[int, int]], seq: int) -> tuple[int, int] | None:
    """The skipped range (first, last) holding ``seq``, if any."""
    return next(((lo, hi) for lo, hi in skipped if lo <= seq <= hi), None)


class SeqSkippedError(PolylogueInputError):
    """An event numbered inside a range a ``seq`` jump skipped: answered 409."""


#: Who takes part (the participant objects, immutable) and who is present, to tell cheaply
#: whether the roster changed since it was stored.
RosterSig = tuple[tuple[Participant, ...], tuple[str, ...]]


def roster_sig(live: LiveConversation) -> RosterSig:
    return tuple(live.engine.participants.values()), tuple(live.present)


def same_roster(a: RosterSig | None, b: RosterSig) -> bool:
    return (
        a is not None
        and a[1] == b[1]
        and len(a[0]) == len(b[0])
        and all(x is y for x, y in zip(a[0], b[0], strict=True))
    )


def split_roster(snapshot: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A snapshot without its roster (each engine block's participants, who is present),
    and the roster: stored apart, and only when it changed (see :data:`ROSTER_KEY`)."""
    blocks = {
        key: value.pop("participants")
        for key, value in snapshot.items()
        if isinstance(value, dict) and "participants" in value
    }
    return snapshot, {"present": snapshot.pop("present"), "blocks": blocks}


def join_roster(snapshot: dict[str, Any], roster: dict[str, Any]) -> dict[str, Any]:
    """:func:`split_roster` undone."""
    snapshot["present"] = roster["present"]
    for key, people in roster["blocks"].items():
        snapshot[key]["participants"] = people
    return snapshot


@dataclass
class _Cached:
    version: int
    live: LiveConversation
    #: the highest ``seq`` applied so far (stored with the snapshot): resends are skipped
    last_seq: int | None = None
    used: float = field(default_factory=time.monotonic)
    #: ``seq`` ranges jumped over (never applied): events numbered there are refused
    skipped: list[tuple[int, int]] = field(default_factory=list)
    #: added to the client's times after a clock jump, so the session's clock runs on
    time_offset: float = 0.0
    #: the roster as the store holds it (None: unknown, written with the next snapshot)
    roster_sig: RosterSig | None = None


class SessionNotFound(PolylogueInputError):
    pass


def _echo_seq(raw: Any) -> int | None:
    """The ``seq`` to echo in a result: only an integer that JSON clients can hold."""
    seq = raw.get("seq") if isinstance(raw, dict) else None
    if isinstance(seq, int) and not isinstance(seq, bool) and abs(seq) <= MAX_SEQ:
        return seq
    return None


@dataclass(frozen=True)
class EventOutcome:
    """One event's result object and the HTTP status a lone event of that kind gets."""

    status: int
    result: dict[str, Any]


class Sessions:
    """Live conversations: an in-memory cache in front of the snapshot store."""

    def __init__(
        self,
        store: SessionStore,
        model: TurnTakingModel | None,
        metrics: Metrics,
        idle_s: float = 1800.0,
        max_sessions: int = 10_000,
        max_cached: int = 2_000,
    ) -> None:
        self.store = store
        #: The server's own model (``--model-dir``) for every session; None: each session gets
        #: the shipped model of its domain (the chat domain has its own).
        self.model = model
        self._models: dict[str, TurnTakingModel] = {}
        self.metrics = metrics
        self.idle_s = idle_s
        self.max_sessions = max_sessions
        self.max_cached = max_cached
        self.cache: OrderedDict[str, _Cached] = OrderedDict()
        self.max_time_jump_s = max(MAX_TIME_JUMP_S, idle_s)

    def _model_for(self, domain: Any) -> TurnTakingModel:
        """The loaded model a session of ``domain`` runs on (each folder loaded once)."""
        if self.model is not None:
            return self.model
        folder = model_dir_for(domain if isinstance(domain, str) else None)
        model = self._models.get(str(folder))
        if model is None:
            model = self._models[str(folder)] = load_model(folder)
        return model

    def deployment(self, options: dict[str, Any]) -> Deployment:
        """A session's deployment from its request/snapshot options (validated: 400 if bad)."""
        if "model_dir" in options:
            raise DeploymentError(
                "deployment.model_dir", "a session cannot choose a model folder; start "
                "`polylogue serve --model-dir DIR` instead",
            )  # fmt: skip
        return Deployment.from_options(options, model=self._model_for(options.get("domain")))

    def _start(self, spec: SessionIn) -> LiveConversation:
        """The one place a session's live conversation is built from its creation body."""
        policy = Policy.from_dict(spec.policy)
        participants = [p.to_participant() for p in spec.participants]
        live = LiveConversation.start(
            spec.agent, participants, policy, self.deployment(spec.deployment)
        )
        if spec.audience is not None:
            apply_audience(live, spec.audience)
        if spec.focus is not None:
            apply_focus(live, spec.focus)
        return live

    @staticmethod
    def _snapshot(c: _Cached) -> tuple[dict[str, Any], str | None, RosterSig]:
        """The state to store: the snapshot without its roster, the roster's JSON if it
        changed since it was stored (else None), and the roster's signature."""
        snapshot, roster = split_roster(
            {
                **c.live.to_dict(),
                _LAST_SEQ: c.last_seq,
                _SKIPPED: [list(r) for r in c.skipped],
                _TIME_OFFSET: c.time_offset,
            }
        )
        sig = roster_sig(c.live)
        text = None if same_roster(c.roster_sig, sig) else json.dumps(roster, separators=(",", ":"))
        return snapshot, text, sig

    async def create(self, spec: SessionIn) -> tuple[str, LiveConversation]:
        """A new session, written to the store before this returns (the 201 is durable)."""
        sid = spec.session_id or secrets.token_urlsafe(12)
        if len(self.cache) >= self.max_sessions:
            raise SessionLimitError(f"too many sessions (limit {self.max_sessions})")
        c = _Cached(0, self._start(spec))
        snapshot, roster, c.roster_sig = self._snapshot(c)
        await self.store.create(sid, snapshot, self.max_sessions, roster)
        self._remember(sid, c)
        return sid, c.live

    def _remember(self, sid: str, c: _Cached) -> None:
        self.cache[sid] = c
        self.cache.move_to_end(sid)
        while len(self.cache) > self.max_cached:
            self.cache.popitem(last=False)  # still in the store; reloaded when needed

    async def _current(self, sid: str, verify: bool = True) -> _Cached:
        """The session, reloaded if another process moved it on.

        ``verify=False`` trusts the cached copy without asking the store: an event applied to
        a stale copy is caught by the store's compare-and-set write and applied again.
        """
        c = self.cache.get(sid)
        if c is not None and (self.store.exclusive or not verify):
            return c
        if c is not None and await self.store.version(sid) == c.version:
            return c
        loaded = await self.store.load(sid)
        if loaded is None:
            self.cache.pop(sid, None)
            raise SessionNotFound(f"no session {sid!r} (never created, deleted or expired)")
        version, snap = loaded
        roster = snap.pop(ROSTER_KEY, None)
        if roster is not None:
            join_roster(snap, roster)
        elif "present" not in snap:  # stored apart, and that part is gone (evicted)
            raise SessionGoneError(f"session {sid!r} lost its roster in the store; start a new one")
        last_seq = snap.pop(_LAST_SEQ, None)
        skipped = [(int(lo), int(hi)) for lo, hi in snap.pop(_SKIPPED, None) or []]
        offset = float(snap.pop(_TIME_OFFSET, None) or 0.0)
        domain = (snap.get("deployment") or {}).get("domain")
        deployment = snapshot_deployment(snap, self._model_for(domain))
        live = LiveConversation.from_dict(snap, deployment)
        c = _Cached(version, live, last_seq, skipped=skipped, time_offset=offset)
        # What the store holds; a snapshot with its roster inside (an older file) is written
        # apart at the next event.
        c.roster_sig = None if roster is None else roster_sig(live)
        self._remember(sid, c)
        return c

    async def apply(
        self, sid: str, raw: Any, trace: dict[str, float] | None = None
    ) -> dict[str, Any]:
        """Apply one event (already JSON-decoded) to a session; returns its result object."""
        return (await self.apply_event(sid, raw, trace)).result

    async def apply_event(
        self, sid: str, raw: Any, trace: dict[str, float] | None = None
    ) -> EventOutcome:
        """:meth:`apply` with the HTTP status of the outcome.

        With ``trace`` (a dict), the monotonic clock (``time.perf_counter``, comparable
        between processes on one Linux machine) is written at each step; the stream handler
        returns it for ``benchmarks/serve_load.py``'s latency breakdown.
        """
        seq = _echo_seq(raw)
        t0 = time.perf_counter()
        touched = False
        duplicate = False
        gap = 0
        result: dict[str, Any] = {}
        try:
            event = parse_event(raw)
            if trace is not None:
                trace["parsed"] = time.perf_counter()
            async with self.store.lock(sid):
                for attempt in (0, 1):
                    # A shared store: first on the cached copy (no round trip); if that was
                    # stale or the event failed on it, once more on the stored state.
                    c = await self._current(sid, verify=attempt > 0)
                    if trace is not None:
                        trace["locked"] = time.perf_counter()
                    seen = c.last_seq
                    if event.seq is not None and seen is not None and event.seq <= seen:
                        jumped = in_skipped(c.skipped, event.seq)
                        if jumped is not None:
                            raise SeqSkippedError(
                                f"seq {event.seq} was skipped by a jump (seq {jumped[0] - 1} "
                                f"was followed by {jumped[1] + 1}) and cannot be applied now; "
                                f"the session's last_seq is {seen}: the next event needs seq "
                                f"{seen + 1} or more"
                            )
                        duplicate = True  # a resend: applied before, not again
                        break
                    gap = seq_gap(seen, event.seq)
                    touched = True
                    try:
                        result = _apply(c, event, self.max_time_jump_s)
                        c.version += 1
                        if event.seq is not None:
                            if gap and seen is not None:
                                c.skipped = [*c.skipped, (seen + 1, event.seq - 1)][-MAX_SKIPPED:]
                            c.last_seq = event.seq
                        c.used = time.monotonic()
                        if trace is not None:
                            trace["decided"] = time.perf_counter()
                        snapshot, roster, sig = self._snapshot(c)
                        if trace is not None:
                            trace["snapshot"] = time.perf_counter()
                        await self.commit(sid, c.version, snapshot, event, roster)
                        c.roster_sig = sig
                    except PolylogueInputError:
                        self.cache.pop(sid, None)  # maybe half applied: reload it
                        if attempt or self.store.exclusive:
                            raise
                        continue
                    if trace is not None:
                        trace["saved"] = time.perf_counter()
                    break
        except SessionNotFound as e:
            self.metrics.errors.inc(kind="SessionNotFound")
            return EventOutcome(404, {"ok": False, "seq": seq, "error": str(e)})
        except SeqSkippedError as e:
            self.metrics.errors.inc(kind="SeqSkipped")
            last = {"last_seq": c.last_seq}
            return EventOutcome(409, {"ok": False, "seq": seq, "error": str(e), **last})
        except SessionGoneError as e:
            self.cache.pop(sid, None)
            self.metrics.errors.inc(kind="SessionGone")
            return EventOutcome(410, {"ok": False, "seq": seq, "error": str(e)})
        except StoreUnavailableError as e:
            # Not stored, so not applied: the cached copy may hold the event; the store's
            # state (its queue first) is the truth. The client sends the event again.
            self.cache.pop(sid, None)
            self.metrics.errors.inc(kind="StoreUnavailable")
            return EventOutcome(503, store_refusal(seq, e))
        except StaleSessionError as e:
            self.cache.pop(sid, None)
            self.metrics.errors.inc(kind="StaleSession")
            return EventOutcome(409, {"ok": False, "seq": seq, "error": str(e)})
        except (PolylogueInputError, ValueError) as e:
            # The event may have been half applied: the stored snapshot (the state after the
            # last good event) is the truth, so reload it next time.
            if touched:
                self.cache.pop(sid, None)
            self.metrics.errors.inc(kind=type(e).__name__)
            return EventOutcome(400, {"ok": False, "seq": seq, "error": str(e)})
        except TimeoutError as e:
            self.metrics.errors.inc(kind="LockTimeout")
            return EventOutcome(503, {"ok": False, "seq": seq, "error": str(e)})
        except Exception as e:  # a bug must not take the socket or other sessions down
            self.cache.pop(sid, None)
            self.metrics.errors.inc(kind="InternalError")
            logger.exception("session %s: event failed", sid)
            error = f"internal error: {type(e).__name__}"
            return EventOutcome(500, {"ok": False, "seq": seq, "error": error})
        dt = time.perf_counter() - t0
        if duplicate:
            self.metrics.duplicates.inc()
            # last_seq: a client whose numbering went back (or jumped before) sees where
            # the session is, instead of a stream of silent duplicates.
            last = {"last_seq": c.last_seq}
            return EventOutcome(200, {"ok": True, "seq": seq, "duplicate": True, **last})
        self.metrics.events.inc(type=event.type)
        for w in result.get("warnings", ()):
            logger.warning("session %s: %s", sid, w)
        if gap:
            self.metrics.errors.inc(kind="SeqGap")
            result = {**result, "seq_gap": gap}
        if "decision" in result:
            action = result["decision"]["action"] or "none"
            self.metrics.decisions.inc(action=action)
            self.metrics.latency.observe(dt)
        return EventOutcome(
            200, {"ok": True, "seq": seq, **result, "server_ms": round(dt * 1000, 3)}
        )

    async def commit(
        self,
        sid: str,
        version: int,
        snapshot: dict[str, Any],
        event: Event,
        roster: str | None = None,
    ) -> None:
        """Store the state after ``event``: the one write path of every event (``roster``:
        the roster's JSON when it changed).

        A control event (:data:`CONTROL_EVENTS`: what the agent may do) is written through
        before it is answered, whatever the write-behind interval: an acknowledged switch to
        ``observer`` must survive a crash, like session creation.
        """
        durable = isinstance(event, CONTROL_EVENTS)
        await self.store.save(sid, version, snapshot, durable=durable, roster=roster)

    async def summary(self, sid: str) -> dict[str, Any]:
        c = await self._current(sid)
        live = c.live
        return {
            "session_id": sid,
            "agent": live.agent.pid,
            "agent_resolved": not live.agent.provisional,
            "agent_state": live.agent.state.value,
            "utterances": live.engine.state.n_utterances,
            "participants": [p.to_dict() for p in live.engine.participants.values()],
            "present": list(live.present),
            "policy": live.policy.to_dict(),
            "deployment": public_deployment(live.deployment),
            **session_controls(live),
            "version": c.version,
            "last_seq": c.last_seq,
        }

    async def delete(self, sid: str) -> None:
        async with self.store.lock(sid):
            if await self.store.version(sid) is None:
                raise SessionNotFound(f"no session {sid!r}")
            await self.store.delete(sid)
            self.cache.pop(sid, None)

    async def expire(self) -> int:
        """Drop sessions idle for longer than ``idle_s`` (memory and store)."""
        now = time.monotonic()
        stale = [sid for sid, c in self.cache.items() if now - c.used > self.idle_s]
        for sid in stale:
            self.cache.pop(sid, None)
        gone = await self.store.expire(self.idle_s)
        return len(set(stale) | set(gone))


def not_reached(raw: Any, refused: dict[str, Any]) -> dict[str, Any]:
    """The result of a batch's event after one the store refused: not applied either (it
    must not overtake the refused one); the batch is sent again from the first refusal."""
    error = f"not applied: an earlier event of this batch was refused ({refused.get('error')})"
    return {"ok": False, "seq": _echo_seq(raw), "error": error, "retry_after": 1}


def store_refusal(seq: int | None, e: StoreUnavailableError) -> dict[str, Any]:
    """The result of an event the store did not take: not applied, send it again later."""
    return {"ok": False, "seq": seq, "error": str(e), "retry_after": e.retry_after_s}


def public_deployment(deployment: Deployment) -> dict[str, Any]:
    """A deployment as clients see it: model folders by name, never the server's paths."""
    out = deployment.to_dict()
    for key in ("model", "model_dir"):
        if out.get(key) is not None:
            out[key] = Path(str(out[key])).name
    return out


def session_times(
    c: _Cached, what: str, times: tuple[float | None, ...], max_jump_s: float
) -> tuple[float | None, ...]:
    """An event's times on the session's clock, checked as ``decide`` checks a transcript's.

    A time more than :data:`MAX_TIME_BACK_S` before the session's clock (a clock reset) or
    more than ``max_jump_s`` after it (epoch seconds among conversation seconds) is a clock
    jump: a warning says so (result and log), and the jump is not applied: the event's times
    are shifted onto the session's clock, and later times by the same amount
    (``time_offset``), so silences, "just spoke" and cooldowns keep their meaning. A client
    whose clock comes back (times fitting without the shift) drops the shift.
    """
    clock = c.live.clock
    given = next((t for t in times if t is not None), None)
    if given is None or clock is None:
        return tuple(None if t is None else t + c.time_offset for t in times)

    def fits(offset: float) -> bool:
        return clock - MAX_TIME_BACK_S <= given + offset <= clock + max_jump_s

    if not fits(c.time_offset):
        if c.time_offset and fits(0.0):
            c.time_offset = 0.0
        else:
            shifted = given + c.time_offset
            way = "after" if shifted > clock else "before"
            c.time_offset = clock - given
            c.live.warnings.append(
                f"{what} time {given:g} s is {abs(shifted - clock):g} s {way} the session's "
                f"clock ({clock:g} s): a clock jump, not applied to silence and recency "
                f"(this and later times are read {c.time_offset:+g} s)"
            )
    return tuple(None if t is None else t + c.time_offset for t in times)


def _apply(c: _Cached, e: Event, max_jump_s: float) -> dict[str, Any]:
    """Apply one parsed event to a cached session; its result fields (warnings drained)."""
    out = _apply_event(c, e, max_jump_s)
    if c.live.warnings:
        out = {**out, "warnings": list(c.live.warnings)}
        c.live.warnings.clear()
    return out


def _apply_event(c: _Cached, e: Event, max_jump_s: float) -> dict[str, Any]:
    live = c.live
    if isinstance(e, UtteranceEvent):
        # Someone the roster does not list is added as they speak (late dial-ins are common);
        # the result says so, since a typo in a speaker id would do the same.
        if live.roster_known and not live.names.matches(e.speaker):
            live.warnings.append(
                f"speaker {e.speaker[:60]!r} is not on the roster: added as a participant "
                "(a join event also marks them present)"
            )
        out: dict[str, Any] = {}
        start, end = session_times(c, "utterance", (e.start, e.end), max_jump_s)
        if not e.final:
            b = live.interim_utterance(e.speaker, e.text, end if end is not None else start)
            if b is not None:
                out["barge_in"] = b.to_dict()
        else:
            d = live.utterance(Utterance(e.speaker, e.text, start, end))
            out["decision"] = d.to_dict()
            if d.barge_in is not None:
                out["barge_in"] = d.barge_in.to_dict()
        return out
    if isinstance(e, JoinEvent):
        if len(live.engine.participants) + len(e.participants) > MAX_PARTICIPANTS:
            raise PolylogueInputError(f"too many participants (limit {MAX_PARTICIPANTS})")
        live.join([p.to_participant() for p in e.participants])
    elif isinstance(e, LeaveEvent):
        live.leave(e.participant)
    elif isinstance(e, AgentSpeechEvent):
        (t,) = session_times(c, "agent_speech", (e.time,), max_jump_s)
        live.agent_speech(e.speaking, t, e.text)
    elif isinstance(e, SilenceEvent):
        (t,) = session_times(c, "silence", (e.time,), max_jump_s)
        assert t is not None
        stepped_in = live.silence(t)
        return {} if stepped_in is None else {"decision": stepped_in.to_dict()}
    elif isinstance(e, RoleEvent):
        live.set_role(e.role)
        return {"deployment": public_deployment(live.deployment)}
    elif isinstance(e, AudienceEvent):
        apply_audience(live, e.audience)
        return session_controls(live)
    elif isinstance(e, FocusEvent):
        apply_focus(live, e)
        return session_controls(live)
    else:
        live.reset()
    return {}


# ----------------------------------------------------------------------------- run-time controls


def apply_audience(live: LiveConversation, audience: Any) -> None:
    """The session's audience from a body or event (``group`` or ``adaptive``); anything else
    is one error naming the value and the choices, and the session is unchanged."""
    live.set_audience(audience)


def apply_focus(live: LiveConversation, focus: FocusIn) -> None:
    """Replace the session's focus; an unknown participant (or one in both lists, or the agent)
    is one error naming it and the known participants, and the session is unchanged."""
    live.set_focus(focus.ignored, focus.only)


def session_controls(live: LiveConversation) -> dict[str, Any]:
    """The run-time controls besides the role, as replies and summaries show them."""
    return {"audience": live.audience, "focus": live.focus.to_dict()}


# ----------------------------------------------------------------------------- the app

#: Environment variable carrying :class:`ServeSettings` to ``--workers`` processes.
SETTINGS_ENV = "POLYLOGUE_SERVE_SETTINGS"


@dataclass(frozen=True)
class ServeSettings:
    """What a service process needs to build its app (passed to workers as JSON)."""

    state: str | None = None
    token: str | None = None
    idle_s: float = 1800.0
    max_sessions: int = 10_000
    sweep_s: float = 30.0
    flush_s: float = 0.05
    trace: bool = False
    workers: int = 1
    #: the bound address and port: requests must name them in ``Host``
    host: str = "127.0.0.1"
    port: int | None = None
    #: origins (``scheme://host:port``) whose web pages may call the service; ``*``: any
    allow_origins: tuple[str, ...] = ()
    #: Every session's model folder (None: the shipped model of each session's domain).
    model_dir: str | None = None

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str) -> ServeSettings:
        d = json.loads(text)
        d["allow_origins"] = tuple(d.get("allow_origins", ()))
        return cls(**d)

    def open_store(self) -> SessionStore:
        from polylogue.serve.store import open_store

        return open_store(self.state, self.idle_s, self.flush_s, shared=self.workers > 1)

    def app(self, store: SessionStore | None = None) -> Starlette:
        return create_app(
            store or self.open_store(),
            token=self.token,
            idle_s=self.idle_s,
            max_sessions=self.max_sessions,
            sweep_s=self.sweep_s,
            trace=self.trace,
            allowed_hosts=bound_hosts(self.host),
            port=self.port,
            allow_origins=self.allow_origins,
            model=None if self.model_dir is None else load_model(self.model_dir),
        )


#: Environment variable carrying the ``--workers`` supervisor's process id to its workers.
SUPERVISOR_ENV = "POLYLOGUE_SERVE_SUPERVISOR"


def end_with_supervisor(supervisor: int) -> None:
    """End this worker when its supervisor process dies, even by SIGKILL.

    A worker outliving its supervisor would keep serving on the port (and a restart would
    find it taken). Linux: the kernel sends SIGKILL when the parent dies
    (``PR_SET_PDEATHSIG``); everywhere, a daemon thread also checks the parent each second.
    Either way the worker ends as its supervisor did: abruptly, with every snapshot already
    written (workers write before they answer).
    """
    import signal
    import sys
    import threading

    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass  # the thread below still watches

    def orphaned() -> bool:
        return os.getppid() != supervisor

    def watch() -> None:
        while not orphaned():
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGKILL)

    if orphaned():  # the supervisor died before the watch was set up
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=watch, name="polylogue-supervisor-watch", daemon=True).start()


def app_from_env() -> Starlette:
    """The app of one ``--workers`` process (uvicorn factory), from ``SETTINGS_ENV``."""
    supervisor = os.environ.get(SUPERVISOR_ENV)
    if supervisor is not None:
        end_with_supervisor(int(supervisor))
    return ServeSettings.from_json(os.environ[SETTINGS_ENV]).app()


async def read_body(request: Request, limit: int = MAX_MESSAGE) -> bytes:
    """The body, counted while it arrives: a client announcing or sending more than ``limit``
    bytes is refused at that point, without the rest being read into memory."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > limit):
        raise RequestTooLarge(f"request body over {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"request body over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(
    store: SessionStore,
    token: str | None = None,
    idle_s: float = 1800.0,
    max_sessions: int = 10_000,
    model: TurnTakingModel | None = None,
    sweep_s: float = 30.0,
    trace: bool = False,
    allowed_hosts: set[str] | None = None,
    port: int | None = None,
    allow_origins: tuple[str, ...] = (),
) -> Starlette:
    """The service. ``trace`` adds per-step timestamps (``"trace"``) to each stream result.

    ``allowed_hosts`` (see :func:`~polylogue.serve.guard.bound_hosts`) and ``port`` restrict
    the ``Host`` header (default: the loopback names, any port); web pages of other origins
    than ``allow_origins`` are refused (:class:`~polylogue.serve.guard.RequestGuard`).
    """
    metrics = Metrics()
    pid = os.getpid()  # in traces: which process answered (--workers)
    sessions = Sessions(store, model, metrics, idle_s, max_sessions)
    rooms = Rooms(store, sessions._model_for, max_sessions)

    def offered_token(headers: Any) -> str:
        auth = str(headers.get("authorization", ""))
        return auth[7:].strip() if auth.lower().startswith("bearer ") else ""

    def authorised(given: str) -> bool:
        # Constant-time comparison on bytes of equal meaning (no early exit on a prefix).
        return token is None or hmac.compare_digest(given.encode(), token.encode())

    def error(status: int, msg: str) -> JSONResponse:
        return JSONResponse({"ok": False, "error": msg}, status_code=status)

    def unavailable(e: StoreUnavailableError) -> JSONResponse:
        metrics.errors.inc(kind="StoreUnavailable")
        return JSONResponse(
            {"ok": False, "error": str(e), "retry_after": e.retry_after_s},
            status_code=503,
            headers={"Retry-After": str(e.retry_after_s)},
        )

    async def body(request: Request) -> Any:
        raw = await read_body(request)
        try:
            return load_message(raw or b"{}")
        except ValueError as e:  # also bad UTF-8 and integers too long to read
            raise PolylogueInputError(f"body is not JSON: {e}") from None

    def guarded(handler: Any) -> Any:
        async def run(request: Request) -> Response:
            if token is not None and not authorised(offered_token(request.headers)):
                if "token" in request.query_params:
                    # The query string ends up in logs and histories: sockets only.
                    return error(
                        401,
                        "send the token as 'Authorization: Bearer ...'; "
                        "?token= is accepted on the WebSocket upgrade only",
                    )
                return error(401, "missing or wrong token")
            try:
                return await handler(request)
            except SessionNotFound as e:
                return error(404, str(e))
            except SessionGoneError as e:
                return error(410, str(e))
            except StoreUnavailableError as e:
                return unavailable(e)
            except SessionExistsError as e:
                return error(409, str(e))
            except SessionLimitError as e:
                return error(503, str(e))
            except RequestTooLarge as e:
                return error(413, str(e))
            except PolylogueInputError as e:
                return error(400, str(e))
            except ValidationError as e:
                return error(400, _validation_message(e))
            except TimeoutError as e:
                return error(503, str(e))

        run.__doc__ = handler.__doc__  # the route's description (docs/reference/serve-api.md)
        return run

    async def create(request: Request) -> Response:
        """Create a session (body: ``SessionIn``); 201 once it is stored."""
        spec = SessionIn.model_validate(await body(request))
        sid, live = await sessions.create(spec)
        return JSONResponse(
            {
                "session_id": sid,
                "agent": live.agent.pid,
                "agent_resolved": not live.agent.provisional,
                "deployment": public_deployment(live.deployment),
                **session_controls(live),
            },
            status_code=201,
        )

    async def events(request: Request) -> Response:
        """Apply one event or a list of up to 1000, in order: ``{"results": [...]}``."""
        sid = request.path_params["sid"]
        payload = await body(request)
        if isinstance(payload, list):
            if len(payload) > 1000:
                raise PolylogueInputError("at most 1000 events per request")
            outcomes: list[EventOutcome] = []
            for e in payload:
                if outcomes and outcomes[-1].status == 503:
                    # Not stored (or busy): a later event must not overtake it.
                    outcomes.append(EventOutcome(503, not_reached(e, outcomes[-1].result)))
                else:
                    outcomes.append(await sessions.apply_event(sid, e))
            # A batch is applied in order, a bad event does not stop the rest: 200 with one
            # result per event, unless the session does not exist or the store refused.
            codes = {o.status for o in outcomes}
            status = 404 if 404 in codes else 410 if 410 in codes else 503 if 503 in codes else 200
        else:
            outcomes = [await sessions.apply_event(sid, payload)]
            status = outcomes[0].status  # a lone event: its own status (400 when refused)
        if status in (404, 410):
            return error(status, next(o.result["error"] for o in outcomes if o.status == status))
        headers = {"Retry-After": str(StoreUnavailableError.retry_after_s)} if status == 503 else {}
        return JSONResponse(
            {"results": [o.result for o in outcomes]}, status_code=status, headers=headers
        )

    async def show(request: Request) -> Response:
        """The session: roster, presence, agent state, policy, deployment, ``last_seq``."""
        return JSONResponse(await sessions.summary(request.path_params["sid"]))

    async def delete(request: Request) -> Response:
        """Delete the session: ``{"ok": true}``."""
        await sessions.delete(request.path_params["sid"])
        return JSONResponse({"ok": True})

    async def store_health() -> dict[str, Any]:
        found = store.health()
        report: dict[str, Any] = await found if asyncio.iscoroutine(found) else found
        metrics.store_up.set(1.0 if report.get("state") == "ok" else 0.0)
        return report

    async def healthz(request: Request) -> Response:
        """200 while the store takes writes; 503 (with the store's error) while it does not."""
        report = await store_health()
        ok = report.get("state") == "ok"
        body = {"ok": ok, "sessions_cached": len(sessions.cache), "store": report}
        body["tasks"] = {name: t.state() for name, t in background.items()}
        return JSONResponse(body, status_code=200 if ok else 503)

    async def metrics_route(request: Request) -> Response:
        """Prometheus text: every series below exists from the start, at 0."""
        metrics.sessions.set(len(sessions.cache))
        await store_health()
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    def frame_json(message: Any) -> tuple[Any, dict[str, Any] | None]:
        """The JSON of one received message, or the error result for a bad frame."""
        text = message.get("text")
        if text is None:
            metrics.errors.inc(kind="BinaryFrame")
            return None, {
                "ok": False,
                "seq": None,
                "error": "binary frame: send each event as a JSON text message",
            }
        # len() counts characters; a message may be up to 4 bytes per character.
        if len(text) > MAX_MESSAGE or (
            len(text) > MAX_MESSAGE // 4
            and len(text.encode("utf-8", "surrogatepass")) > MAX_MESSAGE
        ):
            metrics.errors.inc(kind="MessageTooLarge")
            return None, {"ok": False, "seq": None, "error": f"message over {MAX_MESSAGE} bytes"}
        try:
            return load_message(text), None
        except ValueError as e:
            metrics.errors.inc(kind="NotJSON")
            return None, {"ok": False, "seq": None, "error": f"not JSON: {e}"}

    async def frame_result(ws: WebSocket, message: Any) -> dict[str, Any]:
        """The result of one received message: a bad frame is an error result, never a crash."""
        received = time.perf_counter()
        raw, bad = frame_json(message)
        if bad is not None:
            return bad
        sid = ws.path_params["sid"]
        if not trace:
            return await sessions.apply(sid, raw)
        steps = {"received": received, "json": time.perf_counter()}
        result = await sessions.apply(sid, raw, steps)
        steps["gc_s"] = metrics.gc_seconds()
        steps["pid"] = pid
        steps["reply"] = time.perf_counter()
        return {**result, "trace": steps}

    async def room_frame(ws: WebSocket, message: Any) -> dict[str, Any]:
        """A room stream's message: one event (its result) or a list (``{"results"}``), as
        ``POST /v1/rooms/{id}/events`` answers them."""
        raw, bad = frame_json(message)
        if bad is not None:
            return bad
        rid = ws.path_params["rid"]
        if not isinstance(raw, list):
            return (await rooms.apply(rid, raw))[1]
        if len(raw) > 1000:
            return {"ok": False, "error": "at most 1000 events per message"}
        return {"results": [(await rooms.apply(rid, e))[1] for e in raw]}

    async def stream(ws: WebSocket) -> None:
        """A session's events, one JSON text message each; one result per event, in order."""
        await socket(ws, "session", ws.path_params["sid"], sessions.summary, frame_result)

    async def room_stream(ws: WebSocket) -> None:
        """A room's events, one JSON message each (or a list); one result per message."""
        await socket(ws, "room", ws.path_params["rid"], rooms.summary, room_frame)

    async def socket(
        ws: WebSocket,
        what: str,
        key: str,
        exists: Callable[[str], Awaitable[Any]],
        handle: Callable[[WebSocket, Any], Awaitable[dict[str, Any]]],
    ) -> None:
        """A session's or a room's stream: one result per message, in order."""
        # Accept first so a refused client is told why (close code 4401/4404 and a reason).
        await ws.accept()
        given = offered_token(ws.headers) or ws.query_params.get("token", "")
        if not authorised(given):
            await ws.close(code=4401, reason="missing or wrong token")
            return
        try:
            await exists(key)
        except (SessionNotFound, RoomNotFound) as e:
            await ws.close(code=4404, reason=str(e)[:120])
            return
        except PolylogueInputError as e:  # a stored session or room this version cannot read
            await ws.close(code=4400, reason=str(e)[:120])
            return
        metrics.sockets.inc()
        try:
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    break
                try:
                    result = await handle(ws, message)
                except Exception as e:  # a bug must not take the socket down
                    metrics.errors.inc(kind="InternalError")
                    logger.exception("%s %s: message failed", what, key)
                    result = {
                        "ok": False,
                        "seq": None,
                        "error": f"internal error: {type(e).__name__}",
                    }
                await ws.send_json(result)
        except WebSocketDisconnect:
            pass
        finally:
            metrics.sockets.dec()

    async def sweep_once() -> None:
        await asyncio.sleep(sweep_s)
        metrics.expired.inc(n=await sessions.expire())

    background = {"sweeper": Supervised("sweeper", sweep_once, metrics)}
    refusals = AcceptRefusals(metrics)

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        refusals.install(asyncio.get_running_loop())
        for t in background.values():
            t.start()
        # Everything loaded so far (the model, the libraries) lives as long as the process:
        # moving it out of the collector's generations keeps full collections short (they
        # paused every session for tens of ms, see benchmarks/serve_load.py's "gc" split).
        gc.collect()
        gc.freeze()
        metrics.gc.start()
        try:
            yield
        finally:
            metrics.gc.stop()
            for t in background.values():
                t.stop()
            try:
                await store.close()
            except StoreUnavailableError as e:
                # Read by `polylogue serve`, which then exits 1: answered events are lost.
                app.state.unclean_stop = str(e)
                logger.error("stopped with unwritten state: %s", e)

    hosts = bound_hosts("127.0.0.1") if allowed_hosts is None else allowed_hosts
    app = Starlette(
        routes=[
            Route("/healthz", guarded(healthz)),
            Route("/metrics", guarded(metrics_route)),
            Route("/v1/sessions", guarded(create), methods=["POST"]),
            Route("/v1/sessions/{sid}", guarded(show), methods=["GET"]),
            Route("/v1/sessions/{sid}", guarded(delete), methods=["DELETE"]),
            Route("/v1/sessions/{sid}/events", guarded(events), methods=["POST"]),
            WebSocketRoute("/v1/sessions/{sid}/stream", stream),
            *room_routes(rooms, guarded, body),
            WebSocketRoute("/v1/rooms/{rid}/stream", room_stream),
        ],
        middleware=[
            Middleware(RequestGuard, allowed_hosts=hosts, port=port, allowed_origins=allow_origins)
        ],
        lifespan=lifespan,
    )
    app.state.sessions = sessions
    app.state.unclean_stop = None
    return app


class Supervised:
    """A background task that runs ``step`` over and over: an exception in a step is logged
    (with its traceback, once per kind in a row), counted in ``polylogue_task_restarts_total``
    and the loop starts again after a pause; it never ends silently."""

    def __init__(self, name: str, step: Any, metrics: Metrics, pause_s: float = 1.0) -> None:
        self.name, self.step, self.metrics, self.pause_s = name, step, metrics, pause_s
        self.task: asyncio.Task[None] | None = None
        self.restarts = 0
        self.last_error: str | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    def state(self) -> dict[str, Any]:
        running = self.task is not None and not self.task.done()
        return {"running": running, "restarts": self.restarts, "last_error": self.last_error}

    async def _run(self) -> None:
        while True:
            try:
                await self.step()
                self.last_error = None
            except asyncio.CancelledError:
                raise
            except Exception as e:
                error = f"{type(e).__name__}: {e}"
                self.restarts += 1
                self.metrics.restarts.inc(task=self.name)
                if error != self.last_error:  # not a traceback per retry of one fault
                    logger.error("background task %s failed; restarting", self.name, exc_info=e)
                self.last_error = error
                await asyncio.sleep(self.pause_s)


#: ``accept()`` errors that mean the process is out of descriptors or memory.
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class AcceptRefusals:
    """The event loop's handler for ``accept()`` failing for lack of descriptors or memory.

    asyncio reports every failed ``accept()`` with a traceback, as many as the listen backlog
    per wake-up (megabytes a second while descriptors are exhausted). Here each is counted
    (``polylogue_connections_refused_total``) and one line per ``interval_s`` says how many;
    other errors go to the loop's default handler.
    """

    def __init__(self, metrics: Metrics, interval_s: float = 10.0) -> None:
        self.metrics, self.interval_s = metrics, interval_s
        self._since_log = 0
        self._logged_at = -math.inf

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.set_exception_handler(self)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, ValueError) and "_start_serving" in repr(context.get("handle")):
            # asyncio schedules an accept retry per failed accept() (up to the backlog per
            # wake-up); those still due when the server stops find the socket closed.
            return
        if not (isinstance(exc, OSError) and exc.errno in _RESOURCE_ERRNOS):
            loop.default_exception_handler(context)
            return
        kind = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        self.metrics.refused.inc(reason=kind)
        self._since_log += 1
        now = time.monotonic()
        if now - self._logged_at >= self.interval_s:
            logger.error(
                "cannot accept connections: %s (%s); %d refusals since the last report "
                "(polylogue_connections_refused_total); raise the descriptor limit (ulimit -n)",
                exc.strerror,
                kind,
                self._since_log,
            )
            self._logged_at, self._since_log = now, 0
