"""The scorecard as pages: ``scorecard.md``, ``scorecard.html`` (plots inline as data URIs)
and the plots as PNG files beside them.

Every cell is formatted by one function per column (:data:`COLUMNS`), so a table copied into
a doc can be checked against the ``scorecard.json`` it came from
(:mod:`polylogue.evaluation.scorecard_docs`).
"""

from __future__ import annotations

import base64
import functools
import html
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from polylogue.evaluation.scorecard import FOUR_WAY
from polylogue.runs import portable_command, portable_path

Entry = dict[str, Any]


def _get(entry: Entry, path: str) -> Any:
    value: Any = entry
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _pct(v: Any) -> str:
    return "–" if v is None else f"{100 * float(v):.1f}"


def _num(v: Any, digits: int) -> str:
    return "–" if v is None else f"{float(v):.{digits}f}"


def _with_ci(entry: Entry, key: str) -> str:
    """The value and its interval; ``n/a: k groups`` when the bootstrap had too few groups
    to mean anything (``metrics.bootstrap_warning``)."""
    from polylogue.evaluation.metrics import bootstrap_warning

    value = _pct(_get(entry, f"metrics.{key}"))
    ci = _get(entry, f"metrics.ci95.{key}")
    if not ci:
        return value
    groups = _get(entry, "metrics.bootstrap.n_units")
    if bootstrap_warning(groups):
        return f"{value} (CI n/a: {groups} group{'s' if groups != 1 else ''})"
    return f"{value} ({100 * ci[0]:.1f}–{100 * ci[1]:.1f})"


def _point(entry: Entry) -> str:
    return str(entry.get("operating_point") or "–")


def _threshold(entry: Entry) -> str:
    t = entry.get("threshold")
    return "–" if t is None else f"{float(t):.2f}"


def _four_way(entry: Entry, category: str) -> str:
    return _pct(_get(entry, f"four_way.accuracy.{category}"))


Formatter = Callable[[Entry], str]

#: Every column a scorecard table can have: header -> the cell of an entry. The first three
#: name the row (:data:`KEY_COLUMNS`); the others are figures.
COLUMNS: dict[str, Formatter] = {
    "Data": lambda e: str(e["data"]),
    "Model": lambda e: str(e["model"]),
    "Point": _point,
    "Threshold": _threshold,
    "BalAcc (95% CI)": lambda e: _with_ci(e, "balanced_accuracy"),
    "F1avg (95% CI)": lambda e: _with_ci(e, "f1_avg"),
    "Acc (95% CI)": lambda e: _with_ci(e, "accuracy"),
    "BalAcc": lambda e: _pct(_get(e, "metrics.balanced_accuracy")),
    "F1avg": lambda e: _pct(_get(e, "metrics.f1_avg")),
    "Acc": lambda e: _pct(_get(e, "metrics.accuracy")),
    "Speak ratio": lambda e: _num(_get(e, "metrics.agent.speak_ratio"), 2),
    "Precision": lambda e: _pct(_get(e, "metrics.agent.precision")),
    "False interr.": lambda e: _pct(_get(e, "metrics.agent.false_interruption_rate")),
    "I1 recall": lambda e: _pct(_get(e, "metrics.agent.i1_recall")),
    "False interj./10 min": lambda e: _num(
        _get(e, "metrics.agent.false_interjections_per_10min"), 1
    ),
    "Missed addressed/10 min": lambda e: _num(
        _get(e, "metrics.agent.missed_addressed_per_10min"), 1
    ),
    "N": lambda e: f"{_get(e, 'metrics.n') or 0:,}",
    **{c: functools.partial(_four_way, category=c) for c in FOUR_WAY},
}
KEY_COLUMNS: tuple[str, ...] = ("Data", "Model", "Point")

MAIN_COLUMNS: tuple[str, ...] = (
    "Model", "Point", "Threshold", "BalAcc (95% CI)", "F1avg (95% CI)", "Acc (95% CI)",
    "Speak ratio", "Precision", "False interr.", "I1 recall", "False interj./10 min",
    "Missed addressed/10 min", "N",
)  # fmt: skip
FOUR_WAY_COLUMNS: tuple[str, ...] = ("Model", "Point", *FOUR_WAY, "Acc", "F1avg", "BalAcc")

NOTES: tuple[str, ...] = (
    "All rates in %. 95% CI: percentile bootstrap over whole meetings/episodes/calls.",
    "Speak ratio: how often the model speaks / how often the person did (1.0: as often). "
    "Precision: share of its SPEAKs where the person did take the floor. False interr.: share "
    "of pauses where the person stayed silent (or only acknowledged) at which it speaks. I1 "
    "recall: share of explicitly addressed turns it takes.",
    "Per 10 min: per 10 minutes of one listener's conversation (first to last pause); `–` "
    "where the data has no pause times.",
    "Point: the named operating point (models that have them); Threshold: its floor "
    "threshold on P(SPEAK).",
    "Curves: P(SPEAK) >= threshold at every threshold; a named point can sit just off its "
    "model's curve where its rule acknowledges instead of speaking, or speaks only when "
    "addressed (addressed-only).",
)


def table(entries: Sequence[Entry], columns: Sequence[str]) -> list[list[str]]:
    """Rows of cells (the header first)."""
    return [list(columns), *([COLUMNS[c](e) for c in columns] for e in entries)]


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    head, *body = rows
    align = ["---" if i == 0 or head[i] in KEY_COLUMNS else "---:" for i in range(len(head))]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines) + "\n"


def html_table(rows: Sequence[Sequence[str]]) -> str:
    head, *body = rows
    out = ["<table><thead><tr>", *(f"<th>{html.escape(h)}</th>" for h in head), "</tr></thead>"]
    out.append("<tbody>")
    for r in body:
        out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _by_data(card: dict[str, Any]) -> dict[str, list[Entry]]:
    out: dict[str, list[Entry]] = {}
    for e in card["entries"]:
        out.setdefault(e["data"], []).append(e)
    return out


# ----------------------------------------------------------------------------- plots


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def curve_plot(card: dict[str, Any], data: str) -> bytes | None:
    """The operating curves of one data: false interjections vs missed addressed turns per
    hour, and precision vs speak ratio; named points and baselines marked."""
    entries = [e for e in card["entries"] if e["data"] == data]
    curves = [c for c in card["curves"] if c["data"] == data]
    if not entries:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
    colors = {m: f"C{i % 10}" for i, m in enumerate(dict.fromkeys(e["model"] for e in entries))}
    for c in curves:
        color = colors.get(c["model"], "grey")
        pairs = [
            (x, y)
            for x, y in zip(
                c["false_interjections_per_hour"], c["missed_addressed_per_hour"], strict=True
            )
            if x is not None and y is not None
        ]
        if pairs:
            a.plot(*zip(*pairs, strict=True), color=color, lw=1.2, label=f"{c['model']} (curve)")
        pr = [
            (x, y)
            for x, y in zip(c["speak_ratio"], c["precision"], strict=True)
            if x is not None and y is not None
        ]
        if pr:
            b.plot([x for x, _ in pr], [100 * y for _, y in pr], color=color, lw=1.2)
    for e in entries:
        agent = e["metrics"].get("agent") or {}
        color = colors[e["model"]]
        marker = "o" if e.get("operating_point") else "s"
        name = e["model"] + (f" @ {e['operating_point']}" if e.get("operating_point") else "")
        fi, ma = agent.get("false_interjections_per_10min"), agent.get("missed_addressed_per_10min")
        if fi is not None and ma is not None:
            a.plot([6 * fi], [6 * ma], marker, color=color, ms=7, mec="black", label=name)
            a.annotate(f" {e.get('operating_point') or e['model']}", (6 * fi, 6 * ma), fontsize=7)
        sr, prec = agent.get("speak_ratio"), agent.get("precision")
        if sr is not None and prec is not None:
            b.plot([sr], [100 * prec], marker, color=color, ms=7, mec="black")
            b.annotate(f" {e.get('operating_point') or e['model']}", (sr, 100 * prec), fontsize=7)
    if not a.lines:
        a.text(0.5, 0.5, "no pause times in this data:\nno per-hour figures", ha="center",
               va="center", transform=a.transAxes, color="grey")  # fmt: skip
    a.set_xlabel("false interjections per hour (a listener's conversation)")
    a.set_ylabel("missed addressed (I1) turns per hour")
    a.set_title(f"{data}: interjections vs missed addressed turns")
    a.set_xlim(left=0)
    a.set_ylim(bottom=0)
    b.set_xlabel("speak ratio (1.0: as often as people)")
    b.set_ylabel("precision % (its SPEAKs that were right)")
    b.set_title(f"{data}: precision vs speak ratio")
    b.axvline(1.0, color="grey", lw=0.6, ls="--")
    b.set_ylim(0, 100)
    b.set_xlim(left=0)
    handles, labels = a.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", fontsize=7, ncol=3)
    return _png(fig)


# ----------------------------------------------------------------------------- pages


def _paper_rows(card: dict[str, Any], entries: Sequence[Entry]) -> list[list[str]]:
    corpora = {c for d in card["manifest"]["data"] if d["label"] == entries[0]["data"]
               for c in d["corpora"]}  # fmt: skip
    rows = []
    for p in card.get("paper", []):
        if p["corpus"] not in corpora:
            continue
        vals = [p[c] for c in FOUR_WAY] + [p["accuracy"], p["f1_avg"], p["balanced_accuracy"]]
        rows.append(
            [f"paper: {p['system']} ({p['source']}, their split)", "–", *(_pct(v) for v in vals)]
        )
    return rows


def _protocol(card: dict[str, Any], label: str) -> str:
    return next((d["protocol"] for d in card["manifest"]["data"] if d["label"] == label), "?")


def sections(card: dict[str, Any]) -> list[tuple[str, str, list[list[str]], list[str]]]:
    """(level + title, kind, table rows, notes) for each part of the page, in order."""
    out: list[tuple[str, str, list[list[str]], list[str]]] = []
    by_data = _by_data(card)
    for data, entries in by_data.items():
        notes = []
        untimed = max((e.get("untimed_points") or 0) for e in entries)
        if untimed:
            n = entries[0]["metrics"]["n"]
            notes.append(
                f"{untimed:,} of {n:,} points have no pause time (no times in the transcript): "
                "the per-10-minute columns, which need every point's time, stay empty."
            )
        notes += sorted({f"⚠ {e['training_overlap']}" for e in entries if e["training_overlap"]})
        out.append((f"## {data} ({_protocol(card, data)} protocol)", "main",
                    table(entries, MAIN_COLUMNS), notes))  # fmt: skip
        out.append((f"### {data}: operating curves", "plot:" + data, [], []))
        four = table(entries, FOUR_WAY_COLUMNS) + _paper_rows(card, entries)
        four_notes = [
            "The paper's four-way mapping: S3 (silent participant) and SA (addressed, silent) "
            "count as S2."
        ]
        if len(four) > len(entries) + 1:
            four_notes.append(
                "Rows marked 'paper:' are the paper's own figures (Bhagtani et al., Speak or Stay "
                "Silent), on their split and protocol (utterance boundaries, 50/50 classes, "
                "per-sample split), quoted for comparison"
                + (
                    "; this data is built in the same protocol."
                    if _protocol(card, data) == "paper"
                    else "; this data is not: compare with the paper-protocol sections."
                )
            )
        out.append((f"### {data}: per category (the paper's four-way mapping)", "four",
                    four, four_notes))  # fmt: skip
        for e in entries:
            om = e.get("outcomes")
            if not om or not e.get("gives_backchannels"):
                continue
            rows = [["Gold \\ action", "TAKE_FLOOR", "BACKCHANNEL", "SILENT", "Recall"]]
            for g in ("TAKE_FLOOR", "BACKCHANNEL", "SILENT"):
                row = om["confusion"][g]
                rows.append([g, *(f"{row[p]:,}" for p in ("TAKE_FLOOR", "BACKCHANNEL", "SILENT")),
                             _pct(om["recall"][g])])  # fmt: skip
            prec = om.get("precision") or {}
            rows.append(["Precision", *(_pct(prec.get(p)) for p in
                                        ("TAKE_FLOOR", "BACKCHANNEL", "SILENT")), ""])  # fmt: skip
            notes3 = [
                f"Floor BalAcc {_pct(om['floor_balanced_accuracy'])}; takes the floor at "
                f"{_pct(om['backchannel_floor_take_rate'])}% of the pauses where the person "
                "only acknowledged."
            ]
            title = f"#### {data}: three outcomes, {e['model']} @ {e.get('operating_point')}"
            out.append((title, "outcomes", rows, notes3))
    return out


def markdown(card: dict[str, Any], plots: dict[str, str]) -> str:
    m = card["manifest"]
    parts = [
        "# Turn-taking scorecard",
        "",
        f"Split: {m['options']['split']}. Made {m['created']} by `{portable_command(m['command'])}`"
        if m["command"]
        else f"Split: {m['options']['split']}. Made {m['created']}.",
        "",
        *(f"- {n}" for n in NOTES),
        "",
    ]
    for title, kind, rows, notes in sections(card):
        parts += [title, ""]
        if kind.startswith("plot:"):
            name = plots.get(kind[5:])
            parts += [f"![{title.lstrip('# ')}]({name})" if name else "(no plot)", ""]
            continue
        parts.append(markdown_table(rows))
        parts += [f"- {n}" for n in notes]
        parts.append("")
    parts += ["## Runs", "", *(f"- `{r}`" for r in m["runs"]), ""]
    return "\n".join(parts)


STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}"
    "table{border-collapse:collapse;font-size:13px;margin:6px 0}"
    "td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}"
    "td:first-child,td:nth-child(2){text-align:left}img{max-width:100%}"
)


def portable_manifest(m: dict[str, Any]) -> dict[str, Any]:
    """The manifest as a page shows it: its command as a user types it and its folders
    relative or as placeholders (``RUNS``, ``BENCH``); ``scorecard.json`` keeps the record."""
    out = json.loads(json.dumps(m))
    if out.get("command"):
        out["command"] = portable_command(out["command"])
    options = out.get("options") or {}
    if options.get("runs_dir"):
        options["runs_dir"] = portable_path(options["runs_dir"], placeholder="RUNS")
    for data in out.get("data") or []:
        if data.get("path"):
            data["path"] = portable_path(data["path"], placeholder="BENCH")
    return out


def html_page(card: dict[str, Any], pngs: dict[str, bytes]) -> str:
    m = card["manifest"]
    body = ["<h1>Turn-taking scorecard</h1>", f"<p>Split: {html.escape(m['options']['split'])}"
            f". Made {html.escape(m['created'])}.</p>",
            "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in NOTES) + "</ul>"]  # fmt: skip
    for title, kind, rows, notes in sections(card):
        level = min(4, len(title) - len(title.lstrip("#")))
        text = html.escape(title.lstrip("# "))
        body.append(f"<h{level}>{text}</h{level}>")
        if kind.startswith("plot:"):
            png = pngs.get(kind[5:])
            if png:
                b64 = base64.b64encode(png).decode("ascii")
                body.append(f'<img class="curve" alt="{text}" src="data:image/png;base64,{b64}">')
            continue
        body.append(html_table(rows))
        if notes:
            body.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    manifest = html.escape(json.dumps(portable_manifest(m), indent=1))
    body.append(f"<h2>Manifest</h2><pre>{manifest}</pre>")
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>Turn-taking scorecard</title>'
        f"<style>{STYLE}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "data"


def write_pages(card: dict[str, Any], out: Path) -> list[Path]:
    """``scorecard.json``, ``scorecard.md``, ``scorecard.html`` and one PNG per data."""
    out.mkdir(parents=True, exist_ok=True)
    pngs: dict[str, bytes] = {}
    names: dict[str, str] = {}
    for data in _by_data(card):
        png = curve_plot(card, data)
        if png is not None:
            pngs[data] = png
            names[data] = f"curve-{_slug(data)}.png"
            (out / names[data]).write_bytes(png)
    paths = [out / "scorecard.json", out / "scorecard.md", out / "scorecard.html"]
    paths[0].write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(card, names), encoding="utf-8")
    paths[2].write_text(html_page(card, pngs), encoding="utf-8")
    return paths + [out / n for n in names.values()]
