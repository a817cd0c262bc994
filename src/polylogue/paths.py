"""Where polylogue finds the shared corpora.

Order: the ``POLYLOGUE_DATA`` environment variable, then a ``shared/data`` folder beside the
current directory or any of its parents (the project's checkout keeps ``../shared`` beside it).
"""

from __future__ import annotations

import os
from pathlib import Path

from polylogue.errors import PolylogueInputError


class DataRootNotFound(PolylogueInputError, FileNotFoundError):
    pass


def data_root(explicit: str | Path | None = None) -> Path:
    if explicit is not None:
        p = Path(explicit)
        if not p.is_dir():
            raise DataRootNotFound(f"data folder {p} does not exist")
        return p
    env = os.environ.get("POLYLOGUE_DATA")
    if env:
        p = Path(env)
        if not p.is_dir():
            raise DataRootNotFound(f"POLYLOGUE_DATA={env} is not a folder")
        return p
    here = Path.cwd().resolve()
    for base in (here, *here.parents):
        for cand in (base / "shared" / "data", base.parent / "shared" / "data"):
            if cand.is_dir():
                return cand
    raise DataRootNotFound(
        "could not find the shared corpora: set POLYLOGUE_DATA or pass --data-root "
        "(expected a folder 'shared/data' beside the project)"
    )


def corpus_dir(name: str, explicit_root: str | Path | None = None) -> Path:
    p = data_root(explicit_root) / name
    if not p.is_dir():
        raise DataRootNotFound(f"corpus folder {p} does not exist")
    return p


def user_cache_dir() -> Path:
    """Where polylogue keeps what it can rebuild (benchmarks a command built for itself).

    ``POLYLOGUE_CACHE``, else ``$XDG_CACHE_HOME/polylogue``, else ``~/.cache/polylogue``; never
    inside the shared corpora, which stay read-only.
    """
    env = os.environ.get("POLYLOGUE_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "polylogue"
