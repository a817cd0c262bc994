"""Small real benchmarks for tests, built once per test session and copied where a test asks.

A build is deterministic, so a copy is what a fresh build would write; copying (milliseconds)
instead of rebuilding (seconds each) keeps every test's folder its own to write next to.
"""

from __future__ import annotations

import atexit
import itertools
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

_BUILT: dict[str, Path] = {}


def cached_benchmark(folder: Path, key: str, build: Callable[[Path], Path]) -> Path:
    """``build(path)`` (which saves a benchmark at ``path``) once per session for ``key``;
    a copy of it at ``folder`` (left as it is when it already holds a benchmark)."""
    if (folder / "manifest.json").is_file():
        return folder
    built = _BUILT.get(key)
    if built is None:
        root = Path(tempfile.mkdtemp(prefix="polylogue-test-bench-"))
        atexit.register(shutil.rmtree, root, True)
        built = _BUILT[key] = build(root / "bench")
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
