"""Run-folder primitives shared by every runner (turn-taking evaluation, MeetingToM).

A run folder holds ``manifest.json`` (options, versions, data hash) and ``predictions.jsonl``
(one record per sample, appended as each finishes). These helpers make the two durable: the
predictions file survives SIGKILL (a torn last line is cut off on resume) and the manifest is
replaced atomically.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from polylogue.errors import PolylogueInputError


class RunFileError(PolylogueInputError):
    """A predictions file was edited or damaged (a malformed line before the last one)."""


def canonical_json(obj: Any) -> str:
    """Deterministic JSON for hashing options into run keys."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def read_records(
    path: str | Path, key: str = "point_id", repair: bool = False
) -> list[dict[str, Any]]:
    """Records of a JSONL predictions file, first occurrence per ``key``.

    A last line without its newline is the trace of a killed write: ignored, and cut off when
    ``repair`` is set. A malformed line elsewhere means the file was edited or damaged, which
    is reported with its line number rather than guessed around.
    """
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    complete_end = data.rfind(b"\n") + 1
    if complete_end < len(data) and repair:
        with open(p, "r+b") as f:
            f.truncate(complete_end)
            f.flush()
            os.fsync(f.fileno())
    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    for lineno, line in enumerate(data[:complete_end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            rid = str(rec[key])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise RunFileError(f"{p}:{lineno}: malformed prediction record: {exc}") from exc
        if rid in seen:
            continue
        seen.add(rid)
        records.append(rec)
    return records


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON so a reader never sees half a file (temp file + fsync + rename)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def git_commit() -> str | None:
    """The polylogue checkout's commit, when it runs from one."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def versions(packages: Iterable[str] = ()) -> dict[str, str]:
    """Python, platform and installed versions of polylogue and ``packages``."""
    from importlib import metadata

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("polylogue", *packages):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out
