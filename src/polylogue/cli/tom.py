"""``polylogue tom validate|run|score|report|export|media|build``: the MeetingToM harness."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from polylogue.cli.output import (
    WholeHelpGroup,
    check_output_folder,
    counter_progress,
    markdown_table,
    plain_console,
)
from polylogue.tom.generators import KIND_SUMMARY

console = plain_console(stderr=True)
tom_app = typer.Typer(
    name="tom",
    help="MeetingToM: validate the release, run models, score (official/strict), report tables.",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help, see polylogue.cli.app
    cls=WholeHelpGroup,
)

DataOpt = Annotated[
    Path | None, typer.Option("--data", help="MeetingToM folder (default: shared/data/meetingtom).")
]


def register(app: typer.Typer) -> None:
    app.add_typer(tom_app, name="tom")


def _split(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


@tom_app.command("validate")
def validate_cmd(
    data: DataOpt = None,
    show: Annotated[
        bool, typer.Option("--list", help="List every finding, not just counts.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Load all records and report the known anomalies and any inconsistencies."""
    from polylogue.tom.records import (
        KNOWN_ANOMALY_KINDS,
        anomaly_counts,
        load_tom_benchmark,
        validate,
    )

    bench = load_tom_benchmark(data)
    findings = validate(bench)
    counts = anomaly_counts(findings)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "records": {t.value: len(r) for t, r in bench.records.items()},
                    "counts": counts,
                    "findings": [f.__dict__ for f in findings] if show else None,
                },
                indent=2,
            )
        )
        return
    typer.echo(", ".join(f"{t.value}: {len(r)} records" for t, r in bench.records.items()))
    for kind, n in counts.items():
        note = KNOWN_ANOMALY_KINDS.get(kind, "UNEXPECTED: not a documented anomaly")
        typer.echo(f"{kind:24s} {n:5d}  {note}")
    if show:
        for f in findings:
            typer.echo(f"  {f.kind}\t{f.record_id}\t{f.detail}")
    unexpected = [k for k in counts if k not in KNOWN_ANOMALY_KINDS]
    typer.echo(validate_verdict(sum(len(r) for r in bench.records.values()), counts, unexpected))
    if unexpected:
        raise typer.Exit(1)


def validate_verdict(n_records: int, counts: dict[str, int], unexpected: list[str]) -> str:
    """The last line of ``tom validate``: OK, or which findings are not documented anomalies."""
    known = sum(n for k, n in counts.items() if k not in unexpected)
    if unexpected:
        return (
            f"verdict: FAIL: {len(unexpected)} undocumented finding kind(s) "
            f"({', '.join(unexpected)}) in {n_records} records"
        )
    return (
        f"verdict: OK: {n_records} records load; {known} findings, all documented anomalies "
        "of the release"
    )


def _ami_folder(ami: Path | None) -> Path:
    if ami is not None:
        return ami
    from polylogue.paths import corpus_dir

    return corpus_dir("ami")


@tom_app.command("run")
def run_cmd(
    model: Annotated[
        str,
        typer.Option(help=KIND_SUMMARY),
    ],
    variant: Annotated[
        str,
        typer.Option(
            help="Prompt variant, e.g. noprompt, cot+utter, eot+video+q1only; YOU asks Q1 and Q2 "
            "in separate prompts unless 'joint' (the official prompt, whose Q2 leaks Q1)"
        ),
    ] = "noprompt+utter",
    tasks: Annotated[str, typer.Option(help="Comma list of tasks.")] = "state,you,consensus",
    limit: Annotated[int | None, typer.Option(help="First N records per task.")] = None,
    ids: Annotated[str | None, typer.Option(help="Comma list of record ids.")] = None,
    sessions: Annotated[str | None, typer.Option(help="Comma list of AMI sessions.")] = None,
    out: Annotated[Path, typer.Option(help="Root of run folders.")] = Path("runs/tom"),
    data: DataOpt = None,
    ami: Annotated[
        Path | None, typer.Option(help="AMI manual annotations (transcripts, priors).")
    ] = None,
    ami_media: Annotated[
        Path | None, typer.Option(help="Local licensed AMI video/audio root.")
    ] = None,
    media_out: Annotated[Path | None, typer.Option(help="Where cut clips and frames go.")] = None,
    video_mode: Annotated[
        str, typer.Option(help="openai: 'frames' (images) or 'video' parts.")
    ] = "frames",
    hf_mode: Annotated[
        str, typer.Option(help="hf: 'choice' (option scoring) or 'generate'.")
    ] = "choice",
    max_prompt_tokens: Annotated[int, typer.Option(help="hf: prompt token budget.")] = 2048,
    threads: Annotated[int | None, typer.Option(help="hf: torch CPU threads.")] = None,
    cache: Annotated[
        Path | None,
        typer.Option(help="hf:/openai: response cache (SQLite) for repeated identical requests."),
    ] = None,
    folds: Annotated[
        int,
        typer.Option(help="heuristic, majority-cv: cross-fitting folds over AMI meeting series."),
    ] = 3,
) -> None:
    """Run a model over records; resumes in the same hash-keyed run folder."""
    from polylogue.tom.generators import GeneratorFit, generator_kind
    from polylogue.tom.prompts import parse_variant
    from polylogue.tom.records import load_tom_benchmark
    from polylogue.tom.runner import run_tom

    kind, target = generator_kind(model)  # an unknown spec fails before any data is read
    options = parse_variant(variant)
    check_output_folder(out, "--out")
    if media_out is not None:
        check_output_folder(media_out, "--media-out")
    bench = load_tom_benchmark(data)
    records = bench.select(_split(tasks), _split(ids), _split(sessions), limit)
    if not records:
        raise typer.BadParameter("no records match the selection")
    flags = {
        "mode": hf_mode,
        "max_prompt_tokens": max_prompt_tokens,
        "threads": threads,
        "video_mode": video_mode,
        "cache_path": cache,
    }
    fit = GeneratorFit(
        records=records,
        all_records=list(bench.all_records()),
        ami_folder=_ami_folder(ami),
        folds=folds,
    )
    generator = kind.load(model, target, fit, {k: v for k, v in flags.items() if kind.takes(k)})
    media = None
    if options.uses_video:
        if ami_media is None:
            raise typer.BadParameter(f"variant {options.name} shows video: pass --ami-media")
        media = _media_provider(ami_media, media_out or out / "_media", options)
    result = run_tom(
        bench,
        records,
        generator,
        options,
        out,
        ami_folder=_ami_folder(ami),
        media=media,
        progress=counter_progress(console, "records"),
    )
    console.print(
        f"{result.folder}: {result.generated} new, {result.reused} reused, {result.errors} errors",
        markup=False,
    )
    if any(r.task.value == "you" for r in records):
        from polylogue.tom.baselines import leak_metrics

        leak = leak_metrics(records)
        if leak is not None:
            console.print(
                f"reference: copying Q2's subject answers Task 2.1 at {100 * leak.accuracy:.2f}% "
                f"({round(leak.accuracy * leak.n)}/{leak.n}) on these YOU records with the joint "
                "prompt"
            )
    typer.echo(str(result.folder))


def _media_provider(ami_media: Path, media_out: Path, options: Any) -> Any:
    from polylogue.tom.media import (
        AmiMediaSource,
        build_record_media,
        confined,
        frames_for_record,
    )

    source = AmiMediaSource(ami_media)

    def provide(record: Any, opts: Any) -> Any:
        built = build_record_media(record.item.reconstruction, source, media_out)
        frames_dir = confined(
            media_out,
            "frames",
            record.item.bundle_name,
            opts.frame_sampling.describe().replace(" ", "_").replace("/", "_"),
            what=record.id,
        )
        return frames_for_record(built, frames_dir, opts.frame_sampling)

    return provide


@tom_app.command("score")
def score_cmd(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Run folders, or one folder of official-style prediction files."),
    ],
    mode: Annotated[str, typer.Option(help="official, strict or both.")] = "both",
    data: DataOpt = None,
    out: Annotated[
        Path | None, typer.Option(help="Write overall_summary.csv (official) and scores.json here.")
    ] = None,
    only_windows: Annotated[str, typer.Option(help="STATE windows to score.")] = "0,1",
    labels: Annotated[str | None, typer.Option(help="Official: override every label list.")] = None,
) -> None:
    """Score run folders (strict and/or official) or an official prediction folder."""
    from polylogue.tom.records import TASK_FILES, ToMTask, load_tom_benchmark
    from polylogue.tom.report import TASK32_NOTES, scores_from_run
    from polylogue.tom.runner import MANIFEST
    from polylogue.tom.scoring import score_official

    bench = load_tom_benchmark(data)
    windows = tuple(int(w) for w in only_windows.split(","))
    modes = ["official", "strict"] if mode == "both" else [mode]
    results: list[dict[str, Any]] = []
    for path in paths:
        if (path / MANIFEST).is_file():
            scored = [scores_from_run(bench, path, m) for m in modes]
            results += [s.to_dict() for s in scored]
            typer.echo(f"\n{path.name}\n\n{run_score_table(scored)}")
        else:  # a folder of official-style prediction files
            res = score_official(
                [bench.folder / TASK_FILES[t] for t in ToMTask],
                path,
                only_windows=windows,
                labels_override=_split(labels),
            )
            rows = res.summary_rows()
            if rows:
                header = list(rows[0])
                table = markdown_table(header, [[r[h] for h in header] for r in rows])
                note = f"- cons_q2_cond_acc = {TASK32_NOTES['t32']}"
                typer.echo(f"\n{path}\n\n{table}\n\n{note}")
            if out is not None:
                res.write_summary(out)
            results += [f.to_dict() for f in res.files]
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "scores.json").write_text(json.dumps(results, indent=2), encoding="utf-8")


def run_score_table(scored: list[Any]) -> str:
    """One row per task/metric, a column per scoring mode (%), then items and strict coverage;
    below it, what the modes and the Task 3.2 rows mean."""
    from polylogue.tom.report import METRICS, MODE_RULES, task32_notes

    header = ["metric", *(f"{s.mode} %" for s in scored), "items", "coverage"]
    rows = []
    shown = []
    for key, title in METRICS:
        values = [s.values.get(key) for s in scored]
        task = key.rsplit("_", 1)[0]
        n = next((s.n[task] for s in scored if task in s.n), None)
        if all(v is None for v in values) and n is None:
            continue  # an empty subset (n = 0, e.g. no predicted PC) is still a row
        shown.append(key)
        cov = next((s.coverage[task] for s in scored if task in s.coverage), None)
        rows.append(
            [
                title,
                *("-" if v is None else f"{100 * v:.2f}" for v in values),
                "" if n is None else str(n),
                "" if cov is None else f"{100 * cov:.0f}%",
            ]
        )
    notes = [f"{s.mode} %: {MODE_RULES[s.mode]}" for s in scored]
    if any(s.mode == "strict" for s in scored):
        notes.append("coverage: the share of items with a valid answer (strict)")
    notes += task32_notes(scored, shown)
    return markdown_table(header, rows) + "\n\n" + "\n".join(f"- {n}" for n in notes)


@tom_app.command("report")
def report_cmd(
    runs: Annotated[list[Path], typer.Argument(help="Run folders.")],
    mode: Annotated[str, typer.Option(help="official or strict.")] = "strict",
    modality: Annotated[
        str, typer.Option(help="Modality the ablation tables are built around.")
    ] = "both",
    data: DataOpt = None,
    out: Annotated[Path | None, typer.Option(help="Write the Markdown report here.")] = None,
    labels: Annotated[
        bool, typer.Option("--labels", help="Add per-label tables and confusion matrices.")
    ] = False,
) -> None:
    """Markdown tables in the layouts of the paper's Tables 1-6."""
    from polylogue.tom.records import load_tom_benchmark
    from polylogue.tom.report import build_report, label_tables, leak_values, scores_from_run

    bench = load_tom_benchmark(data)
    scores = [scores_from_run(bench, r, mode) for r in runs]
    by_id = bench.by_id()
    answered = {i for s in scores for i in s.record_ids}
    leak = leak_values([by_id[i] for i in sorted(answered) if i in by_id])
    text = build_report(scores, modality=modality, leak=leak)
    if labels:
        text += "\n" + "\n".join(label_tables(s) for s in scores)
    if out is not None:
        out.write_text(text, encoding="utf-8")
    typer.echo(text)


@tom_app.command("export")
def export_cmd(
    run: Annotated[Path, typer.Argument(help="Run folder.")],
    out: Annotated[Path, typer.Option(help="Folder for <model>_<task>_<tag>.jsonl files.")],
    name: Annotated[str | None, typer.Option(help="Model name used in the file names.")] = None,
) -> None:
    """Write a run's predictions as files the official evaluator accepts."""
    from polylogue.tom.runner import export_official

    for p in export_official(run, out, name):
        typer.echo(str(p))


@tom_app.command("media")
def media_cmd(
    ami_media: Annotated[
        Path, typer.Option(help="Local licensed AMI root (video + Mix-Headset audio).")
    ],
    out: Annotated[Path, typer.Option(help="Output root (<task>/<bundle>/media/...).")],
    ids: Annotated[
        str | None, typer.Option(help="Comma list of record ids (default: all).")
    ] = None,
    data: DataOpt = None,
    corner_audio: Annotated[bool, typer.Option(help="Mux audio into the YOU corner clip.")] = True,
) -> None:
    """Cut clips and mosaics for records from the reconstruction metadata."""
    from polylogue.tom.media import AmiMediaSource, build_record_media
    from polylogue.tom.records import load_tom_benchmark

    check_output_folder(out, "--out")

    bench = load_tom_benchmark(data)
    records = bench.select(ids=_split(ids))
    source = AmiMediaSource(ami_media)
    for rec in records:
        built = build_record_media(rec.item.reconstruction, source, out, corner_audio=corner_audio)
        typer.echo(f"{rec.id}\t" + "\t".join(str(p) for p in built.files.values()))


@tom_app.command("build")
def build_cmd(
    out: Annotated[Path, typer.Option(help="Folder for the new items (release format).")],
    ami: Annotated[
        Path | None, typer.Option(help="AMI manual annotations (default: shared data).")
    ] = None,
    meetings: Annotated[
        str | None, typer.Option(help="Comma list of AMI meetings (default: all scenario ones).")
    ] = None,
    tasks: Annotated[str, typer.Option(help="Comma list of tasks.")] = "state,you,consensus",
    per_meeting: Annotated[int, typer.Option(help="Most items per task and meeting.")] = 6,
    include_release: Annotated[
        bool,
        typer.Option(
            "--include-release", help="Also mine meetings that the release uses (default: not)."
        ),
    ] = False,
    q2_subject: Annotated[
        str,
        typer.Option(
            help="YOU Q2 names the proposed addressee as the release does ('proposal'), or "
            "says 'the addressee' ('addressee': no Q1 hint in Q2's text)."
        ),
    ] = "proposal",
    data: DataOpt = None,
) -> None:
    """Mine new MeetingToM-style items from AMI annotations, with proposed answers.

    The folder is in the release's format (``tom validate --data``, ``tom run --data`` and the
    official scorer read it); its answers are proposals until two annotators and an
    adjudicator label it: ``polylogue annotate create --meetingtom OUT ...``.
    """
    from polylogue.tom.build import ToMBuildOptions, build_items

    # BuildError is an input error: the one CLI handler prints it (exit 2).
    options = ToMBuildOptions(
        tasks=tuple(_split(tasks) or ()),
        meetings=tuple(_split(meetings) or ()) or None,
        exclude_release=not include_release,
        per_meeting=per_meeting,
        q2_subject=q2_subject,
    )
    result = build_items(_ami_folder(ami), out, options, release_folder=data)
    console.print(
        f"{len(result.items)} records from {len(result.meetings)} meetings"
        + (f" ({len(result.excluded)} release meetings left out)" if result.excluded else "")
    )
    for key, counts in result.counts.items():
        labels = ", ".join(f"{k} {v}" for k, v in counts.items() if not k.startswith("source:"))
        sources = ", ".join(
            f"{k.removeprefix('source:')} {v}" for k, v in counts.items() if k.startswith("source:")
        )
        console.print(f"  {key}: {labels} (from {sources})")
    typer.echo(str(result.folder))
