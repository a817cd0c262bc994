"""Prometheus metrics in the text exposition format (no client library needed)."""

from __future__ import annotations

import gc
import time
from typing import Any


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


class CounterMetric:
    """A counter or gauge; ``seed`` (label name, values): series shown at 0 before use.

    Prometheus' ``rate()`` and alerts need a series to exist before its first increment, so
    every label value the service can produce is present from the start.
    """

    def __init__(
        self,
        name: str,
        help_: str,
        kind: str = "counter",
        seed: tuple[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.name, self.help, self.kind = name, help_, kind
        self.values: dict[tuple[tuple[str, str], ...], float] = {}
        if seed is not None:
            label, values = seed
            for v in values:
                self.values[((label, v),)] = 0.0

    def inc(self, n: float = 1, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        self.values[key] = self.values.get(key, 0.0) + n

    def dec(self, n: float = 1, **labels: str) -> None:
        self.inc(-n, **labels)

    def set(self, v: float, **labels: str) -> None:
        self.values[tuple(sorted(labels.items()))] = v

    def render(self) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        for key, v in sorted(self.values.items()):
            out.append(f"{self.name}{_labels(dict(key))} {v:g}")
        if not self.values:
            out.append(f"{self.name} 0")
        return out


#: Label values every series starts with (``none``: no decision point, e.g. a filler).
ACTIONS = ("SPEAK", "BACKCHANNEL", "SILENT", "none")
EVENT_TYPES = ("utterance", "join", "leave", "agent_speech", "reset", "role")
#: The usual kinds; others (an exception's class name) appear when they first happen.
ERROR_KINDS = (
    "NotJSON",
    "BinaryFrame",
    "MessageTooLarge",
    "PolylogueInputError",
    "EventError",
    "SessionNotFound",
    "StaleSession",
    "LockTimeout",
    "StoreUnavailable",
    "SessionGone",
    "SeqSkipped",
    "InternalError",
)


class Histogram:
    BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)

    def __init__(self, name: str, help_: str) -> None:
        self.name, self.help = name, help_
        self.counts = [0] * len(self.BUCKETS)
        self.total = 0.0
        self.n = 0

    def observe(self, v: float) -> None:
        for i, b in enumerate(self.BUCKETS):
            if v <= b:
                self.counts[i] += 1
        self.total += v
        self.n += 1

    def render(self) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for b, c in zip(self.BUCKETS, self.counts, strict=True):
            out.append(f'{self.name}_bucket{{le="{b:g}"}} {c}')
        out.append(f'{self.name}_bucket{{le="+Inf"}} {self.n}')
        out.append(f"{self.name}_sum {self.total:.6f}")
        out.append(f"{self.name}_count {self.n}")
        return out


class GcClock:
    """Time this process spends in the garbage collector (a pause of the whole event loop)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections += 1

    def start(self) -> None:
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def stop(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)


class Metrics:
    def __init__(self) -> None:
        self.gc = GcClock()
        self.decisions = CounterMetric(
            "polylogue_decisions_total", "Decisions by action", seed=("action", ACTIONS)
        )
        self.events = CounterMetric(
            "polylogue_events_total", "Events applied, by type", seed=("type", EVENT_TYPES)
        )
        self.errors = CounterMetric(
            "polylogue_event_errors_total", "Rejected events, by error", seed=("kind", ERROR_KINDS)
        )
        self.duplicates = CounterMetric(
            "polylogue_events_duplicate_total", "Resent events (seq already applied), skipped"
        )
        self.latency = Histogram(
            "polylogue_decision_latency_seconds", "Server time to apply an utterance and decide"
        )
        self.sessions = CounterMetric("polylogue_sessions", "Sessions held in memory", "gauge")
        self.sockets = CounterMetric("polylogue_websockets", "Open WebSocket streams", "gauge")
        self.expired = CounterMetric("polylogue_sessions_expired_total", "Idle sessions dropped")
        self.store_up = CounterMetric(
            "polylogue_store_up", "1 while the session store takes writes, else 0", "gauge"
        )
        self.store_up.set(1.0)
        self.restarts = CounterMetric(
            "polylogue_task_restarts_total",
            "Background tasks restarted after an error",
            seed=("task", ("sweeper",)),
        )
        self.refused = CounterMetric(
            "polylogue_connections_refused_total",
            "Connections not accepted for lack of descriptors or memory (accept() errors)",
            seed=("reason", ("EMFILE", "ENFILE")),
        )

    def render(self) -> str:
        parts: list[CounterMetric | Histogram] = [self.decisions, self.events, self.errors]
        parts.append(self.duplicates)
        parts += [self.latency, self.sessions, self.sockets, self.expired]
        parts += [self.store_up, self.restarts, self.refused]
        gc_pause = CounterMetric(
            "polylogue_gc_pause_seconds_total", "Time spent in Python's garbage collector"
        )
        gc_pause.set(self.gc.seconds)
        parts.append(gc_pause)
        return "\n".join(line for m in parts for line in m.render()) + "\n"

    def gc_seconds(self) -> float:
        return self.gc.seconds
