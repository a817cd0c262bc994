"""Old path of :mod:`polylogue.training.engine_models.text_component`, kept for compatibility.

``python -m polylogue.training.text_component`` still runs it.
"""

from polylogue.training.engine_models.text_component import *  # noqa: F403
from polylogue.training.engine_models.text_component import main

if __name__ == "__main__":
    main()
