"""``polylogue train-default``, ``operating-points`` and ``tune-threshold``: fitting the
turn-taking engine's model and choosing its thresholds.

Thin wiring of :mod:`polylogue.training.engine_models`; ``decide`` (:mod:`polylogue.cli.decide`)
is where a fitted model and its thresholds are used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from polylogue.cli.decide import DOMAIN_LIST, resolve_deployment


def register(app: typer.Typer) -> None:
    app.command("tune-threshold")(tune_threshold)
    app.command("operating-points")(operating_points)
    app.command("train-default")(train_default)


# ----------------------------------------------------------------------------- tune-threshold


def tune_threshold(
    data: Annotated[
        list[Path], typer.Option("--data", "-d", help="Benchmark folder(s) (repeatable).")
    ],
    split: Annotated[
        str, typer.Option(help="Split to tune on (never the test split you report).")
    ] = "validation",
    interruption_cost: Annotated[
        float,
        typer.Option(
            help="Cost of speaking when one should stay silent, relative to a missed turn."
        ),
    ] = 1.0,
    max_interruption_rate: Annotated[
        float | None,
        typer.Option(
            help="Instead: the lowest threshold whose interruption rate stays below this."
        ),
    ] = None,
    model_dir: Annotated[
        Path | None, typer.Option(help="Model folder (default: the shipped one).")
    ] = None,
    domain: Annotated[str | None, typer.Option(help=f"Deployment domain: {DOMAIN_LIST}.")] = None,
    operating_point: Annotated[
        str | None,
        typer.Option(help="The point to compare with (default: matched)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the sweep as JSON.")] = False,
) -> None:
    """Choose a threshold for a deployment's interruption vs missed-turn trade-off."""
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from polylogue.engine.extract import FeatureExtractor
    from polylogue.evaluation.metrics import sweep_thresholds
    from polylogue.turntaking.dataset import load_benchmark

    if split == "test":
        Console(stderr=True).print(
            "[yellow]warning: tuning on the test split makes its scores optimistic[/yellow]"
        )
    deployment = resolve_deployment(model_dir, domain, operating_point, None)
    model = deployment.model
    current = deployment.take_floor_threshold
    extractor = FeatureExtractor.for_model(model)
    ps, ys = [], []
    for folder in data:
        points = load_benchmark(folder).points(split)
        if not points:
            continue
        ps.append(model.proba(extractor.features([p.input for p in points])))
        ys.append(np.asarray([p.gold.label.value == "SPEAK" for p in points], dtype=np.int8))
    if not ps:
        raise typer.BadParameter(f"no points in split {split!r}", param_hint="--split")
    rows, chosen = sweep_thresholds(
        np.concatenate(ys), np.concatenate(ps), interruption_cost, max_interruption_rate
    )
    if as_json:
        print(
            json.dumps(
                {
                    "chosen": chosen,
                    "default": current,
                    "deployment": deployment.options(),
                    "sweep": rows,
                },
                indent=2,
            )
        )
        return
    y_all, p_all = np.concatenate(ys).astype(bool), np.concatenate(ps)
    table = Table(title=f"threshold sweep on {split} ({len(y_all):,} points)")
    for col in (
        "threshold", "speak ratio", "precision", "interruption rate", "missed-turn rate",
        "balanced acc", "cost",
    ):  # fmt: skip
        table.add_column(col, justify="right")
    for r in rows:
        mark = "bold green" if r["threshold"] == chosen else None
        speak = p_all >= r["threshold"]
        ratio = speak.mean() / y_all.mean() if y_all.any() else float("nan")
        precision = (speak & y_all).sum() / speak.sum() if speak.any() else float("nan")
        table.add_row(
            f"{r['threshold']:.2f}",
            f"{ratio:.2f}",
            f"{precision:.3f}",
            f"{r['interruption_rate']:.3f}",
            f"{r['missed_turn_rate']:.3f}",
            f"{r['balanced_accuracy']:.3f}",
            f"{r['cost']:.3f}",
            style=mark,
        )
    console = Console()
    console.print(table)
    console.print(
        f"chosen threshold: [bold]{chosen:.2f}[/bold] (operating point "
        f"{deployment.operating_point}: {current:.2f}); "
        f"use it with `polylogue decide ... --threshold {chosen:.2f}`"
    )


def operating_points(
    data: Annotated[
        list[Path], typer.Option("--data", "-d", help="Benchmark folder(s) (repeatable).")
    ],
    model_dir: Annotated[
        Path | None, typer.Option(help="Model folder (default: the shipped general model).")
    ] = None,
    split: Annotated[str, typer.Option(help="Split to choose on.")] = "validation",
    write: Annotated[
        bool, typer.Option(help="Store the points in the folder's model.json.")
    ] = False,
) -> None:
    """Choose the named operating points (balanced, matched, polite) per domain on validation."""
    from rich.console import Console
    from rich.table import Table

    from polylogue.engine.model import DEFAULT_MODEL_DIR
    from polylogue.training.engine_models.operating_points import operating_points_for_folder

    if split == "test":
        Console(stderr=True).print(
            "[yellow]warning: choosing on the test split makes its scores optimistic[/yellow]"
        )
    err = Console(stderr=True)
    chosen = operating_points_for_folder(
        model_dir or DEFAULT_MODEL_DIR, data, split, write, log=lambda m: err.print(m, markup=False)
    )
    table = Table(title=f"operating points chosen on {split}")
    for col in ("point", "domain", "floor threshold", "backchannel", "margin"):
        table.add_column(col)
    for point, per_domain in chosen.items():
        for dom, v in per_domain.items():
            b = "never" if v["backchannel"] > 1 else f"{v['backchannel']:.2f}"
            table.add_row(point, dom, f"{v['take_floor']:.2f}", b, f"{v['backchannel_margin']:g}")
    Console().print(table)


# ----------------------------------------------------------------------------- train-default


def train_default(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the trained model files.")],
    data_root: Annotated[
        Path | None, typer.Option(help="Folder holding the corpora (default: ../shared/data).")
    ] = None,
    work_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where benchmarks are built (reused if present; default OUT/benchmarks)."
        ),
    ] = None,
    bench: Annotated[
        list[Path] | None,
        typer.Option("--bench", help="Use already-built benchmark folder(s) instead."),
    ] = None,
    corpus: Annotated[
        list[str] | None,
        typer.Option(
            "--corpus",
            "-c",
            help="Corpora to build (default: ami friends earnings21 icsi molweni).",
        ),
    ] = None,
    limit_conversations: Annotated[
        int | None, typer.Option(help="Only the first N conversations per corpus (quick runs).")
    ] = None,
    rounds: Annotated[
        int, typer.Option(help="Maximum boosting rounds (early stopping on validation).")
    ] = 800,
    threads: Annotated[int, typer.Option(help="CPU threads for LightGBM.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed for splits and boosting.")] = 13,
    domain: Annotated[
        str | None,
        typer.Option(
            help="'chat': the chat-domain model (IRC + Molweni by their own splits, chat "
            "feature block); default: the general model."
        ),
    ] = None,
    irc_train_files: Annotated[
        int, typer.Option(help="--domain chat: IRC train logs to use (of 133).")
    ] = 24,
) -> None:
    """Reproduce the shipped model: build benchmarks, fit, calibrate, pick the threshold, report."""
    from polylogue.cli.output import check_output_folder
    from polylogue.extras import require_extra

    check_output_folder(out, "--out")  # before hours of building and fitting

    require_extra("train", "lightgbm", what="polylogue train-default")
    from rich.console import Console

    from polylogue.training.engine_models.default_model import (
        CORPORA,
        TrainOptions,
        build_benchmarks,
        train_default_model,
    )
    from polylogue.turntaking.dataset import load_benchmark

    console = Console(stderr=True)

    def log(msg: str) -> None:
        console.print(msg, highlight=False)

    if domain not in (None, "chat"):
        raise typer.BadParameter("only 'chat' has its own model", param_hint="--domain")
    options = TrainOptions(seed=seed, num_boost_round=rounds, threads=threads)
    if bench:
        benches = [load_benchmark(b) for b in bench]
    elif domain == "chat":
        from polylogue.training.engine_models.chat_model import build_chat_benchmarks

        benches = build_chat_benchmarks(
            data_root, work_dir or out / "benchmarks", irc_train_files, log
        )
    else:
        benches = build_benchmarks(
            data_root,
            work_dir or out / "benchmarks",
            corpus or CORPORA,
            limit_conversations,
            seed,
            log,
        )
    if domain == "chat":
        from polylogue.training.engine_models.chat_model import chat_train_options

        options = chat_train_options(seed=seed, num_boost_round=rounds, threads=threads)
    result = train_default_model(benches, options, log)
    result.model.save(out)
    for name, entry in result.metrics.get("test", {}).get("corpora", {}).items():
        log(
            f"test {name}: balanced accuracy {entry['balanced_accuracy']:.3f}  "
            f"S2 {entry['acc_S2'] if entry['acc_S2'] is not None else float('nan'):.3f}  "
            f"ECE {entry['ece']:.3f}"
        )
    log(f"model written to {out}")
