"""Moved to :mod:`polylogue.prompts.parsing` (answers are parsed beside the prompts)."""

from polylogue.prompts.parsing import ParsedAnswer, parse_decision

__all__ = ["ParsedAnswer", "parse_decision"]
