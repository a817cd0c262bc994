"""Prompt templates and the builder that fills them (shared by evaluation and training)."""

from polylogue.prompts.builder import (
    ChatMessage,
    PromptOptions,
    PromptTemplates,
    answer_strings,
    answer_text,
    approx_token_count,
    build_messages,
    load_templates,
    prompt_fingerprint,
)

__all__ = [
    "ChatMessage",
    "PromptOptions",
    "PromptTemplates",
    "answer_strings",
    "answer_text",
    "approx_token_count",
    "build_messages",
    "load_templates",
    "prompt_fingerprint",
]
