"""LoRA fine-tuning of turn-taking models (the paper's §4.2 method) and reasoning distillation.

Heavy dependencies (torch, transformers, peft, trl, accelerate, datasets) are imported inside
the functions that need them, so importing the configuration stays cheap.
"""
