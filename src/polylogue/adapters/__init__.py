"""Adapters that put polylogue's live policy inside agent frameworks (optional extras).

* :mod:`polylogue.adapters.livekit` — LiveKit Agents turn detector + reply gate
  (``pip install 'polylogue[livekit]'``).
* :mod:`polylogue.adapters.pipecat` — a Pipecat frame processor that gates the LLM response
  (``pip install 'polylogue[pipecat]'``).
"""
