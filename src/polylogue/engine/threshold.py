"""Choosing a decision threshold: interruptions (speaking out of turn) vs missed turns."""

from __future__ import annotations

from typing import Any

import numpy as np


def sweep_thresholds(
    y: np.ndarray,
    p: np.ndarray,
    interruption_cost: float = 1.0,
    max_interruption_rate: float | None = None,
    grid: np.ndarray | None = None,
) -> tuple[list[dict[str, Any]], float]:
    """Rates at each threshold and the chosen one.

    interruption rate = P(model speaks | should stay silent); missed-turn rate =
    P(model silent | should speak). Rates are per class, so the choice does not depend on the
    class ratio of the tuning set. Without ``max_interruption_rate`` the threshold minimises
    ``interruption_cost * interruption_rate + missed_turn_rate``; with it, the lowest threshold
    (fewest missed turns) whose interruption rate stays at or below the limit.
    """
    y = np.asarray(y).astype(bool)
    p = np.asarray(p, dtype=np.float64)
    if not y.any() or y.all():
        raise ValueError("tuning needs both SPEAK and SILENT points")
    grid = np.round(np.arange(0.02, 0.99, 0.02), 2) if grid is None else grid
    rows: list[dict[str, Any]] = []
    for t in grid:
        speak = p >= t
        interruption = float(speak[~y].mean())
        missed = float((~speak[y]).mean())
        rows.append(
            {
                "threshold": float(t),
                "interruption_rate": interruption,
                "missed_turn_rate": missed,
                "balanced_accuracy": 1.0 - (interruption + missed) / 2,
                "cost": interruption_cost * interruption + missed,
            }
        )
    if max_interruption_rate is not None:
        ok = [r for r in rows if r["interruption_rate"] <= max_interruption_rate]
        chosen = ok[0]["threshold"] if ok else rows[-1]["threshold"]
    else:
        chosen = min(rows, key=lambda r: (r["cost"], r["threshold"]))["threshold"]
    return rows, float(chosen)
