"""Adapters that put polylogue's live policy inside agent frameworks (optional extras).

* :mod:`polylogue.adapters.livekit` — LiveKit Agents turn detector + reply gate
  (``pip install 'polylogue[livekit]'``).
* :mod:`polylogue.adapters.pipecat` — a Pipecat frame processor that gates the LLM response
  (``pip install 'polylogue[pipecat]'``).
"""

from __future__ import annotations

from collections.abc import Iterable

from polylogue.conversation import Participant
from polylogue.engine.deployment import Deployment
from polylogue.engine.live import LiveConversation, Policy
from polylogue.engine.model import TurnTakingModel


def start_live(
    agent_name: str,
    participants: Iterable[Participant] = (),
    policy: Policy | None = None,
    model: TurnTakingModel | None = None,
    deployment: Deployment | None = None,
    role: str | None = None,
    audience: str | None = None,
) -> tuple[LiveConversation, TurnTakingModel]:
    """An adapter's conversation on ``deployment`` (default: the shipped model at the product
    operating point; ``model``: that model at the product point). ``role`` (``observer``,
    ``assistant``, ``facilitator``) is resolved with the deployment's own options exactly as
    :meth:`Deployment.resolve` would at creation; ``audience``: ``group`` (default) or
    ``adaptive``. The one place adapters build a conversation.

    Returns the model too, for adapters that start more conversations on it (probes).
    """
    if deployment is None:
        deployment = Deployment.resolve(model=model, role=role)
    elif role is not None:
        deployment = deployment.with_role(role)
    live = LiveConversation.start(agent_name, participants, policy or Policy(), deployment)
    if audience is not None:
        live.set_audience(audience)
    return live, deployment.model
