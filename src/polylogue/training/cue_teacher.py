"""Old path of :mod:`polylogue.training.lora.cue_teacher`, kept for compatibility."""

from polylogue.training.lora.cue_teacher import *  # noqa: F403
