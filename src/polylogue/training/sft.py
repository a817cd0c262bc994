"""Old path of :mod:`polylogue.training.lora.sft`, kept for compatibility."""

from polylogue.training.lora.sft import *  # noqa: F403
