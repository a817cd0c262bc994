"""Running the ``polylogue`` CLI from a benchmark script (shared by `domain_default.py`)."""

from __future__ import annotations

import os
import subprocess
import sys


def polylogue(*args: str, stdin: str | None = None) -> str:
    """``polylogue ARGS`` with this interpreter; its stdout, or exit naming the failed command.

    The child runs with ``PYTHONHASHSEED=0`` so that two runs of the same code agree byte for
    byte even where an output is built from a set."""
    proc = subprocess.run(
        [sys.executable, "-m", "polylogue.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    if proc.returncode:
        raise SystemExit(f"polylogue {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout
