"""Old path of :mod:`polylogue.training.lora.teacher_prompts`, kept for compatibility."""

from polylogue.training.lora.teacher_prompts import *  # noqa: F403
