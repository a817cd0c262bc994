"""Old path of :mod:`polylogue.training.engine_models.bargein`, kept for compatibility."""

from polylogue.training.engine_models.bargein import *  # noqa: F403
