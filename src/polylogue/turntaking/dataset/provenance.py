"""What a benchmark was built from and with: input hashes, options, versions (the manifest).

The CLI names the inputs; the records of them (a corpus folder's or a transcript's content
hash) and the manifest that carries them are made here, so every caller that saves a build
writes the same provenance.
"""

from __future__ import annotations

import hashlib
import platform
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from polylogue.turntaking.dataset.make import BenchmarkBuild
from polylogue.turntaking.dataset.options import BuildOptions
from polylogue.turntaking.dataset.tables import outcome_table, table1
from polylogue.turntaking.dataset.versions import FORMAT_VERSION, MANIFEST_KIND


def hash_tree(folder: str | Path, patterns: Sequence[str] = ("**/*",)) -> str:
    """Content hash of the files under ``folder`` (relative paths + bytes)."""
    root = Path(folder)
    h = hashlib.sha256()
    files = sorted({p for pat in patterns for p in root.glob(pat) if p.is_file()})
    for p in files:
        h.update(str(p.relative_to(root)).encode())
        h.update(b"\0")
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def corpus_input(folder: str | Path) -> dict[str, str]:
    """The manifest's record of a shared corpus folder: its path and content hash."""
    return {"path": str(folder), "sha256": hash_tree(folder)}


def transcript_input(path: Path, domain: str | None = None) -> dict[str, str]:
    """The manifest's record of one user transcript (and the domain it was read with)."""
    return {
        "path": str(path),
        "sha256": hash_tree(path.parent, [path.name]),
        **({"domain": domain} if domain else {}),
    }


def benchmark_manifest(
    build: BenchmarkBuild,
    inputs: dict[str, dict[str, Any]],
    split_counts: dict[str, int],
    data_hash: str,
) -> dict[str, Any]:
    """The manifest of a saved build (``created`` and the versions say when and with what)."""
    return {
        "format_version": FORMAT_VERSION,
        "kind": MANIFEST_KIND,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "polylogue_version": _version(),
        "python": platform.python_version(),
        "options": _options_dict(build.options),
        "inputs": inputs,
        "counts": {**build.counts, "splits": split_counts},
        "corpora": sorted({c.corpus for c in build.conversations}),
        "table1": table1(build.points),
        "table1_paper_mapping": table1(build.points, "paper"),
        "outcomes": outcome_table(build.points),
        "protocol": build.options.protocol,
        "decision_moments": {c.id: c.metadata.get("decision_moments") for c in build.conversations},
        "class_ratio": "natural" if build.options.protocol == "default" else "balanced",
        "data_hash": data_hash,
    }


def _options_dict(o: BuildOptions) -> dict[str, Any]:
    d = asdict(o)
    d["fractions"] = list(o.fractions)
    return d


def _version() -> str:
    from polylogue import __version__

    return __version__
