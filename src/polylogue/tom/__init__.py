"""MeetingToM harness: records, transcript windows, media, prompt variants, runs and scoring.

Data flows one way: release files -> :mod:`records` (items without gold + gold) ->
:mod:`transcript` / :mod:`media` -> :mod:`prompts` -> :mod:`backends` via :mod:`runner` ->
:mod:`scoring` (official and strict) -> :mod:`report`. See ``docs/meetingtom.md``.
"""
