"""Adapters that put polylogue's live policy inside agent frameworks (optional extras).

* :mod:`polylogue.adapters.livekit` — LiveKit Agents turn detector + reply gate
  (``pip install 'polylogue[livekit]'``).
* :mod:`polylogue.adapters.pipecat` — a Pipecat frame processor that gates the LLM response
  (``pip install 'polylogue[pipecat]'``).
* :mod:`polylogue.adapters.voice` — offline voice: recognizers (Whisper through
  faster-whisper, pocketsphinx) with the roster as hints, test voices (piper, espeak-ng),
  Pipecat STT/TTS services over them, a voice meeting end to end
  (``pip install 'polylogue[voice]'``; the ``espeak-ng`` program for its voices).
"""

from __future__ import annotations

from collections.abc import Iterable

from polylogue.conversation import Participant
from polylogue.engine.deployment import Deployment
from polylogue.engine.live import LiveConversation, Policy
from polylogue.engine.model import TurnTakingModel


def roster_terms(participants: Iterable[Participant]) -> list[str]:
    """The names people call the participants (names and aliases, as written, each once): the
    key terms / custom vocabulary to give a speech recognizer, so that it writes the names the
    address rule reads. Ids are left out (a transport's id is no word anyone says)."""
    terms: list[str] = []
    for p in participants:
        for label in (p.name, *p.aliases):
            if label and label.upper() != "ALL" and label not in terms:
                terms.append(label)
    return terms


def start_live(
    agent_name: str,
    participants: Iterable[Participant] = (),
    policy: Policy | None = None,
    model: TurnTakingModel | None = None,
    deployment: Deployment | None = None,
    role: str | None = None,
    audience: str | None = None,
    roster_known: bool = True,
) -> tuple[LiveConversation, TurnTakingModel]:
    """An adapter's conversation on ``deployment`` (default: the shipped model at the product
    operating point; ``model``: that model at the product point). ``role`` (``observer``,
    ``assistant``, ``facilitator``) is resolved with the deployment's own options exactly as
    :meth:`Deployment.resolve` would at creation; ``audience``: ``group`` (default) or
    ``adaptive``. ``roster_known=False``: ``participants`` are known by name (``--alias``
    names), not present until they speak, as ``decide`` reads a transcript without a roster.
    The one place adapters build a conversation.

    Returns the model too, for adapters that start more conversations on it (probes).
    """
    if deployment is None:
        deployment = Deployment.resolve(model=model, role=role)
    elif role is not None:
        deployment = deployment.with_role(role)
    live = LiveConversation.start(
        agent_name, participants, policy or Policy(), deployment, roster_known=roster_known
    )
    if audience is not None:
        live.set_audience(audience)
    return live, deployment.model
