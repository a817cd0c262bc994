"""One parser for the LLM part of a model spec: ``hf:PATH_OR_ALIAS`` and ``openai:MODEL@URL``.

Task registries (``polylogue eval --model``, ``polylogue tom run --model``) add their own
baselines in front of it and hand every ``hf:``/``openai:`` string here.
"""

from __future__ import annotations

from dataclasses import dataclass

from polylogue.errors import PolylogueInputError

LLM_KINDS = ("hf", "openai")


class LLMSpecError(PolylogueInputError):
    """A model spec that is not ``hf:PATH_OR_ALIAS`` or ``openai:MODEL@URL``."""


@dataclass(frozen=True, slots=True)
class LLMSpec:
    kind: str  # "hf" | "openai"
    #: HF path or alias, or the OpenAI model name.
    target: str
    #: Base URL of an OpenAI-compatible server (``.../v1``, no trailing slash).
    url: str | None = None

    @property
    def text(self) -> str:
        return f"openai:{self.target}@{self.url}" if self.kind == "openai" else f"hf:{self.target}"


def parse_llm_spec(spec: str, *, default_hf: str | None = None) -> LLMSpec:
    """Parse ``hf:PATH`` or ``openai:MODEL@URL``; ``default_hf`` fills an empty ``hf:``."""
    spec = spec.strip()
    kind, sep, rest = spec.partition(":")
    if kind == "hf" and sep:
        target = rest or default_hf
        if not target:
            raise LLMSpecError(f"model spec {spec!r}: hf: needs a path or alias (hf:smollm2)")
        return LLMSpec("hf", target)
    if kind == "openai" and sep:
        # The URL itself contains ':' so split on the last '@' only.
        model, at, url = rest.rpartition("@")
        if not at or not model or not url.startswith(("http://", "https://")):
            raise LLMSpecError(
                f"OpenAI spec {spec!r} must look like openai:MODEL@http://host:port/v1"
            )
        return LLMSpec("openai", model, url.rstrip("/"))
    raise LLMSpecError(f"model spec {spec!r} is not hf:PATH_OR_ALIAS or openai:MODEL@URL")
