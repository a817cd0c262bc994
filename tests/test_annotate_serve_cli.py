"""``polylogue annotate serve`` prints the address it really listens on (``--port 0`` too)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from polylogue.annotate.store import AnnotationStore

POLYLOGUE = [str(Path(sys.executable).parent / "polylogue")]


def test_serve_prints_the_real_port_and_answers_there(tmp_path: Path) -> None:
    db = tmp_path / "study.sqlite"
    AnnotationStore(db)
    env = {**os.environ, "COLUMNS": "300"}
    proc = subprocess.Popen(
        [*POLYLOGUE, "annotate", "serve", "--db", str(db), "--port", "0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        m = re.search(r"on (http://127\.0\.0\.1:(\d+)/)", line)
        assert m, line
        assert int(m[2]) != 0
        # the socket is bound before the line is printed; uvicorn answers once it started
        for _ in range(100):
            try:
                r = httpx.get(m[1] + "static/does-not-exist", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise AssertionError("nothing answers at the printed address")
        assert r.status_code in (403, 404)
    finally:
        proc.terminate()
        proc.wait(10)


def test_port_in_use_is_a_one_line_error(tmp_path: Path) -> None:
    db = tmp_path / "study.sqlite"
    AnnotationStore(db)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [*POLYLOGUE, "annotate", "serve", "--db", str(db), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "300"},
        )
    assert proc.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr and "Traceback" not in proc.stderr
