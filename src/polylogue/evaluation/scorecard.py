"""The scorecard: every model on every benchmark at every operating point, in one folder.

:func:`run_scorecard` runs (or reuses) one evaluation run per data × model × operating point
through :func:`polylogue.evaluation.runner.run_evaluation`, the runner ``eval`` uses, so the
run folders are the same ones and an interrupted scorecard resumes where it stopped.
:func:`collect` reads the finished runs back (``metrics.json``, ``predictions.jsonl``) into
one JSON-ready dict; :mod:`polylogue.evaluation.scorecard_pages` writes it as Markdown and
HTML. Nothing here computes a metric of its own: the main figures are the runs'
``metrics.json`` (:func:`~polylogue.evaluation.runner.metrics_from_records`), the three-outcome
view is :func:`~polylogue.evaluation.report.run_outcomes`, and the operating curves and the
four-way table apply the same definitions (``metrics.agent_metrics``) at other thresholds or
category groupings.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.errors import PolylogueInputError
from polylogue.turntaking.dataset.options import Protocol

SCORECARD_KIND = "polylogue.scorecard"
SCORECARD_VERSION = 1

#: What ``--data`` defaults to: the shared corpora the shipped model is measured on, each in
#: the default protocol, and the two the paper reports on in its own protocol.
DEFAULT_DATA: tuple[str, ...] = (
    "ami",
    "friends",
    "earnings21",
    "icsi",
    "paper:ami",
    "paper:friends",
)
#: What ``--model`` defaults to: the shipped model and the two rules it must beat.
DEFAULT_MODELS: tuple[str, ...] = (
    "default",
    "baseline:previous-speaker",
    "baseline:explicit-address",
)
#: ``--model baselines`` stands for these.
BASELINE_SHORTHAND: tuple[str, ...] = ("baseline:previous-speaker", "baseline:explicit-address")


class ScorecardError(PolylogueInputError):
    """A ``--data``, ``--model`` or ``--operating-point`` the scorecard cannot use."""


# ----------------------------------------------------------------------------- the paper


@dataclass(frozen=True)
class PaperRow:
    """One row the paper reports (their split, their protocol), quoted beside ours."""

    corpus: str
    system: str
    source: str
    #: I1, I2, S1, S2, Acc, F1avg, BalAcc in %.
    values: tuple[float, float, float, float, float, float, float]

    def to_dict(self) -> dict[str, Any]:
        keys = ("I1", "I2", "S1", "S2", "accuracy", "f1_avg", "balanced_accuracy")
        return {
            "corpus": self.corpus,
            "system": self.system,
            "source": self.source,
            **{k: v / 100 for k, v in zip(keys, self.values, strict=True)},
        }


#: Bhagtani et al., "Speak or Stay Silent" (arXiv 2603.11409): the best fine-tuned and the
#: best zero-shot model per corpus (Tables 3 and 2) and the human annotators on 360 Friends
#: test points (Table 4). Their protocol: utterance boundaries, 50/50 classes, a per-sample
#: split (docs/benchmark.md); not our test split.
PAPER_ROWS: tuple[PaperRow, ...] = (
    PaperRow("ami", "Mistral-7B-instruct, fine-tuned", "Table 3",
             (81.01, 58.90, 86.49, 61.78, 72.17, 72.05, 72.28)),
    PaperRow("ami", "gemini-3.1-pro, zero-shot", "Table 2",
             (52.53, 39.27, 88.63, 54.14, 60.77, 59.55, 61.03)),
    PaperRow("friends", "LLaMA3.1-8B-instruct, fine-tuned", "Table 3",
             (100.00, 63.18, 86.67, 69.44, 72.28, 71.78, 72.52)),
    PaperRow("friends", "gemini-3.1-pro, zero-shot", "Table 2",
             (82.52, 80.62, 86.67, 34.10, 56.43, 56.11, 60.54)),
    PaperRow("friends", "humans (average of 3, 360 points)", "Table 4",
             (82.67, 79.00, 78.33, 27.67, 65.65, 63.51, 63.75)),
)  # fmt: skip


# ----------------------------------------------------------------------------- data


@dataclass(frozen=True)
class DataSource:
    """One benchmark folder of the scorecard and what it is called in the tables."""

    label: str
    folder: Path
    #: The ``--data`` value it came from.
    spec: str
    protocol: str
    corpora: tuple[str, ...]
    data_hash: str


def _build_key(corpus: str, source: Path, protocol: str, limit: int | None) -> str:
    from polylogue.turntaking.dataset.versions import FORMAT_VERSION

    payload = json.dumps(
        [corpus, str(source.resolve()), protocol, limit, FORMAT_VERSION], sort_keys=True
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def cached_corpus_build(
    corpus: str,
    protocol: str,
    cache_dir: Path,
    *,
    data_root: Path | None = None,
    limit_conversations: int | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """The benchmark ``polylogue build --corpus CORPUS [--protocol paper]`` writes, kept under
    ``cache_dir/benchmarks`` and reused while it is current (same corpus folder, options and
    benchmark format: :func:`~polylogue.turntaking.dataset.is_current_build`).

    It is built beside its place and moved there when complete, so a killed build leaves
    nothing that looks finished.
    """
    from polylogue.corpora import corpus_folder, load_corpus
    from polylogue.turntaking.dataset import (
        BuildOptions,
        build_benchmark,
        corpus_input,
        is_current_build,
        paper_protocol_options,
        reader_options,
        save_benchmark,
    )

    source = corpus_folder(corpus, data_root)
    paper = protocol == "paper"
    kind: Protocol = "paper" if paper else "default"
    name = corpus + ("-paper" if paper else "")
    if limit_conversations is not None:
        name += f"-first{limit_conversations}"
    folder = (
        cache_dir
        / "benchmarks"
        / f"{name}-{_build_key(corpus, source, protocol, limit_conversations)}"
    )
    if is_current_build(folder):
        return folder
    log(f"building {name} into {folder} (once; later scorecards reuse it)")
    convs = load_corpus(corpus, source, **reader_options(corpus, protocol=kind))
    if limit_conversations is not None:
        convs = itertools.islice(convs, limit_conversations)
    options = paper_protocol_options() if paper else BuildOptions()
    build = build_benchmark(convs, options)
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    save_benchmark(build, partial, inputs={corpus: corpus_input(source)})
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


def resolve_data(
    spec: str,
    cache_dir: Path,
    *,
    data_root: Path | None = None,
    limit_conversations: int | None = None,
    log: Callable[[str], None] = print,
) -> DataSource:
    """A ``--data`` value: a benchmark folder, or a shared corpus name (``friends``,
    ``paper:friends`` for the paper's protocol) built once into the user cache."""
    from polylogue.corpora import CORPORA
    from polylogue.turntaking.dataset import load_benchmark

    path = Path(spec)
    protocol, _, name = spec.rpartition(":") if spec.startswith("paper:") else ("", "", spec)
    if (path / "manifest.json").is_file():
        label = path.name
        folder = path
    elif name in CORPORA and not path.exists():
        folder = cached_corpus_build(
            name,
            "paper" if protocol == "paper" else "default",
            cache_dir,
            data_root=data_root,
            limit_conversations=limit_conversations,
            log=log,
        )
        label = name + (" (paper protocol)" if protocol == "paper" else "")
        if limit_conversations is not None:
            label += f" (first {limit_conversations})"
    else:
        why = "has no manifest.json" if path.is_dir() else "does not exist"
        raise ScorecardError(
            f"--data {spec}: not a benchmark folder ({path} {why}) and not a shared corpus; "
            f"give a folder written by `polylogue build` or one of {', '.join(CORPORA.names())} "
            "(paper:NAME for the paper's protocol)"
        )
    bench = load_benchmark(folder)
    return DataSource(
        label=label,
        folder=folder,
        spec=spec,
        protocol=str(bench.manifest.get("protocol", "default")),
        corpora=tuple(bench.manifest.get("corpora") or ()),
        data_hash=bench.data_hash,
    )


def data_domain(source: DataSource) -> str | None:
    """The deployment domain of a benchmark whose corpora all belong to one (else None)."""
    from polylogue.engine.model import domain_of_corpus

    domains = {domain_of_corpus(c) for c in source.corpora}
    return domains.pop() if len(domains) == 1 else None


# ----------------------------------------------------------------------------- models


@dataclass(frozen=True)
class Contender:
    """One model at one operating point: a row of the scorecard."""

    spec: str
    kind: str
    #: The named operating point (models that have them; None for the others).
    operating_point: str | None


def expand_models(models: Sequence[str], operating_points: Sequence[str] | None) -> list[Contender]:
    """``--model`` values (``baselines`` stands for the two baseline rules) × the operating
    points of the models that have named ones (all of them unless ``operating_points``)."""
    from polylogue.engine.deployment import OPERATING_POINTS
    from polylogue.models.base import ModelSpecError, parse_model_spec

    for op in operating_points or ():
        if op not in OPERATING_POINTS:
            raise ScorecardError(
                f"--operating-point {op}: unknown; choose from {', '.join(OPERATING_POINTS)}"
            )
    specs = [s for m in models for s in (BASELINE_SHORTHAND if m == "baselines" else (m,))]
    out: list[Contender] = []
    for spec in dict.fromkeys(specs):
        try:
            kind = parse_model_spec(spec).kind
        except ModelSpecError as exc:
            raise ScorecardError(f"--model {spec}: {exc}") from None
        points: Sequence[str | None] = (
            (operating_points or OPERATING_POINTS) if kind == "default" else (None,)
        )
        out.extend(Contender(spec, kind, op) for op in points)
    return out


# ----------------------------------------------------------------------------- running


@dataclass
class ScorecardRun:
    """One finished (or partial) run of the scorecard."""

    data: DataSource
    contender: Contender
    folder: Path
    domain: str | None
    complete: bool
    overlap_note: str | None = None


@dataclass
class ScorecardOptions:
    data: list[DataSource]
    contenders: list[Contender]
    split: str = "test"
    runs_dir: Path = Path("runs")
    n_boot: int = 1000
    progress: bool = True
    #: ``model spec -> backend options`` (prompt, cache, adapter: what ``eval`` would pass).
    backend_options: dict[str, dict[str, Any]] = field(default_factory=dict)


def run_scorecard(
    options: ScorecardOptions, log: Callable[[str], None] = print
) -> list[ScorecardRun]:
    """Run or reuse every data × contender run; finished runs are only re-read."""
    from polylogue.evaluation.leakage import MANIFEST_KEY, training_overlap
    from polylogue.evaluation.runner import load_points, run_evaluation
    from polylogue.models.base import load_predictor

    total = len(options.data) * len(options.contenders)
    done: list[ScorecardRun] = []
    step = itertools.count(1)
    for source in options.data:
        points, info = load_points(source.folder, options.split)
        # In conversation order (each conversation's points by context length) a streaming
        # model reuses its state from chunk to chunk; a per-sample split (the paper protocol)
        # would make it replay each conversation for nearly every chunk. The run folder and
        # its predictions (stored by point id) do not depend on the order.
        first: dict[str, int] = {}
        for p in points:
            first.setdefault(p.input.conversation_id, len(first))
        points = sorted(
            points, key=lambda p: (first[p.input.conversation_id], len(p.input.context))
        )
        domain = data_domain(source)
        for c in options.contenders:
            backend = dict(options.backend_options.get(c.spec, {}))
            if c.kind == "default":
                backend.update(operating_point=c.operating_point, domain=domain)
            predictor = load_predictor(c.spec, **backend)
            extra: dict[str, Any] = {}
            note = None
            if c.kind == "default":
                shipped = getattr(predictor, "model", None)
                overlap = training_overlap(getattr(shipped, "metadata", {}), points)
                if overlap is not None:
                    extra[MANIFEST_KEY] = overlap.to_dict()
                    note = overlap.message()
            where = f" @ {c.operating_point}" if c.operating_point else ""
            log(f"[{next(step)}/{total}] {c.spec}{where} on {source.label}")
            result = run_evaluation(
                points,
                info,
                predictor,
                options.runs_dir,
                spec=c.spec,
                n_boot=options.n_boot,
                progress=options.progress,
                extra_manifest=extra or None,
            )
            done.append(ScorecardRun(source, c, result.folder, domain, result.complete, note))
    return done


# ----------------------------------------------------------------------------- collecting

#: The keys of a run's ``metrics.json`` the scorecard carries (the threshold sweep is
#: replaced by the operating curve).
METRIC_KEYS: tuple[str, ...] = (
    "n", "n_speak", "n_silent", "n_unparseable", "accuracy", "f1_avg", "balanced_accuracy",
    "false_interruption_rate", "missed_turn_rate", "unparseable_rate", "confusion",
    "per_category", "per_category_n", "ci95", "bootstrap", "agent", "complete", "n_split",
)  # fmt: skip

FOUR_WAY: tuple[str, ...] = ("I1", "I2", "S1", "S2")
#: Thresholds of the operating curves.
CURVE_GRID: tuple[float, ...] = tuple(float(t) for t in np.round(np.arange(0.0, 1.0001, 0.01), 2))


def four_way_accuracy(
    records: Sequence[dict[str, Any]], paper_category: dict[str, str]
) -> dict[str, Any]:
    """Accuracy per category in the paper's four-way mapping (S3 and SA count as S2, or the
    authors' own label where the build kept one), with the point counts."""
    from polylogue.turntaking.types import Category

    right: dict[str, int] = dict.fromkeys(FOUR_WAY, 0)
    count: dict[str, int] = dict.fromkeys(FOUR_WAY, 0)
    for r in records:
        cat = paper_category.get(str(r["point_id"]))
        if cat is None and r.get("category"):
            cat = Category(r["category"]).four_way.value
        if cat not in count:
            continue
        count[cat] += 1
        right[cat] += int(r.get("decision") == r["gold"])
    return {
        "accuracy": {c: (right[c] / count[c] if count[c] else None) for c in FOUR_WAY},
        "n": count,
    }


def operating_curve(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """What an agent acting on ``P(SPEAK) >= t`` would do at every ``t`` of :data:`CURVE_GRID`
    (the definitions of :func:`~polylogue.evaluation.metrics.agent_metrics`): false
    interjections and missed addressed (I1) turns per hour of a listener's conversation,
    precision and speak ratio. None when the model gives no probability for every point, or
    only 0 and 1 (a rule such as the baselines: its one operating point is its curve)."""
    from polylogue.evaluation.metrics import agent_metrics, listener_minutes

    if not records or any(r.get("p_speak") is None for r in records):
        return None
    if len({float(r["p_speak"]) for r in records}) <= 2:
        return None  # 0/1 scores (a rule): one point, no curve
    minutes = None
    if all(r.get("pause_time") is not None and "target" in r for r in records):
        minutes = listener_minutes(
            [r["conversation_id"] for r in records],
            [r["target"] for r in records],
            [r["pause_time"] for r in records],
        )
    p = np.asarray([float(r["p_speak"]) for r in records])
    gold = [r["gold"] == "SPEAK" for r in records]
    cats = [r.get("category") for r in records]
    curve: dict[str, list[float | None]] = {
        "threshold": [],
        "balanced_accuracy": [],
        "speak_ratio": [],
        "precision": [],
        "false_interjections_per_hour": [],
        "missed_addressed_per_hour": [],
    }
    for t in CURVE_GRID:
        a = agent_metrics(gold, p >= t, cats, minutes)
        curve["threshold"].append(t)
        # The floor decision's balanced accuracy at t (mean of the two recalls): the figure
        # a pure-threshold table (the model card's) gives at this threshold.
        fir, mtr = a["false_interruption_rate"], a["missed_turn_rate"]
        curve["balanced_accuracy"].append(
            None if fir is None or mtr is None else 1 - (fir + mtr) / 2
        )
        curve["speak_ratio"].append(a["speak_ratio"])
        curve["precision"].append(a["precision"])
        fi, ma = a.get("false_interjections_per_10min"), a.get("missed_addressed_per_10min")
        curve["false_interjections_per_hour"].append(None if fi is None else 6 * fi)
        curve["missed_addressed_per_hour"].append(None if ma is None else 6 * ma)
    return {"minutes": minutes, **curve}


def _paper_categories(source: DataSource, split: str) -> dict[str, str]:
    from polylogue.turntaking.dataset import load_benchmark

    bench = load_benchmark(source.folder)
    return {
        p.point_id: (p.gold.paper_category or p.gold.category.four_way.value)
        for p in bench.points(split)
    }


def collect(
    runs: Sequence[ScorecardRun], options: ScorecardOptions, command: Sequence[str] = ()
) -> dict[str, Any]:
    """The scorecard as one JSON-ready dict: a manifest, one entry per run, one operating
    curve per data × model, and the paper's figures quoted for the corpora it reports on."""
    from polylogue.evaluation.report import load_run, run_outcomes
    from polylogue.evaluation.runner import read_predictions
    from polylogue.runs import git_commit, utc_now, versions

    entries: list[dict[str, Any]] = []
    curves: list[dict[str, Any]] = []
    categories: dict[str, dict[str, str]] = {}
    for run in runs:
        summary = load_run(run.folder)
        records = read_predictions(run.folder / "predictions.jsonl")
        if run.data.label not in categories:
            categories[run.data.label] = _paper_categories(run.data, options.split)
        desc = summary.manifest["model"].get("description") or {}
        metrics = {k: summary.metrics[k] for k in METRIC_KEYS if k in summary.metrics}
        outcomes = run_outcomes(summary)
        entries.append(
            {
                "data": run.data.label,
                "model": run.contender.spec,
                "kind": run.contender.kind,
                "operating_point": run.contender.operating_point,
                "threshold": desc.get("threshold"),
                "domain": run.domain,
                "run": run.folder.name,
                "complete": run.complete,
                "metrics": metrics,
                "four_way": four_way_accuracy(records, categories[run.data.label]),
                "outcomes": outcomes,
                "gives_backchannels": any(
                    (r.get("extra") or {}).get("action") is not None for r in records
                ),
                "training_overlap": run.overlap_note,
                # Per-10-minute figures need every point's pause time.
                "untimed_points": sum(r.get("pause_time") is None for r in records),
            }
        )
        if not any(
            c["data"] == run.data.label and c["model"] == run.contender.spec for c in curves
        ):
            curve = operating_curve(records)
            if curve is not None:
                curves.append({"data": run.data.label, "model": run.contender.spec, **curve})
    corpora = {c for s in options.data for c in s.corpora}
    manifest = {
        "created": utc_now(),
        "versions": versions(("numpy", "scikit-learn", "matplotlib")),
        "git_commit": git_commit(),
        "command": list(command),
        "options": {
            "split": options.split,
            "n_boot": options.n_boot,
            "runs_dir": str(options.runs_dir),
            "models": list(dict.fromkeys(c.spec for c in options.contenders)),
            "operating_points": sorted(
                {c.operating_point for c in options.contenders if c.operating_point}
            ),
        },
        "data": [
            {
                "label": s.label,
                "spec": s.spec,
                "path": str(s.folder.resolve()),
                "data_hash": s.data_hash,
                "protocol": s.protocol,
                "corpora": list(s.corpora),
            }
            for s in options.data
        ],
        "runs": [r.folder.name for r in runs],
    }
    return {
        "kind": SCORECARD_KIND,
        "version": SCORECARD_VERSION,
        "manifest": manifest,
        "entries": entries,
        "curves": curves,
        "paper": [r.to_dict() for r in PAPER_ROWS if r.corpus in corpora],
    }


def load_scorecard(path: str | Path) -> dict[str, Any]:
    """A ``scorecard.json`` (its kind checked)."""
    from polylogue.jsonio import load_json_object

    card = load_json_object(Path(path), "a scorecard object")
    if card.get("kind") != SCORECARD_KIND:
        raise ScorecardError(f"{path}: not a polylogue scorecard.json")
    return card
