"""Bad input gives a located one-line error (exit 2 in the CLI), never a traceback or wrong data.

Each test reproduces one finding of the fault/bad-input probe (issue 18) on a damaged copy of a
real shared file, or on the exact input the probe used.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

POLYLOGUE = [str(Path(sys.executable).parent / "polylogue")]


def _run(args: list[str], stdin: str | bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "400"}  # no wrapping of the one-line error
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run(
        [*POLYLOGUE, *args], input=data, capture_output=True, timeout=120, env=env
    )


def _assert_located(proc: subprocess.CompletedProcess[bytes], *fragments: str) -> str:
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err
    assert "Traceback" not in err, err
    assert err.startswith("error: "), err
    for frag in fragments:
        assert frag in err, (frag, err)
    return err


# ----------------------------------------------------------------------------- 1. error printer


def test_error_printer_shows_markup_in_user_text_verbatim() -> None:
    proc = _run(["decide", "-", "--as", "Dave"], "Alice: hi\nsee [/b] here\n")
    _assert_located(proc, "<stdin>:line 2", "'see [/b] here'")


def test_error_printer_shows_bracketed_file_name_verbatim(tmp_path: Path) -> None:
    missing = tmp_path / "notes[/draft].txt"
    proc = _run(["decide", str(missing), "--as", "A"])
    _assert_located(proc, "notes[/draft].txt")


def test_error_printer_does_not_turn_colon_codes_into_emoji(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from polylogue.cli import print_error

    print_error("predictions.jsonl:100: bad [bold]record[/bold] :smile:")
    err = capsys.readouterr().err
    assert "predictions.jsonl:100: bad [bold]record[/bold] :smile:" in err
