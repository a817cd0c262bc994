"""The deployment layer: which model, which domain, which operating point, resolved once.

The engine returns probabilities (P(take floor), P(backchannel)); what an agent *does* with them
is a deployment choice, and every front end (``polylogue decide``, ``eval``, ``tune-threshold``,
``serve`` sessions, the LiveKit and Pipecat adapters) builds one :class:`Deployment` from the same
options, so the same stream gets the same actions everywhere:

* the model folder: the shipped general model, the shipped chat model (``domain="chat"``), or a
  folder written by ``polylogue train-default``;
* the deployment domain (``meeting``, ``tv``, ``earnings``, ``chat``): the one requested, else
  the one the input declares (:meth:`Deployment.with_declared_domain`: a transcript header, a
  benchmark point's corpus), else :data:`DEFAULT_DOMAIN` (``meeting``);
* the operating point, a named set of thresholds chosen on validation and stored in the model's
  ``model.json`` (see :data:`OPERATING_POINTS`), or a raw ``threshold`` that overrides the floor
  threshold of the chosen point;
* the role (``observer``, ``assistant``, ``facilitator``): a preset over the operating point and
  whether the agent may speak at all.

The options a deployment was asked for apart from its role (:class:`PointRequest`) are kept
beside what they resolved to, so a role given at run time (:meth:`Deployment.with_role`) is
resolved exactly as the same role given at creation, and clearing it returns to the
session's own point.

One rule turns the three calibrated probabilities into one :class:`Reason`, and the reason
fixes the action (:data:`REASON_ACTIONS`; :meth:`Deployment.reason`, :meth:`Deployment.choose`):

0. SPEAK when the words address the agent (:mod:`polylogue.turntaking.address`: named as
   addressee, introduced, or asked a "you" question right after it spoke), at every operating
   point: ``addressed`` with P(take floor) at or above the floor threshold,
   ``address-overrides-threshold`` below it; ``addressed-only`` (the ``assistant``) speaks only
   then;
1. BACKCHANNEL (``backchannel``) when P(backchannel) >= ``backchannel`` and P(backchannel) >=
   ``backchannel_margin`` x P(take floor): a short acknowledgement is about as likely as a floor
   take, and far cheaper to get wrong than an interruption;
2. otherwise SPEAK when P(take floor) >= ``take_floor`` (``above-threshold``), unless the
   address gate of ``addressed-only`` holds it back (SILENT, ``address-gate``);
3. otherwise SILENT (``below-threshold``).

The live policy adds the reasons that depend on the agent's state and the clock (``cooldown``,
``one-to-one``, ``long-silence``), and :mod:`polylogue.engine.explanation` writes each reason's
words from the same values, so a reason never contradicts its action.

A point whose backchannel threshold is above 1 never suggests one (its validation precision
was too low to be worth saying).

    >>> dep = Deployment.resolve(domain="meeting")              # doctest: +SKIP
    >>> dep.operating_point, dep.take_floor_threshold          # doctest: +SKIP
    ('matched', 0.3)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from polylogue.conversation import DomainError, Participant, check_domain_name
from polylogue.engine.engine import TurnTakingEngine
from polylogue.engine.model import TurnTakingModel, load_shared_model, model_dir_for
from polylogue.errors import PolylogueInputError


class Action(StrEnum):
    SPEAK = "SPEAK"
    BACKCHANNEL = "BACKCHANNEL"
    SILENT = "SILENT"


#: The named operating points (stored per domain in ``model.json``):
#:
#: * ``balanced`` maximises balanced accuracy (the paper's metric; kept for paper-style tables:
#:   it speaks at about twice the real rate);
#: * ``matched`` speaks as often as people did (predicted SPEAK rate = real TAKE_FLOOR rate);
#: * ``polite`` keeps the false-interruption rate at or below 5%;
#: * ``addressed-only`` speaks only when the words put the turn to the agent (named, or asked
#:   right after it spoke), at the ``balanced`` floor threshold.
OPERATING_POINTS: tuple[str, ...] = ("balanced", "matched", "polite", "addressed-only")
#: What ``decide``, ``serve`` and the adapters use unless told otherwise (see the model card).
DEFAULT_OPERATING_POINT = "matched"
#: The key of the thresholds chosen over every domain at once (paper-style tables over a
#: mixed benchmark, :func:`balanced_threshold` without a domain).
OVERALL = "default"
#: The domain of a deployment whose input declares none: a meeting (backchannels suggested,
#: a ``polite`` point that speaks). The overall thresholds suggest no backchannel at all.
DEFAULT_DOMAIN = "meeting"
#: Where a deployment's domain came from (``Deployment.domain_source``).
DOMAIN_SOURCES = ("requested", "declared", "inferred", "default")


@dataclass(frozen=True)
class RolePreset:
    """A preset over the operating point and whether the agent may speak."""

    name: str
    #: The operating point the role uses unless one is given explicitly.
    operating_point: str
    #: May the agent's decisions be acted on (False: decisions are logged, the action is SILENT).
    speaks: bool
    description: str
    #: Step in when nobody has spoken for this many seconds (None: never).
    silence_s: float | None = None


#: How long a silence the facilitator lets pass before it steps in. In the AMI validation
#: meetings 95.6% of the pauses at decision points are shorter (97.2% under 8 s).
FACILITATOR_SILENCE_S = 6.0

ROLES: dict[str, RolePreset] = {
    "observer": RolePreset(
        "observer",
        DEFAULT_OPERATING_POINT,
        speaks=False,
        description="listens and logs every decision (what it would do), never speaks",
    ),
    "assistant": RolePreset(
        "assistant",
        "addressed-only",
        speaks=True,
        description="answers when addressed by name or asked right after it spoke",
    ),
    "facilitator": RolePreset(
        "facilitator",
        "balanced",
        speaks=True,
        description="proactive: steps into open floors (speaks at the balanced point) and "
        f"into silences of {FACILITATOR_SILENCE_S:g} s or more",
        silence_s=FACILITATOR_SILENCE_S,
    ),
}


class DeploymentError(PolylogueInputError):
    """A deployment option with a value that cannot be used (names the option and the choices)."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option


@dataclass(frozen=True)
class Thresholds:
    """One operating point in one domain."""

    take_floor: float
    #: Above 1: never suggest a backchannel.
    backchannel: float = 2.0
    backchannel_margin: float = 1.0

    def to_dict(self) -> dict[str, float]:
        return {
            "take_floor": self.take_floor,
            "backchannel": self.backchannel,
            "backchannel_margin": self.backchannel_margin,
        }


class Reason(StrEnum):
    """Why the rule gives its action at one pause (the action is :data:`REASON_ACTIONS`'s)."""

    #: The words address the agent and P(take floor) >= the floor threshold.
    ADDRESSED = "addressed"
    #: The words address the agent and P(take floor) < the floor threshold: the address wins.
    ADDRESS_OVERRIDES_THRESHOLD = "address-overrides-threshold"
    #: Not addressed, P(take floor) >= the floor threshold.
    ABOVE_THRESHOLD = "above-threshold"
    #: ``audience="adaptive"`` with one other person present (:mod:`polylogue.engine.live`).
    ONE_TO_ONE = "one-to-one"
    #: The facilitator steps into a long silence (:meth:`LiveConversation.silence`).
    LONG_SILENCE = "long-silence"
    #: A short acknowledgement fits (the backchannel thresholds).
    BACKCHANNEL = "backchannel"
    #: Not addressed, P(take floor) < the floor threshold.
    BELOW_THRESHOLD = "below-threshold"
    #: A SPEAK above the threshold held back: the point speaks only when addressed.
    ADDRESS_GATE = "address-gate"
    #: A SPEAK above the threshold held back: an unaddressed interjection was made too recently.
    COOLDOWN = "cooldown"


#: The action each reason gives (an observer's is then SILENT: it never acts).
REASON_ACTIONS: dict[Reason, Action] = {
    Reason.ADDRESSED: Action.SPEAK,
    Reason.ADDRESS_OVERRIDES_THRESHOLD: Action.SPEAK,
    Reason.ABOVE_THRESHOLD: Action.SPEAK,
    Reason.ONE_TO_ONE: Action.SPEAK,
    Reason.LONG_SILENCE: Action.SPEAK,
    Reason.BACKCHANNEL: Action.BACKCHANNEL,
    Reason.BELOW_THRESHOLD: Action.SILENT,
    Reason.ADDRESS_GATE: Action.SILENT,
    Reason.COOLDOWN: Action.SILENT,
}


def rule_reason(
    p_take: float, p_back: float, thresholds: Thresholds, addressed: bool = False
) -> Reason:
    """The three-outcome rule (module docstring) for one pause, as its reason: an address
    first (every point answers a direct address), else the thresholds."""
    if addressed:
        if p_take >= thresholds.take_floor:
            return Reason.ADDRESSED
        return Reason.ADDRESS_OVERRIDES_THRESHOLD
    if p_back >= thresholds.backchannel and p_back >= thresholds.backchannel_margin * p_take:
        return Reason.BACKCHANNEL
    if p_take >= thresholds.take_floor:
        return Reason.ABOVE_THRESHOLD
    return Reason.BELOW_THRESHOLD


def choose_action(
    p_take: float, p_back: float, thresholds: Thresholds, addressed: bool = False
) -> Action:
    """The three-outcome rule's action (:func:`rule_reason`) for one pause: SPEAK whenever
    the words address the agent, else by the thresholds."""
    return REASON_ACTIONS[rule_reason(p_take, p_back, thresholds, addressed)]


def balanced_threshold(model: TurnTakingModel, domain: str | None) -> float:
    """The ``balanced`` floor threshold of a domain (paper-style tables and comparisons);
    ``None``: the one chosen over every domain at once (:data:`OVERALL`)."""
    if domain is not None:
        return Deployment.resolve(
            model=model, domain=domain, operating_point="balanced"
        ).take_floor_threshold
    return float(model_operating_points(model)["balanced"][OVERALL]["take_floor"])


def model_operating_points(model: TurnTakingModel) -> dict[str, dict[str, dict[str, float]]]:
    """The model's stored points; a folder from before they existed has ``balanced`` only."""
    if model.operating_points:
        return model.operating_points
    legacy = {OVERALL: model.threshold, **model.domain_thresholds}
    return {
        "balanced": {
            d: {"take_floor": t, "backchannel": model.backchannel_threshold}
            for d, t in legacy.items()
        }
    }


def _check_choice(option: str, value: str | None, choices: Iterable[str]) -> None:
    choices = list(choices)
    if value is not None and value not in choices:
        raise DeploymentError(
            option, f"unknown value {value!r}; choose one of {', '.join(choices)}"
        )


@dataclass(frozen=True)
class PointRequest:
    """What a deployment was asked for apart from its role: the session's own point.

    ``None`` where an option was not given (the role's preset, the input's domain or the
    defaults fill it in when resolving).
    """

    domain: str | None = None
    operating_point: str | None = None
    threshold: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "operating_point": self.operating_point,
            "threshold": self.threshold,
        }


@dataclass(frozen=True)
class Deployment:
    """A model with its domain, operating point and role resolved into one decision rule."""

    model: TurnTakingModel
    #: None when the model was handed over in memory.
    model_dir: Path | None
    domain: str | None
    operating_point: str
    thresholds: Thresholds
    #: Speak only when addressed (the ``addressed-only`` point, or the ``assistant`` role).
    addressed_only: bool
    role: str | None = None
    #: The raw ``threshold`` option when one was given (it replaced the point's floor threshold).
    threshold_override: float | None = None
    #: The options asked for apart from the role (what clearing the role returns to).
    request: PointRequest = PointRequest()
    #: Where ``domain`` came from: ``requested``, ``declared`` by the input, or the ``default``.
    domain_source: str = "default"

    @classmethod
    def resolve(
        cls,
        model_dir: str | Path | None = None,
        domain: str | None = None,
        operating_point: str | None = None,
        threshold: float | None = None,
        role: str | None = None,
        model: TurnTakingModel | None = None,
        domain_source: str | None = None,
    ) -> Deployment:
        """Check every option, load the model (unless given) and pick its thresholds.

        Without a domain the deployment is a :data:`DEFAULT_DOMAIN` one; an explicit
        ``operating_point`` wins over the role's preset point.
        """
        try:
            check_domain_name(domain)
        except DomainError as exc:
            raise DeploymentError("domain", str(exc)) from None
        request = PointRequest(domain, operating_point, threshold)
        source = domain_source or ("default" if domain is None else "requested")
        domain = domain or DEFAULT_DOMAIN
        _check_choice("operating point", operating_point, OPERATING_POINTS)
        _check_choice("role", role, ROLES)
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, int | float):
                raise DeploymentError("threshold", f"{threshold!r} is not a number")
            if not 0.0 <= float(threshold) <= 1.0:
                raise DeploymentError("threshold", f"{threshold} is outside [0, 1]")
        point = operating_point or (ROLES[role].operating_point if role else None)
        point = point or DEFAULT_OPERATING_POINT
        folder: Path | None
        if model is None:
            folder = Path(model_dir) if model_dir is not None else model_dir_for(domain)
            model = load_shared_model(folder)
        else:
            folder = Path(model_dir) if model_dir is not None else None
        points = model_operating_points(model)
        # addressed-only is the balanced floor threshold behind the address gate.
        stored = "balanced" if point == "addressed-only" else point
        if stored not in points:
            where = folder if folder is not None else "the model"
            raise DeploymentError(
                "operating point",
                f"{where} has no {point!r} point (it has: {', '.join(sorted(points))}); "
                "run `polylogue operating-points` on it",
            )
        per_domain = points[stored]
        values = per_domain.get(domain) or per_domain.get(OVERALL)
        if values is None:
            raise DeploymentError(
                "domain", f"the {stored!r} point has no thresholds for {domain!r}"
            )
        base = Thresholds(
            take_floor=float(values["take_floor"]),
            backchannel=float(values.get("backchannel", 2.0)),
            backchannel_margin=float(values.get("backchannel_margin", 1.0)),
        )
        if threshold is not None:
            base = Thresholds(float(threshold), base.backchannel, base.backchannel_margin)
        return cls(
            model=model,
            model_dir=folder,
            domain=domain,
            operating_point=point,
            thresholds=base,
            addressed_only=point == "addressed-only",
            role=role,
            threshold_override=None if threshold is None else float(threshold),
            request=request,
            domain_source=source,
        )

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], model: TurnTakingModel | None = None
    ) -> Deployment:
        """From a JSON-like mapping (a ``serve`` request, a snapshot): unknown keys are errors."""
        known = ("model_dir", "domain", "operating_point", "threshold", "role")
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise DeploymentError(
                "deployment", f"unknown option(s) {', '.join(unknown)}; known: {', '.join(known)}"
            )
        for key in ("model_dir", "domain", "operating_point", "role"):
            v = options.get(key)
            if v is not None and not isinstance(v, str):
                raise DeploymentError(key.replace("_", " "), f"{v!r} is not a string")
        return cls.resolve(model=model, **{k: options.get(k) for k in known})

    @property
    def take_floor_threshold(self) -> float:
        return self.thresholds.take_floor

    @property
    def silence_s(self) -> float | None:
        """Seconds of silence after which the agent steps in (the facilitator's), or None."""
        return None if self.role is None else ROLES[self.role].silence_s

    @property
    def speaks(self) -> bool:
        """False for the observer role: decisions are made and logged, never acted on."""
        return self.role is None or ROLES[self.role].speaks

    def reason(
        self, p_take: float, p_back: float, addressed: bool, thresholds: Thresholds | None = None
    ) -> Reason:
        """The rule's reason at one pause with this point's address gate (``thresholds``: the
        live policy's for the agent's state, else this deployment's)."""
        why = rule_reason(p_take, p_back, thresholds or self.thresholds, addressed)
        if why is Reason.ABOVE_THRESHOLD and self.addressed_only:
            return Reason.ADDRESS_GATE
        return why

    def choose(self, p_take: float, p_back: float, addressed: bool) -> Action:
        """The action the rule gives at one pause (before a role silences it)."""
        return REASON_ACTIONS[self.reason(p_take, p_back, addressed)]

    def with_role(self, role: str | None) -> Deployment:
        """This deployment's own options (:attr:`request`) resolved again with ``role``: the
        same thresholds, gate and actions as that role given at creation (``None``: the
        session's own point)."""
        _check_choice("role", role, ROLES)
        return self._again(self.request, role)

    def with_declared_domain(self, declared: str | None, source: str = "declared") -> Deployment:
        """The domain the input declares (a transcript header, a benchmark point's corpus)
        or shows (``source="inferred"``: an earnings call's operator), used unless one was
        requested; everything else resolved as before."""
        if declared is None or self.request.domain is not None:
            return self
        return self._again(replace(self.request, domain=declared), self.role, source)

    def _again(
        self, request: PointRequest, role: str | None, source: str | None = None
    ) -> Deployment:
        """``request`` and ``role`` resolved on this deployment's model; a shipped model is
        loaded again only when the new domain has another shipped folder (``chat``)."""
        shipped = self.model_dir is not None and self.model_dir == model_dir_for(self.domain)
        if shipped and model_dir_for(request.domain) != self.model_dir:
            model, folder = None, None
        else:
            model, folder = self.model, self.model_dir
        return Deployment.resolve(
            model_dir=folder,
            domain=request.domain,
            operating_point=request.operating_point,
            threshold=request.threshold,
            role=role,
            model=model,
            domain_source=source or (self.domain_source if request.domain else None),
        )

    def options(self) -> dict[str, Any]:
        """The options that rebuild this deployment (``from_options``), for snapshots: the
        ones asked for (a point the role chose is not stored as the session's own)."""
        out: dict[str, Any] = {**self.request.to_dict(), "role": self.role}
        if self.model_dir is not None and self.model_dir != model_dir_for(self.domain):
            out["model_dir"] = str(self.model_dir)
        return out

    def to_dict(self) -> dict[str, Any]:
        """What the deployment is, for output headers, run manifests and ``serve`` replies:
        the resolved domain and point, and what was asked for (``requested``)."""
        return {
            **self.options(),
            "domain": self.domain,
            "domain_source": self.domain_source,
            "operating_point": self.operating_point,
            "requested": self.request.to_dict(),
            "model": str(self.model_dir) if self.model_dir is not None else None,
            "feature_blocks": list(self.model.feature_blocks),
            "thresholds": self.thresholds.to_dict(),
            "addressed_only": self.addressed_only,
            "speaks": self.speaks,
        }

    def engine(self, participants: Iterable[Participant] = ()) -> TurnTakingEngine:
        """A fresh engine (probabilities only) on this deployment's model."""
        return TurnTakingEngine(self.model, participants)
