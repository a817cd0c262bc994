"""Effect of the engine's cue fixes (issue 23 item 5) on validation, for the model card.

    python benchmarks/cue_ablation.py build/bench-{ami,friends,earnings21,icsi,molweni} \
        [--model-dir DIR] [--old-cues PATH/TO/v2/cues.py]

Scores the validation splits with the shipped (or given) model three ways and prints balanced
accuracy per corpus at each domain's threshold, and the mean over corpora:

* ``as shipped``: the features as the engine computes them;
* ``no previous``: the engine's cues without the utterance before (so a bare name answering a
  question counts as address again);
* ``v2 cue rules`` (with ``--old-cues``): the vocative/role patterns of a v2 ``cues.py`` in the
  engine's features (name inside a question, speaker tags, role identification reverted).

The explanation fixes (``describe_cues``: punctuation read before "ends on a continuer" and
"question") change no feature, so they cannot move these numbers.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

import polylogue.engine.features as features_mod
import polylogue.engine.names as names_mod
import polylogue.turntaking.cues as cues_mod
from polylogue.engine.deployment import balanced_threshold
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.model import domain_of_corpus, load_model
from polylogue.turntaking.dataset import load_benchmark


def balanced_accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.mean([np.mean(pred[y == c] == c) for c in (0, 1) if (y == c).any()]))


@contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def no_previous(real: Callable[..., Any]) -> Callable[..., Any]:
    def cues(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("previous", None)
        return real(*args, **kwargs)

    return cues


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benches", nargs="+", type=Path)
    ap.add_argument("--model-dir", type=Path, default=None)
    ap.add_argument("--old-cues", type=Path, default=None)
    args = ap.parse_args()
    model = load_model(args.model_dir)
    data: list[tuple[str, list[Any]]] = []
    for b in args.benches:
        bench = load_benchmark(b)
        pts = bench.points("validation")
        by_corpus: dict[str, list[Any]] = {}
        for p in pts:
            by_corpus.setdefault(p.input.corpus, []).append(p)
        data.extend(by_corpus.items())

    def score() -> dict[str, float]:
        out = {}
        for corpus, pts in data:
            x = FeatureExtractor.for_model(model).features([p.input for p in pts])
            p = model.proba(x)
            y = np.array([pt.gold.label.value == "SPEAK" for pt in pts], dtype=int)
            thr = balanced_threshold(model, domain_of_corpus(corpus))
            out[corpus] = balanced_accuracy(y, (p >= thr).astype(int))
        return out

    rows = {"as shipped": score()}
    with patched(features_mod, "utterance_cues", no_previous(cues_mod.utterance_cues)):
        rows["no previous"] = score()
    if args.old_cues is not None:
        spec = importlib.util.spec_from_file_location("v2_cues", args.old_cues)
        assert spec is not None and spec.loader is not None
        old = importlib.util.module_from_spec(spec)
        sys.modules["v2_cues"] = old  # dataclasses look their module up while it loads
        spec.loader.exec_module(old)
        with (
            patched(cues_mod, "_patterns", old._patterns),
            patched(names_mod, "participant_matcher", old.participant_matcher),
            patched(features_mod, "utterance_cues", no_previous(cues_mod.utterance_cues)),
        ):
            rows["v2 cue rules"] = score()
    corpora = [c for c, _ in data]
    print("| features | " + " | ".join(corpora) + " | mean |")
    print("|---|" + "---:|" * (len(corpora) + 1))
    for name, r in rows.items():
        vals = [100 * r[c] for c in corpora]
        print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in vals) + f" | {np.mean(vals):.2f} |")


if __name__ == "__main__":
    main()
