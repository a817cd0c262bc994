"""Old path of :mod:`polylogue.training.engine_models.default_model`, kept for compatibility."""

from polylogue.training.engine_models.default_model import *  # noqa: F403
