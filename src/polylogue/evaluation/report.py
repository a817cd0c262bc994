"""Reports from finished runs, in the layout of the paper's Tables 2, 3 and 5.

Rows are (model, dataset); columns I1, I2, S1, S2, S3, SA, Acc, F1avg, BalAcc (in %), the balanced
accuracy's 95% group-bootstrap interval, the unparseable rate and N. With reference runs, each
value is followed by its change in points against the reference run on the same dataset and
split, as the paper prints deltas in parentheses. Every table states the class ratio its runs
used. Nothing here runs a model: it reads ``metrics.json`` / ``predictions.jsonl``.

Outputs: ``report.md``, ``report.csv`` and a self-contained ``report.html`` (plots embedded as
base64 PNG: per-category accuracy bars, confusion matrices, threshold curves).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polylogue.errors import PolylogueInputError
from polylogue.evaluation.leakage import MANIFEST_KEY, TrainingOverlap
from polylogue.evaluation.metrics import (
    MIN_BOOTSTRAP_GROUPS,
    OUTCOME_LABELS,
    OUTCOME_PRED_LABELS,
    SweepPoint,
    bootstrap_warning,
    outcome_metrics,
    sweep_point,
)
from polylogue.evaluation.runner import RUN_KIND, metrics_from_records, read_predictions
from polylogue.turntaking.types import CATEGORIES

COLUMNS: tuple[tuple[str, str], ...] = (
    ("I1", "I1"),
    ("I2", "I2"),
    ("S1", "S1"),
    ("S2", "S2"),
    ("S3", "S3"),  # benchmark v2.1: silent participant of the exchange
    ("SA", "SA"),  # benchmark v2: silent although individually addressed
    ("accuracy", "Acc"),
    ("f1_avg", "F1avg"),
    ("balanced_accuracy", "BalAcc"),
)


_CATEGORY_KEYS = frozenset(c.value for c in CATEGORIES)


class ReportError(PolylogueInputError):
    pass


@dataclass(frozen=True)
class RunSummary:
    folder: Path
    manifest: dict[str, Any]
    metrics: dict[str, Any]

    @property
    def dataset(self) -> str:
        return str(self.manifest["dataset"]["name"])

    @property
    def split(self) -> str:
        return str(self.manifest["dataset"]["split"])

    @property
    def class_ratio(self) -> str:
        return str(self.manifest["dataset"].get("class_ratio", "natural"))

    @property
    def rendering(self) -> str:
        return str(self.manifest["dataset"].get("rendering", "original"))

    @property
    def label(self) -> str:
        model = self.manifest["model"]
        desc = model.get("description") or {}
        name = str(model.get("spec") or model.get("name"))
        extras = []
        if desc.get("system_repeats", 1) and int(desc.get("system_repeats", 1)) > 1:
            extras.append(f"sp{desc['system_repeats']}")
        if desc.get("prompt_mode") == "reasoning":
            extras.append("reasoning")
        if desc.get("adapter"):
            extras.append(f"lora:{Path(str(desc['adapter'])).name}")
        # Two runs of one model at different points are two different rows.
        point = (desc.get("deployment") or {}).get("operating_point")
        if point:
            extras.append(str(point))
        if desc.get("threshold") is not None:
            extras.append(f"t={float(desc['threshold']):.2f}")
        return name + (f" ({', '.join(extras)})" if extras else "")

    @property
    def unfinished(self) -> str | None:
        """Why the run is not finished (its manifest's status: ``running``, ``partial``,
        ``failed``, ``interrupted``), or None for a finished run. A run still in progress has
        no finished manifest; its figures cover only the points done so far."""
        status = self.manifest.get("status")
        if status in (None, "complete") and self.metrics.get("complete", True):
            return None
        return str(status) if status not in (None, "complete") else "partial"

    @property
    def threshold(self) -> float | None:
        """The decision threshold on P(SPEAK) the run used (models that have one)."""
        desc = self.manifest.get("model", {}).get("description") or {}
        t = desc.get("threshold")
        return None if t is None else float(t)

    def value(self, key: str) -> float | None:
        if key in _CATEGORY_KEYS:
            v = (self.metrics.get("per_category") or {}).get(key)
        else:
            v = self.metrics.get(key)
        return None if v is None else float(v)


def load_run(folder: str | Path) -> RunSummary:
    folder = Path(folder)
    mpath = folder / "manifest.json"
    if not mpath.is_file():
        raise ReportError(f"{folder}: not a run folder (no manifest.json)")
    manifest = json.loads(mpath.read_text(encoding="utf-8"))
    if manifest.get("kind") != RUN_KIND:
        raise ReportError(f"{mpath}: not a polylogue evaluation run manifest")
    metrics_path = folder / "metrics.json"
    if metrics_path.is_file():
        metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    else:
        records = read_predictions(folder / "predictions.jsonl")
        if not records:
            raise ReportError(f"{folder}: the run has no predictions yet")
        metrics = metrics_from_records(records)
    return RunSummary(folder, manifest, metrics)


def find_runs(paths: Sequence[str | Path]) -> list[RunSummary]:
    """Run folders given directly or found one level below the given folders."""
    runs: list[RunSummary] = []
    for p in map(Path, paths):
        if (p / "manifest.json").is_file():
            runs.append(load_run(p))
        elif p.is_dir():
            found = sorted(q for q in p.iterdir() if (q / "manifest.json").is_file())
            if not found:
                raise ReportError(f"{p}: no run folders inside")
            runs.extend(load_run(q) for q in found)
        else:
            raise ReportError(f"{p}: no such run folder")
    return runs


# ----------------------------------------------------------------------------- tables


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.2f}"


def _delta(v: float | None, ref: float | None) -> str:
    if v is None or ref is None:
        return ""
    return f" ({100 * (v - ref):+.2f})"


def table_rows(
    runs: Sequence[RunSummary], references: Sequence[RunSummary] = ()
) -> list[dict[str, Any]]:
    refs = {(r.dataset, r.split, r.rendering): r for r in references}
    rows = []
    for run in runs:
        ref = refs.get((run.dataset, run.split, run.rendering))
        ci = (run.metrics.get("ci95") or {}).get("balanced_accuracy")
        row: dict[str, Any] = {
            "model": run.label,
            "dataset": run.dataset,
            "split": run.split,
            "class_ratio": run.class_ratio,
            "rendering": run.rendering,
            "n": run.metrics.get("n"),
            "complete": run.unfinished is None,
            "status": run.unfinished or "complete",
            "unparseable_rate": run.metrics.get("unparseable_rate"),
            "balanced_accuracy_ci95": ci,
            "bootstrap_groups": (run.metrics.get("bootstrap") or {}).get("n_units"),
            "reference": None if ref is None else ref.label,
            "training_overlap_note": _overlap_note(run),
        }
        for key, _ in COLUMNS:
            row[key] = run.value(key)
            row[f"delta_{key}"] = (
                None
                if ref is None or row[key] is None or ref.value(key) is None
                else row[key] - (ref.value(key) or 0.0)
            )
        rows.append(row)
    return rows


def _overlap_note(run: RunSummary) -> str | None:
    """⚠ when the run's test points were in the model's training data (evaluation.leakage)."""
    d = run.manifest.get(MANIFEST_KEY)
    if not d:
        return None
    model = run.manifest.get("model") or {}
    name = str(model.get("spec") or model.get("name"))
    return f"⚠ {run.label} on {run.dataset}: " + TrainingOverlap.from_dict(d).message(name)


def training_overlap_warnings(run_paths: Sequence[str | Path]) -> list[str]:
    """The overlap notes of the runs under ``run_paths`` (``report`` prints them)."""
    return [n for r in find_runs(run_paths) if (n := _overlap_note(r))]


def _ratio_note(rows: Sequence[dict[str, Any]]) -> str:
    ratios = sorted({r["class_ratio"] for r in rows})
    if ratios == ["natural"]:
        return "Class ratio: natural (the split as built; SPEAK/SILENT not rebalanced)."
    if ratios == ["balanced"]:
        return (
            "Class ratio: balanced (majority class subsampled to the minority's size, "
            "per category)."
        )
    return "Class ratios differ between runs: see the Ratio column."


#: What the categories mean (docs/benchmark.md), printed under every report's table.
CATEGORY_NOTES: tuple[str, ...] = (
    "I1 explicit address: the target is addressed individually and explicitly and takes the floor.",
    "I2 contextual intervention: the target takes the floor without being individually "
    "addressed (a group address included).",
    "S1 no reference: the target is a bystander (neither addressed nor referenced, and not in "
    "the exchange) and stays silent.",
    "S2 referenced, not addressed: the target is named or talked about, not addressed, and "
    "stays silent.",
    "S3 silent participant: neither addressed nor referenced, but spoke in one of the two "
    "turns before, and stays silent (benchmark v2.1; the paper's four-way tables count it as "
    "S2).",
    "SA addressed, silent: the target is addressed individually but does not take the floor "
    "(benchmark v2; the paper's four-way tables count it as S2).",
)


def ci_cell(ci: Sequence[float] | None, groups: int | None) -> str:
    """The BalAcc interval, or ``n/a (k groups)`` when it resamples too few groups."""
    if not ci:
        return "–"
    if bootstrap_warning(groups):
        return f"n/a ({groups} group{'s' if groups != 1 else ''})"
    return f"{100 * ci[0]:.1f}–{100 * ci[1]:.1f}"


def _row_cells(r: dict[str, Any], with_ratio: bool) -> list[str]:
    """One table row's cells (Markdown and HTML tables show the same values)."""
    rendering = r.get("rendering", "original")
    words = "" if rendering == "original" else f" ({rendering} rendering)"
    cells = [str(r["model"]), f"{r['dataset']}/{r['split']}{words}"]
    if with_ratio:
        cells.append(str(r["class_ratio"]))
    for key, _ in COLUMNS:
        d = r[f"delta_{key}"]
        cells.append(_pct(r[key]) + ("" if d is None else f" ({100 * d:+.2f})"))
    cells.append(ci_cell(r["balanced_accuracy_ci95"], r.get("bootstrap_groups")))
    cells.append(_pct(r["unparseable_rate"]))
    cells.append(f"{r['n']}" + ("" if r["complete"] else f" (unfinished: {r['status']})"))
    return cells


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    mixed = len({r["class_ratio"] for r in rows}) > 1
    head = ["Model", "Dataset", *(t for _, t in COLUMNS), "BalAcc 95% CI", "Unparseable", "N"]
    if mixed:
        head.insert(2, "Ratio")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join(_row_cells(r, with_ratio=mixed)) + " |")
    notes = [
        _ratio_note(rows),
        "All values in %. Unparseable answers count as wrong in every metric.",
        "BalAcc 95% CI: percentile bootstrap resampling whole meetings/episodes/calls.",
    ]
    if any(r["reference"] for r in rows):
        notes.append("Parentheses: change in points vs the reference run on the same dataset.")
    if any(
        bootstrap_warning(r.get("bootstrap_groups")) for r in rows if r["balanced_accuracy_ci95"]
    ):
        notes.append(
            f"n/a (k groups): the interval would resample fewer than {MIN_BOOTSTRAP_GROUPS} "
            "meetings/episodes/calls, too few to be meaningful, so it is not shown."
        )
    if any(not r["complete"] for r in rows):
        notes.append(
            "unfinished: the run was still in progress, stopped or partial when the report was "
            "written (its manifest is not a finished one); its figures cover the points done "
            "so far."
        )
    notes.append("Categories: " + " ".join(CATEGORY_NOTES))
    notes.extend(r["training_overlap_note"] for r in rows if r.get("training_overlap_note"))
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    fields = [
        "model",
        "dataset",
        "split",
        "class_ratio",
        "n",
        "complete",
        "status",
        *(k for k, _ in COLUMNS),
        *(f"delta_{k}" for k, _ in COLUMNS),
        "balanced_accuracy_ci95_low",
        "balanced_accuracy_ci95_high",
        "unparseable_rate",
        "reference",
    ]
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            ci = r["balanced_accuracy_ci95"] or [None, None]
            out = {k: r.get(k) for k in fields if k in r}
            out["balanced_accuracy_ci95_low"], out["balanced_accuracy_ci95_high"] = ci
            w.writerow(out)


# ----------------------------------------------------------------------------- plots


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def legend_names(runs: Sequence[RunSummary]) -> list[str]:
    """One distinct legend entry per run: model · dataset/split (+ run folder if still equal)."""
    base = [f"{r.label} · {r.dataset}/{r.split}" for r in runs]
    return [
        name if base.count(name) == 1 else f"{name} [{r.folder.name}]"
        for name, r in zip(base, runs, strict=True)
    ]


def category_bars(runs: Sequence[RunSummary]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    keys = [k for k, _ in COLUMNS]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(keys) + 0.4 * len(runs)), 3.6))
    width = 0.8 / max(1, len(runs))
    x = np.arange(len(keys))
    for i, (run, name) in enumerate(zip(runs, legend_names(runs), strict=True)):
        vals = [100 * (run.value(k) or 0.0) for k in keys]
        ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=name)
    ax.set_xticks(x, [t for _, t in COLUMNS])
    ax.set_ylabel("%")
    ax.set_ylim(0, 100)
    ax.axhline(50, color="grey", lw=0.6, ls="--")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    ax.set_title("Per-category and overall accuracy")
    return _png(fig)


def confusion_plot(run: RunSummary) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    conf = run.metrics["confusion"]
    gold, pred = ["SPEAK", "SILENT"], ["SPEAK", "SILENT", "UNPARSEABLE"]
    m = np.array([[conf[g][p] for p in pred] for g in gold])
    fig, ax = plt.subplots(figsize=(3.6, 2.4))
    ax.imshow(m, cmap="Blues", vmin=0, vmax=max(1, int(m.max())))
    for i in range(2):
        for j in range(3):
            color = confusion_text_color(int(m[i, j]), int(m.max()))
            ax.text(j, i, str(m[i, j]), ha="center", va="center", fontsize=9, color=color)
    ax.set_xticks(range(3), ["SPEAK", "SILENT", "unparse."], fontsize=8)
    ax.set_yticks(range(2), gold, fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(f"{run.label}\n{run.dataset}/{run.split}", fontsize=8)
    return _png(fig)


def confusion_text_color(value: int, vmax: int) -> str:
    """White text on the dark half of the Blues map, black on the light half."""
    return "white" if vmax > 0 and value > vmax / 2 else "black"


def threshold_plot(runs: Sequence[RunSummary]) -> str | None:
    sweeps: list[tuple[RunSummary, dict[str, Any]]] = [
        (r, r.metrics["threshold_sweep"]) for r in runs if r.metrics.get("threshold_sweep")
    ]
    if not sweeps:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    # Fixed 0-100 axes (as the category bars): plots of different reports compare by eye.
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 4.2), layout="constrained")
    names = legend_names([r for r, _ in sweeps])
    handles: list[Any] = []
    labelled: set[float] = set()
    for i, ((run, s), name) in enumerate(zip(sweeps, names, strict=True)):
        color = f"C{i % 10}"
        if zero_one_scores(s):
            # A 0/1 P(SPEAK) has one operating point, not a curve: a line from it to the
            # corners would cross every real curve. A marker, and its BalAcc in the legend.
            pt = threshold_marker(run, 0.5)
            handles += b.plot(
                [100 * pt.false_interruption_rate],
                [100 * pt.missed_turn_rate],
                "s",
                color=color,
                clip_on=False,  # often a corner (never or always speaks): drawn whole
                zorder=3,
                label=f"{name} (0/1 scores: one operating point, "
                f"BalAcc {100 * pt.balanced_accuracy:.1f}% at every threshold)",
            )
            continue
        handles += a.plot(
            s["thresholds"], [100 * v for v in s["balanced_accuracy"]], color=color, label=name
        )
        b.plot(
            [100 * v for v in s["false_interruption_rate"]],
            [100 * v for v in s["missed_turn_rate"]],
            color=color,
        )
        t = run.threshold
        if t is not None:  # the run's own decision threshold, on both curves
            pt = threshold_marker(run, t)
            a.axvline(t, color=color, ls=":", lw=1)
            a.plot([t], [100 * pt.balanced_accuracy], "o", color=color)
            b.plot(
                [100 * pt.false_interruption_rate], [100 * pt.missed_turn_rate], "o", color=color
            )
            if round(t, 2) not in labelled:  # runs of one model share it: label it once
                labelled.add(round(t, 2))
                a.annotate(f" t={t:.2f}", (t, 0.03), xycoords=a.get_xaxis_transform(), fontsize=7)
    if any(r.threshold is not None and not zero_one_scores(s) for r, s in sweeps):
        handles.append(
            Line2D([], [], marker="o", ls="none", color="black", label="decision threshold")
        )
    a.set_xlim(0, 1)
    a.set_ylim(0, 100)
    b.set_xlim(0, 100)
    b.set_ylim(0, 100)
    a.set_xlabel("threshold on P(SPEAK)")
    a.set_ylabel("balanced accuracy %")
    a.set_title("Balanced accuracy vs threshold")
    b.set_xlabel("false interruptions % (of SILENT points)")
    b.set_ylabel("missed turns % (of SPEAK points)")
    b.set_title("Interruption vs missed-turn trade-off")
    # Below both plots, so it never covers a curve.
    fig.legend(handles=handles, loc="outside lower center", fontsize=7, ncol=1)
    return _png(fig)


def zero_one_scores(sweep: dict[str, Any]) -> bool:
    """Whether a run's swept thresholds are only 0 and 1 (a constant or hard 0/1 predictor)."""
    return all(float(t) in (0.0, 1.0) for t in sweep["thresholds"])


def threshold_marker(run: RunSummary, t: float) -> SweepPoint:
    """The run's operating point at its threshold ``t``: the table's own numbers (its
    decisions) when ``t`` is the run's threshold, since a three-way rule can keep a few points
    above the floor threshold silent (the dot then sits just off the pure-threshold curve);
    for another ``t``, the curve at exactly ``t`` from the predictions; without predictions,
    the swept row that gives the same decisions as ``t`` (exact unless the sweep was thinned)."""
    m = run.metrics
    if t == run.threshold and all(
        m.get(k) is not None
        for k in ("balanced_accuracy", "false_interruption_rate", "missed_turn_rate")
    ):
        return SweepPoint(
            t, m["balanced_accuracy"], m["false_interruption_rate"], m["missed_turn_rate"]
        )
    path = run.folder / "predictions.jsonl"
    records = read_predictions(path) if path.is_file() else []
    if records:
        pt = sweep_point(
            [r["gold"] for r in records],
            [r.get("p_speak") for r in records],
            t,
            pred=[r.get("decision") for r in records],
        )
        if pt is not None:
            return pt
    s = run.metrics["threshold_sweep"]
    k = sweep_row(s["thresholds"], t)
    return SweepPoint(
        t, s["balanced_accuracy"][k], s["false_interruption_rate"][k], s["missed_turn_rate"][k]
    )


def sweep_row(thresholds: Sequence[float], t: float) -> int:
    """Row of a sweep (thresholds falling) whose decisions ``p >= threshold`` are those of ``t``:
    the last row with threshold >= ``t`` (the first row when ``t`` is above them all)."""
    rows = [i for i, x in enumerate(thresholds) if float(x) >= t]
    return rows[-1] if rows else 0


# ----------------------------------------------------------------------------- html


def _html_table(rows: Sequence[dict[str, Any]]) -> str:
    head = [
        "Model",
        "Dataset",
        "Ratio",
        *(t for _, t in COLUMNS),
        "BalAcc 95% CI",
        "Unparseable",
        "N",
    ]
    out = [
        "<table><thead><tr>",
        *(f"<th>{html.escape(h)}</th>" for h in head),
        "</tr></thead><tbody>",
    ]
    for r in rows:
        cells = _row_cells(r, with_ratio=True)
        out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def write_report(
    run_paths: Sequence[str | Path],
    out_dir: str | Path,
    *,
    references: Sequence[str | Path] = (),
    title: str = "Turn-taking evaluation",
) -> list[Path]:
    runs = find_runs(run_paths)
    refs = find_runs(references) if references else []
    ref_folders = {r.folder.resolve() for r in refs}
    runs = [r for r in runs if r.folder.resolve() not in ref_folders] or runs
    rows = table_rows(runs, refs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md = f"# {title}\n\n" + markdown_table(rows)
    if refs:
        md += "\nReference runs:\n\n" + markdown_table(table_rows(refs))
    sections = outcome_sections([*runs, *refs])
    outcomes = agent_markdown([*runs, *refs]) + outcome_markdown(sections)
    if outcomes:
        md += "\n" + outcomes
    (out / "report.md").write_text(md, encoding="utf-8")
    write_csv(rows, out / "report.csv")

    images = [("Per-category accuracy", category_bars([*runs, *refs]))]
    curve = threshold_plot([*runs, *refs])
    if curve:
        images.append(("Threshold curves (points with P(SPEAK) only)", curve))
    confusions = "".join(
        f'<img alt="confusion matrix" src="data:image/png;base64,{confusion_plot(r)}">'
        for r in [*runs, *refs]
    )
    notes = "".join(
        f"<li>{html.escape(line[2:])}</li>"
        for line in markdown_table(rows).splitlines()
        if line.startswith("- ")
    )
    style = (
        "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse;font-size:14px}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
        "td:first-child,td:nth-child(2),td:nth-child(3){text-align:left}img{margin:6px}"
        "table.outcomes td:nth-child(n+2){text-align:right}"
    )
    figures = "".join(
        f"<h2>{html.escape(t)}</h2><img alt='{html.escape(t)}' src='data:image/png;base64,{b}'>"
        for t, b in images
    )
    ref_table = "<h2>Reference runs</h2>" + _html_table(table_rows(refs)) if refs else ""
    page = (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style></head><body>\n<h1>{html.escape(title)}</h1>"
        f"{_html_table(rows)}<ul>{notes}</ul>\n{ref_table}\n"
        + f"{agent_html([*runs, *refs])}{outcome_html(sections)}\n"
        + f"{figures}\n"
        f"<h2>Confusion matrices</h2><div>{confusions}</div></body></html>\n"
    )
    (out / "report.html").write_text(page, encoding="utf-8")
    return [out / "report.md", out / "report.csv", out / "report.html"]


# ----------------------------------------------------------------------------- agent behaviour


AGENT_HEAD = (
    "Run", "Data", "Speak ratio", "Precision", "False interr.", "Missed turns", "I1 recall",
    "False interj./10 min", "Missed I1/10 min",
)  # fmt: skip
AGENT_NOTE = (
    "Speak ratio = predicted SPEAK rate / real rate (1.0: as often as people did); "
    "per-10-minute figures count one listener's view of the conversation."
)


def agent_rows(runs: Sequence[RunSummary]) -> list[list[str]]:
    """What each run's decisions would make an agent do (``metrics.json`` ``agent``): how
    often it speaks against people, how often it is right when it does, what it misses."""

    def num(v: float | None, digits: int = 2) -> str:
        return "–" if v is None else f"{v:.{digits}f}"

    out = []
    for run in runs:
        a = run_agent(run)
        if not a:
            continue
        out.append(
            [
                run.label,
                f"{run.dataset}/{run.split}",
                num(a.get("speak_ratio")),
                _pct(a.get("precision")),
                _pct(a.get("false_interruption_rate")),
                _pct(a.get("missed_turn_rate")),
                f"{_pct(a.get('i1_recall'))} (n={a.get('n_I1', 0)})",
                num(a.get("false_interjections_per_10min"), 1),
                num(a.get("missed_addressed_per_10min"), 1),
            ]
        )
    return out


def run_agent(run: RunSummary) -> dict[str, Any] | None:
    """A run's agent figures (``metrics.json`` ``agent``); per-10-minute figures missing from
    an older ``metrics.json`` are filled from its predictions when every point has a time."""
    a = run.metrics.get("agent")
    if not a or a.get("false_interjections_per_10min") is not None:
        return a
    path = run.folder / "predictions.jsonl"
    records = read_predictions(path) if path.is_file() else []
    if records and all(r.get("pause_time") is not None and "target" in r for r in records):
        filled = metrics_from_records(records, n_boot=0).get("agent")
        if filled and filled.get("false_interjections_per_10min") is not None:
            return {**a, **filled}
    return a


def per_minute_notes(runs: Sequence[RunSummary]) -> list[str]:
    """Why a run's per-10-minute columns are empty: its points have no pause times."""
    empty = sorted(
        {
            f"{r.dataset}/{r.split}"
            for r in runs
            if (a := run_agent(r)) and a.get("false_interjections_per_10min") is None
        }
    )
    if not empty:
        return []
    return [
        f"Per-10-minute columns empty for {', '.join(empty)}: some or all of its points have "
        "no pause time (scripted or chat data, or a transcript without times), so there is no "
        "conversation length to divide by."
    ]


def agent_markdown(runs: Sequence[RunSummary]) -> str:
    rows = agent_rows(runs)
    if not rows:
        return ""
    lines = [
        "## Agent behaviour",
        "",
        AGENT_NOTE,
        *(f"\n{n}" for n in per_minute_notes(runs)),
        "",
        "| " + " | ".join(AGENT_HEAD) + " |",
        "|---|---|" + "---:|" * (len(AGENT_HEAD) - 2),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]
    return "\n".join(lines) + "\n\n"


def agent_html(runs: Sequence[RunSummary]) -> str:
    rows = agent_rows(runs)
    if not rows:
        return ""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in AGENT_HEAD)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    notes = "".join(f"<p>{html.escape(n)}</p>" for n in per_minute_notes(runs))
    return (
        f"<h2>Agent behaviour</h2><p>{html.escape(AGENT_NOTE)}</p>{notes}"
        f'<table class="outcomes"><tr>{head}</tr>{body}</table>\n'
    )


# ----------------------------------------------------------------------------- three outcomes


def run_outcomes(run: RunSummary) -> dict[str, Any] | None:
    """Three-outcome metrics of a run (benchmark v2), or None when gold outcomes are unknown.

    Outcomes come from the prediction records when they carry an ``outcome`` field, else from
    the run's benchmark folder (``manifest.dataset.path``) when its data hash still matches.
    """
    path = run.folder / "predictions.jsonl"
    if not path.is_file():
        return None
    records = read_predictions(path)
    if not records:
        return None
    gold: dict[str, str] = {}
    if all(r.get("outcome") for r in records):
        gold = {str(r["point_id"]): str(r["outcome"]) for r in records}
    else:
        ds = run.manifest.get("dataset") or {}
        bench_path = ds.get("path")
        if not bench_path or not (Path(bench_path) / "manifest.json").is_file():
            return None
        from polylogue.turntaking.dataset import load_benchmark

        bench = load_benchmark(bench_path)
        if bench.data_hash != ds.get("data_hash") or bench.manifest.get("format_version", 1) < 2:
            return None
        gold = {
            p.point_id: p.gold.floor_outcome.value
            for p in bench.points(str(ds.get("split")))
            if p.gold.outcome is not None
        }
    # A three-way model records its action (SPEAK / BACKCHANNEL / SILENT) beside the floor
    # decision; a binary one only the decision.
    pairs = [
        (gold[str(r["point_id"])], (r.get("extra") or {}).get("action") or r.get("decision"))
        for r in records
        if str(r["point_id"]) in gold
    ]
    if not pairs:
        return None
    om = outcome_metrics([g for g, _ in pairs], [p for _, p in pairs])
    # The run recorded three-way actions (SPEAK / BACKCHANNEL / SILENT): a three-way model,
    # even at a point where it chose no acknowledgement.
    om["actions"] = any((r.get("extra") or {}).get("action") for r in records)
    return om


@dataclass(frozen=True)
class OutcomeSection:
    """One run's three-outcome table: cells as text, shared by the Markdown and HTML pages."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...]


OUTCOMES_TITLE = "Three outcomes (benchmark v2)"


def outcome_sections(runs: Sequence[RunSummary]) -> list[OutcomeSection]:
    """Per run: confusion of gold outcomes vs predictions, per-outcome and floor recall."""
    sections: list[OutcomeSection] = []
    for run in runs:
        om = run_outcomes(run)
        if om is None:
            continue
        rows = []
        for g in OUTCOME_LABELS:
            row = om["confusion"][g]
            rows.append(
                (
                    g,
                    *(f"{row[p]:,}" for p in OUTCOME_PRED_LABELS),
                    _pct(om["recall"][g]),
                    _pct(om["floor_recall"][g]),
                )
            )
        precision = om.get("precision") or {}
        rows.append(
            (
                "Precision",
                *(_pct(precision.get(p)) if p in precision else "" for p in OUTCOME_PRED_LABELS),
                "",
                "",
            )
        )
        notes = [
            f"Floor-decision BalAcc: {_pct(om['floor_balanced_accuracy'])} "
            f"(TAKE_FLOOR vs BACKCHANNEL+SILENT); took the floor at "
            f"{_pct(om['backchannel_floor_take_rate'])}% of BACKCHANNEL points."
        ]
        if om.get("actions"):
            n_back = sum(om["confusion"][g]["BACKCHANNEL"] for g in OUTCOME_LABELS)
            notes.append(
                f"Three-way model: scored on its actions (SPEAK, BACKCHANNEL, SILENT); it "
                f"acknowledged at {n_back:,} pause{'' if n_back == 1 else 's'}"
                + ("" if n_back else " (its operating point suggests no acknowledgement here)")
                + "."
            )
        elif not om["three_way"]:
            notes.append(
                "Binary model (SPEAK = TAKE_FLOOR): it never predicts BACKCHANNEL, so that "
                "recall is 0; its floor recall is what counts."
            )
        sections.append(
            OutcomeSection(
                f"{run.label} — {run.dataset}/{run.split}",
                ("Gold \\ predicted", *OUTCOME_PRED_LABELS, "Recall", "Floor recall"),
                tuple(rows),
                tuple(notes),
            )
        )
    return sections


def outcome_markdown(sections: Sequence[OutcomeSection]) -> str:
    """The three-outcome sections as Markdown (``report.md``); empty when there are none."""
    parts: list[str] = []
    for sec in sections:
        lines = [
            f"### {sec.title}",
            "",
            "| " + " | ".join(sec.header) + " |",
            "|---|" + "---:|" * (len(sec.header) - 1),
            *("| " + " | ".join(r) + " |" for r in sec.rows),
            "",
            *(f"- {n}" for n in sec.notes),
        ]
        parts.append("\n".join(lines) + "\n")
    if not parts:
        return ""
    return f"## {OUTCOMES_TITLE}\n\n" + "\n".join(parts)


def outcome_html(sections: Sequence[OutcomeSection]) -> str:
    """The same sections as HTML tables (``report.html``); empty when there are none."""
    if not sections:
        return ""
    out = [f"<h2>{html.escape(OUTCOMES_TITLE)}</h2>"]
    for sec in sections:
        out += [
            f"<h3>{html.escape(sec.title)}</h3>",
            '<table class="outcomes"><thead><tr>',
            *(f"<th>{html.escape(h)}</th>" for h in sec.header),
            "</tr></thead><tbody>",
            *(
                "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                for r in sec.rows
            ),
            "</tbody></table>",
            "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in sec.notes) + "</ul>",
        ]
    return "".join(out)
