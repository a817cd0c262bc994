"""Time of the WebVTT reader on adversarial cues (docs/corpora-friends-earnings-user.md).

The cues: unclosed ``<v a`` tags and stray ``<``.

Run: ``python benchmarks/vtt_adversarial.py``. Prints, per payload and size, the seconds to read
a one-cue file (the reader answers with a located "cue has no speaker" error or utterances).
Time must grow linearly with size; the target is a 1 MB cue in under 1 s. Before the fix an
unclosed ``<v a`` repeated 20,000 times (80 KB) took 14.5 s and 160 KB took 58 s.
Baseline: reading the same number of bytes as plain ``<v Alice>word`` cues.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from polylogue.conversation import ConversationFormatError
from polylogue.corpora.transcripts import read_transcript

PAYLOADS = {
    "unclosed '<v a'": "<v a",
    "stray '<'": "<",
    "'<v ' + spaces": "<v     ",
    "closed '<v a>x' (baseline)": "<v a>x",
}


def _time_cue(folder: Path, unit: str, size: int) -> tuple[float, str]:
    path = folder / "cue.vtt"
    cue = unit * (size // len(unit))
    path.write_text(f"WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n{cue}\n", encoding="utf-8")
    t0 = time.perf_counter()
    try:
        n = len(read_transcript(path).utterances)
        outcome = f"{n} utterances"
    except ConversationFormatError as exc:
        outcome = f"error: {exc.message[:40]}"
    return time.perf_counter() - t0, outcome


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[80_000, 160_000, 1_000_000],
        help="Cue sizes in bytes.",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for label, unit in PAYLOADS.items():
            for size in args.sizes:
                dt, outcome = _time_cue(folder, unit, size)
                print(f"{label:<28} {size / 1e6:5.2f} MB  {dt:6.3f} s   {outcome}")


if __name__ == "__main__":
    main()
