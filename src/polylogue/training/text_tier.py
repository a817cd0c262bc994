"""Old path of :mod:`polylogue.training.engine_models.text_tier`, kept for compatibility."""

from polylogue.training.engine_models.text_tier import *  # noqa: F403
