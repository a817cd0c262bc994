"""Whisper's settings for the voice meeting, chosen by measurement.

The lines of the two written scenarios of ``benchmarks/voice_meeting.py`` (a design review and a
planning call, every line naming or not naming a roster member) are spoken by two piper
speakers and two espeak-ng voices, padded with silence as the VAD cuts a segment, and decoded
by the bundled Whisper ``tiny.en`` under each setting: compute type (int8, float32), beam (1,
5), CTranslate2 threads (1, 2), the roster's names as initial prompt, as hotwords or not given,
and the silence around the speech (0.1 s, or 0.3 s before and 0.6 s after, what Silero at the
meeting's stop time leaves). Printed per setting: word error rate (WER), roster-name recall,
names written that were not said, and the decode time per line (p50, wall, on this machine,
with the load average).

    nice -n 5 python benchmarks/whisper_settings.py --out build/whisper-settings.json

(``condition_on_previous_text`` does nothing here: each segment is one decode of under 30 s,
so there is no previous window to condition on; the recognizer leaves it off.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from voice_meeting import PLANNING, REVIEW, edit_distance, words

from polylogue.adapters.voice.audio import SAMPLE_RATE


def voices() -> list[tuple[str, Any]]:
    from polylogue.adapters.voice.synthesis import (
        PIPER_SPEAKERS,
        EspeakVoice,
        PiperVoice,
        espeak_path,
    )

    out: list[tuple[str, Any]] = [
        ("piper", PiperVoice(None, *PIPER_SPEAKERS[0])),
        ("piper", PiperVoice(None, *PIPER_SPEAKERS[1])),
    ]
    if espeak_path() is not None:
        out += [("espeak", EspeakVoice("en-us+edward")), ("espeak", EspeakVoice("en-us+f2"))]
    return out


SETTINGS: list[dict[str, Any]] = [
    {"compute_type": "int8", "beam_size": 1, "cpu_threads": 2},
    {"compute_type": "float32", "beam_size": 1, "cpu_threads": 2},
    {"compute_type": "int8", "beam_size": 5, "cpu_threads": 2},
    {"compute_type": "int8", "beam_size": 1, "cpu_threads": 1},
    {"compute_type": "int8", "beam_size": 1, "cpu_threads": 2, "hints": "hotwords"},
    {"compute_type": "int8", "beam_size": 1, "cpu_threads": 2, "hints": "none"},
    {"compute_type": "int8", "beam_size": 1, "cpu_threads": 2, "pad": "vad"},
]


def main() -> None:
    ap = argparse.ArgumentParser(description="Whisper settings (see the docstring).")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()
    from polylogue.adapters.voice.recognition import WhisperRecognizer

    names = sorted({w.capitalize() for lines in (REVIEW, PLANNING) for w, _, _ in lines})
    said = {n.lower() for n in names}
    lines = [text for lines in (REVIEW, PLANNING) for _, text, _ in lines]
    spoken: list[tuple[str, str, np.ndarray]] = []
    for k, text in enumerate(lines):
        kind, voice = voices()[k % len(voices())]
        spoken.append((kind, text, voice.speak(text)))
    load = os.getloadavg()
    print(f"{len(lines)} lines; load average {load[0]:.1f} {load[1]:.1f}", file=sys.stderr)
    result: dict[str, Any] = {"lines": len(lines), "load_average": round(load[1], 1), "rows": []}
    for s in SETTINGS:
        s = dict(s)
        hints_as = s.pop("hints", "prompt")
        pad = s.pop("pad", "short")
        rec = WhisperRecognizer(
            None, [] if hints_as == "none" else names, hotwords=hints_as == "hotwords", **s
        )
        before, after = (0.1, 0.1) if pad == "short" else (0.3, 0.6)
        tally: dict[str, list[float]] = {}
        for kind, text, x in spoken:
            audio = np.concatenate(
                [np.zeros(int(before * SAMPLE_RATE), np.int16), x,
                 np.zeros(int(after * SAMPLE_RATE), np.int16)]
            )  # fmt: skip
            t0 = time.perf_counter()
            r = rec.recognize(audio.tobytes())
            dt = time.perf_counter() - t0
            ref, hyp = words(text), words(r.text)
            t = tally.setdefault(kind, [0, 0, 0, 0, 0])
            t[0] += edit_distance(ref, hyp)
            t[1] += len(ref)
            ref_names = [w for w in ref if w in said]
            t[2] += sum(1 for w in ref_names if w in hyp)
            t[3] += len(ref_names)
            t[4] += sum(1 for w in hyp if w in said and w not in ref)
            tally.setdefault(f"{kind} seconds", []).append(dt)
        row = {**s, "hints": hints_as, "pad": pad}
        for kind in ("piper", "espeak"):
            if kind not in tally:
                continue
            t = tally[kind]
            row[kind] = {
                "wer": round(100 * t[0] / t[1], 1),
                "name_recall": round(t[2] / t[3], 2),
                "false_names": int(t[4]),
                "decode_p50_s": round(float(np.median(tally[f"{kind} seconds"])), 2),
            }
        result["rows"].append(row)
        print(json.dumps(row), file=sys.stderr)
    print(markdown(result))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def markdown(res: dict[str, Any]) -> str:
    out = [
        "| compute | beam | threads | names | silence | piper WER % | piper names | "
        "espeak WER % | espeak names | false names | decode p50 s |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in res["rows"]:
        p, e = r.get("piper", {}), r.get("espeak", {})
        false = p.get("false_names", 0) + e.get("false_names", 0)
        out.append(
            f"| {r['compute_type']} | {r['beam_size']} | {r['cpu_threads']} | {r['hints']} | "
            f"{r['pad']} | {p.get('wer', '-')} | {p.get('name_recall', '-')} | "
            f"{e.get('wer', '-')} | {e.get('name_recall', '-')} | {false} | "
            f"{p.get('decode_p50_s', '-')} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    main()
