"""The ``polylogue`` command line: thin wiring of the Python API.

Each sub-module of ``polylogue.cli`` exposes ``register(app)`` and owns its commands; heavy
imports happen inside the command functions so ``polylogue --help`` stays fast.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="polylogue",
    help="AI participants in multi-party conversation: turn-taking and meeting Theory-of-Mind.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

# One line per command module; each defines register(app).
_COMMAND_MODULES: tuple[str, ...] = (
    "polylogue.cli.build",
)

for _name in _COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    app()
