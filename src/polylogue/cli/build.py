"""``polylogue build`` and ``polylogue inspect``: make and look at turn-taking benchmarks."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from polylogue.cli.output import plain_console
from polylogue.conversation import DEFAULT_GAP_S, DOMAIN_NAMES, Conversation, check_domain_name
from polylogue.corpora import CORPORA

console = plain_console(stderr=True)


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
            help=f"Shared corpus: {', '.join(CORPORA.names())} (repeatable).",
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
    domain: Annotated[
        str | None,
        typer.Option(
            "--domain",
            help=f"Domain of every --transcript: {', '.join(DOMAIN_NAMES)} (else a JSONL "
            "header's 'domain', else meeting). With chat every message is a decision moment, "
            "whatever its timestamps say.",
        ),
    ] = None,
    data_root: Annotated[
        Path | None, typer.Option(help="Folder holding the corpora (default: ../shared/data).")
    ] = None,
    unit: Annotated[
        str | None,
        typer.Option(
            help="AMI unit: 'ipu' (acts split at word gaps: pauses cut at word level; default), "
            "'da' (dialogue acts; the paper protocol's default) or 'turn'."
        ),
    ] = None,
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
    gap: Annotated[
        float,
        typer.Option(
            help="Silence in seconds after speech that makes a pause (timed corpora).", min=0.0
        ),
    ] = DEFAULT_GAP_S,
    protocol: Annotated[
        str,
        typer.Option(
            help="'default' (real pauses, three outcomes, grouped causal splits) or 'paper' "
            "(the authors' utterance boundaries, per-sample category-stratified split, 50/50 "
            "classes; leaks context across splits, for comparison with the paper only)."
        ),
    ] = "default",
    keep_no_context: Annotated[
        bool, typer.Option(help="Keep points with no earlier context (the paper drops them).")
    ] = False,
    jsonl: Annotated[
        bool,
        typer.Option("--jsonl", help="Also write each split as JSONL (default: Parquet only)."),
    ] = False,
) -> None:
    """Build a turn-taking benchmark (decision points, categories, grouped splits)."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from polylogue.cli.output import check_output_folder

    check_output_folder(out, "--out")  # before the corpora are read

    from polylogue.corpora import corpus_folder, load_corpus
    from polylogue.corpora.segments import expand_transcript_paths, read_transcript_parts
    from polylogue.corpora.transcripts import TRANSCRIPT_FORMATS
    from polylogue.turntaking.dataset import (
        BuildOptions,
        build_benchmark,
        corpus_input,
        reader_options,
        save_benchmark,
        stats_markdown,
        transcript_input,
    )
    from polylogue.turntaking.points import PointOptions

    if protocol not in ("default", "paper"):
        raise typer.BadParameter(f"--protocol must be 'default' or 'paper', not {protocol!r}")
    paper = protocol == "paper"
    units = [u for c in CORPORA if c.units is not None for u in c.units.choices]
    if unit is not None and unit not in units:
        names = ", ".join(f"'{u}'" for u in dict.fromkeys(units))
        raise typer.BadParameter(f"--unit must be one of {names}, not {unit!r}")

    if fmt is not None and fmt not in TRANSCRIPT_FORMATS:
        raise typer.BadParameter(f"unknown format {fmt!r}; known: {', '.join(TRANSCRIPT_FORMATS)}")
    check_domain_name(domain, "--domain")
    if reset_after is not None and reset_after <= 0:
        raise typer.BadParameter("must be positive seconds", param_hint="--reset-after")
    corpora = corpus or []
    transcripts = expand_transcript_paths(transcript or [], fmt)
    if not corpora and not transcripts:
        raise typer.BadParameter("give at least one --corpus or --transcript")
    for c in corpora:
        if c not in CORPORA:
            raise typer.BadParameter(str(CORPORA.unknown(c)))

    inputs: dict[str, dict[str, str]] = {}
    current = {"input": ""}  # what the progress line names

    def sources() -> Iterator[Conversation]:
        for name in corpora:
            current["input"] = name
            folder = corpus_folder(name, data_root)
            inputs[name] = corpus_input(folder)
            opts = reader_options(name, gap, "paper" if paper else "default", unit)
            yield from itertools.islice(load_corpus(name, folder, **opts), limit_conversations)
            progress.advance(task)
        if not transcripts:
            return
        seen: set[str] = set()
        for path in transcripts:
            current["input"] = path.name
            inputs[f"transcript:{path}"] = transcript_input(path, domain)
            parts = read_transcript_parts(path, format=fmt, reset_after=reset_after, domain=domain)
            if any(c.id in seen for c in parts):
                # Several files from one template: fall back to the file name (then its path).
                for cid in (path.stem, str(path)):
                    parts = read_transcript_parts(path, fmt, cid, reset_after, domain)
                    if not any(c.id in seen for c in parts):
                        break
            seen.update(c.id for c in parts)
            yield from parts
            progress.advance(task)

    options = BuildOptions(
        points=PointOptions(
            timing="utterance" if paper else "auto",
            gap=gap,
            backchannels=not paper,
            keep_no_context=keep_no_context,
        ),
        protocol="paper" if paper else "default",
        seed=42 if paper and seed == 13 else seed,
        merge_turns=merge_turns,
        dedup=not no_dedup,
        max_points={"train": max_train} if max_train else {},
        context_turns=context_turns,
        require_addressee_annotation=annotated_only,
    )
    # The total is the inputs (each corpus, each transcript file): readers stream their
    # conversations, so how many a corpus holds is known only once it is read.
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]building[/bold] {task.description}"),
        BarColumn(),
        TextColumn(
            "{task.completed}/{task.total} inputs, {task.fields[conversations]:,} conversations"
        ),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("", total=len(corpora) + len(transcripts), conversations=0)
        n_conversations = itertools.count(1)

        def tick(conv: Conversation) -> None:
            progress.update(
                task,
                description=escape(f"{current['input']}: {conv.id}"),
                conversations=next(n_conversations),
            )

        result = build_benchmark(sources(), options, on_conversation=tick)
    formats = ("parquet", "jsonl") if jsonl else ("parquet",)
    folder = save_benchmark(result, out, inputs=inputs, formats=formats)
    console.print(stats_markdown(result.points))
    console.print(
        f"[green]wrote[/green] {escape(str(folder))}  ({result.counts['points']:,} points from "
        f"{result.counts['conversations']:,} conversations; "
        f"{result.counts.get('duplicates_removed', 0):,} duplicates removed)"
    )


def inspect(
    folder: Annotated[Path, typer.Argument(help="A benchmark folder.")],
    split: Annotated[str, typer.Option(help="train, validation or test.")] = "test",
    category: Annotated[
        str | None, typer.Option(help="Only this category (I1, I2, S1, S2, S3, SA).")
    ] = None,
    outcome: Annotated[
        str | None,
        typer.Option(help="Only this outcome (TAKE_FLOOR, BACKCHANNEL, SILENT)."),
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

    from polylogue.turntaking.dataset import acknowledgement, load_benchmark, render_point

    bench = load_benchmark(folder)
    if split not in bench.splits:
        raise typer.BadParameter(f"no split {split!r} (have {', '.join(bench.splits)})")
    # Filter and sample on the point index; build only the points that are shown.
    index = bench.point_index(split)
    keys = index
    if point_id:
        keys = [k for k in keys if k.point_id == point_id]
        if not keys:
            raise typer.BadParameter(f"no point {point_id!r} in split {split}")
    if category:
        keys = [k for k in keys if k.category == category.upper()]
    if outcome:
        keys = [k for k in keys if k.outcome == outcome.upper()]
    keys = random.Random(seed).sample(keys, min(n, len(keys))) if seed is not None else keys[:n]
    by_id = {p.point_id: p for p in bench.points_by_id(split, [k.point_id for k in keys])}
    pts = [by_id[k.point_id] for k in keys]
    out = plain_console()
    for p in pts:
        # A BACKCHANNEL point shows what the target said: the acknowledgement it is about.
        ack = None
        if not no_gold and p.gold.floor_outcome.value == "BACKCHANNEL":
            ack = acknowledgement(p, bench.conversations[p.input.conversation_id])
        out.print(
            render_point(p, max_context=context, show_gold=not no_gold, acknowledged=ack),
            markup=False,
            highlight=False,
        )
        out.print()
    from collections import Counter

    from polylogue.turntaking.types import CATEGORIES, OUTCOMES

    table = Table(title=escape(f"{bench.name}/{split}"))
    cats = [c.value for c in CATEGORIES]
    outs = [o.value for o in OUTCOMES]
    for col in ("points", *cats, *outs):
        table.add_column(col, justify="right")
    by_cat = Counter(k.category for k in index)
    by_out = Counter(k.outcome for k in index)
    table.add_row(
        f"{len(index):,}", *(f"{by_cat[c]:,}" for c in cats), *(f"{by_out[o]:,}" for o in outs)
    )
    out.print(table)
