"""Reuse a cached benchmark folder when it is current, else build and save it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from polylogue.jsonio import load_json_object
from polylogue.turntaking.dataset.load import Benchmark, load_benchmark
from polylogue.turntaking.dataset.make import BenchmarkBuild
from polylogue.turntaking.dataset.save import save_benchmark
from polylogue.turntaking.dataset.versions import FORMAT_VERSION


def is_current_build(folder: str | Path) -> bool:
    """Whether ``folder`` holds a benchmark built by this version of the builder.

    Cached builds (``train-default --work-dir``) are reused only when current: an older format
    can assign different splits or groups to the same options (e.g. v2 Molweni)."""
    manifest = Path(folder) / "manifest.json"
    if not manifest.is_file():
        return False
    try:
        version = load_json_object(manifest).get("format_version", 1)
    except (OSError, ValueError):
        return False
    return bool(version == FORMAT_VERSION)


def load_or_build(
    folder: str | Path,
    make: Callable[[], BenchmarkBuild],
    log: Callable[[str], None] = print,
) -> Benchmark:
    """Load the benchmark cached in ``folder`` when it is current, else ``make()`` it, save it
    there (replacing an older build) and load it."""
    if not is_current_build(folder):
        build = make()
        save_benchmark(build, folder)
        log(f"built {folder} ({len(build.points):,} points)")
    return load_benchmark(folder)
