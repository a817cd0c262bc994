"""Optional extras: which ``pip install 'polylogue[EXTRA]'`` a command needs, checked up front.

Commands call :func:`require_extra` before importing a heavy stack, so a core install gets one
line naming what to install (exit 2 in the CLI) instead of a ``ModuleNotFoundError`` traceback.
The CLI's error handler also turns a stray ``ModuleNotFoundError`` for a module listed in
:data:`MODULE_EXTRAS` into the same message.
"""

from __future__ import annotations

import importlib.util

from polylogue.errors import PolylogueInputError

#: top-level module -> the extra of pyproject.toml that installs it
MODULE_EXTRAS: dict[str, str] = {
    "torch": "hf",
    "transformers": "hf",
    "peft": "hf",
    "gguf": "hf",
    "accelerate": "hf",
    "safetensors": "hf",
    "trl": "train",
    "datasets": "train",
    "yaml": "train",
    "lightgbm": "train",
    "imageio_ffmpeg": "video",
    "starlette": "serve",
    "uvicorn": "serve",
    "websockets": "serve",
    "redis": "serve",
    "livekit": "livekit",
    "pipecat": "pipecat",
    "fastapi": "annotate",
    "statsmodels": "annotate",
}


class MissingExtra(PolylogueInputError):
    """A command needs an optional extra that is not installed."""

    def __init__(self, extra: str, module: str, what: str = "this command") -> None:
        self.extra = extra
        self.module = module
        super().__init__(
            f"{what} needs the {extra!r} extra ({module} is not installed): "
            f"pip install 'polylogue[{extra}]'"
        )


def missing_modules(*modules: str) -> list[str]:
    """The names among ``modules`` that cannot be imported here (found without importing)."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def require_extra(extra: str, *modules: str, what: str = "this command") -> None:
    """Raise :class:`MissingExtra` unless every module of ``modules`` is importable."""
    missing = missing_modules(*modules)
    if missing:
        raise MissingExtra(extra, missing[0], what)


def extra_for_missing_module(exc: ModuleNotFoundError) -> MissingExtra | None:
    """The :class:`MissingExtra` behind a ``ModuleNotFoundError``, if its module is an extra's."""
    top = (exc.name or "").split(".")[0]
    extra = MODULE_EXTRAS.get(top)
    return None if extra is None else MissingExtra(extra, top)
