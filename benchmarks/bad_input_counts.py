"""What the readers do with damaged input, counted: the fuzz suite run wider (docs/performance.md).

Runs the seeded damage of ``tests/test_fuzz_readers.py`` (every reader and user format, real
files, 16 kinds of damage including the later probes': big integers, BOMs, Unicode line
breaks, lone CRs, missing blank lines, look-alike names and letters, repeated keys) over more
seeds than the test, and prints per format and in total: cases, clear errors, correct, silent
garbage, tracebacks, hangs (a case over ``--timeout`` seconds).

    PYTHONPATH=src python benchmarks/bad_input_counts.py [--cases 48] [--timeout 20]

Then, once each, the third probe's classes (``--no-round-three`` leaves them out): look-alike
spellings of a speaker in every user format and on stdin, different names kept apart, two
speakers in one cue, damaged Parquet pages and mixed builds through ``inspect``/``eval``,
``operating-points --write`` on a three-conversation benchmark.

To measure the code before a change, point ``PYTHONPATH`` at that tree's ``src``: what it lacks
(the input-warning class, the stdin line splitter) is filled in with what it did then.
Results are recorded in docs/performance.md ("Bad input").
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _shim_older_code() -> None:
    """Fill in what a tree from before issue 29 does not have, as that tree behaved."""
    import polylogue.conversation as conversation
    import polylogue.corpora.transcripts as transcripts
    import polylogue.errors as errors

    if not hasattr(conversation, "name_key"):  # before issue 34: names compared as written
        setattr(conversation, "name_key", lambda name: name)  # noqa: B010
    if not hasattr(errors, "InputWarning"):
        setattr(errors, "InputWarning", UserWarning)  # noqa: B010 (mypy: the name is new)
    if not hasattr(transcripts, "stream_lines"):

        def stream_lines(stream: object, *_: object) -> list[str]:  # readline on text stdin
            data = stream.read()  # type: ignore[attr-defined]
            return data.decode("utf-8", "surrogateescape").split("\n")

        setattr(transcripts, "stream_lines", stream_lines)  # noqa: B010


def round_three(tmp: Path) -> dict[str, Counter[str]]:
    """The third probe's classes, each input tried once: look-alike spellings of a speaker in
    every user format and on stdin (through the live engine, as ``decide -`` reads it), two
    speakers in one cue, and damaged or mixed benchmark folders through the real CLI."""
    import shutil
    import warnings

    import test_bad_input_round3 as r3
    import test_names_round3 as names
    from benches import friends_benchmark
    from cli_run import run_polylogue

    from polylogue.corpora.transcripts import read_transcript
    from polylogue.engine.live import LiveConversation, Policy
    from polylogue.engine.model import model_dir_for
    from polylogue.errors import InputWarning

    lines = ["so what do we do about the budget", "I think we wait", "fine by me then", "ok"]
    out: dict[str, Counter[str]] = {}

    def tally(kind: str, outcome: str) -> None:
        out.setdefault(kind, Counter())[outcome] += 1

    for fmt in ("jsonl", "csv", "txt", "srt", "vtt"):
        for spelling in names.LOOKALIKES.values():
            folder = tmp / f"{fmt}-{len(out.get('look-alike speaker', ()))}-{ord(spelling[0])}"
            folder.mkdir(parents=True, exist_ok=True)
            turns = [("Ann", lines[0]), ("Bo", lines[1]), (spelling, lines[2]), ("Bo", lines[3])]
            path = names._write(fmt, folder, turns)
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    conv = read_transcript(path)
            except Exception as exc:
                tally("look-alike speaker", "traceback")
                print(f"  {fmt} {spelling!a}: {type(exc).__name__}: {exc}")
                continue
            warned = any(issubclass(w.category, InputWarning) for w in caught)
            one = [p.id for p in conv.participants] == ["Ann", "Bo"]
            tally("look-alike speaker", "correct" if one and warned else "silent garbage")
    for spelling in names.LOOKALIKES.values():  # stdin: the live engine's speaker names
        live = LiveConversation.start("Bo", [], Policy())
        ids = [live.speaker_id(s) for s in ("Ann", spelling)]
        ok = ids == ["Ann", "Ann"] and live.warnings
        tally("look-alike speaker (stdin)", "correct" if ok else "silent garbage")
    for a, b in names.DIFFERENT:  # different people must stay two
        live = LiveConversation.start("Bo", [], Policy())
        two = live.speaker_id(a) != live.speaker_id(b)
        tally("different names kept apart", "correct" if two else "silent garbage")
    srt = tmp / "cue.srt"
    srt.write_text(names.CUES_SRT.format(*lines), encoding="utf-8")
    conv = read_transcript(srt)
    two = [u.speaker for u in conv.utterances] == ["Ann", "Bo", "Ann"]
    tally("two speakers in one cue", "correct" if two else "silent garbage")
    vtt = tmp / "cue.vtt"
    vtt.write_text(
        "WEBVTT\n\n00:00:01.000 --> 00:00:03.000\n<v Ann>hi</v> <v Bo>hello</v>\n",
        encoding="utf-8",
    )
    two = [u.speaker for u in read_transcript(vtt).utterances] == ["Ann", "Bo"]
    tally("two speakers in one cue", "correct" if two else "silent garbage")

    def cli(kind: str, args: list[str], file: Path, ok_exit: bool = False) -> None:
        done = run_polylogue(args, None, env={"COLUMNS": "400"})
        err = done.stderr.decode("utf-8", "replace")
        if "Traceback" in err:
            tally(kind, "traceback")
        elif done.returncode == 2 and str(file) in err:
            tally(kind, "clear error")
        elif done.returncode == 0 and ok_exit:
            tally(kind, "correct")
        else:
            tally(kind, "silent garbage")

    bench = friends_benchmark(tmp / "bench", 3)
    for file in ("test.parquet", "conversations.parquet"):
        for where in (0.0, 0.25, 0.5, 0.75):
            folder = tmp / f"damaged-{file}-{where}"
            shutil.copytree(bench, folder)
            r3._damage_pages(folder / file, where)
            for args in (["inspect", str(folder), "-n", "1"],
                         ["eval", "-d", str(folder), "-m", "baseline:always-speak",
                          "--out", str(tmp / "runs")]):  # fmt: skip
                cli("damaged Parquet page", args, folder / file)
    for version in ("4", "3"):
        folder = tmp / f"mixed-{version}"
        shutil.copytree(bench, folder)
        r3._stamp(folder / "test.parquet", version)
        cli(
            "mixed builds in one folder",
            ["inspect", str(folder), "-n", "1"],
            folder / "test.parquet",
        )
    other = friends_benchmark(tmp / "bench4", 4)
    folder = tmp / "mixed-count"
    shutil.copytree(bench, folder)
    shutil.copy(other / "test.parquet", folder / "test.parquet")
    r3._stamp(folder / "test.parquet", None)
    cli("mixed builds in one folder", ["inspect", str(folder), "-n", "1"], folder / "test.parquet")
    model = tmp / "model"
    shutil.copytree(model_dir_for("meeting"), model)
    op = ["operating-points", "-d", str(bench), "--model-dir", str(model), "--write"]
    cli("operating points, tiny benchmark", op, bench)
    cli("operating points, tiny benchmark", [*op, "--split", "test"], bench, ok_exit=True)
    return out


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Hang


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=48, help="damaged copies per format")
    ap.add_argument("--timeout", type=int, default=20, help="seconds before a case is a hang")
    ap.add_argument("--show", type=int, default=3, help="failures to print per format")
    ap.add_argument(
        "--no-round-three",
        dest="round_three",
        action="store_false",
        help="leave out the third probe's classes (they need this tree's tests/)",
    )
    args = ap.parse_args()
    _shim_older_code()
    import test_fuzz_readers as fuzz

    signal.signal(signal.SIGALRM, _alarm)
    total: Counter[str] = Counter()
    by_kind: dict[str, Counter[str]] = {}
    failures: list[str] = []
    print(f"{'format':<22}" + "".join(f"{o:>15}" for o in ("cases", *fuzz.OUTCOMES)))
    started = time.perf_counter()
    for fmt in fuzz.FORMATS:
        counts: Counter[str] = Counter()
        n = max(args.cases // 3, 15) if fmt.name.startswith("ami") else args.cases
        seed = sum(map(ord, fmt.name)) + 1  # other seeds than the test's
        with tempfile.TemporaryDirectory() as tmp:
            shown = 0
            for kind, case, target, label, expected in fuzz.cases(fmt, Path(tmp), seed, n):
                signal.alarm(args.timeout)
                try:
                    outcome, detail = fuzz.run_case(fmt, case, target, label, expected)
                except _Hang:
                    outcome, detail = "hang", f"{label}: over {args.timeout} s"
                finally:
                    signal.alarm(0)
                counts[outcome] += 1
                by_kind.setdefault(kind, Counter())[outcome] += 1
                if outcome not in ("clear error", "correct") and shown < args.show:
                    failures.append(detail)
                    shown += 1
        total.update(counts)
        row = [sum(counts.values()), *(counts[o] for o in fuzz.OUTCOMES)]
        print(f"{fmt.name:<22}" + "".join(f"{v:>15}" for v in row), flush=True)
    row = [sum(total.values()), *(total[o] for o in fuzz.OUTCOMES)]
    print(f"{'TOTAL':<22}" + "".join(f"{v:>15}" for v in row))
    print("\nby kind of damage:")
    for kind, counts in by_kind.items():
        print(f"  {kind:<22}" + "".join(f"{counts[o]:>15}" for o in fuzz.OUTCOMES))
    print(f"\n{time.perf_counter() - started:.0f} s")
    for line in failures:
        print("  " + line)
    if args.round_three:
        print("\nround three (issue 34), each input once:")
        with tempfile.TemporaryDirectory() as tmp:
            by_class = round_three(Path(tmp))
        print(f"  {'class':<34}" + "".join(f"{o:>15}" for o in fuzz.OUTCOMES))
        for kind, counts in by_class.items():
            print(f"  {kind:<34}" + "".join(f"{counts[o]:>15}" for o in fuzz.OUTCOMES))


if __name__ == "__main__":
    main()
