"""Write a build as a benchmark folder (atomically: staged, then renamed)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polylogue.conversation import Participant, write_parquet
from polylogue.turntaking.dataset.make import BenchmarkBuild
from polylogue.turntaking.dataset.provenance import benchmark_manifest
from polylogue.turntaking.dataset.tables import stats_markdown, write_stats_csv
from polylogue.turntaking.dataset.versions import (
    FORMAT_VERSION,
    SPLIT_FORMAT_KEY,
    BenchmarkFormatError,
)
from polylogue.turntaking.splits import (
    SPLITS,
)
from polylogue.turntaking.types import (
    DecisionPoint,
)


def _participant_dict(q: Participant, memo: dict[int, dict[str, Any]]) -> dict[str, Any]:
    # Participants are shared by every point of a conversation: serialise each once.
    d = memo.get(id(q))
    if d is None:
        d = memo[id(q)] = q.to_dict()
    return d


def _point_row(
    p: DecisionPoint, context_turns: int, memo: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    cur = p.input.current
    ctx: list[dict[str, Any]] = []
    if context_turns > 0:
        ctx = [
            {"speaker": u.speaker, "text": u.text, "start": u.start, "end": u.end}
            for u in p.input.history[-context_turns:]
        ]
    return {
        "point_id": p.point_id,
        "conversation_id": p.input.conversation_id,
        "corpus": p.input.corpus,
        "domain": p.input.domain,
        "group": p.group,
        "split": p.split,
        "index": p.index,
        "input": {
            "target": _participant_dict(p.input.target, memo),
            "present": [_participant_dict(q, memo) for q in p.input.present],
            "current": {
                "speaker": cur.speaker,
                "text": cur.text,
                "start": cur.start,
                "end": cur.end,
            },
            "context": ctx,
        },
        "gold": p.gold.to_dict(),
    }


def _points_schema() -> Any:
    import pyarrow as pa

    participant = pa.struct(
        [
            ("id", pa.string()),
            ("name", pa.string()),
            ("role", pa.string()),
            ("aliases", pa.list_(pa.string())),
        ]
    )
    turn = pa.struct(
        [
            ("speaker", pa.string()),
            ("text", pa.string()),
            ("start", pa.float64()),
            ("end", pa.float64()),
        ]
    )
    gold = pa.struct(
        [
            ("label", pa.string()),
            ("category", pa.string()),
            ("fine_category", pa.string()),
            ("addressed", pa.bool_()),
            ("referenced", pa.bool_()),
            ("address_evidence", pa.string()),
            ("reference_evidence", pa.string()),
            ("next_speaker", pa.string()),
            ("group_address", pa.bool_()),
            ("outcome", pa.string()),
            ("paper_category", pa.string()),
            ("pause_time", pa.float64()),
            ("pause_s", pa.float64()),
            ("in_exchange", pa.bool_()),
        ]
    )
    return pa.schema(
        [
            ("point_id", pa.string()),
            ("conversation_id", pa.string()),
            ("corpus", pa.string()),
            ("domain", pa.string()),
            ("group", pa.string()),
            ("split", pa.string()),
            ("index", pa.int32()),
            (
                "input",
                pa.struct(
                    [
                        ("target", participant),
                        ("present", pa.list_(participant)),
                        ("current", turn),
                        ("context", pa.list_(turn)),
                    ]
                ),
            ),
            ("gold", gold),
        ]
    )


def save_benchmark(
    build: BenchmarkBuild,
    out_dir: str | Path,
    inputs: dict[str, dict[str, Any]] | None = None,
    formats: Sequence[str] = ("parquet",),
) -> Path:
    """Write ``build`` as a benchmark folder and return its path.

    Splits are Parquet by default; ``formats=("parquet", "jsonl")`` also writes JSONL (the same
    rows, for tools that want text). Loading reads Parquet when present, else JSONL, so folders
    written either way (and older ones holding both) load alike.

    Everything is written into a hidden sibling folder that is renamed to ``out_dir`` only when
    complete, so a full disk or a kill never leaves a folder that looks like a benchmark (an
    older benchmark at ``out_dir`` is replaced only then).
    """
    unknown = set(formats) - {"parquet", "jsonl"}
    if unknown or not formats:
        raise ValueError(f"formats must be parquet and/or jsonl, not {list(formats)}")
    import shutil

    final = Path(out_dir)
    if final.exists() and not final.is_dir():  # replacing it would hide the user's file
        raise BenchmarkFormatError(f"{final} is a file, not a folder; choose another --out")
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.is_dir() and any(final.iterdir()) and not (final / "manifest.json").is_file():
        # Replacing the folder would delete files that are not a benchmark's.
        raise BenchmarkFormatError(
            f"{final} exists and is not a benchmark folder; choose a new or empty --out"
        )
    staging = final.with_name(f".{final.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        _save_benchmark_files(build, staging, inputs, formats)
        if final.exists():
            old = final.with_name(f".{final.name}.old-{os.getpid()}")
            os.replace(final, old)
            os.replace(staging, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def _save_benchmark_files(
    build: BenchmarkBuild,
    out: Path,
    inputs: dict[str, dict[str, Any]] | None,
    formats: Sequence[str],
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    conv_dicts = [c.to_dict() for c in build.conversations]
    write_parquet(build.conversations, out / "conversations.parquet", dicts=conv_dicts)
    data_hash = hashlib.sha256()
    for d in conv_dicts:
        data_hash.update(json.dumps(d, sort_keys=True, ensure_ascii=False).encode())
    split_counts: dict[str, int] = {}
    schema = _points_schema()
    for name in SPLITS:
        memo: dict[int, dict[str, Any]] = {}
        rows = [
            _point_row(p, build.options.context_turns, memo)
            for p in build.points
            if p.split == name
        ]
        split_counts[name] = len(rows)
        # Rows are built with a fixed key order, so one serialisation serves hash and file.
        lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in rows]
        for line in lines:
            data_hash.update(line.encode())
        if "parquet" in formats:
            table = pa.Table.from_pylist(rows, schema=schema)
            # Each split names its format: a folder mixing files of two builds is detected.
            stamp = {**(table.schema.metadata or {}), SPLIT_FORMAT_KEY: str(FORMAT_VERSION)}
            pq.write_table(table.replace_schema_metadata(stamp), out / f"{name}.parquet")
        if "jsonl" in formats:
            with open(out / f"{name}.jsonl", "w", encoding="utf-8") as f:
                f.writelines(lines)
    (out / "stats.md").write_text(stats_markdown(build.points) + "\n", encoding="utf-8")
    write_stats_csv(build.points, out / "stats.csv")
    manifest = benchmark_manifest(build, inputs or {}, split_counts, data_hash.hexdigest())
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
