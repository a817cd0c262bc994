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

And the fourth probe's CLI classes (``--no-round-four`` leaves them out): names of only
invisible characters everywhere a name comes in, roles with control or bidi characters,
``--only``/``--ignore`` names nobody in a stream has, output folders that are files, a missing
``--alias-file``, damaged MeetingToM records, misspelt scorecard doc markers and rows a
scorecard lacks, and espeak-ng fed a line starting with ``-`` or failing, hanging or writing
garbage (a real program first on ``PATH``; skipped without espeak-ng).

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


def round_four(tmp: Path) -> dict[str, Counter[str]]:
    """The fourth probe's CLI classes, each input once, through the real CLI (in-process)."""
    import json
    import shutil
    import subprocess

    from cli_run import run_polylogue

    from polylogue.paths import corpus_dir

    out: dict[str, Counter[str]] = {}

    def tally(kind: str, outcome: str) -> None:
        out.setdefault(kind, Counter())[outcome] += 1

    def cli(kind: str, args: list[str], needle: str, stdin: str | None = None,
            code: int = 2) -> subprocess.CompletedProcess[bytes]:  # fmt: skip
        done = run_polylogue(args, stdin, env={"COLUMNS": "400"})
        text = (done.stderr + done.stdout).decode("utf-8", "replace")
        if "Traceback" in text:
            tally(kind, "traceback")
        elif done.returncode == code and needle in text:
            tally(kind, "clear error")
        else:
            tally(kind, "silent garbage")
            print(f"  {kind}: {args} -> {done.returncode}: {text[-300:]!r}")
        return done

    standup = str(ROOT / "examples" / "standup.jsonl")
    invisible = ["\u200b", "\u200c\u200d", "\u2060", "\ufeff", "\u3164", "\u00ad\u200b"]
    for k, name in enumerate(invisible):
        t = tmp / f"inv{k}.txt"
        t.write_text(f"Alice: hi\n{name}: one\nBob: yo\n", encoding="utf-8")
        # (a leading U+FEFF is a byte-order mark: that line has no speaker, also an error)
        cli("invisible-only name", ["decide", str(t), "--as", "Bob"], f"{t}:line 2:")
        cli("invisible-only name", ["decide", "-", "--as", "Bob"], "<stdin>:line 1:",
            f"{name}: one\n")  # fmt: skip
        cli("invisible-only name", ["decide", standup, "--as", name], "invisible")
        for flag in ("--alias=Dave=", "--only=", "--ignore="):
            cli("invisible-only name", ["decide", standup, "--as", "Dave", flag + name], "\\u")
        h = tmp / f"invh{k}.jsonl"
        h.write_text(json.dumps({"participants": [{"id": "a", "name": name}, {"id": "b"}]})
                     + "\n" + json.dumps({"speaker": "a", "text": "hi"}) + "\n")  # fmt: skip
        cli("invisible-only name", ["decide", str(h), "--as", "b"], "invisible")
    for k, role in enumerate(["x\ny", "chair\x00", "\u202erotaredom", "\u2066x", 7, ["a"]]):
        r = tmp / f"role{k}.jsonl"
        r.write_text(json.dumps({"participants": [{"id": "a", "role": role}, {"id": "b"}]})
                     + "\n" + json.dumps({"speaker": "a", "text": "hi"}) + "\n")  # fmt: skip
        cli("role with control/bidi", ["decide", str(r), "--as", "b"], "role")
    lines = [json.loads(x) for x in Path(standup).read_text().splitlines()]
    stream = "\n".join(f"{x['speaker']}: {x['text']}" for x in lines if "speaker" in x) + "\n"
    for flag, name in (("--only", "Priyaa"), ("--only", "Dvae Smith"), ("--ignore", "Telly")):
        cli("--only/--ignore nobody has (stdin)", ["decide", "-", "--as", "Dave", flag, name],
            "named nobody who spoke", stream)  # fmt: skip
    taken = tmp / "taken"
    taken.write_text("a file\n")
    for args in (["scorecard", "--out", str(taken), "--data", "ami", "--runs", str(tmp / "r")],
                 ["scorecard", "--out", str(taken / "x"), "--data", "ami"],
                 ["eval", "-d", str(tmp / "nobench"), "--out", str(taken)],
                 ["tom", "run", "--model", "majority", "--out", str(taken)],
                 ["build", "--corpus", "friends", "--limit-conversations", "1",
                  "--out", str(taken)],
                 ["tom", "media", "--ami-media", str(tmp), "--out", str(taken)]):  # fmt: skip
        cli("output folder is a file", args, "nothing was run")
    cli("missing --alias-file", ["decide", standup, "--as", "Dave", "--alias-file",
                                 str(tmp / "none.txt")], "cannot read the alias file")  # fmt: skip

    src = corpus_dir("meetingtom")
    edits: list[tuple[str, str, int, object]] = [
        ("state.jsonl", "answers.Q1", 0, 3), ("state.jsonl", "task", 1, "mood"),
        ("state.jsonl", "questions.Q1.options", 2, "A,B"), ("state.jsonl", "id", 3, 17),
        ("reconstruction.jsonl", "source_window.end", 4, 0.5),
        ("reconstruction.jsonl", "source_window.start", 5, "150"),
        ("reconstruction.jsonl", "bundle_name", 6, "../../outside"),
        ("reconstruction.jsonl", "session_id", 7, "/etc"),
        ("reconstruction.jsonl", "target_view", 8, "../Closeup1"),
        ("reconstruction.jsonl", "required_views", 9, "Closeup1"),
    ]  # fmt: skip
    for k, (file, field, line, value) in enumerate([*edits, ("state.jsonl", "bytes", 4, None),
                                                    ("state.jsonl", "dup", 5, None)]):  # fmt: skip
        folder = tmp / f"tom{k}"
        folder.mkdir()
        for name in ("state.jsonl", "you.jsonl", "consensus.jsonl", "reconstruction.jsonl"):
            shutil.copy(src / name, folder / name)
        rows = (folder / file).read_bytes().split(b"\n")
        if field == "bytes":
            rows[line] = rows[line].replace(b"participant", b"particip\xff")
        elif field == "dup":
            rows[line + 1] = rows[line]
        else:
            row = json.loads(rows[line])
            keys = field.split(".")
            target = row
            for key in keys[:-1]:
                target = target[key]
            target[keys[-1]] = value
            rows[line] = json.dumps(row).encode()
        (folder / file).write_bytes(b"\n".join(rows))
        where = f"{folder / file}:line {line + (2 if field == 'dup' else 1)}"
        cli("MeetingToM record", ["tom", "validate", "--data", str(folder)], where)

    doc_src = ROOT / "docs" / "scorecard.md"
    text = doc_src.read_text().replace("scorecard: docs/", f"scorecard: {ROOT}/docs/")
    marker = "<!-- scorecard: " + f"{ROOT}/docs/results/scorecard-example/scorecard.json -->"
    for k, bad in enumerate(["<!-- scorecards: X -->", "<!-- Scorecard: X -->",
                             "<!-- scorecard X -->", "<!-- scorcard: X -->",
                             "<!-- score-card: X -->", "<!-- scorecard: X ->",
                             "<!-- scorecard: -->"]):  # fmt: skip
        doc = tmp / f"doc{k}.md"
        doc.write_text(text.replace(marker, bad.replace("X", marker[16:-4])))
        before = doc.read_bytes()
        cli("scorecard doc marker misspelt", ["scorecard", "--check-doc", str(doc)],
            "does not parse", code=1)  # fmt: skip
        cli("scorecard doc marker misspelt", ["scorecard", "--update-doc", str(doc)],
            "does not parse")  # fmt: skip
        if doc.read_bytes() != before:
            tally("scorecard doc marker misspelt", "silent garbage")
    doc = tmp / "rows.md"
    doc.write_text(text.replace("| default | polite |", "| default | chatty |"))
    before = doc.read_bytes()
    cli("scorecard row it cannot match", ["scorecard", "--update-doc", str(doc)], "chatty")
    if doc.read_bytes() != before:
        tally("scorecard row it cannot match", "silent garbage")

    try:
        from polylogue.adapters import voice
    except ImportError:
        voice = None  # type: ignore[assignment]
    if voice is None or voice.espeak_path() is None:
        print("  (espeak-ng or the voice extra missing: the espeak-ng classes are skipped)")
        return out
    import os

    stolen = tmp / "stolen.wav"
    for spoken in (f"-w {stolen} hello", "--version", "-- -q", "-f /etc/hostname"):
        samples = voice.synthesize(spoken, "en-us")
        ok = len(samples) > 0.3 * voice.SAMPLE_RATE and not stolen.exists()
        tally("espeak-ng: line starting with -", "correct" if ok else "silent garbage")
    real = voice.espeak_path()
    for name, act in (("fails", "exit 3"), ("hangs", "sleep 600"),
                      ("garbage", "printf 'RIFFxxxx'; exit 0")):  # fmt: skip
        folder = tmp / f"espeak-{name}"
        folder.mkdir()
        fake = folder / "espeak-ng"
        fake.write_text(f'#!/bin/sh\ncat >/dev/null\n{act}\nexec {real} "$@"\n')
        fake.chmod(0o755)
        old = os.environ["PATH"]
        os.environ["PATH"] = f"{folder}{os.pathsep}{old}"  # this script's own process only
        try:
            voice.synthesize("good morning", "en-us", timeout_s=3)
            tally(f"espeak-ng {name}", "silent garbage")
        except voice.VoiceError:
            tally(f"espeak-ng {name}", "clear error")
        except Exception as exc:
            tally(f"espeak-ng {name}", "traceback")
            print(f"  espeak-ng {name}: {type(exc).__name__}: {exc}")
        finally:
            os.environ["PATH"] = old
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
    ap.add_argument(
        "--no-round-four",
        dest="round_four",
        action="store_false",
        help="leave out the fourth probe's CLI classes",
    )
    ap.add_argument(
        "--only-round-four", action="store_true", help="run the fourth probe's classes alone"
    )
    args = ap.parse_args()
    _shim_older_code()
    if args.only_round_four:
        _print_round_four()
        return
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
    if args.round_four:
        _print_round_four()


def _print_round_four() -> None:
    import test_fuzz_readers as fuzz

    print("\nround four (issue 46, the CLI side), each input once:")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        by_class = round_four(Path(tmp))
    print(f"  {'class':<38}" + "".join(f"{o:>15}" for o in fuzz.OUTCOMES))
    total: Counter[str] = Counter()
    for kind, counts in by_class.items():
        total.update(counts)
        print(f"  {kind:<38}" + "".join(f"{counts[o]:>15}" for o in fuzz.OUTCOMES))
    print(f"  {'TOTAL':<38}" + "".join(f"{total[o]:>15}" for o in fuzz.OUTCOMES))
    print(f"  {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
