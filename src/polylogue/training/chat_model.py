"""Old path of :mod:`polylogue.training.engine_models.chat_model`, kept for compatibility."""

from polylogue.training.engine_models.chat_model import *  # noqa: F403
