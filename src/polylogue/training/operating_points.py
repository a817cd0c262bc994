"""Old path of :mod:`polylogue.training.engine_models.operating_points`, kept for compatibility."""

from polylogue.training.engine_models.operating_points import *  # noqa: F403
