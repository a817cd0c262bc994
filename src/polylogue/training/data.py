"""Old path of :mod:`polylogue.training.lora.data`, kept for compatibility."""

from polylogue.training.lora.data import *  # noqa: F403
