"""What ``decide`` and ``eval`` do when the input declares no domain.

Part 1: one real AMI meeting and one real ICSI meeting, written as a user's JSONL transcript
with no ``domain`` (as the README's ``decide`` lines read a file), decided for every speaker
with and without ``--domain meeting`` (what ``scripts/demo.sh`` passes), at the default point
and at ``polite``: backchannel suggestions and SPEAK decisions per meeting.

Part 2: ``eval`` of the shipped model on the test split of an AMI benchmark (built here once,
``--limit-conversations``) without and with ``--domain meeting``: backchannel suggestions,
speak ratio, precision, balanced accuracy, and the domain the run's manifest records.

Part 3 (``--earnings BENCH``): every call of an Earnings-21 benchmark's test split written as a
user's JSONL transcript with no ``domain``, three ways: a participants header with the roles
the reader gives (the conference operator), the same with ``--domain earnings``, and no header
at all (speaker names only: nothing shows it is a call). Each call is decided for every
speaker at the default point; speak ratio = SPEAK decisions / decisions after which that
speaker spoke next (what ``decide --check`` compares), summed over calls and speakers.

Run it on two checkouts to compare (``PYTHONPATH=OTHER/src python benchmarks/domain_default.py``
gives the other code's figures; the work folder's benchmark is shared). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import polylogue as cli

import polylogue
from polylogue.corpora import load_corpus


def _meeting_file(corpus: str, folder: Path) -> tuple[Path, list[str], float | None]:
    """The corpus's first meeting as a headerless JSONL file; its speakers and minutes."""
    conv = next(iter(load_corpus(corpus)))
    path = folder / f"{corpus}-{conv.id}.jsonl"
    rows = [
        {"speaker": u.speaker, "text": u.text, "start": u.start, "end": u.end}
        for u in conv.utterances
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    ends = [u.end for u in conv.utterances if u.end is not None]
    starts = [u.start for u in conv.utterances if u.start is not None]
    minutes = (max(ends) - min(starts)) / 60 if ends and starts else None
    speakers = list(dict.fromkeys(u.speaker for u in conv.utterances))
    return path, speakers, minutes


def decide_counts(path: Path, speakers: list[str], extra: list[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for who in speakers:
        out = cli("decide", str(path), "--as", who, "--json", *extra)
        for line in out.splitlines():
            if line.strip():
                counts[str(json.loads(line)["decision"])] += 1
    return counts


def eval_figures(bench: Path, runs: Path, extra: list[str]) -> dict[str, object]:
    cli("eval", "-d", str(bench), "--out", str(runs), "--no-progress", "--n-boot", "50", *extra)
    folder = max(runs.glob("*/manifest.json"), key=lambda p: p.stat().st_mtime).parent
    manifest = json.loads((folder / "manifest.json").read_text())
    metrics = json.loads((folder / "metrics.json").read_text())
    actions = Counter(
        (json.loads(x).get("extra") or {}).get("action") or json.loads(x)["decision"]
        for x in (folder / "predictions.jsonl").read_text().splitlines()
        if x.strip()
    )
    dep = manifest["model"]["description"].get("deployment", {})
    agent = metrics.get("agent") or {}
    return {
        "points": sum(actions.values()),
        "BACKCHANNEL": actions["BACKCHANNEL"],
        "SPEAK": actions["SPEAK"],
        "speak_ratio": agent.get("speak_ratio"),
        "precision": agent.get("precision"),
        "balanced_accuracy": metrics.get("balanced_accuracy"),
        "domain": dep.get("domain"),
        "domain_source": dep.get("domain_source", "-"),
    }


def _call_files(bench: Path, folder: Path) -> list[tuple[Path, Path, list[str]]]:
    """The test calls of ``bench``: (with roster header, without header, speakers)."""
    from polylogue.turntaking.dataset import load_benchmark

    ids = {p.input.conversation_id for p in load_benchmark(bench).points("test")}
    out = []
    for conv in load_corpus("earnings21"):
        if conv.id not in ids:
            continue
        name = {p.id: p.display_name for p in conv.participants}
        people = [{"id": name[p.id], **({"role": p.role} if p.role else {})}
                  for p in conv.participants]  # fmt: skip
        rows = [
            json.dumps(
                {
                    "speaker": name.get(u.speaker, u.speaker),
                    "text": u.text,
                    "start": u.start,
                    "end": u.end,
                }
            )
            for u in conv.utterances
        ]
        header, bare = folder / f"{conv.id}-roster.jsonl", folder / f"{conv.id}-bare.jsonl"
        header.write_text("\n".join([json.dumps({"participants": people}), *rows]) + "\n")
        bare.write_text("\n".join(rows) + "\n")
        out.append((header, bare, list(dict.fromkeys(name.get(u.speaker, u.speaker)
                                                     for u in conv.utterances))))  # fmt: skip
    return out


def _decide_in_process(*args: str) -> str:
    """``polylogue decide ...`` in this process (the tests' runner): the model loads once."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from cli_run import run_polylogue

    done = run_polylogue(list(args), None, env={"COLUMNS": "400"})
    if done.returncode:
        raise SystemExit(f"polylogue {' '.join(args)} failed:\n{done.stderr.decode()}")
    return done.stdout.decode()


def call_speak_ratio(path: Path, speakers: list[str], extra: list[str]) -> tuple[int, int, str]:
    """(SPEAK decisions, decisions the speaker answered, the domain decide names)."""
    speak = took = 0
    for who in speakers:
        out = _decide_in_process("decide", str(path), "--as", who, "--json", "--check", *extra)
        for line in out.splitlines():
            row = json.loads(line) if line.strip() else None
            if row is None or row["decision"] is None:
                continue
            speak += row["decision"] == "SPEAK"
            took += row["next_speaker"] == row["target"]
    head = _decide_in_process("decide", str(path), "--as", speakers[0], *extra).splitlines()[0]
    return speak, took, head.split(", ", 1)[1].split(":", 1)[0]


def earnings(bench: Path, work: Path) -> None:
    files = _call_files(bench, work)
    print("\n| Earnings-21 test calls | calls | SPEAK | person spoke next | speak ratio | domain |")
    print("|---|---:|---:|---:|---:|---|")
    for label, pick, extra in (
        ("roster header, no domain", 0, []),
        ("roster header, --domain earnings", 0, ["--domain", "earnings"]),
        ("no header, no domain", 1, []),
    ):
        speak = took = 0
        domain = "?"
        for with_header, without_header, speakers in files:
            path = with_header if pick == 0 else without_header
            s, t, domain = call_speak_ratio(path, speakers, extra)
            speak, took = speak + s, took + t
        print(f"| {label} | {len(files)} | {speak} | {took} | {speak / max(1, took):.2f} | "
              f"{domain} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "polylogue-dd")
    ap.add_argument("--limit-conversations", type=int, default=40)
    ap.add_argument("--skip-eval", action="store_true")
    ap.add_argument("--skip-decide", action="store_true")
    ap.add_argument("--earnings", type=Path, help="an Earnings-21 benchmark: part 3 only")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.earnings is not None:
        earnings(args.earnings, args.work)
        return
    print(f"code: {Path(polylogue.__file__).resolve().parent}\n")
    print("| meeting | minutes | speakers | point | --domain | SPEAK | BACKCHANNEL | decided |")
    print("|---|---:|---:|---|---|---:|---:|---:|")
    for corpus in () if args.skip_decide else ("ami", "icsi"):
        path, speakers, minutes = _meeting_file(corpus, args.work)
        for point, domain in itertools.product(("matched", "polite"), (None, "meeting")):
            extra = ["--operating-point", point] + (["--domain", domain] if domain else [])
            c = decide_counts(path, speakers, extra)
            decided = sum(v for k, v in c.items() if k != "None")
            print(
                f"| {corpus} {path.stem.split('-', 1)[1]} | "
                f"{'-' if minutes is None else f'{minutes:.1f}'} | {len(speakers)} | "
                f"{point} | {domain or '(none)'} | {c['SPEAK']} | {c['BACKCHANNEL']} | {decided} |"
            )
    if args.skip_eval:
        return
    bench = args.work / f"ami-bench-{args.limit_conversations}"
    if not (bench / "manifest.json").is_file():
        cli(
            "build", "--corpus", "ami", "--out", str(bench),
            "--limit-conversations", str(args.limit_conversations),
        )  # fmt: skip
    print("\n| eval (AMI test) | points | SPEAK | BACKCHANNEL | speak ratio | precision | BalAcc "
          "| manifest domain |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    code = Path(polylogue.__file__).resolve().parents[2].name
    # The two rule baselines on the same points, beside the model.
    for label, extra in (
        ("(none)", []),
        ("meeting", ["--domain", "meeting"]),
        ("baseline:previous-speaker", ["-m", "baseline:previous-speaker"]),
        ("baseline:explicit-address", ["-m", "baseline:explicit-address"]),
    ):
        runs = args.work / f"runs-{code}-{label.strip('()').replace(':', '-')}"
        f = eval_figures(bench, runs, extra)

        def num(v: object) -> str:
            return "-" if not isinstance(v, int | float) else f"{v:.3f}"

        name = label if label.startswith("baseline") else f"--domain {label}"
        print(
            f"| {name} | {f['points']} | {f['SPEAK']} | {f['BACKCHANNEL']} | "
            f"{num(f['speak_ratio'])} | {num(f['precision'])} | {num(f['balanced_accuracy'])} | "
            f"{f['domain']} ({f['domain_source']}) |"
        )


if __name__ == "__main__":
    main()
