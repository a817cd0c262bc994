"""Rooms with several agent seats in ``polylogue serve`` (:mod:`polylogue.engine.seats`).

* ``POST /v1/rooms`` ``{"room_id"?, "people": [participant...], "seats": [seat...],
  "policy"?: "first-named" | "in-turn", "brake"?: int, "domain"?}`` -> 201 ``{"room_id",
  "seats", "policy", "brake"}``, answered once the room is stored. A seat is ``{"id", "name"?,
  "aliases"?, "role"?, "operating_point"?, "audience"?, "ignored"?, "only"?}``.
* ``POST /v1/rooms/{id}/events`` one event or a list -> ``{"results": [...]}``.
* ``GET /v1/rooms/{id}``, ``DELETE /v1/rooms/{id}``.
* ``WS /v1/rooms/{id}/stream``: the same events, one JSON message each (or a list), one
  result per message (the socket itself lives in :mod:`polylogue.serve.app`, beside the
  sessions' one).

Events: ``{"type": "utterance", "speaker", "text", "start"?, "end"?}`` (a person's line, or an
agent's when ``speaker`` is a seat), ``{"type": "interim", "speaker", "text"}`` (a person is
speaking: no agent starts), ``{"type": "agent_speech", "seat", "speaking", "time"?}``,
``{"type": "agent_said", "seat", "text", "start"?, "end"?}``, and the controls ``add_seat``
(``"seat": {...}``), ``change_seat`` (``"seat": id`` and any of ``role``,
``operating_point``, ``audience``, ``ignored``, ``only``), ``remove_seat`` (``"seat"``),
``floor_policy`` (``"policy"``), ``brake`` (``"brake"``). A decision result is ``{"ok": true,
"decision": {"arbitration": {"granted", "queued", "wanted", "reason", "seats"}, "seats":
{...}}}``; a bad event is ``{"ok": false, "error"}`` (a lone one: HTTP 400) naming the value
and the valid ones, with the room unchanged. Every event is stored before it is answered;
controls are written through (they survive a crash, like session controls).
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from polylogue.conversation import Participant, Utterance
from polylogue.engine.model import TurnTakingModel
from polylogue.engine.seats import (
    DEFAULT_BRAKE,
    DEFAULT_FLOOR_POLICY,
    AgentRoom,
    SeatError,
    SeatSpec,
)
from polylogue.errors import PolylogueInputError
from polylogue.serve.store import SessionStore

#: Rooms share the session store; their keys cannot be session ids (no "/" in a route id).
KEY_PREFIX = "room/"
#: Events that change what the agents may do: written through before they are answered.
#: The fields of a ``POST /v1/rooms`` body.
ROOM_FIELDS = ("room_id", "people", "seats", "policy", "brake", "domain")
CONTROL_EVENTS = frozenset({"add_seat", "change_seat", "remove_seat", "floor_policy", "brake"})
_EVENT_FIELDS: dict[str, tuple[set[str], set[str]]] = {
    # type -> (required, optional) fields besides "type"
    "utterance": ({"speaker", "text"}, {"start", "end"}),
    "interim": ({"speaker", "text"}, set()),
    "agent_speech": ({"seat", "speaking"}, {"time"}),
    "agent_said": ({"seat", "text"}, {"start", "end"}),
    "add_seat": ({"seat"}, set()),
    "change_seat": (
        {"seat"},
        {"role", "operating_point", "audience", "ignored", "only"},
    ),
    "remove_seat": ({"seat"}, set()),
    "floor_policy": ({"policy"}, set()),
    "brake": ({"brake"}, set()),
}


def _field(e: dict[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    v = e.get(name)
    if not isinstance(v, kind) or (isinstance(v, bool) and kind is not bool):
        raise SeatError(f"{e.get('type')}.{name}: {v!r} is not {what}")
    return v


def _time(e: dict[str, Any], name: str) -> float | None:
    v = e.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < float("inf"):
        raise SeatError(f"{e.get('type')}.{name}: {v!r} is not a finite time >= 0")
    return float(v)


def check_event(e: Any) -> dict[str, Any]:
    """A room event with its fields checked (one error naming the field or the type)."""
    if not isinstance(e, dict):
        raise SeatError(f"event {e!r} is not an object")
    kind = e.get("type")
    if kind not in _EVENT_FIELDS:
        raise SeatError(f"event type {kind!r} is unknown; room events: {', '.join(_EVENT_FIELDS)}")
    required, optional = _EVENT_FIELDS[kind]
    missing = sorted(required - set(e))
    extra = sorted(set(e) - required - optional - {"type"})
    if missing or extra:
        raise SeatError(
            f"{kind} event: "
            + "; ".join(
                ([f"missing {', '.join(missing)}"] if missing else [])
                + ([f"unknown field(s) {', '.join(extra)}"] if extra else [])
            )
        )
    return e


def _apply(room: AgentRoom, e: dict[str, Any]) -> dict[str, Any]:
    """One checked event applied to ``room``; its result object."""
    kind = e["type"]
    if kind == "utterance":
        u = Utterance(
            _field(e, "speaker", str, "a string"),
            _field(e, "text", str, "a string"),
            _time(e, "start"),
            _time(e, "end"),
        )
        return {"decision": room.utterance(u).to_dict()}
    if kind == "interim":
        room.interim(_field(e, "speaker", str, "a string"), _field(e, "text", str, "a string"))
        return {}
    if kind == "agent_speech":
        seat = _field(e, "seat", str, "a seat id")
        room.agent_speech(seat, _field(e, "speaking", bool, "true or false"), _time(e, "time"))
        return {}
    if kind == "agent_said":
        rd = room.agent_said(
            _field(e, "seat", str, "a seat id"),
            _field(e, "text", str, "a string"),
            _time(e, "start"),
            _time(e, "end"),
        )
        return {"decision": rd.to_dict()}
    if kind == "add_seat":
        room.add_seat(SeatSpec.from_dict(_field(e, "seat", dict, "a seat object")))
    elif kind == "change_seat":
        changes = {k: v for k, v in e.items() if k not in ("type", "seat")}
        room.change_seat(_field(e, "seat", str, "a seat id"), **changes)
    elif kind == "remove_seat":
        room.remove_seat(_field(e, "seat", str, "a seat id"))
    elif kind == "floor_policy":
        room.set_policy(e["policy"])
    elif kind == "brake":
        room.set_brake(e["brake"])
    return {"room": room_controls(room)}


def room_controls(room: AgentRoom) -> dict[str, Any]:
    return {
        "seats": [s.spec.to_dict() for s in room.seats.values()],
        "policy": room.policy,
        "brake": room.brake,
        "floor": room.floor,
    }


def _people(raw: Any) -> list[Participant]:
    if not isinstance(raw, list):
        raise SeatError(f"people: {raw!r} is not a list of participants")
    out = []
    for p in raw:
        if isinstance(p, str) and p.strip():
            out.append(Participant(p))
            continue
        if not isinstance(p, dict) or not isinstance(p.get("id"), str) or not p["id"].strip():
            raise SeatError(f"people: {p!r} is not a participant (an id or {{'id', ...}})")
        unknown = sorted(set(p) - {"id", "name", "role", "aliases"})
        if unknown:
            raise SeatError(f"people: {p['id']!r} has unknown field(s) {', '.join(unknown)}")
        aliases = p.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise SeatError(f"people: {p['id']!r} aliases {aliases!r} is not a list of strings")
        out.append(Participant(p["id"], p.get("name"), p.get("role"), tuple(aliases)))
    return out


class Rooms:
    """Rooms: an in-memory cache in front of the session store."""

    def __init__(
        self,
        store: SessionStore,
        model_for: Callable[[Any], TurnTakingModel],
        max_rooms: int = 10_000,
    ) -> None:
        self.store = store
        self.model_for = model_for
        self.max_rooms = max_rooms
        self.cache: OrderedDict[str, tuple[int, AgentRoom]] = OrderedDict()

    async def create(self, body: Any) -> tuple[str, AgentRoom]:
        if not isinstance(body, dict):
            raise SeatError(f"room: {body!r} is not an object")
        known = set(ROOM_FIELDS)
        unknown = sorted(set(body) - known)
        if unknown:
            raise SeatError(
                f"room: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        rid = body.get("room_id") or secrets.token_urlsafe(12)
        if not isinstance(rid, str) or "/" in rid:
            raise SeatError(f"room_id: {rid!r} is not a string without '/'")
        seats = body.get("seats", [])
        if not isinstance(seats, list):
            raise SeatError(f"seats: {seats!r} is not a list of seats")
        domain = body.get("domain")
        if domain is not None and not isinstance(domain, str):
            raise SeatError(f"domain: {domain!r} is not a string")
        room = AgentRoom.start(
            _people(body.get("people", [])),
            [SeatSpec.from_dict(s) for s in seats],
            model=self.model_for(domain),
            policy=body.get("policy", DEFAULT_FLOOR_POLICY),
            brake=body.get("brake", DEFAULT_BRAKE),
            domain=domain,
        )
        await self.store.create(KEY_PREFIX + rid, room.to_dict(), self.max_rooms)
        self.cache[rid] = (0, room)
        return rid, room

    async def _current(self, rid: str) -> tuple[int, AgentRoom]:
        cached = self.cache.get(rid)
        # Always asked of the store (one read): a room the sweeper expired, or another
        # process moved on, is not served from the cache.
        if cached is not None and await self.store.version(KEY_PREFIX + rid) == cached[0]:
            return cached
        loaded = await self.store.load(KEY_PREFIX + rid)
        if loaded is None:
            self.cache.pop(rid, None)
            raise RoomNotFound(f"no room {rid!r} (never created, deleted or expired)")
        version, snap = loaded
        room = AgentRoom.from_dict(snap, self.model_for(snap.get("domain")))
        self.cache[rid] = (version, room)
        return version, room

    async def apply(self, rid: str, raw: Any) -> tuple[int, dict[str, Any]]:
        """One event: (HTTP status of a lone event, result object)."""
        try:
            async with self.store.lock(KEY_PREFIX + rid):
                version, room = await self._current(rid)
                try:
                    e = check_event(raw)
                    result = _apply(room, e)
                except PolylogueInputError:
                    # Maybe half applied: the stored room (after the last good event) is the
                    # truth, reloaded next time, so a refused event leaves the room unchanged.
                    self.cache.pop(rid, None)
                    raise
                version += 1
                await self.store.save(KEY_PREFIX + rid, version, room.to_dict())
                if e["type"] in CONTROL_EVENTS:
                    await self.store.persist(KEY_PREFIX + rid)
                self.cache[rid] = (version, room)
        except RoomNotFound as err:
            return 404, {"ok": False, "error": str(err)}
        except (PolylogueInputError, ValueError) as err:
            return 400, {"ok": False, "error": str(err)}
        return 200, {"ok": True, **result}

    async def summary(self, rid: str) -> dict[str, Any]:
        version, room = await self._current(rid)
        return {"room_id": rid, "version": version, **room_controls(room), "log": list(room.log)}

    async def delete(self, rid: str) -> None:
        async with self.store.lock(KEY_PREFIX + rid):
            if await self.store.version(KEY_PREFIX + rid) is None:
                raise RoomNotFound(f"no room {rid!r}")
            await self.store.delete(KEY_PREFIX + rid)
            self.cache.pop(rid, None)


class RoomNotFound(PolylogueInputError):
    """No room of that id."""


def room_routes(
    rooms: Rooms,
    guarded: Callable[[Callable[[Request], Awaitable[Response]]], Any],
    body: Callable[[Request], Awaitable[Any]],
) -> list[Route]:
    """The ``/v1/rooms`` routes, behind the app's own guard (token, errors as 4xx)."""

    async def create(request: Request) -> Response:
        """Create a room (people, seats, floor policy, brake); 201 once it is stored."""
        rid, room = await rooms.create(await body(request))
        return JSONResponse({"room_id": rid, **room_controls(room)}, status_code=201)

    async def events(request: Request) -> Response:
        """Apply one room event or a list of up to 1000: ``{"results": [...]}``."""
        rid = request.path_params["rid"]
        payload = await body(request)
        if isinstance(payload, list):
            if len(payload) > 1000:
                raise PolylogueInputError("at most 1000 events per request")
            outcomes = [await rooms.apply(rid, e) for e in payload]
            status = 404 if any(s == 404 for s, _ in outcomes) else 200
        else:
            outcomes = [await rooms.apply(rid, payload)]
            status = outcomes[0][0]
        if status == 404:
            msg = next(r["error"] for s, r in outcomes if s == 404)
            return JSONResponse({"ok": False, "error": msg}, status_code=404)
        return JSONResponse({"results": [r for _, r in outcomes]}, status_code=status)

    async def show(request: Request) -> Response:
        """The room: seats, floor policy, brake, floor, ``version``, the observers' log."""
        try:
            return JSONResponse(await rooms.summary(request.path_params["rid"]))
        except RoomNotFound as e:
            return JSONResponse({"ok": False, "error": str(e)}, status_code=404)

    async def delete(request: Request) -> Response:
        """Delete the room: ``{"ok": true}``."""
        try:
            await rooms.delete(request.path_params["rid"])
        except RoomNotFound as e:
            return JSONResponse({"ok": False, "error": str(e)}, status_code=404)
        return JSONResponse({"ok": True})

    return [
        Route("/v1/rooms", guarded(create), methods=["POST"]),
        Route("/v1/rooms/{rid}", guarded(show), methods=["GET"]),
        Route("/v1/rooms/{rid}", guarded(delete), methods=["DELETE"]),
        Route("/v1/rooms/{rid}/events", guarded(events), methods=["POST"]),
    ]
