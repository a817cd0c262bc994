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
    pretty_exceptions_enable=False,
)

# One line per command module, in the order of the data flow; each defines register(app).
_COMMAND_MODULES: tuple[str, ...] = (
    "polylogue.cli.build",
    "polylogue.cli.addressing",
    "polylogue.cli.decide",
    "polylogue.cli.eval",
    "polylogue.cli.train",
    "polylogue.cli.tom",
    "polylogue.cli.annotate",
)

for _name in _COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    """Entry point: user-facing errors (bad input files, missing data) print one clear line."""
    import sys

    from polylogue.errors import user_errors

    try:
        app()
    except user_errors() as exc:
        from rich.console import Console

        Console(stderr=True, soft_wrap=True).print(
            f"[bold red]error:[/bold red] {exc}", markup=True, highlight=False
        )
        sys.exit(2)
