"""Trains and scores the barge-in model on AMI overlaps (docs/serve-measured.md, performance.md).

    python benchmarks/bargein_ami.py [--write]     # --write: update the shipped bargein.json

Overlaps: a dialogue act that starts while another speaker has been talking for >= 1 s; the
label is whether that speaker's run of words ended within 1 s. Held-out: whole meeting series
(ES2002a-d together) chosen by a stable hash (about 1 in 5). Baselines: "yield on any speech"
and a lexical backchannel list (continue when the interjection's words are all backchannel
words). Prints accuracy and balanced accuracy, overall and per dialogue-act type.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict

from polylogue.engine.bargein import BARGE_IN_MODEL_PATH, interjection_words, lexical_backchannel
from polylogue.paths import data_root
from polylogue.training.engine_models.bargein import (
    Overlap,
    dialogue_act_meetings,
    fit_barge_in_model,
    held_out_meeting,
    meeting_overlaps,
)


def _scores(y: list[bool], pred: list[bool]) -> dict[str, float]:
    tp = sum(a and b for a, b in zip(y, pred, strict=True))
    tn = sum((not a) and (not b) for a, b in zip(y, pred, strict=True))
    pos = sum(y) or 1
    neg = (len(y) - sum(y)) or 1
    return {
        "accuracy": round((tp + tn) / max(len(y), 1), 4),
        "balanced_accuracy": round((tp / pos + tn / neg) / 2, 4),
        "n": len(y),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="write the shipped model file")
    args = ap.parse_args()
    root = data_root() / "ami" / "ami_public_manual_1.6.2"
    meetings = dialogue_act_meetings(root)
    train: list[Overlap] = []
    test: list[Overlap] = []
    for m in meetings:
        (test if held_out_meeting(m) else train).extend(meeting_overlaps(root, m))
    held = sorted({o.meeting for o in test})
    print(
        f"overlaps: train {len(train)} ({len(meetings) - len(held)} meetings), "
        f"held-out {len(test)} ({len(held)} meetings)"
    )
    print(
        f"yield rate: train {sum(o.yielded for o in train) / len(train):.3f}, "
        f"held-out {sum(o.yielded for o in test) / len(test):.3f}"
    )
    # Threshold: best balanced accuracy on an inner validation series set (never the test).
    import zlib

    inner = [o for o in train if zlib.crc32(o.meeting[:-1].encode()) % 5 == 1]
    outer = [o for o in train if zlib.crc32(o.meeting[:-1].encode()) % 5 != 1]
    probe = fit_barge_in_model(outer)
    yi = [o.yielded for o in inner]
    pi = [probe.p_yield(o.text, o.speaking_s) for o in inner]
    threshold = max(
        (t / 100 for t in range(10, 90)),
        key=lambda t: _scores(yi, [p >= t for p in pi])["balanced_accuracy"],
    )
    print(
        f"threshold (best balanced accuracy on {len(inner)} inner-validation overlaps): "
        f"{threshold:.2f}"
    )
    model = fit_barge_in_model(
        train,
        threshold=threshold,
        metadata={
            "trained_on": "AMI manual annotations 1.6.2, overlaps in non-held-out meetings",
            "window_s": 1.0,
            "held_out_meetings": held,
        },
    )
    y = [o.yielded for o in test]
    systems = {
        "learnt model": [model.decide(o.text, o.speaking_s).yield_floor for o in test],
        "yield on any speech": [True] * len(test),
        "lexical backchannel list": [
            not lexical_backchannel(interjection_words(o.text)) for o in test
        ],
    }
    results = {name: _scores(y, pred) for name, pred in systems.items()}
    for name, r in results.items():
        print(f"{name:26s} accuracy {r['accuracy']:.3f}  balanced {r['balanced_accuracy']:.3f}")
    by_da: dict[str, list[int]] = defaultdict(list)
    for i, o in enumerate(test):
        by_da[o.da_type].append(i)
    print("\nper dialogue-act type of the interjection (held-out):")
    print(f"{'DA':8s} {'n':>5s} {'yield%':>7s} {'model':>6s} {'lexical':>7s}")
    for da, idx in sorted(by_da.items(), key=lambda kv: -len(kv[1])):
        if len(idx) < 20:
            continue
        yy = [y[i] for i in idx]
        acc_m = _scores(yy, [systems["learnt model"][i] for i in idx])["accuracy"]
        acc_l = _scores(yy, [systems["lexical backchannel list"][i] for i in idx])["accuracy"]
        print(f"{da:8s} {len(idx):5d} {sum(yy) / len(yy):7.3f} {acc_m:6.3f} {acc_l:7.3f}")
    print("\nDA types in train:", dict(Counter(o.da_type for o in train).most_common(8)))
    if args.write:
        meta = dict(model.metadata or {})
        meta["held_out"] = results
        out = type(model)(model.weights, model.threshold, meta)
        BARGE_IN_MODEL_PATH.write_text(json.dumps(out.to_dict(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {BARGE_IN_MODEL_PATH} ({len(model.weights)} weights)")


if __name__ == "__main__":
    main()
