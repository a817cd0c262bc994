"""``polylogue scorecard``: thin wiring of polylogue.evaluation.scorecard."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from polylogue.models.base import BASELINE_NAMES


def register(app: typer.Typer) -> None:
    app.command("scorecard")(scorecard_command)


def scorecard_command(
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Folder for scorecard.md, .html and .json."),
    ] = None,
    data: Annotated[
        list[str] | None,
        typer.Option(
            "--data",
            "-d",
            help="Benchmark folder (polylogue build) or shared corpus name (ami, friends, "
            "earnings21, icsi, irc, molweni; paper:NAME for the paper's protocol), built once "
            "into the user cache; repeatable. Default: ami, friends, earnings21, icsi, "
            "paper:ami, paper:friends.",
        ),
    ] = None,
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            "-m",
            help="default | baseline:NAME | baselines | hf:PATH_OR_ALIAS | openai:MODEL@URL; "
            f"repeatable (default: default and two baselines). Baselines: "
            f"{', '.join(BASELINE_NAMES)}.",
        ),
    ] = None,
    operating_point: Annotated[
        list[str] | None,
        typer.Option(
            "--operating-point",
            help="Named operating point of the models that have them (repeatable; default: "
            "all: balanced, matched, polite, addressed-only).",
        ),
    ] = None,
    split: Annotated[str, typer.Option(help="train, validation or test.")] = "test",
    adapter: Annotated[
        Path | None, typer.Option(help="LoRA adapter folder for the hf: model(s).")
    ] = None,
    runs: Annotated[
        Path, typer.Option(help="Folder holding run folders (the one `eval --out` uses).")
    ] = Path("runs"),
    limit_conversations: Annotated[
        int | None,
        typer.Option(help="Corpus names only: build from the first N conversations of each."),
    ] = None,
    data_root: Annotated[
        Path | None, typer.Option(help="Folder holding the corpora (default: ../shared/data).")
    ] = None,
    n_boot: Annotated[int, typer.Option(help="Bootstrap replicates for 95% intervals.")] = 1000,
    concurrency: Annotated[int, typer.Option(help="Parallel requests (openai backend).")] = 8,
    api_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the API key (openai backend).")
    ] = "OPENAI_API_KEY",
    cache: Annotated[bool, typer.Option(help="Use the deterministic response cache.")] = True,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    check_doc: Annotated[
        list[Path] | None,
        typer.Option(
            help="Check the marked tables of this doc against the scorecard.json each names, "
            "then stop (repeatable; runs no model)."
        ),
    ] = None,
    update_doc: Annotated[
        list[Path] | None,
        typer.Option(help="Rewrite the marked tables of this doc from their scorecard.json."),
    ] = None,
) -> None:
    """Every model on every benchmark at every operating point, in one folder (Markdown, HTML
    with plots, JSON); reuses and resumes the runs of `eval`."""
    import sys

    from rich.console import Console

    from polylogue.cli.output import check_output_folder
    from polylogue.evaluation.scorecard import (
        DEFAULT_DATA,
        DEFAULT_MODELS,
        ScorecardError,
        ScorecardOptions,
        collect,
        expand_models,
        resolve_data,
        run_scorecard,
    )
    from polylogue.evaluation.scorecard_pages import write_pages
    from polylogue.paths import user_cache_dir

    console = Console(stderr=True, soft_wrap=True)
    if check_doc or update_doc:
        _docs(check_doc or [], update_doc or [])
        return
    if out is None:
        raise ScorecardError("--out: give the folder to write the scorecard to")
    check_output_folder(out, "--out")  # before any evaluation runs
    contenders = expand_models(list(model or DEFAULT_MODELS), operating_point)
    if adapter is not None and not any(c.kind == "hf" for c in contenders):
        # As in `eval`: an adapter folder from `polylogue train` names its base model.
        from polylogue.cli.eval import _adapter_meta

        base = _adapter_meta(adapter).get("model_spec")
        if not base:
            raise ScorecardError(
                f"--adapter {adapter} names no base model: give it with --model hf:PATH"
            )
        contenders += expand_models([str(base)], None)
    backend = {c.spec: _backend_options(c.kind, runs, cache, adapter, concurrency, api_key_env)
               for c in contenders}  # fmt: skip

    def log(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    cache_dir = user_cache_dir()
    sources = [
        resolve_data(
            d, cache_dir, data_root=data_root, limit_conversations=limit_conversations, log=log
        )
        for d in dict.fromkeys(data or DEFAULT_DATA)
    ]
    options = ScorecardOptions(
        data=sources,
        contenders=contenders,
        split=split,
        runs_dir=runs,
        n_boot=n_boot,
        progress=progress,
        backend_options=backend,
    )
    done = run_scorecard(options, log)
    card = collect(done, options, ["polylogue", *sys.argv[1:]])
    paths = write_pages(card, out)
    for p in paths[:3]:
        typer.echo(str(p))
    typer.echo(f"open in a browser: {paths[2].resolve().as_uri()}")


def _backend_options(
    kind: str, runs: Path, cache: bool, adapter: Path | None, concurrency: int, api_key_env: str
) -> dict[str, Any]:
    """What ``eval`` would build this model kind with (so both use the same run folders)."""
    from polylogue.cli.eval import _adapter_meta, predictor_options
    from polylogue.prompts.builder import PromptOptions

    meta = _adapter_meta(adapter) if kind == "hf" else {}
    prompt = PromptOptions(**meta["prompt"]) if meta.get("prompt") else PromptOptions()
    return predictor_options(
        kind,
        prompt=prompt,
        cache_path=runs / "_cache" / "responses.sqlite" if cache else None,
        batch_size=None,
        concurrency=concurrency,
        api_key_env=api_key_env,
        given={"adapter": None if adapter is None or kind != "hf" else str(adapter)},
        option=[],
    )


def _docs(check: list[Path], update: list[Path]) -> None:
    from polylogue.evaluation.scorecard_docs import check_doc, update_doc

    for doc in update:
        n = update_doc(doc)
        typer.echo(f"{doc}: {n} table(s) rewritten")
    problems = [p for doc in check for p in check_doc(doc)]
    for p in problems:
        typer.echo(p)
    if problems:
        raise typer.Exit(1)
    for doc in check:
        typer.echo(f"{doc}: every scorecard table matches")
