"""The context-aware turn-taking benchmark: decision points, categories, splits, datasets."""

from polylogue.turntaking.types import (
    CATEGORIES,
    OUTCOMES,
    PAPER_CATEGORIES,
    Category,
    Decision,
    DecisionGold,
    DecisionInput,
    DecisionPoint,
    Outcome,
)

__all__ = [
    "CATEGORIES",
    "OUTCOMES",
    "PAPER_CATEGORIES",
    "Category",
    "Decision",
    "DecisionGold",
    "DecisionInput",
    "DecisionPoint",
    "Outcome",
]
