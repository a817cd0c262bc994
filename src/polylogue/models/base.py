"""The one interface every turn-taking model implements, and the model-spec registry.

A :class:`Predictor` receives model-visible :class:`DecisionInput` objects only (never
:class:`~polylogue.turntaking.types.DecisionGold`) and returns one :class:`Prediction` per input,
in order. ``decision`` is ``None`` when the model's answer could not be parsed; the evaluation
counts that as wrong and reports it separately.

Model specs (``polylogue eval --model SPEC``)::

    default                                the shipped model (polylogue.models.default_model)
    baseline:always-speak | always-silent | random | explicit-address | previous-speaker
    hf:PATH_OR_ALIAS                       local Hugging Face causal LM (alias: smollm2)
    openai:MODEL@URL                       any OpenAI-compatible chat-completions server
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from polylogue.extras import require_extra
from polylogue.llm.spec import LLMSpecError, parse_llm_spec
from polylogue.registry import Registry, load_target, unknown_options_message
from polylogue.turntaking.types import Decision, DecisionInput


@dataclass(frozen=True, slots=True)
class Prediction:
    """One model answer for one decision point."""

    point_id: str
    #: None when the answer could not be parsed (counted wrong, reported as "unparseable").
    decision: Decision | None
    #: Calibrated P(SPEAK) when the backend can give one.
    p_speak: float | None
    reasoning: str | None
    raw_output: str
    latency_s: float
    #: Optional interpretable cues (e.g. "addressed_by_name") a backend may expose.
    cues: Mapping[str, Any] = field(default_factory=dict)
    #: Backend-specific details (token counts, cache hit, HTTP attempts, ...).
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "point_id": self.point_id,
            "decision": None if self.decision is None else self.decision.value,
            "p_speak": self.p_speak,
            "reasoning": self.reasoning,
            "raw_output": self.raw_output,
            "latency_s": self.latency_s,
            "cues": dict(self.cues),
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Prediction:
        dec = d.get("decision")
        p = d.get("p_speak")
        return cls(
            point_id=str(d["point_id"]),
            decision=None if dec is None else Decision(dec),
            p_speak=None if p is None else float(p),
            reasoning=d.get("reasoning"),
            raw_output=str(d.get("raw_output") or ""),
            latency_s=float(d.get("latency_s") or 0.0),
            cues=dict(d.get("cues") or {}),
            extra=dict(d.get("extra") or {}),
        )


@runtime_checkable
class Predictor(Protocol):
    """A turn-taking model: inputs in, one prediction per input out (same order)."""

    #: A stable, human-readable description (goes into run manifests and run keys).
    @property
    def name(self) -> str: ...

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]: ...

    def describe(self) -> dict[str, Any]:
        """Everything that changes the model's answers (for run keys and manifests)."""
        ...


class PredictionError(RuntimeError):
    """A backend could not answer some inputs (dead server, retries exhausted, ...).

    ``completed`` holds the predictions that did finish so a caller can keep them.
    """

    def __init__(self, message: str, completed: Sequence[Prediction] = ()) -> None:
        super().__init__(message)
        self.completed = list(completed)


class ModelSpecError(LLMSpecError):
    """A ``--model`` string no backend understands, or an option its backend does not take."""


def check_options(backend: str, options: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """Refuse options ``backend`` does not take (``-O typo=1`` was silently ignored before)."""
    problem = unknown_options_message(backend, options, allowed)
    if problem:
        raise ModelSpecError(problem)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed ``--model`` string."""

    kind: str  # "default" | "baseline" | "hf" | "openai"
    target: str  # baseline name, HF path/alias, or OpenAI model name
    url: str | None = None

    @property
    def text(self) -> str:
        if self.kind == "default":
            return "default"
        if self.kind == "openai":
            return f"openai:{self.target}@{self.url}"
        return f"{self.kind}:{self.target}"


BASELINE_NAMES = (
    "always-speak",
    "always-silent",
    "random",
    "explicit-address",
    "previous-speaker",
)
#: The options of ``baseline:random`` (the other baselines take none).
RANDOM_BASELINE_OPTIONS = ("seed", "p_speak", "delay_s")


def parse_model_spec(spec: str) -> ModelSpec:
    """Parse ``default``, ``baseline:NAME``, ``hf:PATH`` or ``openai:MODEL@URL``."""
    spec = spec.strip()
    if spec == "default":
        return ModelSpec("default", "default")
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise ModelSpecError(
            f"model spec {spec!r} is not one of: default, baseline:NAME, hf:PATH, openai:MODEL@URL"
        )
    if kind == "baseline":
        if rest not in BASELINE_NAMES:
            raise ModelSpecError(f"unknown baseline {rest!r}; known: {', '.join(BASELINE_NAMES)}")
        return ModelSpec("baseline", rest)
    if kind in ("hf", "openai"):
        try:
            llm = parse_llm_spec(spec)
        except LLMSpecError as exc:
            raise ModelSpecError(str(exc)) from exc
        return ModelSpec(llm.kind, llm.target, llm.url)
    known = ", ".join(BACKENDS.names())
    raise ModelSpecError(f"unknown model kind {kind!r} in {spec!r}; known: {known}")


@dataclass(frozen=True)
class Backend:
    """One model kind of a ``--model`` spec: its factory, the options it takes, its extra.

    The factory (``"module:function"``, imported only when a predictor is built, so
    ``polylogue --help`` never pulls in torch) is called as ``factory(spec, **options)``, or
    ``factory(**options)`` when ``takes_spec`` is false; options it does not list are refused
    before it runs, and the optional extra it needs is checked then too.
    """

    name: str
    factory: str
    #: Every option the factory takes (front ends pass a flag only to backends that take it).
    options: tuple[str, ...]
    #: The ``pip install 'polylogue[EXTRA]'`` this backend needs, and the modules it checks.
    extra: str | None = None
    extra_modules: tuple[str, ...] = ()
    takes_spec: bool = True

    def takes(self, option: str) -> bool:
        return option in self.options

    def load(self, spec: ModelSpec, options: Mapping[str, Any]) -> Predictor:
        check_options(spec.text, options, self.options)
        if self.extra is not None:
            require_extra(self.extra, *self.extra_modules, what=f"--model {spec.text}")
        factory: Callable[..., Predictor] = load_target(self.factory)
        return factory(spec, **options) if self.takes_spec else factory(**options)


#: What an LLM backend's prompt, cache and batching options are called.
_LLM_OPTIONS = ("prompt", "cache_path", "batch_size")

BACKENDS: Registry[Backend] = Registry("model kind")
for _backend in (
    Backend(
        "default",
        "polylogue.models.default_model:load_default_predictor",
        ("threshold", "model_dir", "domain", "operating_point", "point_domains"),
        takes_spec=False,
    ),
    Backend("baseline", "polylogue.models.baselines:make_baseline", RANDOM_BASELINE_OPTIONS),
    Backend(
        "hf",
        "polylogue.models.hf_local:make_hf_predictor",
        (
            *_LLM_OPTIONS,
            "adapter",
            "threshold",
            "max_new_tokens",
            "device",
            "precision",
            "prefix_cache",
        ),
        extra="hf",
        extra_modules=("torch", "transformers"),
    ),
    Backend(
        "openai",
        "polylogue.models.openai_compat:make_openai_predictor",
        (
            *_LLM_OPTIONS,
            "concurrency",
            "api_key_env",
            "temperature",
            "max_tokens",
            "top_logprobs",
            "timeout_s",
            "max_retries",
            "backoff_s",
        ),
    ),
):
    BACKENDS.register(_backend)


def load_predictor(spec: str | ModelSpec, **options: Any) -> Predictor:
    """Build a predictor from a model spec; ``options`` go to its backend's factory."""
    parsed = parse_model_spec(spec) if isinstance(spec, str) else spec
    return BACKENDS[parsed.kind].load(parsed, options)
