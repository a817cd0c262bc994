"""polylogue: AI participants in multi-party conversation.

Data flows one way: corpora -> conversations -> decision points/records -> predictions ->
metrics -> reports. Heavy dependencies are imported inside the modules that need them.
"""

from polylogue.conversation import Conversation, Participant, Utterance

__version__ = "0.1.0"
__all__ = ["Conversation", "Participant", "Utterance", "__version__"]
