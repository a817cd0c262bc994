"""The shipped model on outside data through the transcript formats (docs/corpora-chat.md).

Data the model was not trained on, read through the user-facing transcript formats; rerun
whenever the model changes.

    .venv/bin/python benchmarks/outside_data.py [--model-dir DIR] [--ami-bench DIR] \
        [--molweni N] [--irc-files N] [--irc-messages N] [--json out.json] [--markdown out.md]

Sources (each written to a temporary folder exactly as a user would hand it to polylogue, then
read back with ``read_transcript``):

* ``molweni-test.jsonl``: the first N Molweni test dialogues, one JSONL file each, with the
  gold ``addressee`` field (a chat export with reply annotation);
* ``irc-test.csv``: the first M annotated messages of the first K Ubuntu IRC test logs, after
  100 context messages, as a CSV chat export (``speaker,text,start,end,addressee``, times from
  the log's minutes; addressees who do not write in the slice left out); a user file carries
  no presence window, so everybody seen so far is a target, as for any user transcript;
* ``ami-zoom.vtt`` / ``ami-teams.vtt``: one AMI meeting of the default model's *test* split
  rendered as Zoom-style WebVTT (numbered cues, ``Name: text``) and Teams-style WebVTT (cue ids,
  ``<v Name>text</v>``), speakers named by their role code (PM, ME, UI, ID); and the same
  meeting read natively (``ami-native``) to show what the formats lose (addressee annotation).

The general v2 model was trained on AMI, Friends, Earnings-21, ICSI and Molweni train splits
(``model.json`` ``trained_on``; its Molweni split is the builder's over all dialogues, so the
Molweni test dialogues are *not* outside data for it); IRC is a new domain for it, and the AMI
meeting must be held out (``--ami-meeting TS3005b`` is in the v2 AMI test split).
``--domain chat`` runs the chat-domain model (trained on IRC train logs and Molweni dev).
For each source: files, read errors, decision points, gold SPEAK rate, predicted SPEAK rate,
balanced accuracy and per-category accuracy (I1, I2, S1, S2, SA) of the model, and the same
for the "previous other speaker" rule.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.conversation import Conversation, ConversationFormatError, Participant, Utterance
from polylogue.corpora import load_corpus
from polylogue.corpora.export import (
    VttStyle,
    write_transcript,
)
from polylogue.corpora.irc import read_irc
from polylogue.corpora.molweni import read_molweni
from polylogue.corpora.transcripts import read_transcript
from polylogue.engine.deployment import balanced_threshold
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.model import load_model
from polylogue.models.baselines import held_floor_before
from polylogue.paths import corpus_dir
from polylogue.turntaking.points import conversation_points
from polylogue.turntaking.types import Decision, DecisionPoint


@dataclass
class SourceResult:
    name: str
    description: str
    files: int = 0
    errors: list[str] = field(default_factory=list)
    points: list[DecisionPoint] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- rendering


def molweni_jsonl(convs: Iterable[Conversation], folder: Path) -> list[Path]:
    return [write_transcript(c, folder / f"{c.id}.jsonl", "jsonl") for c in convs]


def irc_csv(
    convs: Iterable[Conversation], folder: Path, messages: int, lead: int = 100
) -> list[Path]:
    """The first ``messages`` annotated messages of each log, after ``lead`` context messages.

    An addressee who does not write within the exported slice is left out (a CSV export only
    names people who appear in it).
    """
    out = []
    for conv in convs:
        first = next(i for i, u in enumerate(conv.utterances) if u.addressees is not None)
        rows = [u for u in conv.utterances[max(0, first - lead) :] if u.text.strip()]
        rows = rows[: min(first, lead) + messages]
        speakers = {u.speaker for u in rows}
        rows = [
            replace(u, addressees=tuple(a for a in u.addressees if a in speakers))
            if u.addressees
            else u
            for u in rows
        ]
        part = replace(conv, utterances=tuple(rows), participants=_participants(rows, conv))
        out.append(write_transcript(part, folder / f"{conv.id}.csv", "csv"))
    return out


def _participants(rows: Sequence[Utterance], conv: Conversation) -> tuple[Participant, ...]:
    spoken = dict.fromkeys(u.speaker for u in rows)
    return tuple(p for p in conv.participants if p.id in spoken)


def ami_vtt(conv: Conversation, path: Path, style: VttStyle) -> Path:
    names = {p.id: (p.aliases[0] if p.aliases else p.id) for p in conv.participants}
    return write_transcript(conv, path, "vtt", style=style, names=names)


# ----------------------------------------------------------------------------- evaluation


def read_all(
    paths: Sequence[Path], result: SourceResult, domain: str | None = None
) -> list[Conversation]:
    """Read as a user would: ``domain`` is what ``polylogue build --domain`` passes."""
    convs = []
    for p in paths:
        result.files += 1
        try:
            convs.append(read_transcript(p, domain=domain))
        except ConversationFormatError as exc:
            result.errors.append(str(exc))
    return convs


def points_of(convs: Iterable[Conversation]) -> list[DecisionPoint]:
    return [p for c in convs for p in conversation_points(c)]


def _balacc(y: np.ndarray, pred: np.ndarray) -> float | None:
    if not len(y):
        return None
    tpr = float(pred[y == 1].mean()) if (y == 1).any() else np.nan
    tnr = float(1 - pred[y == 0].mean()) if (y == 0).any() else np.nan
    return float(np.nanmean([tpr, tnr]))


def _block(points: Sequence[DecisionPoint], y: np.ndarray, pred: np.ndarray) -> dict[str, Any]:
    cats = np.asarray([p.gold.category.value for p in points])
    out: dict[str, Any] = {
        "balanced_accuracy": _balacc(y, pred),
        "speak_rate_pred": float(pred.mean()) if len(pred) else None,
    }
    for c in ("I1", "I2", "S1", "S2", "SA"):
        m = cats == c
        out[f"acc_{c}"] = float((pred[m] == y[m]).mean()) if m.any() else None
    return out


def evaluate(
    result: SourceResult, scorer: Callable[[list[DecisionPoint]], np.ndarray], threshold: float
) -> None:
    pts = result.points
    y = np.asarray([p.gold.label is Decision.SPEAK for p in pts], dtype=np.int8)
    t0 = time.perf_counter()
    prob = scorer(pts) if pts else np.empty(0)
    elapsed = time.perf_counter() - t0
    model_pred = (prob >= threshold).astype(np.int8)
    base_pred = np.asarray([held_floor_before(p.input) for p in pts], dtype=np.int8)
    result.metrics = {
        "files": result.files,
        "errors": len(result.errors),
        "points": len(pts),
        "conversations": len({p.input.conversation_id for p in pts}),
        "speak_rate_gold": float(y.mean()) if len(y) else None,
        "model": _block(pts, y, model_pred),
        "previous_other_speaker": _block(pts, y, base_pred),
        "ms_per_point": 1e3 * elapsed / max(len(pts), 1),
    }


def ami_test_meeting(ami_bench: Path | None, seed: int = 13) -> str:
    """The held-out AMI meeting with the most explicitly addressed points (I1) in the test split
    of the default model's AMI benchmark (ties: first id), so the native read shows what a
    transcript format without addressee annotation loses."""
    from polylogue.turntaking.dataset import BuildOptions, build_benchmark, load_benchmark

    if ami_bench is not None:
        points = load_benchmark(ami_bench).points("test")
    else:
        points = build_benchmark(load_corpus("ami"), BuildOptions(seed=seed)).split("test")
    i1: dict[str, int] = {}
    for p in points:
        i1[p.input.conversation_id] = i1.get(p.input.conversation_id, 0) + (
            p.gold.category.value == "I1"
        )
    return min(i1, key=lambda m: (-i1[m], m))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model-dir", type=Path, default=None)
    ap.add_argument(
        "--domain",
        default=None,
        help="Deployment domain: its shipped model (chat has its own) and threshold.",
    )
    ap.add_argument(
        "--sources",
        nargs="*",
        default=["molweni", "irc", "ami"],
        choices=["molweni", "irc", "ami"],
        help="Which sources to run (default: all).",
    )
    ap.add_argument("--ami-bench", type=Path, default=None, help="Built AMI benchmark (faster).")
    ap.add_argument("--ami-meeting", default=None, help="Use this AMI meeting (must be held out).")
    ap.add_argument("--molweni", type=int, default=200, help="Molweni test dialogues.")
    ap.add_argument("--irc-files", type=int, default=10, help="IRC test logs.")
    ap.add_argument("--irc-messages", type=int, default=150, help="Messages per IRC log.")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args()

    model = load_model(args.model_dir, domain=args.domain)
    threshold = balanced_threshold(model, args.domain)
    extractor = FeatureExtractor.for_model(model)

    def score(pts: list[DecisionPoint]) -> np.ndarray:
        return np.asarray(model.proba(extractor.features([p.input for p in pts])))

    meeting = None
    if "ami" in args.sources:
        meeting = args.ami_meeting or ami_test_meeting(args.ami_bench)
    results: list[SourceResult] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if "molweni" in args.sources:
            mol = list(read_molweni(corpus_dir("molweni"), "test"))[: args.molweni]
            r = SourceResult("molweni-test.jsonl", f"{len(mol)} Molweni test dialogues as JSONL")
            r.points = points_of(read_all(molweni_jsonl(mol, folder), r))
            results.append(r)

        if "irc" in args.sources:
            irc_root = corpus_dir("ubuntu-irc-disentanglement")
            irc = list(read_irc(irc_root, "test"))[: args.irc_files]
            r = SourceResult(
                "irc-test.csv", f"{len(irc)} IRC test logs x {args.irc_messages} messages as CSV"
            )
            # A CSV carries no domain: a user declares the chat export (`build --domain chat`),
            # so every message is a decision moment despite minute-resolution timestamps.
            r.points = points_of(read_all(irc_csv(irc, folder, args.irc_messages), r, "chat"))
            results.append(r)

        if meeting is not None:
            ami = next(iter(load_corpus("ami", meetings=[meeting])))
            r = SourceResult("ami-native", f"AMI {meeting} read natively (with addressees)")
            r.files = 1
            r.points = points_of([ami])
            results.append(r)
            styles: tuple[VttStyle, ...] = ("zoom", "teams")
            for style in styles:
                r = SourceResult(
                    f"ami-{style}.vtt", f"AMI {meeting} as {style.title()}-style WebVTT"
                )
                path = ami_vtt(ami, folder / f"{meeting}-{style}.vtt", style)
                r.points = points_of(read_all([path], r))
                results.append(r)

    for r in results:
        evaluate(r, score, threshold)
    print_table(results, threshold)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "threshold": threshold,
                    "domain": args.domain,
                    "ami_meeting": meeting,
                    "sources": {
                        r.name: {**r.metrics, "description": r.description, "messages": r.errors}
                        for r in results
                    },
                },
                indent=2,
            )
            + "\n"
        )
    if args.markdown:
        args.markdown.write_text(markdown(results) + "\n")


def _f(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def markdown(results: Sequence[SourceResult]) -> str:
    lines = [
        "| Source | files | errors | points | gold SPEAK | model BalAcc | model SPEAK | "
        "I1 | I2 | S1 | S2 | SA | prev-other BalAcc | prev-other SPEAK |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        m, b = r.metrics["model"], r.metrics["previous_other_speaker"]
        lines.append(
            f"| {r.name} | {r.metrics['files']} | {r.metrics['errors']} | "
            f"{r.metrics['points']:,} | {_f(r.metrics['speak_rate_gold'])} | "
            f"{_f(m['balanced_accuracy'])} | {_f(m['speak_rate_pred'])} | {_f(m['acc_I1'])} | "
            f"{_f(m['acc_I2'])} | {_f(m['acc_S1'])} | {_f(m['acc_S2'])} | {_f(m['acc_SA'])} | "
            f"{_f(b['balanced_accuracy'])} | {_f(b['speak_rate_pred'])} |"
        )
    return "\n".join(lines)


def print_table(results: Sequence[SourceResult], threshold: float) -> None:
    print(f"model threshold {threshold:.2f}\n")
    print(markdown(results))
    for r in results:
        print(f"\n{r.name}: {r.description}; {r.metrics['ms_per_point']:.2f} ms/point")
        for e in r.errors[:5]:
            print(f"  error: {e}")


if __name__ == "__main__":
    main()
