"""``polylogue eval`` and ``polylogue report``: thin wiring of polylogue.evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from polylogue.conversation import DOMAIN_NAMES
from polylogue.jsonio import JsonInputError, loads_json
from polylogue.models.base import BACKENDS, BASELINE_NAMES


def _parse_options(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--option expects KEY=VALUE, got {item!r}")
        try:
            out[key] = loads_json(value, "--option", key)
        except JsonInputError:  # not JSON (or a number out of range): the string itself
            out[key] = value
    return out


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
    app.command("report")(report_command)


def eval_command(
    data: Annotated[Path, typer.Option("--data", "-d", help="Benchmark folder (polylogue build).")],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="default | baseline:NAME | hf:PATH_OR_ALIAS | openai:MODEL@URL "
            f"(default: the shipped model). Baselines: {', '.join(BASELINE_NAMES)}.",
        ),
    ] = None,
    split: Annotated[str, typer.Option(help="train, validation or test.")] = "test",
    adapter: Annotated[Path | None, typer.Option(help="LoRA adapter folder (hf backend).")] = None,
    limit: Annotated[int | None, typer.Option(help="Only the first N points.")] = None,
    sample_seed: Annotated[
        int | None,
        typer.Option(
            help="With --limit: take the N points from this seed's category-stratified random "
            "order instead of the first N (a larger --limit extends the same sample)."
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="Folder holding run folders.")] = Path("runs"),
    concurrency: Annotated[int, typer.Option(help="Parallel requests (openai backend).")] = 8,
    batch_size: Annotated[int | None, typer.Option(help="Points per predictor call.")] = None,
    balanced: Annotated[
        bool, typer.Option(help="Evaluate a class-balanced view (majority class subsampled).")
    ] = False,
    rendering: Annotated[
        str,
        typer.Option(
            help="The words as written (original) or as a speech recognizer writes them "
            "(recognizer: lower case, no punctuation)."
        ),
    ] = "original",
    mode: Annotated[str, typer.Option(help="Prompt mode: decision or reasoning.")] = "decision",
    system_repeats: Annotated[int, typer.Option(help="System prompt repetitions (1 or 2).")] = 1,
    max_prompt_tokens: Annotated[
        int | None, typer.Option(help="Token budget; oldest turns are dropped first.")
    ] = None,
    system_template: Annotated[Path | None, typer.Option(help="Override system.txt.")] = None,
    user_template: Annotated[Path | None, typer.Option(help="Override user.txt.")] = None,
    api_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the API key (openai backend).")
    ] = "OPENAI_API_KEY",
    option: Annotated[
        list[str] | None, typer.Option("--option", "-O", help="Backend option KEY=VALUE.")
    ] = None,
    domain: Annotated[
        str | None,
        typer.Option(
            help=f"Default model only: deployment domain ({', '.join(DOMAIN_NAMES)}); picks "
            "that domain's shipped model (chat has its own) and validation threshold. "
            "Default: each point's own (its corpus's) domain."
        ),
    ] = None,
    operating_point: Annotated[
        str | None,
        typer.Option(
            help="Default model only: balanced (paper-style tables), matched (speaks as often "
            "as people did; the default), polite (false interruptions <= 5%) or addressed-only."
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(help="Default or hf: model: raw floor threshold on P(SPEAK) in [0, 1]."),
    ] = None,
    n_boot: Annotated[int, typer.Option(help="Bootstrap replicates for 95% intervals.")] = 1000,
    cache: Annotated[bool, typer.Option(help="Use the deterministic response cache.")] = True,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Evaluate a model on a benchmark split; resumes an interrupted run of the same setup."""
    from rich.console import Console
    from rich.markup import escape

    from polylogue.cli.output import check_output_folder
    from polylogue.evaluation.runner import load_points, run_evaluation, stratified_order
    from polylogue.models.base import load_predictor, parse_model_spec
    from polylogue.prompts.builder import PromptOptions

    # before any model loads or point runs; a complete run may be re-scored read-only
    check_output_folder(out, "--out", writable=False)
    console = Console(stderr=True, soft_wrap=True)
    adapter_meta = _adapter_meta(adapter)
    if model is None and adapter_meta.get("model_spec"):
        model = str(adapter_meta["model_spec"])
    if model is None:
        model = "default"
    try:
        prompt = PromptOptions(
            mode=mode,  # type: ignore[arg-type]
            system_repeats=system_repeats,
            max_prompt_tokens=max_prompt_tokens,
            system_template=None if system_template is None else str(system_template),
            user_template=None if user_template is None else str(user_template),
        )
        if adapter_meta.get("prompt"):
            # An adapter is only measured with the prompt it was trained on.
            trained = PromptOptions(**adapter_meta["prompt"])
            if trained != prompt:
                console.print(
                    f"[yellow]note:[/yellow] using the prompt options {escape(str(adapter))} "
                    "was trained with "
                    f"(mode={trained.mode}, max_prompt_tokens={trained.max_prompt_tokens})"
                )
            prompt = trained
    except (ValueError, FileNotFoundError, TypeError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    kind = parse_model_spec(model).kind
    options = predictor_options(
        kind,
        prompt=prompt,
        cache_path=out / "_cache" / "responses.sqlite" if cache else None,
        batch_size=batch_size,
        concurrency=concurrency,
        api_key_env=api_key_env,
        given={
            "adapter": None if adapter is None else str(adapter),
            "domain": domain,
            "operating_point": operating_point,
            "threshold": threshold,
        },
        option=option or [],
    )
    from polylogue.rendering import RENDERINGS

    if rendering not in RENDERINGS:
        raise typer.BadParameter(
            f"unknown rendering {rendering!r}; choose one of {', '.join(RENDERINGS)}",
            param_hint="--rendering",
        )
    points, info = load_points(data, split, balanced=balanced, rendering=rendering)
    if domain is None and BACKENDS[kind].takes("point_domains"):
        # Each point declares its corpus's domain: decided with that domain's deployment.
        options["point_domains"] = sorted({p.input.domain for p in points})
    extra: dict[str, Any] = {}
    if sample_seed is not None:
        if limit is None:
            raise typer.BadParameter("--sample-seed needs --limit", param_hint="--sample-seed")
        # Predictions are stored per point id, so the order never changes the run folder.
        points = stratified_order(points, sample_seed)
        extra["sample"] = {"seed": sample_seed, "order": "category-stratified random"}
    predictor = load_predictor(model, **options)
    if kind == "default":
        from polylogue.evaluation.leakage import MANIFEST_KEY, training_overlap

        shipped = getattr(predictor, "model", None)
        overlap = training_overlap(getattr(shipped, "metadata", {}), points)
        if overlap is not None:
            console.print(f"[yellow]warning:[/yellow] {escape(overlap.message())}")
            extra[MANIFEST_KEY] = overlap.to_dict()
    result = run_evaluation(
        points,
        info,
        predictor,
        out,
        spec=model,
        limit=limit,
        chunk_size=batch_size,
        n_boot=n_boot,
        progress=progress,
        extra_manifest=extra or None,
    )
    m = result.metrics or {}
    state = "complete" if m.get("complete") else f"{result.n_done}/{len(points)} points"
    console.print(
        f"run folder: {result.folder} ({state}, {info.class_ratio} class ratio"
        + ("" if rendering == "original" else f", {rendering} rendering")
        + ")",
        markup=False,
    )
    if m:
        console.print(
            f"Acc {100 * m['accuracy']:.2f}  F1avg {100 * m['f1_avg']:.2f}  "
            f"BalAcc {100 * m['balanced_accuracy']:.2f}  "
            f"unparseable {100 * m['unparseable_rate']:.2f}%"
        )
        a = m.get("agent") or {}
        if a.get("speak_ratio") is not None:

            def pct(v: float | None) -> str:
                return "-" if v is None else f"{100 * v:.1f}%"

            console.print(
                f"as an agent: speaks {a['speak_ratio']:.2f}x as often as people did, "
                f"precision {pct(a['precision'])}, false interruptions "
                f"{pct(a['false_interruption_rate'])}, missed turns {pct(a['missed_turn_rate'])}"
                + (f", I1 recall {pct(a['i1_recall'])}" if a.get("n_I1") else ""),
                markup=False,
            )


def predictor_options(
    kind: str,
    *,
    prompt: Any,
    cache_path: Path | None,
    batch_size: int | None,
    concurrency: int,
    api_key_env: str,
    given: dict[str, Any],
    option: list[str],
) -> dict[str, Any]:
    """The options a model kind's backend is built with, as ``eval`` builds them (``scorecard``
    uses the same, so both find the same run folders).

    Each backend gets the flags it declares it takes (models.base.BACKENDS): the ``offered``
    ones by default, where it takes them; the ``given`` ones only when set, and an error where
    it does not; -O KEY=VALUE passes anything else through.
    """
    backend = BACKENDS[kind]
    offered: dict[str, Any] = {
        "prompt": prompt,
        "cache_path": None if cache_path is None else str(cache_path),
        "batch_size": batch_size,
        "concurrency": concurrency,
        "api_key_env": api_key_env,
    }
    options = {k: v for k, v in offered.items() if v is not None and backend.takes(k)}
    for key, value in given.items():
        if value is None:
            continue
        if not backend.takes(key):
            flag = "--" + key.replace("_", "-")
            takers = " or ".join(f"{b.name}" for b in BACKENDS if b.takes(key))
            raise typer.BadParameter(f"{flag} applies to {takers} models", param_hint=flag)
        options[key] = value
    options.update(_parse_options(option))
    return options


def report_command(
    runs: Annotated[list[Path], typer.Argument(help="Run folders (or folders holding runs).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder for the report.")],
    reference: Annotated[
        list[Path] | None,
        typer.Option(help="Reference run(s); deltas are shown against the same dataset."),
    ] = None,
    title: Annotated[str, typer.Option(help="Report title.")] = "Turn-taking evaluation",
) -> None:
    """Tables (Markdown, CSV) and an HTML page with plots from finished runs; runs no model."""
    from polylogue.evaluation.report import training_overlap_warnings, write_report

    paths = write_report(runs, out, references=reference or [], title=title)
    for line in training_overlap_warnings(runs):
        typer.echo(f"warning: {line}", err=True)
    for p in paths:
        typer.echo(str(p))
    page = next(p for p in paths if p.suffix == ".html")
    typer.echo(f"open in a browser: {page.resolve().as_uri()}")


def _adapter_meta(adapter: Path | None) -> dict[str, Any]:
    """``polylogue_adapter.json`` of a training run folder (empty for other adapters)."""

    if adapter is None:
        return {}
    meta_path = adapter / "polylogue_adapter.json"
    if not meta_path.is_file():
        return {}
    from polylogue.jsonio import JsonInputError, load_json_object

    try:
        meta: dict[str, Any] = load_json_object(meta_path, "an adapter description object")
    except JsonInputError as exc:
        raise typer.BadParameter(str(exc), param_hint="--adapter") from None
    return meta
