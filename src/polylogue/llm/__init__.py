"""The task-agnostic LLM layer shared by turn-taking and MeetingToM.

Nothing here knows about decision points, ToM questions or prompts: a task builds chat messages,
calls one of two primitives and parses the reply beside its own prompts.

* :mod:`polylogue.llm.base`   the primitives ``generate(messages, config)`` and
  ``score(messages, continuations, options)`` and the types they exchange;
* :mod:`polylogue.llm.spec`   one parser for ``hf:PATH_OR_ALIAS`` and ``openai:MODEL@URL``;
* :mod:`polylogue.llm.hf`     one Hugging Face loader (aliases, GGUF conversion, LoRA adapters)
  and :class:`~polylogue.llm.hf.HFCausalLM`, a local client with both primitives (summed
  log-probabilities of continuations, with the prompt's KV cache shared between them);
* :mod:`polylogue.llm.openai` one OpenAI-compatible chat client: async, bounded concurrency,
  retries honouring ``Retry-After``, ``top_logprobs``;
* :mod:`polylogue.llm.cache`  :class:`~polylogue.llm.cache.CachedLM`, the one deterministic
  response cache (SQLite) that wraps any client.

Heavy libraries (torch, transformers, httpx) are imported inside the modules that need them, so
importing :mod:`polylogue.llm` costs nothing.
"""

from polylogue.llm.spec import LLMSpec, LLMSpecError, parse_llm_spec

__all__ = ["LLMSpec", "LLMSpecError", "parse_llm_spec"]
