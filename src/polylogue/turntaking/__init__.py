"""The context-aware turn-taking benchmark: decision points, categories, splits, datasets."""

from polylogue.turntaking.types import (
    CATEGORIES,
    Category,
    Decision,
    DecisionGold,
    DecisionInput,
    DecisionPoint,
)

__all__ = [
    "CATEGORIES",
    "Category",
    "Decision",
    "DecisionGold",
    "DecisionInput",
    "DecisionPoint",
]
