"""Small real benchmarks for tests, built once per test run and copied where a test asks.

A build is deterministic, so a copy is what a fresh build would write; copying (milliseconds)
instead of rebuilding (seconds each) keeps every test's folder its own to write next to.

The processes of one run (pytest-xdist's workers) share the builds: the first one that needs a
key builds it under a lock in the run's folder (``$POLYLOGUE_TEST_SHARED``, made and removed
by conftest.py in the controlling process), the others wait for it and copy.
"""

from __future__ import annotations

import atexit
import fcntl
import itertools
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

_BUILT: dict[str, Path] = {}


#: The run's folder for builds shared by its processes (set by conftest.py).
SHARED_ENV = "POLYLOGUE_TEST_SHARED"


def _build_shared(root: Path, key: str, build: Callable[[Path], Path]) -> Path:
    """``build`` for ``key`` once across this run's workers (a lock file per key)."""
    out = root / key
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (out / "manifest.json").is_file():
            shutil.rmtree(out, ignore_errors=True)  # what a failed build left
            built = build(out)
            assert built == out, (built, out)
    return out


def cached_benchmark(folder: Path, key: str, build: Callable[[Path], Path]) -> Path:
    """``build(path)`` (which saves a benchmark at ``path``) once per run for ``key``;
    a copy of it at ``folder`` (left as it is when it already holds a benchmark)."""
    if (folder / "manifest.json").is_file():
        return folder
    built = _BUILT.get(key)
    if built is None:
        shared = os.environ.get(SHARED_ENV)
        if shared:
            built = _build_shared(Path(shared), key, build)
        else:  # imported outside this suite's conftest.py
            root = Path(tempfile.mkdtemp(prefix="polylogue-test-bench-"))
            atexit.register(shutil.rmtree, root, True)
            built = build(root / "bench")
        _BUILT[key] = built
    shutil.copytree(built, folder, dirs_exist_ok=True)  # an empty folder (mktemp) is fine
    return folder


def friends_benchmark(folder: Path, conversations: int) -> Path:
    """What ``polylogue build --corpus friends --limit-conversations N`` writes, at ``folder``."""

    def build(out: Path) -> Path:
        from polylogue.corpora import load_corpus
        from polylogue.turntaking.dataset import BuildOptions, build_benchmark, save_benchmark

        convs = list(itertools.islice(load_corpus("friends"), conversations))
        return save_benchmark(build_benchmark(convs, BuildOptions()), out)

    return cached_benchmark(folder, f"friends-{conversations}", build)


def ami_benchmark(folder: Path, conversations: int) -> Path:
    """What ``polylogue build --corpus ami --limit-conversations N`` writes, at ``folder``."""

    def build(out: Path) -> Path:
        from polylogue.corpora import load_corpus
        from polylogue.turntaking.dataset import (
            BuildOptions,
            build_benchmark,
            reader_options,
            save_benchmark,
        )

        convs = list(itertools.islice(load_corpus("ami", **reader_options("ami")), conversations))
        return save_benchmark(build_benchmark(convs, BuildOptions()), out)

    return cached_benchmark(folder, f"ami-{conversations}", build)
