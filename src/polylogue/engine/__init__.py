"""Real-time turn-taking decisions: streaming conversation state, features, the shipped model."""

from polylogue.engine.engine import EngineDecision, TurnTakingEngine

__all__ = ["EngineDecision", "TurnTakingEngine"]
