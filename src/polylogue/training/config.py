"""Old path of :mod:`polylogue.training.lora.config`, kept for compatibility."""

from polylogue.training.lora.config import *  # noqa: F403
