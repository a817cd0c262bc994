"""Does every operating point answer a direct verbal address, in both renderings?

    .venv/bin/python benchmarks/address_recall.py build/bench-ami build/bench-friends \
        build/bench-icsi build/bench-earnings21 [--splits validation test] [--json out.json]

Each benchmark folder is a ``polylogue build`` of one corpus. At every decision point of a split
(a pause, a listener: the *target*) the current utterance is read in the original text and in
the recognizer rendering (:func:`polylogue.rendering.recognizer_text`); the shipped model of the
corpus's domain scores it through the same extractor ``eval`` uses, and each operating point's
rule (``Deployment.choose``) gives the action.

**Direct verbal address** of the target (the gold), from the corpora's annotations and the
original text only:

* *name*: the utterance is annotated as addressed to the target (AMI ``addressee``, Friends
  "(to X)" notes) and one of the target's names or multi-word roles is among its words; or, in
  an utterance without annotation, the benchmark's own vocative rule on the original text
  (:func:`polylogue.turntaking.cues.utterance_cues`: commas, capitals) names the target as
  addressee **and the target takes the floor next**;
* *follow-up*: a question mark and a "you" in the original text (not "you guys", "you all",
  "everyone"), nobody named as addressee, the
  target held the turn before the speaker's and said more than a filler or an acknowledgement
  there, and the target is the annotated addressee (AMI) or, without annotation, takes the
  floor next.

**Not addressed to the target**: *named, not addressed*: the target is named but the
annotation addresses others, or (without annotation) the vocative rule finds the name used in
the third person and the target does not take the floor; *someone else*: annotated to other
people only, or (without annotation) the vocative rule names someone else, the target is not
named, and the target does not take the floor; *no one*: no annotation, nobody named, no
"you", and the target does not take the floor.

Printed per corpus, split and rendering: the number of gold points, the recall of the address
verdict (:mod:`polylogue.turntaking.address`) and of each point's SPEAK (``matched``,
``polite``, ``balanced``, ``addressed-only`` = the ``assistant``), and the assistant's false
speaking on *named, not addressed* / *someone else* / *no one*. Beside them, the **old gate**
(the comma- and case-based rule the engine used before: the row's ``target_vocative`` or
"question / 'you' right after the target spoke") and what each point did with it (SPEAK only
above its threshold; the assistant also needed the old gate). On the original text of corpora
without annotation the old gate agrees with the *name* gold by construction (it is that gold's
rule); the recognizer rendering and the annotated corpora are the fair comparison.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.conversation import GROUP_ROLE, Conversation, Utterance
from polylogue.engine.deployment import Action, Deployment
from polylogue.engine.engine import address_readers, addressed_at
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.features import FEATURE_NAMES
from polylogue.engine.model import domain_of_corpus, load_model
from polylogue.rendering import RENDERINGS, render_utterance
from polylogue.turntaking.address import (
    AddressVerdict,
    participant_words,
    substantive,
    words_of,
)
from polylogue.turntaking.cues import build_matchers, is_cased, utterance_cues
from polylogue.turntaking.dataset import load_benchmark
from polylogue.turntaking.points import Prefixes, model_visible
from polylogue.turntaking.types import DecisionInput, DecisionPoint, Outcome

POINTS: tuple[str, ...] = ("matched", "polite", "balanced", "addressed-only")
_OLD = tuple(
    FEATURE_NAMES.index(n)
    for n in ("target_vocative", "question_to_prev_target", "second_person_to_prev_target")
)
_YOU = re.compile(r"\b(?:you|your|you're|you've|you'll|you'd|yourself)\b", re.IGNORECASE)
# A "you" to several people is no direct address of one listener.
_GROUP = re.compile(r"\b(?:you guys|you all|y'all|everyone|everybody|guys)\b", re.IGNORECASE)


def _previous_turn(utts: Sequence[Utterance], i: int) -> Utterance | None:
    """The last utterance of the turn before the speaker's current turn."""
    speaker = utts[i].speaker
    j = i
    while j >= 0 and utts[j].speaker == speaker:
        j -= 1
    return utts[j] if j >= 0 else None


def gold_labels(conv: Conversation, points: Sequence[DecisionPoint]) -> list[str]:
    """Per point: ``name``, ``follow-up``, ``someone-else``, ``no-one`` or ``""`` (none)."""
    utts = conv.utterances
    matchers = build_matchers(conv.participants, is_cased(utts))
    people = {p.id: p for p in conv.participants}
    terms = {pid: [w for w, _ in participant_words(p)] for pid, p in people.items()}
    cue_cache: dict[int, Any] = {}
    out = []
    for pt in points:
        i = len(pt.input.context) - 1
        u = utts[i]
        t = pt.input.target.id
        if i not in cue_cache:
            bare = Utterance(speaker=u.speaker, text=u.text)
            cue_cache[i] = utterance_cues(bare, matchers, previous=utts[i - 1] if i else None)
        cues = cue_cache[i]
        answered = pt.gold.outcome is Outcome.TAKE_FLOOR
        words = words_of(u.text)
        joined = f" {' '.join(words)} "
        named = any(f" {' '.join(w)} " in joined or f" {' '.join(w)}'s " in joined
                    for w in terms.get(t, []))  # fmt: skip
        ann = u.addressees
        individual = [a for a in (ann or ()) if a != u.speaker and people.get(a) is not None
                      and people[a].role != GROUP_ROLE]  # fmt: skip
        you_q = "?" in u.text and bool(_YOU.search(u.text)) and not _GROUP.search(u.text)
        before = _previous_turn(utts, i)
        follow = (
            you_q
            and before is not None
            and before.speaker == t
            and substantive(before.text)
            and not cues.addressed
        )
        label = ""
        if ann is not None:
            listeners = [p for p, q in people.items() if p != u.speaker and q.role != GROUP_ROLE]
            others = len(individual) < len(listeners)  # not the whole group
            if t in individual and others and named:
                label = "name"
            elif t in individual and others and len(individual) == 1 and you_q and follow:
                label = "follow-up"
            elif named and t not in individual:
                label = "named-not-addressed"
            elif individual and t not in individual and others:
                label = "someone-else"
        else:
            evidence = cues.addressed.get(t)
            if evidence in ("vocative", "role") and answered:
                label = "name"
            elif follow and answered:
                label = "follow-up"
            elif t in cues.referenced and not answered:
                label = "named-not-addressed"
            elif cues.addressed and t not in cues.addressed and not named and not answered:
                label = "someone-else"
            elif not cues.addressed and not cues.referenced and not _YOU.search(u.text):
                label = "" if answered else "no-one"
        out.append(label)
    return out


def rendered_inputs(
    points: Sequence[DecisionPoint], convs: dict[str, Conversation], rendering: str
) -> list[DecisionInput]:
    """The points' inputs with every context utterance in ``rendering``."""
    views: dict[str, Prefixes] = {}
    out = []
    for p in points:
        cid = p.input.conversation_id
        if cid not in views:
            visible = model_visible(convs[cid])
            views[cid] = Prefixes([render_utterance(u, rendering) for u in visible])
        ctx = views[cid].view(len(p.input.context))
        out.append(DecisionInput(**{**_fields(p.input), "context": ctx}))
    return out


def _fields(inp: DecisionInput) -> dict[str, Any]:
    return {f: getattr(inp, f) for f in inp.__dataclass_fields__}


def split_figures(folder: Path, split: str, address: str = "model") -> dict[str, Any]:
    bench = load_benchmark(folder)
    points = bench.points(split)
    convs = bench.conversations
    corpus = points[0].input.corpus
    domain = domain_of_corpus(corpus)
    model = load_model(None, domain)
    labels: list[str] = []
    by_conv: dict[str, list[int]] = {}
    for k, p in enumerate(points):
        by_conv.setdefault(p.input.conversation_id, []).append(k)
    labels = [""] * len(points)
    for cid, idx in by_conv.items():
        for k, label in zip(idx, gold_labels(convs[cid], [points[k] for k in idx]), strict=True):
            labels[k] = label
    lab: np.ndarray[Any, Any] = np.asarray(labels)
    deps = {pt: Deployment.resolve(domain=domain, operating_point=pt, model=model) for pt in POINTS}
    out: dict[str, Any] = {
        "corpus": corpus,
        "split": split,
        "points": len(points),
        "address": address,
    }
    for kind in ("name", "follow-up", "named-not-addressed", "someone-else", "no-one"):
        out[f"n_{kind}"] = int((lab == kind).sum())
    for rendering in RENDERINGS:
        inputs = rendered_inputs(points, convs, rendering)
        extractor = FeatureExtractor.for_model(model)
        extractor.address_model = "shipped" if address == "model" else None
        verdicts: list[AddressVerdict] = []
        x = extractor.features(inputs, verdicts=verdicts)
        o = model.outcomes(x)
        readers = address_readers(extractor.blocks)
        new = np.asarray(
            [
                addressed_at(v, i.target.id, r, readers)
                for v, i, r in zip(verdicts, inputs, x, strict=True)
            ]
        )
        old = (x[:, list(_OLD)] == 1.0).any(axis=1)
        pt_, pb = o.take_floor, o.backchannel
        figs: dict[str, Any] = {}
        gold = np.isin(lab, ("name", "follow-up"))
        for name, mask in (
            ("direct", gold),
            ("name", lab == "name"),
            ("follow-up", lab == "follow-up"),
        ):
            if not mask.any():
                continue
            row = {"n": int(mask.sum()), "verdict": float(new[mask].mean()),
                   "old_gate": float(old[mask].mean())}  # fmt: skip
            for point, dep in deps.items():
                speak = _speaks(dep, pt_, pb, new)
                before = _speaks_before(dep, pt_, pb, old)
                row[point] = float(speak[mask].mean())
                row[f"{point} (old)"] = float(before[mask].mean())
            figs[name] = row
        dep = deps["addressed-only"]
        for name in ("named-not-addressed", "someone-else", "no-one"):
            mask = lab == name
            if mask.any():
                figs[f"false_{name}"] = {
                    "n": int(mask.sum()),
                    "assistant": float(_speaks(dep, pt_, pb, new)[mask].mean()),
                    "assistant (old)": float(_speaks_before(dep, pt_, pb, old)[mask].mean()),
                    "matched": float(_speaks(deps["matched"], pt_, pb, new)[mask].mean()),
                    "matched (old)": float(
                        _speaks_before(deps["matched"], pt_, pb, old)[mask].mean()
                    ),
                }
        both = np.isin(lab, ("named-not-addressed", "someone-else", "no-one"))
        if both.any():
            figs["false_not_target"] = {
                "n": int(both.sum()),
                "assistant": float(_speaks(dep, pt_, pb, new)[both].mean()),
                "assistant (old)": float(_speaks_before(dep, pt_, pb, old)[both].mean()),
            }
        # The not-addressed behaviour: each point's speak ratio beside the real rate.
        took = np.asarray([p.gold.outcome is Outcome.TAKE_FLOOR for p in points])
        figs["speak_ratio"] = {
            point: round(float(_speaks(d, pt_, pb, new).mean() / max(took.mean(), 1e-9)), 3)
            for point, d in deps.items()
        }
        figs["precision"] = {
            point: round(float(took[_speaks(d, pt_, pb, new)].mean()), 3)
            for point, d in deps.items()
            if _speaks(d, pt_, pb, new).any()
        }
        out[rendering] = figs
    return out


def _speaks(dep: Deployment, pt: np.ndarray, pb: np.ndarray, addressed: np.ndarray) -> np.ndarray:
    rows = zip(pt.tolist(), pb.tolist(), addressed.tolist(), strict=True)
    return np.asarray([dep.choose(a, b, c) is Action.SPEAK for a, b, c in rows])


def _speaks_before(
    dep: Deployment, pt: np.ndarray, pb: np.ndarray, addressed: np.ndarray
) -> np.ndarray:
    """The rule before every point answered an address: thresholds, then the old gate."""
    take = pt >= dep.thresholds.take_floor
    back = (pb >= dep.thresholds.backchannel) & (pb >= dep.thresholds.backchannel_margin * pt)
    speak = take & ~back
    return speak & addressed if dep.addressed_only else speak


def _fmt(v: float | None) -> str:
    return "  -  " if v is None else f"{v:5.3f}"


def print_table(results: list[dict[str, Any]]) -> None:
    cols = ("verdict", *POINTS)
    print("recall of direct verbal address (new rule | old gate / old rule)")
    print(f"{'corpus':11} {'split':10} {'addr':6} {'render':10} {'kind':9} {'n':>5}  "
          + "  ".join(f"{c:>17}" for c in cols))  # fmt: skip
    for r in results:
        for rendering in RENDERINGS:
            for kind in ("direct", "name", "follow-up"):
                row = r[rendering].get(kind)
                if row is None:
                    continue
                cells = [f"{_fmt(row['verdict'])} | {_fmt(row['old_gate'])}"]
                cells += [f"{_fmt(row[p])} | {_fmt(row[f'{p} (old)'])}" for p in POINTS]
                head = f"{r['corpus']:11} {r['split']:10} {r['address']:6} {rendering:10}"
                print(f"{head} {kind:9} {row['n']:5d}  " + "  ".join(f"{c:>17}" for c in cells))
    print()
    print("assistant's false speaking (new | old); matched beside it")
    for r in results:
        for rendering in RENDERINGS:
            for kind in ("named-not-addressed", "someone-else", "no-one", "not_target"):
                row = r[rendering].get(f"false_{kind}")
                if row is None:
                    continue
                extra = (
                    f"   matched {_fmt(row['matched'])} | {_fmt(row['matched (old)'])}"
                    if "matched" in row
                    else ""
                )
                new, old = _fmt(row["assistant"]), _fmt(row["assistant (old)"])
                head = f"{r['corpus']:11} {r['split']:10} {r['address']:6} {rendering:10}"
                print(f"{head} {kind:19} {row['n']:6d}  assistant {new} | {old}{extra}")
    print()
    print("not-addressed behaviour: speak ratio (SPEAK rate / real TAKE_FLOOR rate), precision")
    for r in results:
        for rendering in RENDERINGS:
            sr, pr = r[rendering]["speak_ratio"], r[rendering]["precision"]
            cells = [f"{p} {sr[p]:.2f}/{pr.get(p, float('nan')):.2f}" for p in POINTS]
            print(
                f"{r['corpus']:11} {r['split']:10} {r['address']:6} {rendering:10} "
                + "  ".join(cells)
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path, help="benchmark folders (polylogue build)")
    ap.add_argument("--splits", nargs="+", default=["validation", "test"])
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument(
        "--address",
        nargs="+",
        choices=("model", "rules"),
        default=["model", "rules"],
        help="address verdicts to measure: the shipped model, the rulebook alone (default both)",
    )
    args = ap.parse_args()
    results = [
        split_figures(f, s, a) for f in args.folders for s in args.splits for a in args.address
    ]
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
