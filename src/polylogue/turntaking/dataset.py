"""Build, save and load turn-taking benchmark folders.

A benchmark folder holds::

    manifest.json          options, inputs and their hashes, versions, counts, data_hash
    conversations.parquet  the conversations points refer to (full annotations, for audit)
    train.parquet          decision points of each split (.jsonl too on request); "input" and
    validation.*  test.*   "gold" are separate columns, so nothing label-bearing sits among
                           the model inputs
    stats.md, stats.csv    Table-1 counts per corpus and split: our categories (I1, I2, S1,
                           S2, SA), the authors' four-way mapping, the 8-way scheme, outcomes

Points store their context *by reference* (conversation id + utterance index) because full
contexts repeated per point would be quadratic in meeting length; :class:`Benchmark` rebuilds
them as cheap views. ``BuildOptions.context_turns`` can also materialise the last K turns
into the files for users of other tools (e.g. Hugging Face ``datasets``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, NamedTuple

from polylogue.conversation import Conversation, Participant, read_parquet, write_parquet
from polylogue.conversation import merge_turns as merge_conversation_turns
from polylogue.errors import PolylogueInputError, note_input
from polylogue.jsonio import JsonInputError, load_json_object, loads_json
from polylogue.turntaking.points import (
    PointOptions,
    Prefixes,
    conversation_points,
    model_visible,
    prefix_hashes,
    prepare_conversation,
)
from polylogue.turntaking.splits import (
    SPLITS,
    balanced_indices,
    grouped_split,
    stratified_subsample,
)
from polylogue.turntaking.timeline import DEFAULT_GAP_S
from polylogue.turntaking.types import (
    CATEGORIES,
    OUTCOMES,
    PAPER_CATEGORIES,
    DecisionGold,
    DecisionInput,
    DecisionPoint,
)

#: 2: decision points at real pauses, three outcomes, SA, paper_category (issue 11).
#: 3: Molweni grouped by stretches of overlapping dialogues, its official test file pinned to
#: test (a v2 Molweni build shares messages between train and test).
#: 4: benchmark v2.1 definitions (issue 25): S3 (silent participant of the exchange) apart from
#: S1 bystanders, answers to a question are floor takes, one backchannel rule for every corpus,
#: non-people and departed characters are no targets, a name inside a question is no address,
#: AMI act times from words only; ``gold.in_exchange``.
FORMAT_VERSION = 4

Protocol = Literal["default", "paper"]

#: A group counts as addressee-annotated for split stratification when at least this share of
#: its utterances is annotated (AMI has series with 1-3 stray annotations; they are "plain").
ANNOTATED_GROUP_MIN_SHARE = 0.05
#: Conversation metadata key that pins a conversation's group to one benchmark split (the
#: corpus's official test set, e.g. Molweni's ``test`` file); the corpus's other groups are
#: then split over the remaining splits, in proportion to their fractions.
FIXED_SPLIT_KEY = "benchmark_split"


class BenchmarkFormatError(PolylogueInputError):
    """A benchmark folder is missing files or holds malformed rows."""


@dataclass(frozen=True)
class BuildOptions:
    """Everything that determines a build; recorded in the manifest."""

    points: PointOptions = field(default_factory=PointOptions)
    #: Merge consecutive same-speaker utterances into turns before making points.
    merge_turns: bool = False
    #: Remove exact duplicates of (context, current utterance, target, label).
    dedup: bool = True
    seed: int = 13
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    #: Stratified subsample sizes per split, e.g. {"train": 11000} (the paper's SPGI recipe).
    max_points: dict[str, int] = field(default_factory=dict)
    #: Last K context utterances written into the point files (0: context by reference only).
    context_turns: int = 0
    #: Keep only conversations with at least one annotated addressee (e.g. the 22 AMI
    #: meetings with addressee annotation, as in the paper's AMI set).
    require_addressee_annotation: bool = False
    #: "default": grouped, causal splits at natural class ratios. "paper": the authors'
    #: protocol (per-sample split stratified by their four-way category, 50/50 classes); it
    #: leaks context across splits and exists only to put numbers next to the paper's.
    protocol: Protocol = "default"
    #: Addressee-annotated groups (AMI series = teams) each of validation and test must hold.
    min_annotated_groups: int = 2


def reader_options(
    corpus: str, gap: float = DEFAULT_GAP_S, protocol: Protocol = "default"
) -> dict[str, Any]:
    """Reader options a benchmark build uses for a shared corpus.

    AMI is read as dialogue acts split at the speaker's own silences of at least ``gap``
    (``unit="ipu"``), so every pause is a boundary and context is cut at word level; the paper
    protocol keeps whole dialogue acts. Other readers need no options.
    """
    if corpus != "ami":
        return {}
    if protocol == "paper":
        return {"unit": "da"}
    return {"unit": "ipu", "ipu_gap": gap}


def paper_protocol_options(seed: int = 42, **overrides: Any) -> BuildOptions:
    """Build options of the authors' protocol (reference notes D.4/A.5).

    Utterance-boundary decision points with the next-speaker label (no backchannel outcome),
    exact de-duplication, no-context points dropped, a per-sample 80/10/10 split stratified by
    their four-way category with seed 42, and 50/50 SPEAK/SILENT classes.
    """
    points = PointOptions(timing="utterance", backchannels=False)
    return BuildOptions(points=points, seed=seed, protocol="paper", **overrides)


@dataclass
class BenchmarkBuild:
    """The in-memory result of :func:`build_benchmark`."""

    conversations: list[Conversation]
    points: list[DecisionPoint]
    options: BuildOptions
    counts: dict[str, int]

    def split(self, name: str) -> list[DecisionPoint]:
        return [p for p in self.points if p.split == name]


def build_benchmark(
    conversations: Iterable[Conversation],
    options: BuildOptions | None = None,
    on_conversation: Callable[[Conversation], None] | None = None,
) -> BenchmarkBuild:
    """Decision points for ``conversations``, de-duplicated and split per corpus by group."""
    options = options or BuildOptions()
    convs: list[Conversation] = []
    points: list[DecisionPoint] = []
    seen: set[tuple[str, str, str]] = set()
    counts: Counter[str] = Counter()
    conv_ids: set[str] = set()
    # Per group: (utterances with annotated addressees, all utterances).
    annotation: dict[str, list[int]] = {}
    fixed_split: dict[str, str] = {}
    for conv in conversations:
        if conv.id in conv_ids:
            raise PolylogueInputError(
                f"duplicate conversation id {conv.id!r} "
                f"(corpus {conv.corpus}, source {conv.source})"
            )
        conv_ids.add(conv.id)
        if options.merge_turns:
            conv = merge_conversation_turns(conv)
        conv = prepare_conversation(conv, options.points)
        counts[f"decision_moments_{conv.metadata['decision_moments']}"] += 1
        n_annotated = sum(u.addressees is not None for u in conv.utterances)
        if options.require_addressee_annotation and not n_annotated:
            counts["conversations_without_annotation_skipped"] += 1
            continue
        pinned = conv.metadata.get(FIXED_SPLIT_KEY)
        if pinned is not None:
            if pinned not in SPLITS or fixed_split.get(conv.group_id, pinned) != pinned:
                raise PolylogueInputError(
                    f"conversation {conv.id!r} (source {conv.source}): {FIXED_SPLIT_KEY} "
                    f"{pinned!r} is not one of {', '.join(SPLITS)} or conflicts with its group"
                )
            fixed_split[conv.group_id] = pinned
        share = annotation.setdefault(conv.group_id, [0, 0])
        share[0] += n_annotated
        share[1] += len(conv.utterances)
        convs.append(conv)
        counts["conversations"] += 1
        counts["boundaries"] += max(0, len(conv.utterances) - 1)
        hashes = prefix_hashes(conv) if options.dedup else None
        for p in conversation_points(conv, options.points):
            if hashes is not None:
                key = (hashes[p.index], p.input.target.id, p.gold.label.value)
                if key in seen:
                    counts["duplicates_removed"] += 1
                    continue
                seen.add(key)
            points.append(p)
        if on_conversation is not None:
            on_conversation(conv)
    annotated_groups = {
        g for g, (n_ann, n) in annotation.items() if n and n_ann / n >= ANNOTATED_GROUP_MIN_SHARE
    }
    if options.protocol == "paper":
        points = _paper_splits(points, options)
    else:
        points = _assign_splits(points, options, annotated_groups, fixed_split)
    counts["points"] = len(points)
    return BenchmarkBuild(conversations=convs, points=points, options=options, counts=dict(counts))


def _assign_splits(
    points: list[DecisionPoint],
    options: BuildOptions,
    annotated_groups: set[str],
    fixed_split: dict[str, str] | None = None,
) -> list[DecisionPoint]:
    fixed_split = fixed_split or {}
    by_corpus: dict[str, list[int]] = {}
    for i, p in enumerate(points):
        by_corpus.setdefault(p.input.corpus, []).append(i)
    split_of = [""] * len(points)
    for _corpus, all_idx in sorted(by_corpus.items()):
        # Pinned groups keep their split; the rest share the splits nobody pinned.
        pinned = {fixed_split[points[i].group] for i in all_idx if points[i].group in fixed_split}
        for i in all_idx:
            if points[i].group in fixed_split:
                split_of[i] = fixed_split[points[i].group]
        idx = [i for i in all_idx if points[i].group not in fixed_split]
        if not idx:
            continue
        fractions = options.fractions
        if pinned:
            kept = [0.0 if name in pinned else f for name, f in zip(SPLITS, fractions, strict=True)]
            fractions = (kept[0] / sum(kept), kept[1] / sum(kept), kept[2] / sum(kept))
        groups = [points[i].group for i in idx]
        strata = [points[i].gold.category.value for i in idx]
        if pinned and len(set(groups)) < 3:
            assignment = dict.fromkeys(groups, "train")
        elif len(set(groups)) < 3:
            # Too few conversations to split (e.g. one user transcript): evaluation only.
            assignment = dict.fromkeys(groups, "test")
        else:
            group_strata = {
                g: ("annotated" if g in annotated_groups else "plain") for g in set(groups)
            }
            assignment = grouped_split(
                groups,
                strata,
                fractions,
                options.seed,
                group_strata,
                min_groups={"annotated": options.min_annotated_groups},
            )
        for i in idx:
            split_of[i] = assignment[points[i].group]
    out = [replace(p, split=s) for p, s in zip(points, split_of, strict=True)]
    if options.max_points:
        keep: list[DecisionPoint] = []
        for name in SPLITS:
            members = [p for p in out if p.split == name]
            limit = options.max_points.get(name)
            if limit is not None and limit < len(members):
                strata = [f"{p.input.corpus}/{p.gold.category.value}" for p in members]
                members = [members[i] for i in stratified_subsample(strata, limit, options.seed)]
            keep.extend(members)
        out = keep
    return out


def _paper_splits(points: list[DecisionPoint], options: BuildOptions) -> list[DecisionPoint]:
    """The authors' protocol: per corpus, 50/50 classes, then a per-sample split stratified by
    their four-way category (so neighbouring points of one meeting land in every split)."""
    import random

    out: list[DecisionPoint] = []
    by_corpus: dict[str, list[DecisionPoint]] = {}
    for p in points:
        by_corpus.setdefault(p.input.corpus, []).append(p)
    for corpus in sorted(by_corpus):
        pts = by_corpus[corpus]
        cats = [p.gold.paper_category or p.gold.category.value for p in pts]
        keep = balanced_indices([p.gold.label.value for p in pts], cats, options.seed)
        by_cat: dict[str, list[DecisionPoint]] = {}
        for i in keep:
            by_cat.setdefault(cats[i], []).append(pts[i])
        rng = random.Random(options.seed)
        for cat in sorted(by_cat):
            members = by_cat[cat]
            rng.shuffle(members)
            n_train = int(options.fractions[0] * len(members))
            n_val = int(options.fractions[1] * len(members))
            for j, p in enumerate(members):
                split = "train" if j < n_train else "validation" if j < n_train + n_val else "test"
                out.append(replace(p, split=split))
    return out


# ----------------------------------------------------------------------------- stats


def table1(points: Sequence[DecisionPoint], scheme: str = "ours") -> list[dict[str, Any]]:
    """Rows in the layout of the paper's Table 1: corpus, Total, categories (+ SPEAK %).

    ``scheme="ours"``: I1, I2, S1, S2, S3, SA (this benchmark's definitions).
    ``scheme="paper"``: the authors' released four-way mapping (``gold.paper_category``).
    """
    cats = [c.value for c in (CATEGORIES if scheme == "ours" else PAPER_CATEGORIES)]
    rows: list[dict[str, Any]] = []
    by_corpus: dict[str, Counter[str]] = {}
    for p in points:
        key = p.gold.category.value if scheme == "ours" else _paper_cat(p.gold)
        by_corpus.setdefault(p.input.corpus, Counter())[key] += 1
    total: Counter[str] = Counter()
    for corpus in sorted(by_corpus):
        c = by_corpus[corpus]
        total.update(c)
        rows.append(_row(corpus, c, cats))
    if len(by_corpus) > 1:
        rows.append(_row("Total", total, cats))
    return rows


def _paper_cat(g: DecisionGold) -> str:
    return g.paper_category or g.category.four_way.value


def _row(name: str, c: Counter[str], cats: Sequence[str]) -> dict[str, Any]:
    n = sum(c.values())
    speak = c["I1"] + c["I2"]
    return {
        "dataset": name,
        "total": n,
        **{cat: c[cat] for cat in cats},
        "speak_pct": round(100 * speak / n, 2) if n else 0.0,
    }


def outcome_table(points: Sequence[DecisionPoint]) -> list[dict[str, Any]]:
    """Per corpus: points per outcome (TAKE_FLOOR, BACKCHANNEL, SILENT)."""
    by_corpus: dict[str, Counter[str]] = {}
    for p in points:
        by_corpus.setdefault(p.input.corpus, Counter())[p.gold.floor_outcome.value] += 1
    return [
        {"dataset": corpus, "total": sum(c.values()), **{o.value: c[o.value] for o in OUTCOMES}}
        for corpus, c in sorted(by_corpus.items())
    ]


def _markdown_table(rows: list[dict[str, Any]], cats: Sequence[str]) -> list[str]:
    lines = [
        "| Dataset | Total | " + " | ".join(cats) + " | SPEAK % |",
        "|---|---:|" + "---:|" * len(cats) + "---:|",
    ]
    for r in rows:
        cells = " | ".join(f"{r[c]:,}" for c in cats)
        lines.append(f"| {r['dataset']} | {r['total']:,} | {cells} | {r['speak_pct']:.1f} |")
    return lines


def stats_markdown(points: Sequence[DecisionPoint]) -> str:
    lines = [
        "Decision points per corpus and category (natural class ratios; Table 1 layout).",
        "SA = silent although individually addressed. 'Paper mapping' = the authors' released",
        "four-way categories (their S2 includes targets who spoke in the last two turns).",
        "",
    ]
    ours = [c.value for c in CATEGORIES]
    paper = [c.value for c in PAPER_CATEGORIES]
    for title, subset in [("All splits", list(points))] + [
        (s, [p for p in points if p.split == s]) for s in SPLITS
    ]:
        if not subset:
            continue
        lines += [f"### {title}", ""]
        lines += _markdown_table(table1(subset, "ours"), ours)
        lines += ["", f"Paper mapping, {title.lower()}:", ""]
        lines += _markdown_table(table1(subset, "paper"), paper)
        lines.append("")
    lines += [
        "### Outcomes, all splits (SPEAK = TAKE_FLOOR; a backchannel is SILENT for the floor)",
        "",
        "| Dataset | Total | " + " | ".join(o.value for o in OUTCOMES) + " |",
        "|---|---:|" + "---:|" * len(OUTCOMES),
    ]
    for r in outcome_table(points):
        lines.append(
            f"| {r['dataset']} | {r['total']:,} | "
            + " | ".join(f"{r[o.value]:,}" for o in OUTCOMES)
            + " |"
        )
    lines.append("")
    lines += fine_table_markdown(points)
    return "\n".join(lines)


FINE_CATEGORIES = ("I1", "I2", "I3", "S1", "S2", "S3", "S4", "S5")


def fine_table_markdown(points: Sequence[DecisionPoint]) -> list[str]:
    """The authors' 8-way scheme (docs/benchmark.md), all splits."""
    by_corpus: dict[str, Counter[str]] = {}
    for p in points:
        by_corpus.setdefault(p.input.corpus, Counter())[p.gold.fine_category] += 1
    lines = [
        "### Fine categories (the authors' 8-way scheme), all splits",
        "",
        "| Dataset | " + " | ".join(FINE_CATEGORIES) + " |",
        "|---|" + "---:|" * len(FINE_CATEGORIES),
    ]
    for corpus in sorted(by_corpus):
        c = by_corpus[corpus]
        lines.append(f"| {corpus} | " + " | ".join(f"{c[k]:,}" for k in FINE_CATEGORIES) + " |")
    lines.append("")
    return lines


# ----------------------------------------------------------------------------- save


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
            pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / f"{name}.parquet")
        if "jsonl" in formats:
            with open(out / f"{name}.jsonl", "w", encoding="utf-8") as f:
                f.writelines(lines)
    stats = table1(build.points)
    (out / "stats.md").write_text(stats_markdown(build.points) + "\n", encoding="utf-8")
    _write_stats_csv(build.points, out / "stats.csv")
    manifest = {
        "format_version": FORMAT_VERSION,
        "kind": "polylogue.turntaking.benchmark",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "polylogue_version": _version(),
        "python": platform.python_version(),
        "options": _options_dict(build.options),
        "inputs": inputs or {},
        "counts": {**build.counts, "splits": split_counts},
        "corpora": sorted({c.corpus for c in build.conversations}),
        "table1": stats,
        "table1_paper_mapping": table1(build.points, "paper"),
        "outcomes": outcome_table(build.points),
        "protocol": build.options.protocol,
        "decision_moments": {c.id: c.metadata.get("decision_moments") for c in build.conversations},
        "class_ratio": "natural" if build.options.protocol == "default" else "balanced",
        "data_hash": data_hash.hexdigest(),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def _write_stats_csv(points: Sequence[DecisionPoint], path: Path) -> None:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        cats = [c.value for c in CATEGORIES]
        w.writerow(["scheme", "split", "dataset", "total", *cats, "speak_pct"])
        for scheme in ("ours", "paper"):
            for split in ("all", *SPLITS):
                subset = points if split == "all" else [p for p in points if p.split == split]
                for r in table1(subset, scheme):
                    w.writerow(
                        [
                            scheme,
                            split,
                            r["dataset"],
                            r["total"],
                            *(r.get(c, "") for c in cats),
                            r["speak_pct"],
                        ]
                    )


def _options_dict(o: BuildOptions) -> dict[str, Any]:
    d = asdict(o)
    d["fractions"] = list(o.fractions)
    return d


def _version() -> str:
    from polylogue import __version__

    return __version__


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


# ----------------------------------------------------------------------------- load


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
        if self.manifest.get("kind") != "polylogue.turntaking.benchmark":
            raise BenchmarkFormatError(f"{mpath}: not a polylogue turn-taking benchmark manifest")
        check_format_version(self.manifest.get("format_version", 1), mpath)
        self._points: dict[str, list[DecisionPoint]] = {}
        self._checked: set[str] = set()
        self._visible: dict[str, Prefixes] = {}

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
        return {c.id: c for c in read_parquet(self.folder / "conversations.parquet")}

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
                convs = read_parquet(self.folder / "conversations.parquet", ids=missing)
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
            names = set(pq.read_schema(path).names)
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise BenchmarkFormatError(
                f"{path}: not a readable Parquet split (damaged or truncated; rebuild it with "
                f"polylogue build): {exc}"
            ) from None
        missing = sorted(set(_SPLIT_COLUMNS) - names)
        if missing:
            raise BenchmarkFormatError(
                f"{path}: not a decision-point split (no column {', '.join(missing)}; "
                f"it has {', '.join(sorted(names))})"
            )
        self._checked.add(str(path))

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
            import pyarrow.parquet as pq

            col = pq.read_table(pq_path, columns=["conversation_id"]).column(0)
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
                    domain=r["domain"],
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


def _read_split_table(path: Path) -> Any:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise BenchmarkFormatError(f"{path}: not a readable Parquet split: {exc}") from None


#: What reading an older benchmark format as the current one changes (it is upgraded on load).
_UPGRADES = {
    1: "outcomes are derived from the labels (no BACKCHANNEL), there is no SA category and "
    "points sit at every utterance boundary, not at real pauses: scores are not comparable "
    "with a current build",
    2: "Molweni is grouped as before (train and test share messages), and the v2.1 "
    "definitions (S3, answers as floor takes, one backchannel rule, targets) are not applied",
    3: "the benchmark v2 definitions: no S3 (silent participants of the exchange count as "
    "S1 bystanders), answers counted as backchannels, non-people as targets (v2.1 changed them)",
}


def check_format_version(version: Any, manifest: Path) -> None:
    """Read an older benchmark format with a warning that says what the upgrade means; refuse
    a newer one (or a version that is not a number).

    The upgrade is what loading already does (``DecisionGold.floor_outcome`` derives a v1
    point's outcome from its label); the warning makes it visible instead of silent.
    """
    if version == FORMAT_VERSION:
        return
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BenchmarkFormatError(
            f"{manifest}: format_version {version!r} is not a benchmark format number"
        )
    if version > FORMAT_VERSION:
        raise BenchmarkFormatError(
            f"{manifest}: benchmark format {version} is newer than this polylogue reads "
            f"({FORMAT_VERSION}); upgrade polylogue"
        )
    note_input(
        "old benchmark format",
        manifest,
        "",
        f"benchmark format {version} upgraded to format {FORMAT_VERSION} on reading: "
        f"{_UPGRADES.get(version, 'an older layout')}; rebuild it with `polylogue build` "
        "(same options) for a current one",
    )


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
    except (pa.ArrowInvalid, KeyError):
        return None  # an older layout: read it whole
    rows: list[dict[str, Any]] = table.to_pylist()
    for r in rows:  # nested selections come back flattened: put them back under "input"
        r["input"] = {"target": r.pop("target"), "present": r.pop("present")}
    return rows


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


def load_benchmark(folder: str | Path) -> Benchmark:
    return Benchmark(folder)


def render_point(p: DecisionPoint, max_context: int = 8, show_gold: bool = True) -> str:
    """A readable view of one decision point (for ``polylogue inspect``)."""
    names = {q.id: q.display_name for q in p.input.present}
    target = p.input.target
    lines = [
        f"{p.point_id}  [{p.input.corpus}/{p.split or '-'}]  target: {target.display_name}"
        + (f" ({target.role})" if target.role else ""),
        "present: "
        + ", ".join(
            f"{q.display_name}" + (f" ({q.role})" if q.role else "") for q in p.input.present
        ),
    ]
    hist = p.input.history
    skipped = len(hist) - max_context
    if skipped > 0:
        lines.append(f"  ... {skipped} earlier utterances ...")
    for u in hist[-max_context:]:
        mark = "*" if u.speaker == target.id else " "
        lines.append(f" {mark} {names.get(u.speaker, u.speaker)}: {u.text}")
    cur = p.input.current
    lines.append(f" > {names.get(cur.speaker, cur.speaker)}: {cur.text}")
    lines.append("   [pause]")
    if show_gold:
        g = p.gold
        ev = g.address_evidence or g.reference_evidence or "-"
        pause = "" if g.pause_s is None else f"  pause {g.pause_s:.2f} s at {g.pause_time:.2f}"
        lines.append(
            f"gold: {g.label.value} ({g.floor_outcome.value})  category {g.category.value} "
            f"(paper {_paper_cat(g)}, fine {g.fine_category}, evidence {ev})"
            f"  next: {names.get(g.next_speaker or '', g.next_speaker)}{pause}"
        )
    return "\n".join(lines)


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
