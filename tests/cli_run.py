"""Run the ``polylogue`` command inside the test process: the console script's own ``main``
(argument parsing, the one error handler, the warning printer, the final flush) on captured
stdin/stdout/stderr, with the result shaped like ``subprocess.run``'s.

A fresh interpreter per call costs a second or more of imports and model loading and proves
nothing about a command's behaviour; tests about the process itself (signals, a pipe read as
it streams, start-up) keep a real one (``polylogue.serve.local.POLYLOGUE``), and every file
that uses this runner keeps at least one real-process run of the same command family.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import traceback
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from click.testing import CliRunner


def run_polylogue(
    args: Sequence[str],
    stdin: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``polylogue ARGS`` in this process; ``returncode`` is what the process would exit with."""
    from polylogue.cli import main

    data = stdin.encode() if isinstance(stdin, str) else stdin
    argv = sys.argv
    code: int | str | None = 0
    with contextlib.ExitStack() as stack:
        # main() installs its warning printer; restore it afterwards, and start from a new
        # process's filters and an empty once-per-place registry (catch_warnings resets it).
        stack.enter_context(warnings.catch_warnings())
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning):
            warnings.simplefilter("ignore", category)
        warnings.simplefilter("ignore", ResourceWarning)
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        out, err, _ = stack.enter_context(CliRunner().isolation(input=data, env=env))
        sys.argv = ["polylogue", *args]
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        except Exception:  # what an interpreter prints for an uncaught error, and its status
            traceback.print_exc()
            code = 1
        finally:
            sys.argv = argv
            sys.stdout.flush()
            sys.stderr.flush()
        stdout, stderr = out.getvalue(), err.getvalue()
    if code is None:
        returncode = 0
    elif isinstance(code, int):
        returncode = code
    else:  # sys.exit("message"): printed, exit status 1
        stderr += f"{code}\n".encode()
        returncode = 1
    return subprocess.CompletedProcess(["polylogue", *args], returncode, stdout, stderr)


def polylogue_process(
    args: Sequence[str],
    stdin: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 300.0,
) -> subprocess.CompletedProcess[bytes]:
    """``polylogue ARGS`` as a real process (the installed console script), stdin piped."""
    from polylogue.serve.local import POLYLOGUE

    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run(
        [POLYLOGUE, *args],
        input=data,
        capture_output=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
    )


def located_error(proc: subprocess.CompletedProcess[bytes], *fragments: str) -> str:
    """A bad-input exit: status 2, no traceback, one closing ``error:`` line holding every
    fragment (the file, record or field it names). Returns stderr."""
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("error: "), err
    for frag in fragments:
        assert frag in err, (frag, err)
    return err
