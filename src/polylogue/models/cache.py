"""Moved to :mod:`polylogue.llm.cache` (kept for imports written before the move)."""

from polylogue.llm.cache import ResponseCache, request_key

__all__ = ["ResponseCache", "request_key"]
