"""Old path of :mod:`polylogue.training.engine_models.punctuation`, kept for compatibility.

``python -m polylogue.training.punctuation`` still runs it.
"""

from polylogue.training.engine_models.punctuation import *  # noqa: F403
from polylogue.training.engine_models.punctuation import main

if __name__ == "__main__":
    main()
