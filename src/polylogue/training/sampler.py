"""Old path of :mod:`polylogue.training.lora.sampler`, kept for compatibility."""

from polylogue.training.lora.sampler import *  # noqa: F403
