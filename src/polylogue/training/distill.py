"""Old path of :mod:`polylogue.training.lora.distill`, kept for compatibility."""

from polylogue.training.lora.distill import *  # noqa: F403
