"""``polylogue addressing``: addressee recognition and next speaker / responder P@1 on chat."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated

import typer

from polylogue.cli.output import plain_console

console = plain_console(stderr=True)

#: Corpora with reply structure, and the splits their readers know.
CHAT_CORPORA: dict[str, tuple[str, ...]] = {
    "irc": ("train", "dev", "test"),
    "molweni": ("dev", "test"),
}


def register(app: typer.Typer) -> None:
    app.command("addressing")(addressing)


def addressing(
    corpus: Annotated[
        list[str] | None,
        typer.Option("--corpus", "-c", help="irc and/or molweni (repeatable; default both)."),
    ] = None,
    split: Annotated[str, typer.Option(help="The corpus's own split: dev or test.")] = "test",
    task: Annotated[
        list[str] | None,
        typer.Option(
            "--task", help="addressee, next-speaker, responder (repeatable; default all)."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Write report.md and report.json to this folder.")
    ] = None,
    data_root: Annotated[
        Path | None, typer.Option(help="Folder holding the corpora (default: ../shared/data).")
    ] = None,
    limit_conversations: Annotated[
        int | None, typer.Option(help="Use only the first N conversations of each corpus.")
    ] = None,
    model: Annotated[
        bool,
        typer.Option(
            "--model/--no-model",
            help="Also rank next speaker / responder by the shipped turn-taking model's P(SPEAK).",
        ),
    ] = False,
    model_dir: Annotated[
        Path | None, typer.Option(help="A model folder from train-default (with --model).")
    ] = None,
) -> None:
    """Score the addressing baselines (P@1) on IRC and Molweni; prints a Markdown report."""
    from polylogue.addressing import Task, evaluate_task, examples, report_markdown, write_reports
    from polylogue.addressing.baselines import baselines_for
    from polylogue.addressing.model import turn_taking_ranker
    from polylogue.corpora import corpus_folder, load_corpus

    corpora = corpus or list(CHAT_CORPORA)
    for c in corpora:
        if c not in CHAT_CORPORA:
            raise typer.BadParameter(
                f"{c!r} has no reply structure; choose from {', '.join(CHAT_CORPORA)}"
            )
        if split not in CHAT_CORPORA[c]:
            raise typer.BadParameter(
                f"corpus {c} has no split {split!r} (has {', '.join(CHAT_CORPORA[c])})"
            )
    try:
        tasks = [Task(t) for t in task] if task else list(Task)
    except ValueError:
        raise typer.BadParameter(
            f"unknown task in {task}; known: {', '.join(t.value for t in Task)}"
        ) from None
    reports = []
    for name in corpora:
        folder = corpus_folder(name, data_root)
        convs = list(itertools.islice(load_corpus(name, folder, splits=split), limit_conversations))
        for t in tasks:
            predictors = baselines_for(t)
            if model and t is not Task.ADDRESSEE:
                predictors["turn-taking model"] = turn_taking_ranker(
                    list(examples(convs, t)), model_dir
                )
            reports.append(evaluate_task(convs, t, f"{name}/{split}", predictors))
    text = report_markdown(reports)
    plain_console().print(text, markup=False, highlight=False)
    if out is not None:
        console.print(f"[green]wrote[/green] {write_reports(reports, out)}")
