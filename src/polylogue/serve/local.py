"""Throw-away local servers on loopback: `polylogue serve` and Debian's ``redis-server``.

Used by the tests (``tests/servers.py``) and ``benchmarks/serve_load.py``, which both need a
real service process and a real Redis; they live in the package so both import one launcher
without path tricks. Each is a context manager that picks a free port, waits until the server
answers, yields its URL and stops the process on exit.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

POLYLOGUE = str(Path(sys.executable).parent / "polylogue")
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class LocalServerError(RuntimeError):
    """A local server that did not start (missing binary, crashed, never answered)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@contextmanager
def polylogue_serve(
    *args: str,
    token: str | None = None,
    pids: list[int] | None = None,
    timeout_s: float = 60.0,
    port: int | None = None,
    output: Path | None = None,
) -> Iterator[str]:
    """``polylogue serve ARGS`` on a free loopback port (or ``port``); yields its base URL.

    ``POLYLOGUE_SERVE_TOKEN`` from the environment is not passed on (only ``token``). The
    process id is appended to ``pids`` when given (to read its memory, or to kill it).
    ``output``: a file that receives the server's stdout and stderr (appended).
    """
    port = port or free_port()
    env = dict(os.environ)
    env.pop("POLYLOGUE_SERVE_TOKEN", None)
    cmd = [POLYLOGUE, "serve", "--port", str(port), *args]
    if token:
        cmd += ["--token", token]
    log = open(output, "ab") if output is not None else None  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, env=env, stdout=log or subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read().decode() if proc.stdout else ""
                if output is not None:
                    out = output.read_text(errors="replace")
                raise LocalServerError(f"polylogue serve exited: {out}")
            try:
                if httpx.get(f"{url}/healthz", headers=headers, timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise LocalServerError(f"polylogue serve did not answer on {url}")
            time.sleep(0.1)
        if pids is not None:
            pids.append(proc.pid)
        yield url
    finally:
        _stop(proc)
        if log is not None:
            log.close()


def redis_available() -> bool:
    return Path(REDIS_SERVER).exists()


@contextmanager
def redis_server(
    workdir: Path,
    pids: list[int] | None = None,
    port: int | None = None,
    args: tuple[str, ...] = (),
) -> Iterator[str]:
    """A throw-away ``redis-server`` on a free loopback port (or ``port``), without persistence.

    ``workdir`` is its working directory (nothing is written there with persistence off).
    ``args``: more options, after the defaults (``--appendonly yes`` turns persistence on).
    Yields ``redis://127.0.0.1:PORT/0``.
    """
    if not redis_available():
        raise LocalServerError(
            f"redis-server not found at {REDIS_SERVER} (apt-get install -y redis-server)"
        )
    port = port or free_port()
    cmd = [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    cmd += ["--appendonly", "no", "--dir", str(workdir), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None:
                    raise LocalServerError("redis-server exited at start") from None
                time.sleep(0.05)
        else:
            raise LocalServerError(f"redis-server did not listen on port {port}")
        if pids is not None:
            pids.append(proc.pid)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(proc)


class NoTmpfsError(LocalServerError):
    """A tmpfs cannot be mounted here (not root, or no mount permission in a container)."""


@contextmanager
def small_tmpfs(path: Path, size_kb: int) -> Iterator[Path]:
    """A tmpfs of ``size_kb`` KiB mounted on ``path`` (created), unmounted on exit: a disk
    that really fills (ENOSPC), for the full-disk tests and ``benchmarks/serve_soak.py``.

    Needs root (or CAP_SYS_ADMIN); raises :class:`NoTmpfsError` with the reason otherwise.
    """
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        raise NoTmpfsError("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise NoTmpfsError(f"mount -t tmpfs failed: {done.stderr.strip()}")
    try:
        yield path
    finally:
        # Lazy: a server still holding a file there must not keep the mount alive.
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill_disk(folder: Path) -> Path:
    """Write a file in ``folder`` until its filesystem is full (ENOSPC); returns the file
    (delete it to free the space)."""
    filler = folder / "filler.bin"
    with open(filler, "ab", buffering=0) as f:  # unbuffered: nothing left to flush later
        for size in (1 << 20, 65536, 4096, 512, 1):
            try:
                while f.write(b"\0" * size):
                    pass
            except OSError:
                pass  # this size no longer fits: try a smaller one
    return filler
