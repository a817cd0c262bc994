"""``polylogue annotate``: human annotation studies (create, serve, export, agreement, ...)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from polylogue.cli.output import WholeHelpGroup

# User text (study and annotator names, paths) is printed escaped and without emoji codes.
console = Console(stderr=True, emoji=False)
out = Console(emoji=False)

annotate_app = typer.Typer(
    name="annotate",
    help="Human evaluation: annotation studies, a labelling web app, agreement and baselines.",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help, see polylogue.cli.app
    cls=WholeHelpGroup,
)

DbOption = Annotated[Path, typer.Option("--db", help="The study database (SQLite file).")]
StudyOption = Annotated[str, typer.Option("--study", "-s", help="Study name.")]


def register(app: typer.Typer) -> None:
    app.add_typer(annotate_app, name="annotate")


def _fail(message: str) -> typer.Exit:
    console.print(f"error: {message}", style="red", soft_wrap=True, markup=False)
    return typer.Exit(code=2)


def _parse_quota(per_category: int | None, quota: str | None) -> int | dict[str, int] | None:
    if quota:
        parsed: dict[str, int] = {}
        for part in quota.split(","):
            cat, sep, n = part.partition("=")
            if not sep or not n.strip().isdigit():
                raise _fail(f"--quota expects CATEGORY=N,... (got {part!r})")
            parsed[cat.strip()] = int(n)
        return parsed
    return per_category


@annotate_app.command("create")
def create(
    db: DbOption,
    study: StudyOption,
    annotators: Annotated[str, typer.Option(help="Comma-separated annotator names.")],
    benchmark: Annotated[
        Path | None, typer.Option(help="A built turn-taking benchmark folder.")
    ] = None,
    split: Annotated[str, typer.Option(help="Benchmark split to sample from.")] = "test",
    meetingtom: Annotated[
        Path | None, typer.Option(help="A MeetingToM release folder (state/you/consensus.jsonl).")
    ] = None,
    tasks: Annotated[
        str | None, typer.Option(help="MeetingToM tasks, comma-separated (default: all).")
    ] = None,
    ami: Annotated[
        Path | None,
        typer.Option(help="AMI folder for MeetingToM transcript windows (default: shared data)."),
    ] = None,
    no_transcripts: Annotated[
        bool, typer.Option("--no-transcripts", help="MeetingToM: show no transcript.")
    ] = False,
    media_root: Annotated[
        Path | None, typer.Option(help="MeetingToM media made by the reconstruction script.")
    ] = None,
    stratify: Annotated[
        str, typer.Option(help="MeetingToM categories: 'task' or 'label' (task + Q1 gold).")
    ] = "task",
    per_category: Annotated[
        int | None, typer.Option(help="Items per category (default: all items).")
    ] = None,
    quota: Annotated[
        str | None, typer.Option(help="Per-category sizes, e.g. I1=100,I2=100,S1=60,S2=100.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the sample and of the item orders.")] = 13,
    adjudicator: Annotated[
        list[str] | None, typer.Option(help="Adjudicator name (repeatable).")
    ] = None,
    context_turns: Annotated[
        int, typer.Option(help="Turn-taking: context turns stored per item (0 = all).")
    ] = 40,
    instructions: Annotated[
        Path | None, typer.Option(help="A text file shown to annotators beside each item.")
    ] = None,
    base_url: Annotated[
        str, typer.Option(help="Base URL printed in the annotators' links.")
    ] = "http://127.0.0.1:8765",
) -> None:
    """Create a study: seeded sample (N per category), one shuffled order per annotator."""
    from polylogue.annotate.store import AnnotationStore, StudyKind
    from polylogue.annotate.study import (
        SamplingPlan,
        benchmark_items,
        create_study,
        meetingtom_items,
    )

    if (benchmark is None) == (meetingtom is None):
        raise _fail("give exactly one of --benchmark or --meetingtom")
    names = [a.strip() for a in annotators.split(",") if a.strip()]
    if benchmark is not None:
        kind = StudyKind.TURNTAKING
        src = benchmark_items(benchmark, split, context_turns)
    else:
        kind = StudyKind.MEETINGTOM
        ami_folder = None
        if not no_transcripts:
            from polylogue.paths import DataRootNotFound, corpus_dir

            try:
                ami_folder = ami or corpus_dir("ami")
            except DataRootNotFound:
                console.print("[yellow]no AMI folder found: items get no transcript[/yellow]")
        src = meetingtom_items(
            meetingtom,
            tasks=tasks.split(",") if tasks else None,
            ami_folder=ami_folder,
            media_root=media_root,
            stratify=stratify,
        )
    text = instructions.read_text(encoding="utf-8") if instructions else ""
    plan = SamplingPlan(_parse_quota(per_category, quota), seed)
    store = AnnotationStore(db)
    created, keys, report = create_study(
        store,
        study,
        kind,
        src.items,
        plan,
        names,
        adjudicators=adjudicator or (),
        source=src.source,
        instructions=text,
        finish=src.finish,
    )
    total = sum(report.drawn.values())
    console.print(
        f"study [bold]{escape(created.name)}[/bold]: {total} items ({kind.value}) "
        f"in {escape(str(db))}"
    )
    for cat in sorted(report.drawn):
        want = report.requested.get(cat)
        console.print(
            f"  {cat}: {report.drawn[cat]} drawn of {report.available.get(cat, 0)}"
            + (f" (asked {want})" if want is not None else ""),
            markup=False,
        )
    console.print("Links (shown once; the database keeps only hashes):")
    adjudicators = set(adjudicator or ())
    for name, key in keys.items():
        path = "adjudicate" if name in adjudicators else "a"
        out.print(f"{name}\t{base_url.rstrip('/')}/{path}/{key}", soft_wrap=True, markup=False)


@annotate_app.command("assign")
def assign(
    db: DbOption,
    study: StudyOption,
    name: Annotated[str, typer.Option(help="Annotator to add, or whose key to re-issue.")],
    adjudicator: Annotated[
        bool, typer.Option(help="Give this person the adjudicator view.")
    ] = False,
    base_url: Annotated[
        str, typer.Option(help="Base URL for the printed link.")
    ] = "http://127.0.0.1:8765",
) -> None:
    """Add an annotator to a study, or issue a new key (their answers are kept)."""
    from polylogue.annotate.store import AnnotationStore, Role
    from polylogue.annotate.study import annotator_order

    store = AnnotationStore(db)
    s = store.study(study)
    existing = {a.name: a for a in store.annotators(s)}
    ids = [it.item_id for it in store.items(s)]
    order = existing[name].order if name in existing else annotator_order(ids, s.seed, name)
    role = Role.ADJUDICATOR if adjudicator else Role.ANNOTATOR
    key = store.add_annotator(s, name, order, role=role)
    path = "adjudicate" if adjudicator else "a"
    out.print(f"{name}\t{base_url.rstrip('/')}/{path}/{key}", soft_wrap=True, markup=False)


@annotate_app.command("serve")
def serve(
    db: DbOption,
    host: Annotated[
        str, typer.Option(help="Interface to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="TCP port (0: any free port; the real one is printed).")
    ] = 8765,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="Permit a non-loopback --host (needs --token).")
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="POLYLOGUE_ANNOTATE_TOKEN", help="Server token required on every request."
        ),
    ] = None,
    media_root: Annotated[
        Path | None, typer.Option(help="Override the MeetingToM media folder of the studies.")
    ] = None,
) -> None:
    """Serve the labelling app. Annotators open the links printed by `create`/`assign`."""
    from polylogue.extras import require_extra

    require_extra("annotate", "fastapi", "uvicorn", what="polylogue annotate serve")
    from polylogue.annotate.app import check_binding
    from polylogue.annotate.app import serve_study as run_server

    check_binding(host, allow_remote, token)  # AccessError: an input error (exit 2)
    if not db.is_file():
        raise _fail(f"{db}: no such study database (create one with `polylogue annotate create`)")

    def listening(url: str) -> None:
        console.print(f"serving {db} on {url}  (Ctrl-C to stop)", markup=False, soft_wrap=True)

    run_server(
        db,
        host,
        port,
        allow_remote=allow_remote,
        token=token,
        media_root=media_root,
        on_listening=listening,
    )


@annotate_app.command("status")
def status(
    db: DbOption, study: Annotated[str | None, typer.Option("--study", "-s")] = None
) -> None:
    """Studies in a database and each annotator's progress."""
    from polylogue.annotate.store import AnnotationStore, Role

    store = AnnotationStore(db)
    studies = [store.study(study)] if study else store.studies()
    for s in studies:
        n = len(store.items(s))
        out.print(f"[bold]{escape(s.name)}[/bold] ({s.kind.value}, {n} items, seed {s.seed})")
        for a in store.annotators(s):
            if a.role is Role.ANNOTATOR:
                p = store.progress(a)
                out.print(f"  {a.name}: {p.done}/{p.total}", markup=False)
            else:
                out.print(f"  {a.name}: adjudicator", markup=False)


@annotate_app.command("agreement")
def agreement(
    db: DbOption,
    study: StudyOption,
    by_category: Annotated[bool, typer.Option(help="Also per category.")] = True,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write JSON here.")] = None,
) -> None:
    """Pairwise Cohen's κ, Fleiss' κ, Krippendorff's α and raw agreement per question/category."""
    from dataclasses import asdict

    from polylogue.annotate.analysis import agreement_report, format_agreement
    from polylogue.annotate.store import AnnotationStore

    store = AnnotationStore(db)
    summaries = agreement_report(store, store.study(study), by_category)
    out.print(format_agreement(summaries), soft_wrap=True)
    if json_out:
        rows = [{**asdict(s), "mean_cohen": s.mean_cohen} for s in summaries]
        json_out.write_text(json.dumps(rows, indent=2, default=str) + "\n", encoding="utf-8")


@annotate_app.command("adjudicate")
def adjudicate(db: DbOption, study: StudyOption) -> None:
    """Majority vote; list the ties that still need the adjudicator view."""
    from collections import Counter

    from polylogue.annotate.analysis import LabelSource, study_resolutions
    from polylogue.annotate.store import AnnotationStore, Role

    store = AnnotationStore(db)
    s = store.study(study)
    resolutions = study_resolutions(store, s)
    counts = Counter(r.source.value for r in resolutions)
    out.print(", ".join(f"{src.value}: {counts.get(src.value, 0)}" for src in LabelSource))
    ties = [r for r in resolutions if r.source is LabelSource.UNRESOLVED and r.votes]
    for r in ties:
        votes = ", ".join(f"{a}={lab}" for a, lab in r.votes.items())
        out.print(f"tie  {r.item_id}  {r.question_id}: {votes}", soft_wrap=True, markup=False)
    if ties and not any(a.role is Role.ADJUDICATOR for a in store.annotators(s)):
        console.print("add an adjudicator: polylogue annotate assign --adjudicator --name NAME ...")


@annotate_app.command("export")
def export(
    db: DbOption,
    study: StudyOption,
    answers: Annotated[
        Path | None, typer.Option(help="Write every answer here (.jsonl or .csv).")
    ] = None,
    adjudicated: Annotated[
        Path | None,
        typer.Option(help="Write the adjudicated set here, in the benchmark's own format."),
    ] = None,
    allow_unresolved: Annotated[
        bool, typer.Option(help="Drop unresolved ties instead of stopping.")
    ] = False,
) -> None:
    """Export raw answers and/or the adjudicated set."""
    from polylogue.annotate.analysis import export_adjudicated, export_answers
    from polylogue.annotate.store import AnnotationStore

    if answers is None and adjudicated is None:
        raise _fail("give --answers FILE and/or --adjudicated FOLDER")
    store = AnnotationStore(db)
    s = store.study(study)
    if answers is not None:
        n = export_answers(store, s, answers)
        console.print(f"{n} answers -> {answers}", markup=False)
    if adjudicated is not None:
        rep = export_adjudicated(store, s, adjudicated, allow_unresolved=allow_unresolved)
        console.print(
            f"{rep.items} adjudicated items -> {rep.folder} "
            f"({', '.join(f'{k} {v}' for k, v in sorted(rep.by_source.items()))}; "
            f"{rep.changed_from_gold} differ from the original gold; "
            f"{len(rep.dropped_unresolved)} dropped)",
            markup=False,
        )


@annotate_app.command("score")
def score(
    db: DbOption,
    study: StudyOption,
    predictions: Annotated[
        list[str] | None,
        typer.Option(
            "--predictions",
            "-p",
            help="NAME=RUN: an evaluation run folder (polylogue eval) scored on the same items.",
        ),
    ] = None,
    markdown: Annotated[Path | None, typer.Option(help="Also write the tables here.")] = None,
) -> None:
    """Human baselines in the layout of the paper's Table 4 (annotators, average, majority)."""
    from polylogue.annotate.baselines import baseline_tables, format_table, read_run_decisions
    from polylogue.annotate.store import AnnotationStore

    models = {}
    for spec in predictions or []:
        name, sep, path = spec.partition("=")
        if not sep:
            raise _fail(f"--predictions expects NAME=RUN_FOLDER (got {spec!r})")
        models[name] = read_run_decisions(path)
    store = AnnotationStore(db)
    tables = baseline_tables(store, store.study(study), models)
    text = "\n\n".join(f"### {t.question_id}\n\n{format_table(t)}" for t in tables)
    out.print(text, soft_wrap=True, markup=False)
    if markdown:
        markdown.write_text(text + "\n", encoding="utf-8")
