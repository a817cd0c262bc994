"""The ``polylogue`` command line: thin wiring of the Python API.

Each sub-module of ``polylogue.cli`` exposes ``register(app)`` and owns its commands; heavy
imports happen inside the command functions so ``polylogue --help`` stays fast.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import typer

from polylogue.cli.output import WholeHelpGroup
from polylogue.registry import Registry, load_target

app = typer.Typer(
    name="polylogue",
    help="AI participants in multi-party conversation: turn-taking and meeting Theory-of-Mind.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain Click help: it wraps at any width; rich panels cut flag names at 80 columns.
    rich_markup_mode=None,
    cls=WholeHelpGroup,  # command descriptions whole in the list, not cut at "..."
)


@dataclass(frozen=True)
class CommandModule:
    """A module of ``polylogue.cli`` whose ``register(app)`` adds its commands."""

    name: str

    @property
    def target(self) -> str:
        return f"polylogue.cli.{self.name}:register"


#: The command modules, in the order of the data flow (the registry style of corpora and
#: model backends, ``polylogue.registry``).
COMMAND_MODULES: Registry[CommandModule] = Registry("command module")
for _module in (
    "build", "addressing", "decide", "fit", "serve", "eval", "scorecard", "train", "tom",
    "annotate",
):  # fmt: skip
    COMMAND_MODULES.register(CommandModule(_module))


def _report_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """The one error handler: input errors and missing extras -> one line, exit 2; a stopped
    run -> exit 1."""

    @functools.wraps(func)  # typer reads the signature through __wrapped__
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from polylogue.errors import PATH_ERRNOS, RunStopped, user_errors

        try:
            return func(*args, **kwargs)
        except user_errors() as exc:
            print_error(exc)
            raise typer.Exit(2) from exc
        except RunStopped as exc:
            print_error(exc)
            raise typer.Exit(1) from exc
        except OSError as exc:
            if exc.errno in PATH_ERRNOS:
                print_error(_disk_error(exc))
                raise typer.Exit(2) from exc
            if exc.errno not in _DISK_ERRNOS:
                raise
            print_error(_disk_error(exc))
            raise typer.Exit(1) from exc
        except ModuleNotFoundError as exc:
            from polylogue.extras import extra_for_missing_module

            missing = extra_for_missing_module(exc)
            if missing is None:
                raise
            print_error(missing)
            raise typer.Exit(2) from exc

    return wrapper


#: A full or read-only disk: one line (the cause and the file), exit status 1. (Permission
#: denied, EACCES/EPERM, is a PermissionError: an input error, exit 2.)
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO})


def _disk_error(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


def print_error(message: object) -> None:
    """``error: <message>`` on stderr; the message is shown verbatim.

    Messages quote user text (file names, transcript lines), so they are never interpreted as
    Rich markup (``[/b]`` crashed the printer) or emoji codes (``predictions.jsonl:100:``).
    """
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True, soft_wrap=True).print(
        Text.assemble(("error:", "bold red"), " ", str(message)), highlight=False
    )


def _wrap_commands(typer_app: typer.Typer) -> None:
    for command in typer_app.registered_commands:
        if command.callback is not None:
            command.callback = _report_errors(command.callback)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _wrap_commands(group.typer_instance)


_default_show_warning = warnings.showwarning

for _entry in COMMAND_MODULES:
    load_target(_entry.target)(app)
_wrap_commands(app)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """polylogue's own warnings (e.g. a corpus part that was skipped) as one plain line."""
    if category.__module__.startswith("polylogue"):
        import sys

        print(f"warning: {message}", file=sys.stderr, flush=True)
    else:
        _default_show_warning(message, category, filename, lineno, file, line)


def main() -> None:
    """Entry point (every command reports user errors through :func:`_report_errors`).

    Output still buffered when a command returns is flushed here, so ``> /dev/full`` (or a
    disk that fills) gives one line and exit status 1 instead of a traceback at shutdown.
    """
    warnings.showwarning = _show_warning
    code: int | str | None = 0
    try:
        app()
    except SystemExit as exc:
        code = exc.code
    try:
        sys.stdout.flush()
    except OSError as exc:
        if not code:
            print_error(f"cannot write the output: {exc.strerror or exc}")
            code = 1
        # Nothing more can reach stdout: point it at /dev/null so shutdown does not try again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(code)
