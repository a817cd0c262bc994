"""Seeded fuzz cases for a running `polylogue serve`, and how each one ended.

Used by ``tests/test_serve_fuzz.py`` (a few hundred cases) and ``benchmarks/serve_probe.py``
(thousands, counts recorded in docs/serve-measured.md); both point it at a real server on loopback.
The classes: binary frames, big integers, non-finite and
huge numbers, oversized messages, deep nesting, wrong types, damaged copies of a real event,
bad UTF-8 bodies, foreign ``Host`` / ``Origin``, oversized bodies, unknown sessions, plus
valid events (which must be answered correctly) and resends (which must be skipped); and
then values a lax parser would coerce (``"5"`` as a time, ``1`` as a bool),
names holding control, bidi or lone-surrogate characters, session bodies with bad policy or
deployment fields (NaN among them), and run-time controls (role, audience and focus changes,
answered with what they set); and then names made only of invisible characters (as speaker,
agent, participant id or alias), participant roles holding a newline, NUL or bidi control,
session ids ``.`` and ``..``, ``role``/``audience`` events without their value, and clock
jumps (an utterance stamped in epoch seconds: answered, with a "clock jump" warning).

Each case ends as one of: ``clear`` (a refusal with a message: an error result, or a 4xx with
one), ``correct`` (a valid input answered normally), ``silent`` (bad input answered as if it
were fine), ``traceback`` (a 5xx, an "internal error" result, or a dropped socket) or
``hang`` (no answer within the timeout).
"""

from __future__ import annotations

import json
import random
import socket
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

PROBE_OUTCOMES = ("clear", "correct", "silent", "traceback", "hang")


@dataclass(frozen=True)
class ProbeCase:
    kind: str
    #: ``create``: the payload is a ``POST /v1/sessions`` body
    channel: Literal["ws", "http", "raw", "create"]
    payload: str | bytes
    #: ``error``: must be refused; ``ok``: must be answered; ``either``: a damaged copy
    #: that may still be a valid event; ``duplicate``: a resend, to be skipped;
    #: ``control``: a run-time control, answered with what it sets; ``warned``: applied,
    #: with a warning saying what was not taken as given
    expect: Literal["error", "ok", "either", "duplicate", "control", "warned"]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ProbeTally:
    outcomes: Counter[str] = field(default_factory=Counter)
    by_kind: dict[str, Counter[str]] = field(default_factory=dict)
    #: (kind, outcome, what came back) of every silent, traceback and hang
    problems: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, case: ProbeCase, outcome: str, detail: str = "") -> None:
        self.outcomes[outcome] += 1
        self.by_kind.setdefault(case.kind, Counter())[outcome] += 1
        if outcome in ("silent", "traceback", "hang"):
            self.problems.append((case.kind, outcome, detail[:200]))

    @property
    def cases(self) -> int:
        return sum(self.outcomes.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            **{o: self.outcomes.get(o, 0) for o in PROBE_OUTCOMES},
            "by_kind": {k: dict(v) for k, v in sorted(self.by_kind.items())},
            "problems": self.problems[:20],
        }


#: Values of the wrong type for each field of an utterance (each must be refused).
_WRONG: dict[str, list[Any]] = {
    "seq": [True, "12", [1], {"a": 1}, 3.5],
    "speaker": [12, [1], {"a": 1}, None, "", True],
    "text": [12, [1], None, True, {"a": 1}],
    "type": ["dance", 1, None, ""],
    "final": ["maybe", [1], None, 2.5],
    "start": ["soon", [1], {"a": 1}, -3.0],
}


#: Round three: values a lax parser would coerce, and events of other types.
_COERCIBLE: list[dict[str, Any]] = [
    {"type": "audience", "audience": "everyone"},
    {"type": "focus", "ignored": ["nobody-here"]},
    {"start": "5"},
    {"end": "1.5"},
    {"final": "true"},
    {"final": 1},
    {"type": "agent_speech", "speaking": 1},
    {"type": "agent_speech", "speaking": True, "time": "5"},
    {"type": "silence", "time": "12"},
    {"type": "leave", "participant": 7},
    {"type": "join", "participants": [{"id": "Z", "aliases": "Zed"}]},
    {"type": "role", "role": 3},
    {"type": "role", "role": "boss"},
]
#: Names that print as something else: control characters, bidi, a lone surrogate.
_BAD_NAMES = [r"A\u0000B", r"A\nB", r"A\rB", r"\u202eA", r"A\u2066", r"\ud800", r"A\udfff", " "]
#: ``POST /v1/sessions`` bodies that must be refused (a 400 naming the field, no session).
_BAD_BODIES = [
    '{"agent": "B", "policy": {"cooldown_s": "5"}}',
    '{"agent": "B", "policy": {"threshold_speaking": "0.5"}}',
    '{"agent": "B", "policy": {"threshold_just_spoke": [0.5]}}',
    '{"agent": "B", "policy": {"warn_after": "abc"}}',
    '{"agent": "B", "policy": {"warn_after": 1.5}}',
    '{"agent": "B", "policy": {"just_spoke_s": true}}',
    '{"agent": "B", "policy": {"cooldown_s": NaN}}',
    '{"agent": "B", "policy": {"threshold_speaking": Infinity}}',
    '{"agent": "B", "policy": {"cooldown_s": -1}}',
    '{"agent": "B", "deployment": {"threshold": NaN}}',
    '{"agent": "B", "deployment": {"threshold": "0.4"}}',
    '{"agent": "B", "deployment": {"role": 3}}',
    '{"agent": "B", "deployment": {"model_dir": "/etc"}}',
    r'{"agent": "B\u0000"}',
    '{"agent": 5}',
    r'{"agent": "B", "participants": [{"id": "A", "aliases": ["\udc00"]}]}',
    r'{"agent": "B", "participants": [{"id": "A\nB"}]}',
    '{"agent": "B", "participants": "A,B"}',
]
_ROLES = ["observer", "assistant", "facilitator", None]
#: Round four: names that are nothing once normalised (zero-width, joiners, BOM, variation
#: selector, Hangul filler, soft hyphen), alone or repeated.
_INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\ufe0f", "\u3164", "\u00ad"]
_BAD_ROLE_TEXT = ["PM\nadmin", "PM\u0000", "\u202eMP", "\u2066PM", "\r"]


def _invisible(rng: random.Random) -> str:
    return "".join(rng.choice(_INVISIBLE) for _ in range(rng.randint(1, 4)))


def _big_int(rng: random.Random) -> str:
    digits = rng.choice([21, 25, 40, 400, 4_299, 4_301, 5_000, 20_000])
    return ("-" if rng.random() < 0.2 else "") + "7" * digits


def _with(event: dict[str, Any], key: str, literal: str) -> str:
    """``event`` as JSON with ``key`` set to a raw JSON literal (numbers json cannot write)."""
    marker = "__probe__"
    return json.dumps({**event, key: marker}).replace(f'"{marker}"', literal)


def _damage(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(chars))
        op = rng.random()
        if op < 0.4:
            chars[i] = rng.choice('{}[]":,0123456789-eE.tfn\\ ')
        elif op < 0.7:
            del chars[i]
        else:
            chars.insert(i, rng.choice('{}[]":,9\\'))
    return "".join(chars)


def make_cases(
    seed: int, n: int, events: list[dict[str, Any]], max_message: int
) -> list[ProbeCase]:
    """``n`` cases (seeded): every class in turn, each drawn at random.

    ``events``: valid utterance events of a real conversation, with increasing ``seq``; the
    ``ok`` cases send them in order, so their ``seq`` must stay above the session's.
    """
    rng = random.Random(seed)
    cases: list[ProbeCase] = []
    good = iter(events)
    sent: list[dict[str, Any]] = []

    def base() -> dict[str, Any]:
        return {"type": "utterance", "speaker": "A", "text": "so what do you think?"}

    makers = [
        "valid",
        "resend",
        "binary",
        "big_int",
        "non_finite",
        "oversize",
        "deep",
        "wrong_type",
        "damaged",
        "http_big_int",
        "http_bad_utf8",
        "http_foreign_host",
        "http_foreign_origin",
        "http_oversize",
        "http_unknown_session",
        "coercible",
        "bad_name",
        "bad_session_body",
        "control",
        "invisible_name",
        "bad_role_text",
        "dot_session_id",
        "control_no_value",
        "clock_jump",
    ]
    for k in range(n):
        kind = makers[k % len(makers)]
        e = base()
        if kind == "valid":
            nxt = next(good, None)
            if nxt is None:
                kind, e = "wrong_type", base()
            else:
                sent.append(nxt)
                cases.append(ProbeCase(kind, "ws", json.dumps(nxt), "ok"))
                continue
        if kind == "resend":
            if sent:
                cases.append(ProbeCase(kind, "ws", json.dumps(rng.choice(sent)), "duplicate"))
                continue
            kind = "binary"
        if kind == "binary":
            data = (
                json.dumps(e).encode()
                if rng.random() < 0.5
                else rng.randbytes(rng.randint(1, 2000))
            )
            cases.append(ProbeCase(kind, "ws", data, "error"))
        elif kind == "big_int":
            key = rng.choice(["seq", "start", "end", "text", "speaker", "final"])
            cases.append(ProbeCase(kind, "ws", _with(e, key, _big_int(rng)), "error"))
        elif kind == "non_finite":
            key = rng.choice(["seq", "start", "end"])
            literal = rng.choice(["1e999", "-1e999", "NaN", "Infinity", "-Infinity", "-1"])
            if key == "seq" and literal == "-1":
                literal = "1.5"  # a negative seq is valid; a fraction is not
            cases.append(ProbeCase(kind, "ws", _with(e, key, literal), "error"))
        elif kind == "oversize":
            size = rng.randint(max_message + 1, 4 * max_message - 1000)
            filler = rng.choice(["x", "é", "漢"])
            text = filler * (size // len(filler.encode()))
            message = json.dumps({**e, "text": text}, ensure_ascii=False)
            cases.append(ProbeCase(kind, "ws", message, "error"))
        elif kind == "deep":
            depth = rng.choice([1_000, 10_000, 100_000])
            opener = rng.choice(["[", '{"a":'])
            cases.append(ProbeCase(kind, "ws", opener * depth, "error"))
        elif kind == "wrong_type":
            key = rng.choice(sorted(_WRONG))
            value = rng.choice(_WRONG[key])
            cases.append(ProbeCase(kind, "ws", json.dumps({**e, key: value}), "error"))
        elif kind == "damaged":
            cases.append(ProbeCase(kind, "ws", _damage(json.dumps(e), rng), "either"))
        elif kind == "http_big_int":
            body = _with(e, rng.choice(["seq", "end"]), _big_int(rng))
            cases.append(ProbeCase(kind, "http", body, "error"))
        elif kind == "http_bad_utf8":
            raw = json.dumps(e).encode()
            i = rng.randrange(len(raw))
            cases.append(ProbeCase(kind, "http", raw[:i] + b"\xff\xc3" + raw[i:], "error"))
        elif kind == "http_foreign_host":
            cases.append(
                ProbeCase(kind, "http", json.dumps(e), "error", {"Host": "rebind.example:80"})
            )
        elif kind == "http_foreign_origin":
            origin = rng.choice(["http://evil.example", "null", "http://127.0.0.1:1"])
            cases.append(ProbeCase(kind, "http", json.dumps(e), "error", {"Origin": origin}))
        elif kind == "http_oversize":
            size = rng.randint(max_message + 1, 3 * max_message)
            cases.append(ProbeCase(kind, "raw", b"[" * size, "error"))
        elif kind == "coercible":
            wrong = {**e, **rng.choice(_COERCIBLE)}
            if wrong["type"] != "utterance":
                wrong = {k: v for k, v in wrong.items() if k not in ("speaker", "text")}
            cases.append(ProbeCase(kind, "ws", json.dumps(wrong), "error"))
        elif kind == "bad_name":
            key = rng.choice(["speaker", "leave"])
            name = '"' + rng.choice(_BAD_NAMES) + '"'
            if key == "leave":
                frame = '{"type": "leave", "participant": ' + name + "}"
            else:
                frame = _with(e, "speaker", name)
            cases.append(ProbeCase(kind, "ws", frame, "error"))
        elif kind == "bad_session_body":
            cases.append(ProbeCase(kind, "create", rng.choice(_BAD_BODIES), "error"))
        elif kind == "control":
            event = rng.choice(
                [
                    {"type": "role", "role": rng.choice(_ROLES)},
                    {"type": "audience", "audience": rng.choice(["group", "adaptive"])},
                    {"type": "focus"},  # clears the focus: valid on any session
                ]
            )
            cases.append(ProbeCase(kind, "ws", json.dumps(event), "control"))
        elif kind == "invisible_name":
            name = _invisible(rng)
            where = rng.choice(["speaker", "leave", "agent", "participant", "alias"])
            if where == "speaker":
                cases.append(ProbeCase(kind, "ws", json.dumps({**e, "speaker": name}), "error"))
            elif where == "leave":
                frame = json.dumps({"type": "leave", "participant": name})
                cases.append(ProbeCase(kind, "ws", frame, "error"))
            else:
                person = {"id": name} if where == "participant" else {"id": "A", "aliases": [name]}
                spec: dict[str, Any] = {"agent": name}
                if where != "agent":
                    spec = {"agent": "B", "participants": [person]}
                cases.append(ProbeCase(kind, "create", json.dumps(spec), "error"))
        elif kind == "bad_role_text":
            person = {"id": "A", "role": rng.choice(_BAD_ROLE_TEXT)}
            if rng.random() < 0.5:
                body = json.dumps({"agent": "B", "participants": [person]})
                cases.append(ProbeCase(kind, "create", body, "error"))
            else:
                frame = json.dumps({"type": "join", "participants": [person]})
                cases.append(ProbeCase(kind, "ws", frame, "error"))
        elif kind == "dot_session_id":
            body = json.dumps({"agent": "B", "session_id": rng.choice([".", ".."])})
            cases.append(ProbeCase(kind, "create", body, "error"))
        elif kind == "control_no_value":
            frame = json.dumps({"type": rng.choice(["role", "audience"])})
            cases.append(ProbeCase(kind, "ws", frame, "error"))
        elif kind == "clock_jump":
            # Epoch seconds among conversation seconds (the session's clock is the meeting's).
            t = rng.choice([1.7e9, 1_764_000_000.0, 4.0e9]) + rng.random()
            frame = json.dumps({**e, "start": t, "end": t + 2.0})
            cases.append(ProbeCase(kind, "ws", frame, "warned"))
        elif kind == "http_unknown_session":
            cases.append(
                ProbeCase(kind, "http", json.dumps(e), "error", {"X-Probe-Session": "none"})
            )
    return cases


def _ws_outcome(case: ProbeCase, reply: dict[str, Any]) -> tuple[str, str]:
    detail = json.dumps(reply)[:200]
    if not reply.get("ok"):
        error = str(reply.get("error", ""))
        if error.startswith("internal error"):
            return "traceback", detail
        if not error:
            return "silent", detail  # refused without saying why
        return ("clear" if case.expect in ("error", "either") else "silent"), detail
    if case.expect == "duplicate":
        return ("correct" if reply.get("duplicate") else "silent"), detail
    if case.expect == "ok":
        return ("correct" if "decision" in reply else "silent"), detail
    if case.expect == "control":
        shown = "deployment" in reply or "audience" in reply
        return ("correct" if shown else "silent"), detail
    if case.expect == "either":
        return "correct", detail  # a damaged copy that is still a valid event
    if case.expect == "warned":
        warned = any("clock jump" in w for w in reply.get("warnings", ()))
        return ("correct" if warned else "silent"), detail
    return "silent", detail


def _http_outcome(case: ProbeCase, r: httpx.Response) -> tuple[str, str]:
    detail = f"{r.status_code} {r.text[:150]}"
    if r.status_code >= 500:
        return "traceback", detail
    if r.status_code >= 400:
        try:
            message = r.json().get("error") or r.json()["results"][0]["error"]
        except (ValueError, KeyError, IndexError, TypeError):
            message = ""
        return ("clear" if message else "silent"), detail
    return "silent", detail


def _raw_post(url: str, path: str, body: bytes, timeout_s: float) -> int:
    """POST ``body`` chunked over a plain socket, stopping as soon as the server answers;
    the status line's code (0: the connection closed without an answer)."""
    import select

    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as s:
        s.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        try:
            for i in range(0, len(body), 65536):
                if select.select([s], [], [], 0)[0]:
                    break  # an answer (or a close) before the end of the body
                piece = body[i : i + 65536]
                s.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            else:
                s.sendall(b"0\r\n\r\n")
            line = s.recv(4096).split(b"\r\n", 1)[0].split()
        except ConnectionError:
            return 0
        return int(line[1]) if len(line) > 1 else 0


def run_cases(url: str, sid: str, cases: list[ProbeCase], timeout_s: float = 10.0) -> ProbeTally:
    """Send every case to the server at ``url`` (session ``sid``), one socket for all the
    WebSocket cases (it must stay open), and tally the outcomes."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    tally = ProbeTally()
    ws_url = url.replace("http", "ws", 1) + f"/v1/sessions/{sid}/stream"
    http = httpx.Client(timeout=timeout_s)

    def reconnect() -> Any:
        ws.close()
        return connect(ws_url, max_size=None).__enter__()

    ws = connect(ws_url, max_size=None).__enter__()  # closed in the finally below
    try:
        for case in cases:
            if case.channel == "ws":
                try:
                    ws.send(case.payload)
                    reply = json.loads(ws.recv(timeout=timeout_s))
                except TimeoutError:
                    tally.add(case, "hang", "no result")
                    ws = reconnect()
                    continue
                except ConnectionClosed as e:
                    tally.add(case, "traceback", f"socket closed: {e}")
                    ws = reconnect()
                    continue
                tally.add(case, *_ws_outcome(case, reply))
            elif case.channel in ("create", "http"):
                if case.channel == "create":
                    path, headers = "/v1/sessions", {"content-type": "application/json"}
                else:
                    target = "nope-" + sid if "X-Probe-Session" in case.headers else sid
                    path = f"/v1/sessions/{target}/events"
                    headers = {k: v for k, v in case.headers.items() if k != "X-Probe-Session"}
                try:
                    r = http.post(f"{url}{path}", content=case.payload, headers=headers)
                except httpx.TimeoutException:
                    tally.add(case, "hang", "no answer")
                    continue
                except httpx.TransportError as e:
                    tally.add(case, "traceback", f"connection dropped: {e}")
                    continue
                tally.add(case, *_http_outcome(case, r))
            else:
                try:
                    assert isinstance(case.payload, bytes)
                    status = _raw_post(url, f"/v1/sessions/{sid}/events", case.payload, timeout_s)
                except TimeoutError:
                    tally.add(case, "hang", "no answer")
                    continue
                if 400 <= status < 500:
                    outcome = "clear"
                elif 200 <= status < 300:
                    outcome = "silent"
                else:
                    outcome = "traceback"  # a 5xx, or dropped without an answer
                tally.add(case, outcome, str(status))
    finally:
        ws.close()
        http.close()
    return tally
