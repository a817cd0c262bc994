"""The MeetingToM generator kinds, in the registry style of corpora and turn-taking backends.

``polylogue tom run --model SPEC`` and :func:`load_generator` read one registry,
:data:`GENERATORS`. Each :class:`GeneratorKind` names its factory (``"module:function"``,
imported only when used), the options it takes and the optional extra it needs, so the CLI
passes a flag only to the kinds that declare it and an unknown option is refused up front.

Specs::

    chance[:SEED]              uniform random option per question (seeded per record)
    majority                   the most frequent gold label per question of the evaluated records
    majority-cv                the same, cross-fitted over AMI meeting series
    heuristic                  transcript cues, thresholds cross-fitted over AMI meeting series
    heuristic-fixed            the same cues with the hand-set thresholds (options speak_s, reply_s)
    leak                       YOU Q1 = the participant Q2's text names (the official prompt's leak)
    hf:smollm2 | hf:PATH       local Hugging Face causal LM, text only (utterance modality)
    openai:MODEL@URL           OpenAI-compatible chat server; frames sent as images, or whole
                               clips as ``video_url`` parts with ``video_mode=video``

Baselines that are fitted (majority, majority-cv, heuristic, leak's task check) read a
:class:`GeneratorFit`: the records the run answers and every record of the benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polylogue.errors import PolylogueInputError
from polylogue.extras import require_extra
from polylogue.llm.spec import parse_llm_spec
from polylogue.registry import Registry, load_target, unknown_options_message

if TYPE_CHECKING:
    from polylogue.tom.backends import ToMGenerator
    from polylogue.tom.records import ToMRecord


class GeneratorSpecError(PolylogueInputError):
    """A ``tom run --model`` spec no kind understands, or an option or fit it lacks."""


@dataclass(frozen=True)
class GeneratorFit:
    """What a baseline may be fitted on (gold included: baselines, never models, read it)."""

    #: The records the run answers.
    records: Sequence[ToMRecord] = ()
    #: Every record of the benchmark (cross-fitted baselines fit on the other folds).
    all_records: Sequence[ToMRecord] = ()
    #: "task.Q" -> majority label (majority); computed from ``records`` when None.
    majority_labels: Mapping[str, str] | None = None
    #: AMI manual annotations folder (the cross-fitted heuristic reads the transcripts).
    ami_folder: Path | None = None
    folds: int = 3


@dataclass(frozen=True)
class GeneratorKind:
    """One kind of ``--model`` spec: ``factory(target, fit, **options)`` builds the generator."""

    name: str
    factory: str
    options: tuple[str, ...] = ()
    extra: str | None = None
    extra_modules: tuple[str, ...] = ()
    #: A target after ``name:`` (``chance:7``, ``hf:PATH``): "none", "optional" or "required".
    target: str = "none"
    summary: str = ""

    def takes(self, option: str) -> bool:
        return option in self.options

    def load(
        self, spec: str, target: str, fit: GeneratorFit, options: Mapping[str, Any]
    ) -> ToMGenerator:
        problem = unknown_options_message(f"--model {spec}", options, self.options)
        if problem:
            raise GeneratorSpecError(problem)
        if self.target == "none" and target:
            raise GeneratorSpecError(f"--model {spec}: {self.name} takes no ':' part")
        if self.target == "required" and not target:
            raise GeneratorSpecError(
                f"--model {spec}: {self.name} needs a ':' part ({self.summary})"
            )
        if self.extra is not None:
            require_extra(self.extra, *self.extra_modules, what=f"--model {spec}")
        factory: Callable[..., ToMGenerator] = load_target(self.factory)
        return factory(spec, target, fit, **options)


# ------------------------------------------------------------------ factories (one per kind)


def _chance(spec: str, target: str, fit: GeneratorFit) -> ToMGenerator:
    from polylogue.tom.backends import ChanceGenerator

    try:
        seed = int(target or 0)
    except ValueError:
        raise GeneratorSpecError(
            f"--model {spec}: the seed after 'chance:' is a whole number"
        ) from None
    return ChanceGenerator(seed=seed)


def _majority(spec: str, target: str, fit: GeneratorFit) -> ToMGenerator:
    from polylogue.tom.backends import MajorityGenerator
    from polylogue.tom.scoring import majority_labels

    labels = fit.majority_labels
    if labels is None:
        if not fit.records:
            raise GeneratorSpecError(
                "the majority baseline needs the majority labels of the evaluated records"
            )
        labels = {f"{t.value}.{q}": lab for (t, q), lab in majority_labels(fit.records).items()}
    return MajorityGenerator(dict(labels))


def _all_records(spec: str, fit: GeneratorFit) -> list[ToMRecord]:
    if not fit.all_records:
        raise GeneratorSpecError(
            f"--model {spec} is cross-fitted: it needs the benchmark's records"
        )
    return list(fit.all_records)


def _majority_cv(spec: str, target: str, fit: GeneratorFit) -> ToMGenerator:
    from polylogue.tom.baselines import fit_crossfit_majority

    return fit_crossfit_majority(_all_records(spec, fit), fit.folds)


def _heuristic(spec: str, target: str, fit: GeneratorFit) -> ToMGenerator:
    from polylogue.tom.baselines import fit_crossfit_heuristic
    from polylogue.tom.transcript import AmiSessions

    if fit.ami_folder is None:
        raise GeneratorSpecError(f"--model {spec} reads the AMI transcripts: give the AMI folder")
    records = _all_records(spec, fit)
    return fit_crossfit_heuristic(records, AmiSessions(fit.ami_folder), fit.folds)


def _heuristic_fixed(spec: str, target: str, fit: GeneratorFit, **options: Any) -> ToMGenerator:
    from polylogue.tom.baselines import FixedHeuristic

    return FixedHeuristic(**options)


def _leak(spec: str, target: str, fit: GeneratorFit) -> ToMGenerator:
    from polylogue.tom.baselines import LeakGenerator

    bad = sorted({r.task.value for r in fit.records} - {"you"})
    if bad:
        raise GeneratorSpecError(f"the leak baseline answers YOU only (not {bad}): --tasks you")
    return LeakGenerator()


def _hf(spec: str, target: str, fit: GeneratorFit, **options: Any) -> ToMGenerator:
    from polylogue.tom.backends import HFTextGenerator

    return HFTextGenerator(model=parse_llm_spec(spec, default_hf="smollm2").target, **options)


def _openai(spec: str, target: str, fit: GeneratorFit, **options: Any) -> ToMGenerator:
    from polylogue.tom.backends import OpenAIChatGenerator

    llm = parse_llm_spec(spec)
    assert llm.url is not None
    return OpenAIChatGenerator(model=llm.target, base_url=llm.url, **options)


_HERE = "polylogue.tom.generators"

GENERATORS: Registry[GeneratorKind] = Registry("MeetingToM model kind")
for _kind in (
    GeneratorKind("chance", f"{_HERE}:_chance", target="optional", summary="chance[:SEED]"),
    GeneratorKind("majority", f"{_HERE}:_majority"),
    GeneratorKind("majority-cv", f"{_HERE}:_majority_cv"),
    GeneratorKind("heuristic", f"{_HERE}:_heuristic", summary="heuristic (cross-fitted)"),
    GeneratorKind("heuristic-fixed", f"{_HERE}:_heuristic_fixed", ("speak_s", "reply_s")),
    GeneratorKind("leak", f"{_HERE}:_leak", summary="leak (copy Q2's subject)"),
    GeneratorKind(
        "hf",
        f"{_HERE}:_hf",
        ("mode", "max_new_tokens", "max_prompt_tokens", "device", "threads", "cache_path"),
        extra="hf",
        extra_modules=("torch", "transformers"),
        target="optional",
        summary="hf:smollm2",
    ),
    GeneratorKind(
        "openai",
        f"{_HERE}:_openai",
        (
            "api_key_env",
            "temperature",
            "max_tokens",
            "timeout_s",
            "max_retries",
            "backoff_s",
            "video_mode",
            "cache_path",
        ),
        target="required",
        summary="openai:M@URL",
    ),
):
    GENERATORS.register(_kind)


def generator_kind(spec: str) -> tuple[GeneratorKind, str]:
    """The kind of ``spec`` and the part after its ``:``."""
    name, _, target = spec.strip().partition(":")
    if name not in GENERATORS:
        known = ", ".join(k.summary or k.name for k in GENERATORS)
        raise GeneratorSpecError(f"unknown model spec {spec!r}; known: {known}")
    return GENERATORS[name], target


def load_generator(
    spec: str,
    majority_labels: Mapping[str, str] | None = None,
    *,
    fit: GeneratorFit | None = None,
    **options: Any,
) -> ToMGenerator:
    """Build a generator from a spec string; ``options`` must be ones its kind declares."""
    kind, target = generator_kind(spec)
    if fit is None:
        fit = GeneratorFit(majority_labels=majority_labels)
    elif majority_labels is not None:
        fit = replace(fit, majority_labels=majority_labels)
    return kind.load(spec, target, fit, options)


#: Kinds by name, for help texts (``polylogue tom run --help``).
KIND_SUMMARY = ", ".join(k.summary or k.name for k in GENERATORS)

__all__ = [
    "GENERATORS",
    "KIND_SUMMARY",
    "GeneratorFit",
    "GeneratorKind",
    "GeneratorSpecError",
    "generator_kind",
    "load_generator",
]
