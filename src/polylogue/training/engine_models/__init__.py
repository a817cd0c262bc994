"""Trainers of the CPU models the turn-taking engine (:mod:`polylogue.engine`) runs.

The default and chat models (``polylogue train-default``) and their operating points, the
barge-in and final-punctuation models, and the shelved learned text tier (tried, not shipped).
"""
