"""``polylogue build`` and ``polylogue inspect``: make and look at turn-taking benchmarks."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from polylogue.conversation import Conversation

console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.command("build")(build)
    app.command("inspect")(inspect)


def build(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output benchmark folder.")],
    corpus: Annotated[
        list[str] | None,
        typer.Option(
            "--corpus",
            "-c",
            help="Shared corpus: ami, friends, earnings21, icsi, irc, molweni (repeatable).",
        ),
    ] = None,
    transcript: Annotated[
        list[str] | None,
        typer.Option(
            "--transcript",
            "-t",
            help="A user transcript (JSONL, CSV, WebVTT, text), a folder of them or a glob "
            "('calls/*.vtt'); repeatable.",
        ),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="Transcript format for every --transcript (else suffix)."),
    ] = None,
    reset_after: Annotated[
        float | None,
        typer.Option(
            help="Start a new conversation after a silence longer than this many seconds "
            "(break markers in the files always do)."
        ),
    ] = None,
    data_root: Annotated[
        Path | None, typer.Option(help="Folder holding the corpora (default: ../shared/data).")
    ] = None,
    unit: Annotated[str, typer.Option(help="AMI unit: 'da' (dialogue acts) or 'turn'.")] = "da",
    merge_turns: Annotated[
        bool, typer.Option(help="Merge consecutive same-speaker utterances of every corpus.")
    ] = False,
    limit_conversations: Annotated[
        int | None, typer.Option(help="Use only the first N conversations of each corpus.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for splits and subsampling.")] = 13,
    max_train: Annotated[
        int | None, typer.Option(help="Stratified subsample of the train split to this size.")
    ] = None,
    context_turns: Annotated[
        int, typer.Option(help="Materialise the last K context turns into the point files.")
    ] = 0,
    no_dedup: Annotated[bool, typer.Option("--no-dedup", help="Keep exact duplicates.")] = False,
    annotated_only: Annotated[
        bool,
        typer.Option(help="Keep only conversations with addressee annotation (AMI: 22 meetings)."),
    ] = False,
) -> None:
    """Build a turn-taking benchmark (decision points, categories, grouped splits)."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from polylogue.corpora import READERS, load_corpus
    from polylogue.corpora.segments import expand_transcript_paths, read_transcript_parts
    from polylogue.corpora.transcripts import TRANSCRIPT_FORMATS
    from polylogue.paths import corpus_dir
    from polylogue.turntaking.dataset import (
        BuildOptions,
        build_benchmark,
        hash_tree,
        save_benchmark,
        stats_markdown,
    )

    if fmt is not None and fmt not in TRANSCRIPT_FORMATS:
        raise typer.BadParameter(f"unknown format {fmt!r}; known: {', '.join(TRANSCRIPT_FORMATS)}")
    if reset_after is not None and reset_after <= 0:
        raise typer.BadParameter("must be positive seconds", param_hint="--reset-after")
    corpora = corpus or []
    transcripts = expand_transcript_paths(transcript or [], fmt)
    if not corpora and not transcripts:
        raise typer.BadParameter("give at least one --corpus or --transcript")
    for c in corpora:
        if c not in READERS:
            raise typer.BadParameter(f"unknown corpus {c!r}; known: {', '.join(sorted(READERS))}")

    inputs: dict[str, dict[str, str]] = {}

    def sources() -> Iterator[Conversation]:
        for name in corpora:
            folder = corpus_dir(READERS[name][1], data_root)
            inputs[name] = {"path": str(folder), "sha256": hash_tree(folder)}
            opts = {"unit": unit} if name == "ami" else {}
            yield from itertools.islice(load_corpus(name, folder, **opts), limit_conversations)
        if not transcripts:
            return
        seen: set[str] = set()
        for path in transcripts:
            inputs[f"transcript:{path}"] = {
                "path": str(path),
                "sha256": hash_tree(path.parent, [path.name]),
            }
            parts = read_transcript_parts(path, format=fmt, reset_after=reset_after)
            if any(c.id in seen for c in parts):
                # Several files from one template: fall back to the file name (then its path).
                for cid in (path.stem, str(path)):
                    parts = read_transcript_parts(path, fmt, cid, reset_after)
                    if not any(c.id in seen for c in parts):
                        break
            seen.update(c.id for c in parts)
            yield from parts

    options = BuildOptions(
        merge_turns=merge_turns,
        dedup=not no_dedup,
        seed=seed,
        max_points={"train": max_train} if max_train else {},
        context_turns=context_turns,
        require_addressee_annotation=annotated_only,
    )
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]building[/bold] {task.description}"),
        BarColumn(),
        TextColumn("{task.completed} conversations"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("", total=None)

        def tick(conv: Conversation) -> None:
            progress.update(task, advance=1, description=conv.id)

        result = build_benchmark(sources(), options, on_conversation=tick)
    folder = save_benchmark(result, out, inputs=inputs)
    console.print(stats_markdown(result.points))
    console.print(
        f"[green]wrote[/green] {folder}  ({result.counts['points']:,} points from "
        f"{result.counts['conversations']:,} conversations; "
        f"{result.counts.get('duplicates_removed', 0):,} duplicates removed)"
    )


def inspect(
    folder: Annotated[Path, typer.Argument(help="A benchmark folder.")],
    split: Annotated[str, typer.Option(help="train, validation or test.")] = "test",
    category: Annotated[
        str | None, typer.Option(help="Only this category (I1, I2, S1, S2).")
    ] = None,
    n: Annotated[int, typer.Option("-n", help="How many points.")] = 5,
    context: Annotated[int, typer.Option(help="Earlier utterances to show.")] = 8,
    seed: Annotated[
        int | None, typer.Option(help="Random sample with this seed (default: first N).")
    ] = None,
    point_id: Annotated[str | None, typer.Option("--id", help="Show one point by id.")] = None,
    no_gold: Annotated[bool, typer.Option("--no-gold", help="Hide labels.")] = False,
) -> None:
    """Print decision points of a benchmark in a readable form."""
    import random

    from polylogue.turntaking.dataset import load_benchmark, render_point

    bench = load_benchmark(folder)
    pts = bench.points(split)
    if point_id:
        pts = [p for p in pts if p.point_id == point_id]
        if not pts:
            raise typer.BadParameter(f"no point {point_id!r} in split {split}")
    if category:
        pts = [p for p in pts if p.gold.category.value == category.upper()]
    if seed is not None:
        pts = random.Random(seed).sample(pts, min(n, len(pts)))
    out = Console()
    for p in pts[:n]:
        out.print(
            render_point(p, max_context=context, show_gold=not no_gold),
            markup=False,
            highlight=False,
        )
        out.print()
    table = Table(title=f"{bench.name}/{split}")
    for col in ("points", "I1", "I2", "S1", "S2"):
        table.add_column(col, justify="right")
    allp = bench.points(split)
    counts = {c: sum(p.gold.category.value == c for p in allp) for c in ("I1", "I2", "S1", "S2")}
    table.add_row(f"{len(allp):,}", *(f"{counts[c]:,}" for c in ("I1", "I2", "S1", "S2")))
    out.print(table)
