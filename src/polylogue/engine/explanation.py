"""Why the agent does what it does at a pause: one reason, from the values the action came from.

Every front end (``polylogue decide`` plain and ``--json``, ``polylogue serve``, the LiveKit and
Pipecat adapters, :class:`~polylogue.engine.live.LiveConversation`) takes its action *and* its
reason from :func:`explain`: the rule gives a :class:`~polylogue.engine.deployment.Reason`
(an address, the thresholds, the address gate, the cooldown, a one-to-one room), the reason
fixes the action (:data:`~polylogue.engine.deployment.REASON_ACTIONS`), and the words are
written from the same values: the address verdict of the utterance for the target
(:class:`~polylogue.turntaking.address.AddressVerdict`), P(take floor) and the floor threshold
applied. A reason therefore never says "someone else was addressed" on a SPEAK, a SPEAK below
the threshold always says that an address overrode it, and a SPEAK held back by the address
gate or the cooldown says so.

:func:`contradictions` is the invariant as a checker: it reads a decision as a front end writes
it (a ``decide --json`` row or :meth:`LiveDecision.to_dict`, and the plain line's tag) and
lists every way its reason contradicts its action or the values behind it.
``benchmarks/explanation_contradictions.py`` runs it over the test splits of every corpus.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from polylogue.engine.deployment import REASON_ACTIONS, Action, Reason, Thresholds, rule_reason
from polylogue.engine.engine import CUE_PHRASES, address_phrase
from polylogue.turntaking.address import AddressVerdict

#: How another participant was addressed, by the verdict's kind (a name unless listed).
_OTHER_KIND = {
    "follow-up": "a question right after they spoke",
    "you-after": "'you' right after they spoke",
    "earlier-in-turn": "named one utterance earlier",
    "dyad-question": "a question in a two-person room",
}
#: The words of a reason that held back a SPEAK (the address gate, the cooldown).
GATE_WORDS = "address gate"
COOLDOWN_WORDS = "cooldown"
OVERRIDE_WORDS = "overrides the threshold"
ONE_TO_ONE_WORDS = "one-to-one: the only other person present"


@dataclass(frozen=True)
class PauseValues:
    """Everything one pause's action is chosen from (a front end fills it in once)."""

    target: str
    p_speak: float
    p_backchannel: float
    #: The thresholds applied (the deployment's, or the live policy's for the agent's state).
    thresholds: Thresholds
    #: The words (or a chat nick) put the turn to the target (``engine.addressed_at``).
    addressed: bool
    verdict: AddressVerdict
    #: The point speaks only when addressed (the address gate).
    addressed_only: bool = False
    #: False: the observer, which never acts on its decisions.
    speaks: bool = True
    #: Why a short acknowledgement fits here (``cues["backchannel"]``).
    backchannel_cue: str = "a short acknowledgement fits"
    #: The cooldown (seconds) when an unaddressed interjection was made too recently.
    cooling: float | None = None
    #: The ``adaptive`` audience answers the only other person present.
    one_to_one: bool = False


@dataclass(frozen=True)
class Explanation:
    """The reason of one decision, its words, and the action it gives."""

    #: The rule's reason (before an observer silences it).
    reason: Reason
    text: str
    #: What the agent does (SILENT for an observer).
    action: Action
    #: What the reason gives (:data:`REASON_ACTIONS`).
    suggested: Action
    #: The floor threshold applied.
    threshold: float


def explain(v: PauseValues) -> Explanation:
    """The reason, its words and the action at one pause (module docstring)."""
    reason = rule_for(v)
    return _explained(reason, _text(reason, v), v.speaks, v.thresholds.take_floor)


def rule_for(v: PauseValues) -> Reason:
    """The reason alone: the deployment's rule, then the live gates."""
    reason = rule_reason(v.p_speak, v.p_backchannel, v.thresholds, v.addressed)
    if reason is Reason.ABOVE_THRESHOLD:
        if v.addressed_only:
            reason = Reason.ADDRESS_GATE
        elif v.cooling is not None:
            reason = Reason.COOLDOWN
    if v.one_to_one:
        reason = Reason.ONE_TO_ONE
    return reason


def explain_silence(seconds: float, speaks: bool, threshold: float) -> Explanation:
    """The facilitator stepping into a silence of ``seconds``."""
    return _explained(Reason.LONG_SILENCE, f"long silence ({seconds:.1f} s)", speaks, threshold)


def _explained(reason: Reason, text: str, speaks: bool, threshold: float) -> Explanation:
    suggested = REASON_ACTIONS[reason]
    if not speaks:
        return Explanation(
            reason,
            f"observer (would {suggested.value}: {text})",
            Action.SILENT,
            suggested,
            threshold,
        )
    return Explanation(reason, text, suggested, suggested, threshold)


def _p(v: PauseValues, sign: str) -> str:
    return f"P(speak) {v.p_speak:.2f} {sign} threshold {v.thresholds.take_floor:.2f}"


def _text(reason: Reason, v: PauseValues) -> str:
    if reason is Reason.ADDRESSED:
        return f"{target_address(v.verdict, v.target)}; {_p(v, '>=')}"
    if reason is Reason.ADDRESS_OVERRIDES_THRESHOLD:
        return f"{target_address(v.verdict, v.target)}: the address {OVERRIDE_WORDS} ({_p(v, '<')})"
    if reason is Reason.ONE_TO_ONE:
        return ONE_TO_ONE_WORDS
    if reason is Reason.BACKCHANNEL:
        return v.backchannel_cue
    if reason is Reason.ABOVE_THRESHOLD:
        # Only what speaks for the target: another addressee is in ``address``, not here.
        mention = v.verdict.mention_of(v.target)
        return _p(v, ">=") + ("" if mention is None else f"; named{_quoted(mention.words)}")
    if reason is Reason.COOLDOWN:
        return (
            f"{COOLDOWN_WORDS} ({v.cooling:g} s): holds back an unaddressed SPEAK at "
            f"{_p(v, '>=')} this soon after the last one"
        )
    named = not_addressed(v.verdict, v.target)
    if reason is Reason.ADDRESS_GATE:
        text = f"{GATE_WORDS}: not addressed, so no SPEAK at {_p(v, '>=')}"
        return text + (f"; {named}" if named else "")
    return _p(v, "<") + (f"; {named}" if named else "")  # below the threshold


def _quoted(words: str) -> str:
    """`` ("the words")``, or nothing when the verdict gives none (a double quote inside is
    written as a single one: the checker reads quoted words as quoted)."""
    return f' ("{words.replace(chr(34), chr(39))}")' if words else ""


def target_address(verdict: AddressVerdict, target: str) -> str:
    """How the target is addressed, with the words that do it."""
    mine = verdict.of(target)
    if mine is None:  # a further block's columns said so (a chat nick), not the words' verdict
        return "addressed by nick"
    return f"{address_phrase(verdict, target)}{_quoted(mine.words)}"


def not_addressed(verdict: AddressVerdict, target: str) -> str | None:
    """What the words do instead of addressing the target: address others, or name it."""
    others = [a for a in verdict.addressed if a.pid != target]
    if others:
        first = others[0]
        how = _OTHER_KIND.get(first.kind, "by name")
        who = ", ".join(a.pid for a in others)
        said = f": {_quoted(first.words)[2:-1]}" if first.words else ""
        return f"the words address {who} ({how}{said})"
    mention = verdict.mention_of(target)
    if mention is not None:
        return f"named, not addressed{_quoted(mention.words)}"
    if verdict.off_roster:
        return "the words call someone off the roster (a term of address)"
    return None


# ----------------------------------------------------------------------------- the invariant

#: Phrases that say the target is addressed (old and new wordings alike).
_TARGET_ADDRESS = (
    CUE_PHRASES["target_vocative"],
    CUE_PHRASES["question_to_prev_target"],
    CUE_PHRASES["second_person_to_prev_target"],
    CUE_PHRASES["dyad_question"],
    "addressed by nick",
)
#: Phrases that say the words address another participant.
_OTHER_ADDRESS = (
    "someone else",
    "the words address ",
)
#: The cue phrases of another participant's address (one contains a target phrase).
_OTHER_PHRASES = tuple(
    CUE_PHRASES[k]
    for k in ("other_vocative", "other_follow_up", "other_vocative_prev", "other_dyad_question")
)
#: Phrases that argue for keeping quiet (wrong beside a SPEAK).
_AGAINST_SPEAKING = (
    "not addressed",
    "below threshold",
    " < threshold",
    CUE_PHRASES["target_never_spoke"],
    CUE_PHRASES["incomplete"],
    CUE_PHRASES["trailing_continuer"],
    CUE_PHRASES["acknowledgement"],
)


#: Words quoted from the utterance (they may say anything).
_QUOTED = re.compile(r'"[^"]*"')


def _claims_target_address(text: str) -> bool:
    for phrase in _OTHER_PHRASES:
        text = text.replace(phrase, "")
    return any(p in text for p in _TARGET_ADDRESS)


def contradictions(
    row: Mapping[str, Any], addressed_only: bool, text: str | None = None
) -> list[str]:
    """The ways one decision's reason contradicts its action (empty: none).

    ``row``: a ``decide --json`` row or :meth:`LiveDecision.to_dict` (``decision``/``action``,
    ``suggested``, ``reason``, ``reason_code`` where written, ``p_speak``, ``threshold``,
    ``addressed`` or ``address.target``); ``addressed_only``: the point's address gate;
    ``text``: the reason as another rendering shows it (the plain line's tag), else the row's.
    Each finding is a short kind ("speak-says-someone-else", ...), counted by the benchmark.
    """
    action = row.get("action", row.get("decision"))
    if action is None:
        return []
    suggested = row.get("suggested") or action
    said = _QUOTED.sub('""', str(row.get("reason", "")) if text is None else text)
    out: list[str] = []
    observer = action != suggested
    if observer and not (action == "SILENT" and "observer" in said):
        out.append("silenced-without-saying-observer")
    code = None if row.get("reason_code") is None else Reason(row["reason_code"])
    if row.get("p_speak") is None:  # a step into a silence: no probability behind it
        if code is not None and REASON_ACTIONS[code].value != suggested:
            out.append("code-gives-another-action")
        return out
    p = float(row["p_speak"])
    thr = float(row["threshold"])
    address = row.get("address") or {}
    addressed = bool(row.get("addressed", address.get("target") == "addressed"))
    if code is not None:
        out += _code_contradictions(code, suggested, p, thr, addressed, addressed_only)
    if suggested == "SPEAK":
        if any(o in said for o in _OTHER_ADDRESS):
            out.append("speak-says-someone-else")
        if _claims_target_address(said) and not addressed:
            out.append("speak-claims-an-address")
        against: tuple[str, ...] = _AGAINST_SPEAKING
        if OVERRIDE_WORDS in said:  # its words state P below the threshold: that is its point
            against = tuple(a for a in against if "threshold" not in a)
        if any(a in said for a in against):
            out.append("speak-with-a-reason-against")
        special = ONE_TO_ONE_WORDS in said or "long silence" in said
        if p < thr and addressed and not special and OVERRIDE_WORDS not in said:
            out.append("override-unsaid")
        if OVERRIDE_WORDS in said and not (addressed and p < thr):
            out.append("override-false")
    else:
        if addressed:
            out.append("addressed-not-speak")
        if _claims_target_address(said):
            out.append("quiet-claims-an-address")
        held = p >= thr and not addressed and suggested == "SILENT"
        if held and addressed_only and GATE_WORDS not in said and "addressed-only" not in said:
            out.append("gate-unsaid")
    return out


def _code_contradictions(
    code: Reason, suggested: str, p: float, thr: float, addressed: bool, addressed_only: bool
) -> list[str]:
    """The reason code against the action and the values it claims."""
    out = []
    if REASON_ACTIONS[code].value != suggested:
        out.append("code-gives-another-action")
    above = p >= thr
    holds = {
        Reason.ADDRESSED: addressed and above,
        Reason.ADDRESS_OVERRIDES_THRESHOLD: addressed and not above,
        Reason.ABOVE_THRESHOLD: not addressed and above and not addressed_only,
        Reason.BELOW_THRESHOLD: not addressed and not above,
        Reason.ADDRESS_GATE: not addressed and above and addressed_only,
        Reason.COOLDOWN: not addressed and above,
        Reason.BACKCHANNEL: not addressed,
    }.get(code, True)
    if not holds:
        out.append(f"code-{code.value}-false")
    return out
