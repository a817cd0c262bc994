"""Training, in two sub-packages named for their concepts.

* :mod:`polylogue.training.lora`: LoRA fine-tuning of turn-taking models (the paper's §4.2
  method) and reasoning distillation.
* :mod:`polylogue.training.engine_models`: trainers of the CPU models the turn-taking engine
  runs (default and chat models, operating points, barge-in, punctuation, the text tier).
"""
