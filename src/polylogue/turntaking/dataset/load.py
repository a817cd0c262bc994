"""A saved benchmark folder, read lazily: split rows, points rebuilt from the conversations."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from polylogue.conversation import Conversation, Participant, read_parquet, upgrade_domain_name
from polylogue.jsonio import JsonInputError, load_json_object, loads_json
from polylogue.turntaking.dataset.versions import (
    MANIFEST_KIND,
    SPLIT_FORMAT_KEY,
    BenchmarkFormatError,
    check_format_version,
)
from polylogue.turntaking.points import (
    Prefixes,
    model_visible,
)
from polylogue.turntaking.splits import (
    SPLITS,
    balanced_indices,
)
from polylogue.turntaking.types import (
    DecisionGold,
    DecisionInput,
    DecisionPoint,
)


class Benchmark:
    """A saved benchmark folder.

    >>> bench = load_benchmark("data/ami-bench")          # doctest: +SKIP
    >>> inputs = bench.inputs("test")                     # what models see
    >>> gold = {p.point_id: p.gold for p in bench.points("test")}
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        mpath = self.folder / "manifest.json"
        if not mpath.is_file():
            raise BenchmarkFormatError(f"{self.folder}: not a benchmark folder (no manifest.json)")
        try:
            self.manifest: dict[str, Any] = load_json_object(mpath, "a manifest object")
        except JsonInputError as exc:
            raise BenchmarkFormatError(str(exc)) from None
        if self.manifest.get("kind") != MANIFEST_KIND:
            raise BenchmarkFormatError(f"{mpath}: not a polylogue turn-taking benchmark manifest")
        check_format_version(self.manifest.get("format_version", 1), mpath)
        self._points: dict[str, list[DecisionPoint]] = {}
        self._checked: set[str] = set()
        self._visible: dict[str, Prefixes] = {}
        #: Older domain names met in this folder (warned about once: conversation.OLD_DOMAIN_NAMES).
        self._old_domains: set[str] = set()

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def data_hash(self) -> str:
        return str(self.manifest["data_hash"])

    @property
    def splits(self) -> list[str]:
        return [
            s
            for s in SPLITS
            if (self.folder / f"{s}.parquet").exists() or (self.folder / f"{s}.jsonl").exists()
        ]

    @cached_property
    def conversations(self) -> dict[str, Conversation]:
        path = self.folder / "conversations.parquet"
        return {c.id: c for c in read_parquet(path, noted=self._old_domains)}

    def _visible_for(self, ids: Iterable[str]) -> dict[str, Prefixes]:
        """Model-visible utterances of the conversations ``ids``; each read once, on demand.

        Only the conversations a split's points refer to are read (a test split needs ~10%
        of them), never the whole corpus.
        """
        missing = set(ids) - self._visible.keys()
        if missing:
            if "conversations" in self.__dict__:  # already loaded in full
                convs = [self.conversations[i] for i in missing if i in self.conversations]
            else:
                convs = read_parquet(
                    self.folder / "conversations.parquet", ids=missing, noted=self._old_domains
                )
            self._visible.update({c.id: Prefixes(model_visible(c)) for c in convs})
        return self._visible

    def rows(self, split: str, *, with_context: bool = True) -> list[dict[str, Any]]:
        """Raw point rows of a split (Parquet preferred, JSONL otherwise).

        ``with_context=False`` leaves out the stored context turns (``input.context``): points
        are rebuilt from the conversations, so loading them need not decode the copies.
        """
        pq_path = self.folder / f"{split}.parquet"
        if pq_path.exists():
            self._check_split_file(pq_path)
            if not with_context:
                light = _rows_without_context(pq_path)
                if light is not None:
                    return light
            rows: list[dict[str, Any]] = _read_split_table(pq_path).to_pylist()
            return rows
        jl = self.folder / f"{split}.jsonl"
        if not jl.exists():
            raise BenchmarkFormatError(f"{self.folder}: no split {split!r} (have {self.splits})")
        out = []
        with open(jl, "rb") as f:
            for lineno, line in enumerate(f, 1):
                if line.strip():
                    where = f"line {lineno}"
                    try:
                        row = loads_json(line, jl, where)
                    except JsonInputError as exc:
                        raise BenchmarkFormatError(str(exc)) from None
                    if not isinstance(row, dict) or "point_id" not in row:
                        raise BenchmarkFormatError(f"{jl}:{where}: not a decision point row")
                    out.append(row)
        return out

    def _check_split_file(self, path: Path) -> None:
        """A split Parquet file opens and has the point columns (checked once per file)."""
        if str(path) in self._checked:
            return
        import pyarrow.parquet as pq

        try:
            meta = pq.read_metadata(path)
            schema = meta.schema.to_arrow_schema()
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise _unreadable(path, exc) from None
        names = set(schema.names)
        missing = sorted(set(_SPLIT_COLUMNS) - names)
        if missing:
            raise BenchmarkFormatError(
                f"{path}: not a decision-point split (no column {', '.join(missing)}; "
                f"it has {', '.join(sorted(names))})"
            )
        self._check_same_build(path, (schema.metadata or {}), meta.num_rows)
        self._checked.add(str(path))

    def _check_same_build(self, path: Path, metadata: dict[bytes, bytes], rows: int) -> None:
        """A split written by another build than the manifest's (files copied between
        folders, a half-finished manual upgrade) is refused: its points would be read under
        the wrong format's rules."""
        declared = self.manifest.get("format_version", 1)
        stamped = metadata.get(SPLIT_FORMAT_KEY.encode())
        mixed = "the folder mixes files of two builds; rebuild it with polylogue build"
        if stamped is not None and stamped.decode(errors="replace") != str(declared):
            raise BenchmarkFormatError(
                f"{path}: a format-{stamped.decode(errors='replace')} split under a manifest "
                f"of format {declared}: {mixed}"
            )
        counts = self.manifest.get("counts")
        splits = counts.get("splits") if isinstance(counts, dict) else None
        expected = splits.get(path.stem) if isinstance(splits, dict) else None
        if isinstance(expected, int) and not isinstance(expected, bool) and expected != rows:
            raise BenchmarkFormatError(
                f"{path}: holds {rows} points where the manifest counts {expected}: {mixed}"
            )

    def points(self, split: str, balanced: bool = False, seed: int = 13) -> list[DecisionPoint]:
        """Decision points of ``split`` at natural class ratios, or a balanced view."""
        if split not in self._points:
            self._points[split] = self._build_points(self.rows(split, with_context=False), split)
        pts = self._points[split]
        if balanced:
            idx = balanced_indices(
                [p.gold.label.value for p in pts], [p.gold.category.value for p in pts], seed
            )
            pts = [pts[i] for i in idx]
        return pts

    def points_by_id(self, split: str, ids: Iterable[str]) -> list[DecisionPoint]:
        """Only the points ``ids`` of ``split`` (in split order), reading only their rows and
        conversations: what a sample needs, without building every point of the split."""
        wanted = set(ids)
        if split in self._points:
            return [p for p in self._points[split] if p.point_id in wanted]
        pq_path = self.folder / f"{split}.parquet"
        rows = None
        if pq_path.exists():
            rows = _rows_without_context(pq_path, sorted(wanted))
        if rows is None:
            rows = [r for r in self.rows(split) if r["point_id"] in wanted]
        return self._build_points(rows, split)

    def conversation_ids(self, split: str) -> set[str]:
        """The conversations ``split``'s points come from (one column read)."""
        pq_path = self.folder / f"{split}.parquet"
        if pq_path.exists():
            self._check_split_file(pq_path)
            col = _read_split_table(pq_path, columns=["conversation_id"]).column(0)
            return {str(v) for v in col.to_pylist()}
        return {str(r["conversation_id"]) for r in self.rows(split, with_context=False)}

    def point_index(self, split: str) -> list[PointKey]:
        """``(point_id, category, outcome)`` of every point of ``split``: enough to count, filter
        and sample, read from three small columns (no inputs, no conversations)."""
        pq_path = self.folder / f"{split}.parquet"
        if pq_path.exists():
            import pyarrow.parquet as pq

            self._check_split_file(pq_path)
            cols = ["point_id", "gold.category", "gold.label", "gold.outcome"]
            try:
                t = pq.read_table(pq_path, columns=cols)
                flat = [t.column(i).to_pylist() for i in range(4)]
                raw = [
                    dict(zip(("point_id", "category", "label", "outcome"), v, strict=True))
                    for v in zip(*flat, strict=True)
                ]
            except (KeyError, ValueError):  # an older layout without gold.outcome
                raw = [{"point_id": r["point_id"], **r["gold"]} for r in self.rows(split)]
            except Exception as exc:  # a damaged page (pyarrow raises OSError and others)
                raise _unreadable(pq_path, exc) from None
        else:
            raw = [{"point_id": r["point_id"], **r["gold"]} for r in self.rows(split)]
        out = []
        for r in raw:
            try:
                outcome = r.get("outcome") or ("TAKE_FLOOR" if r["label"] == "SPEAK" else "SILENT")
                out.append(PointKey(str(r["point_id"]), str(r["category"]), str(outcome)))
            except (KeyError, TypeError, AttributeError) as exc:
                raise BenchmarkFormatError(
                    f"{self.folder}/{split}: malformed point {r.get('point_id', '?')}: {exc!r}"
                ) from None
        return out

    def _build_points(self, rows: list[dict[str, Any]], split: str) -> list[DecisionPoint]:
        self._visible_for(str(r.get("conversation_id")) for r in rows)
        return [self._point(r, split) for r in rows]

    def inputs(self, split: str, balanced: bool = False, seed: int = 13) -> list[DecisionInput]:
        return [p.input for p in self.points(split, balanced, seed)]

    def _point(self, r: dict[str, Any], split: str) -> DecisionPoint:
        try:
            cid = r["conversation_id"]
            visible = self._visible[cid]
            idx = int(r["index"])
            inp = r["input"]
            return DecisionPoint(
                input=DecisionInput(
                    point_id=r["point_id"],
                    conversation_id=cid,
                    corpus=r["corpus"],
                    domain=upgrade_domain_name(r["domain"], self.folder, self._old_domains),
                    target=Participant.from_dict(inp["target"]),
                    present=tuple(Participant.from_dict(q) for q in inp["present"]),
                    context=visible.view(idx + 1),
                ),
                gold=DecisionGold.from_dict(r["gold"]),
                group=r["group"],
                index=idx,
                split=split,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BenchmarkFormatError(
                f"{self.folder}/{split}: malformed point {r.get('point_id', '?')}: {exc!r}"
            ) from exc


class PointKey(NamedTuple):
    """What sampling and filtering need of a point, without the point."""

    point_id: str
    category: str
    outcome: str


#: Point columns needed to rebuild points (``input.context`` is rebuilt from conversations).
_LIGHT_COLUMNS = (
    "point_id",
    "conversation_id",
    "corpus",
    "domain",
    "group",
    "split",
    "index",
    "input.target",
    "input.present",
    "gold",
)


#: Top-level columns every split file has.
_SPLIT_COLUMNS = ("point_id", "conversation_id", "index", "input", "gold")


def _unreadable(path: Path, exc: BaseException) -> BenchmarkFormatError:
    detail = " ".join(str(exc).split())
    return BenchmarkFormatError(
        f"{path}: not a readable Parquet split (damaged or truncated; rebuild it with "
        f"polylogue build): {detail}"
    )


def _read_split_table(path: Path, columns: list[str] | None = None) -> Any:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path, columns=columns)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise _unreadable(path, exc) from None


def _rows_without_context(
    path: Path, ids: Sequence[str] | None = None
) -> list[dict[str, Any]] | None:
    """Point rows without the stored context turns (only ``ids`` when given), or None if the
    file lacks a column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    filters = None if ids is None else [("point_id", "in", list(ids))]
    try:
        table = pq.read_table(path, columns=list(_LIGHT_COLUMNS), filters=filters)
        rows: list[dict[str, Any]] = table.to_pylist()
    except (pa.ArrowInvalid, KeyError):
        return None  # an older layout: read it whole
    except Exception as exc:  # a damaged page (pyarrow raises OSError and others)
        raise _unreadable(path, exc) from None
    for r in rows:  # nested selections come back flattened: put them back under "input"
        r["input"] = {"target": r.pop("target"), "present": r.pop("present")}
    return rows


def load_benchmark(folder: str | Path) -> Benchmark:
    return Benchmark(folder)


def load_split_points(folders: Sequence[str | Path], split: str) -> list[DecisionPoint]:
    """Points of ``split`` from every benchmark folder (combined-corpus training)."""
    points: list[DecisionPoint] = []
    for folder in folders:
        bench = load_benchmark(folder)
        if split not in bench.splits:
            raise BenchmarkFormatError(f"{folder} has no {split!r} split (has {bench.splits})")
        points.extend(bench.points(split))
    ids = [p.point_id for p in points]
    if len(set(ids)) != len(ids):
        raise BenchmarkFormatError(
            f"duplicate point ids across {[str(f) for f in folders]} ({split}); "
            "combine benchmarks of different corpora"
        )
    return points
