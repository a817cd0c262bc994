"""Every decision of a replayed conversation, at every role and point, checked against its reason.

A conversation is replayed once per agent through :class:`~polylogue.engine.live.LiveConversation`
(the path every front end takes) on the ``matched`` point of the conversation's domain. At each
decision the engine's answer is explained again for every role and operating point
(:data:`CONFIGS`) and both audiences, by the same function the live conversation uses
(:func:`polylogue.engine.explanation.explain`: the role or point changes only the thresholds and
the gates, never the engine's answer); every explanation is written as a front end writes it
(:meth:`LiveDecision.to_dict`) and read back by
:func:`~polylogue.engine.explanation.contradictions`.
The replayed decision itself must equal its re-explanation (``front-end-differs`` otherwise).

``benchmarks/explanation_contradictions.py`` runs it over the test splits of every corpus;
``tests/test_explanation_contradictions.py`` over a sample of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from polylogue.conversation import GROUP_ROLE, Conversation
from polylogue.engine.deployment import Action, Deployment, Reason
from polylogue.engine.explanation import contradictions, explain
from polylogue.engine.live import (
    AgentState,
    LiveConversation,
    LiveDecision,
    pause_values,
)
from polylogue.rendering import render_utterance

#: Every role and operating point, as deployment options (the agent contract's list).
CONFIGS: dict[str, dict[str, str]] = {
    "matched": {"operating_point": "matched"},
    "balanced": {"operating_point": "balanced"},
    "polite": {"operating_point": "polite"},
    "addressed-only": {"operating_point": "addressed-only"},
    "assistant": {"role": "assistant"},
    "facilitator": {"role": "facilitator"},
    "observer": {"role": "observer"},
}
AUDIENCES = ("group", "adaptive")


@dataclass
class AuditCounts:
    """Decisions and contradictions, keyed ``(corpus, rendering, config)``."""

    decisions: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    #: ``(corpus, rendering, config, kind)`` -> count
    found: Counter[tuple[str, str, str, str]] = field(default_factory=Counter)
    #: SPEAK by the threshold while the words address someone else (the policy, not the
    #: explanation: its reason says only what speaks for the target).
    speak_over_other: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    #: ``(corpus, rendering, config, reason code)`` -> count
    reasons: Counter[tuple[str, str, str, str]] = field(default_factory=Counter)
    #: The first contradictions found, for reading.
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.found.values())


def deployments(domain: str | None) -> dict[str, Deployment]:
    """Each of :data:`CONFIGS` on the shipped model of ``domain``."""
    out: dict[str, Deployment] = {}
    for name, options in CONFIGS.items():
        model = next(iter(out.values())).model if out else None
        out[name] = Deployment.resolve(
            domain=domain,
            model=model,
            operating_point=options.get("operating_point"),
            role=options.get("role"),
        )
    return out


def agents_of(conv: Conversation, limit: int | None = None) -> list[str]:
    """The participants an agent can be (group pseudo-speakers aside); ``limit``: the most
    talkative ones."""
    people = [p.id for p in conv.participants if p.role != GROUP_ROLE]
    if limit is None or len(people) <= limit:
        return people
    turns = Counter(u.speaker for u in conv.utterances)
    return sorted(people, key=lambda p: (-turns[p], p))[:limit]


def audit_conversation(
    conv: Conversation,
    rendering: str,
    deps: dict[str, Deployment],
    counts: AuditCounts,
    agents: Iterable[str] | None = None,
    keep_examples: int = 20,
) -> None:
    """Replay ``conv`` in ``rendering`` for each agent and count into ``counts``."""
    utterances = [render_utterance(u, rendering) for u in conv.utterances]
    base = deps["matched"]
    corpus = conv.corpus or "?"
    for agent in agents_of(conv) if agents is None else agents:
        live = LiveConversation.start(agent, conv.participants, deployment=base)
        for u in utterances:
            d = live.utterance(u)
            if d.engine is None or d.action is None:
                continue
            _audit_decision(live, d, corpus, rendering, deps, counts, keep_examples)


def _audit_decision(
    live: LiveConversation,
    d: LiveDecision,
    corpus: str,
    rendering: str,
    deps: dict[str, Deployment],
    counts: AuditCounts,
    keep_examples: int,
) -> None:
    e = d.engine
    assert e is not None
    one_to_one = live.turned_to_agent(e, d.speaker)
    for name, dep in deps.items():
        for audience in AUDIENCES:
            why = explain(pause_values(e, dep, one_to_one=audience == "adaptive" and one_to_one))
            row = LiveDecision.of(d.index, d.speaker, why, AgentState.IDLE, e).to_dict()
            config = name if audience == "group" else f"{name}+adaptive"
            key = (corpus, rendering, config)
            counts.decisions[key] += 1
            counts.reasons[(*key, why.reason.value)] += 1
            found = contradictions(row, dep.addressed_only)
            if (
                name == "matched"
                and audience == "group"
                and ((d.action, d.reason, d.reason_code) != (why.action, why.text, why.reason))
            ):
                found.append("front-end-differs")
            if why.reason is Reason.ABOVE_THRESHOLD and why.suggested is Action.SPEAK:
                others = [a for a in e.address.addressed if a.pid != e.target]
                counts.speak_over_other[key] += bool(others)
            for kind in found:
                counts.found[(*key, kind)] += 1
            if found and len(counts.examples) < keep_examples:
                counts.examples.append(
                    {"corpus": corpus, "rendering": rendering, "config": config,
                     "found": found, "text": live.engine.state.last.text, **row}
                )  # fmt: skip


def summary_rows(counts: AuditCounts, configs: Sequence[str] | None = None) -> list[list[str]]:
    """One row per corpus and rendering: decisions and contradictions (all configs)."""
    rows = []
    keys = sorted({(c, r) for c, r, _ in counts.decisions})
    for corpus, rendering in keys:
        names = [k for c, r, k in counts.decisions if (c, r) == (corpus, rendering)]
        if configs is not None:
            names = [n for n in names if n in configs]
        n = sum(counts.decisions[corpus, rendering, k] for k in names)
        bad = sum(v for (c, r, k, _), v in counts.found.items() if (c, r) == (corpus, rendering))
        over = sum(counts.speak_over_other[corpus, rendering, k] for k in names)
        rows.append([corpus, rendering, str(n), str(bad), str(over)])
    return rows
