"""``python -m polylogue.training ARGS`` = ``polylogue train ARGS``.

The entry point for ``accelerate launch -m polylogue.training ...`` (multi-GPU runs).
"""

from __future__ import annotations

import typer

from polylogue.cli.train import train_command


def main() -> None:
    typer.run(train_command)


if __name__ == "__main__":
    main()
