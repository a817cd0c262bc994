"""Train the final-punctuation models (:mod:`polylogue.engine.punctuation`) and measure them.

    python -m polylogue.training.engine_models.punctuation build/bench-ami build/bench-friends \
        build/bench-icsi build/bench-earnings21 [--out src/polylogue/engine/punctuation.npz]

Every utterance of the train split's conversations is one example: the words of its recognizer
rendering, labelled with the original text's final mark. C is chosen on the validation split;
the figures printed (accuracy and F1 of "ends on ?", accuracy of "ends a sentence", per corpus,
validation and test) sit beside the rule they replace on recognizer text: a question iff it
opens with a wh-word or an auxiliary, and every utterance closed.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from polylogue.engine.punctuation import (
    PUNCTUATION_MODEL_PATH,
    PunctuationModel,
    punctuation_keys,
)
from polylogue.rendering import recognizer_text
from polylogue.turntaking.address import asks_by_words
from polylogue.turntaking.dataset import Benchmark, load_benchmark

_CLOSE = " \t\"')]\u201d\u2019"


def examples(
    bench: Benchmark, split: str
) -> tuple[list[tuple[int, ...]], np.ndarray, np.ndarray, list[str]]:
    """(keys, ends on '?', ends a sentence, recognizer text) for the utterances of ``split``."""
    ids = {p.input.conversation_id for p in bench.points(split)}
    keys, question, terminal, texts = [], [], [], []
    for cid in sorted(ids):
        for u in bench.conversations[cid].utterances:
            t = u.text.rstrip(_CLOSE)
            if not t:
                continue
            heard = recognizer_text(u.text)
            keys.append(punctuation_keys(heard))
            question.append(t.endswith("?"))
            terminal.append(t.endswith((".", "!", "?")) and not t.endswith("..."))
            texts.append(heard)
    return keys, np.asarray(question, dtype=bool), np.asarray(terminal, dtype=bool), texts


def _scores(w: np.ndarray, keys: Sequence[tuple[int, ...]]) -> np.ndarray:
    return np.asarray([float(w[list(k)].sum()) if k else 0.0 for k in keys])


def _f1(y: np.ndarray, p: np.ndarray) -> float:
    tp = float((y & p).sum())
    return 2 * tp / max(float(y.sum() + p.sum()), 1.0)


def main() -> None:
    from polylogue.training.engine_models.default_model import fit_hashed_logistic

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=PUNCTUATION_MODEL_PATH)
    ap.add_argument("--c", type=float, nargs="+", default=[0.1, 0.3, 1.0])
    args = ap.parse_args()
    benches = [load_benchmark(f) for f in args.folders]
    data = {s: [examples(b, s) for b in benches] for s in ("train", "validation", "test")}
    keys = [k for e in data["train"] for k in e[0]]
    yq = np.concatenate([e[1] for e in data["train"]])
    yt = np.concatenate([e[2] for e in data["train"]])
    print(f"train: {len(keys):,} utterances ({yq.mean():.3f} questions, {yt.mean():.3f} closed)")
    vkeys = [k for e in data["validation"] for k in e[0]]
    vq = np.concatenate([e[1] for e in data["validation"]])
    vt = np.concatenate([e[2] for e in data["validation"]])
    best: dict[str, tuple[float, float, np.ndarray]] = {}
    for c in args.c:
        wq = fit_hashed_logistic(keys, yq.astype(int).tolist(), c).weights
        wt = fit_hashed_logistic(keys, yt.astype(int).tolist(), c).weights
        fq = _f1(vq, _scores(wq, vkeys) >= 0)
        at = float(((_scores(wt, vkeys) >= 0) == vt).mean())
        print(f"C={c:g}: validation question F1 {fq:.3f}, closed accuracy {at:.3f}")
        if fq > best.get("q", (-1.0, 0.0, wq))[0]:
            best["q"] = (fq, c, wq)
        if at > best.get("t", (-1.0, 0.0, wt))[0]:
            best["t"] = (at, c, wt)
    model = PunctuationModel(best["q"][2], best["t"][2])
    print(f"chosen C: question {best['q'][1]:g}, closed {best['t'][1]:g}")
    print(f"{'corpus':11} {'split':10} {'n':>7}  {'? F1':>6} {'rule':>6}  {'? acc':>6} "
          f"{'rule':>6}  {'closed acc':>10} {'all closed':>10}")  # fmt: skip
    for split in ("validation", "test"):
        for b, (k, q, t, texts) in zip(benches, data[split], strict=True):
            if not k:
                continue
            pq = np.asarray([model.probabilities(x)[0] >= 0.5 for x in texts])
            pt = np.asarray([model.probabilities(x)[1] >= 0.5 for x in texts])
            rule = np.asarray([asks_by_words(x) for x in texts])
            print(f"{b.name:11} {split:10} {len(k):7,d}  {_f1(q, pq):6.3f} {_f1(q, rule):6.3f}  "
                  f"{(pq == q).mean():6.3f} {(rule == q).mean():6.3f}  {(pt == t).mean():10.3f} "
                  f"{t.mean():10.3f}")  # fmt: skip
    model.save(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
