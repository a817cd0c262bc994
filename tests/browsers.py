"""The annotation app for browser and HTTP tests: a real uvicorn server on a free loopback port,
and Debian's Chromium for Playwright (shared by the annotation and MeetingToM build tests)."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}


def require_chromium() -> Any:
    """Skip the calling test module without Chromium (fail in CI); Playwright's sync API."""
    if not Path(CHROMIUM).exists():
        # scripts/setup.sh installs it; in CI a missing browser is a set-up failure, not a skip.
        if os.environ.get("CI"):
            pytest.fail(
                "Debian chromium is missing although CI ran scripts/setup.sh", pytrace=False
            )
        pytest.skip(
            "Debian chromium is not installed (apt-get install -y chromium)",
            allow_module_level=True,
        )
    return pytest.importorskip("playwright.sync_api")


def launch_chromium(playwright: Any) -> Any:
    """A headless Debian Chromium from a started ``sync_playwright()``."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


@contextmanager
def serve_app(make_app: Callable[[int], Any]) -> Iterator[tuple[str, int]]:
    """uvicorn serving ``make_app(port)`` on a free loopback port; yields (base URL, port).

    The socket is bound here (port 0) and handed to uvicorn still open, so no other process
    can take the port between choosing it and listening on it.
    """
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(make_app(port), log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def serve_study(store: Any) -> Any:
    """:func:`serve_app` for the study app over ``store`` (no Host restriction)."""
    from polylogue.annotate.app import create_study_app

    return serve_app(lambda port: create_study_app(store))


def new_study(
    path: Path, name: str, kind: Any, src: Any, plan: Any, annotators: list[str], **options: Any
) -> tuple[Any, str, dict[str, str], Any]:
    """A study over ``src`` (a ``benchmark_items``/``meetingtom_items`` result) in a new store
    at ``path``: (store, study id, keys by annotator, sampling report)."""
    from polylogue.annotate.store import AnnotationStore
    from polylogue.annotate.study import create_study

    store = AnnotationStore(path)
    study, keys, report = create_study(
        store,
        name,
        kind,
        src.items,
        plan,
        annotators,
        source=src.source,
        finish=src.finish,
        **options,
    )
    return store, study, keys, report
