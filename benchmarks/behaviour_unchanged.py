"""Record what a refactor must not change, then compare two recordings (PASS/FAIL per artefact).

    python benchmarks/behaviour_unchanged.py record /tmp/arch2/before   # on the old code
    python benchmarks/behaviour_unchanged.py record /tmp/arch2/after    # on the new code
    python benchmarks/behaviour_unchanged.py compare /tmp/arch2/before /tmp/arch2/after

Recorded, through the real CLI on the shared data:

* ``polylogue build`` of AMI (4 meetings), Earnings-21 (2 calls) and a user transcript read
  with ``--domain earnings``: every file of each benchmark folder;
* ``polylogue eval --model default`` on the AMI build: ``metrics.json``;
* every turn-taking baseline (``baseline:NAME``) on the AMI build's test split: name,
  description and each point's decision, P(SPEAK), raw output and cues (no latency);
* ``polylogue decide --json`` on the first AMI meeting replayed as JSONL (120 utterances, as
  in tests/test_deployment.py), for the meeting, earnings and tv domains, each row without its
  ``latency_ms`` (wall-clock time).

Every command runs with ``PYTHONHASHSEED=0``: a few metrics sum floats over sets of ids, so
without it two runs of the same code differ in the last digit of ``minutes``.

Files must be byte-identical, except in a benchmark ``manifest.json`` the fields that say when
and with what it was built (``created``; ``polylogue_version`` and ``python`` would differ only
across versions), which are left out of the comparison and reported when they differ.

One change is intended (issue 26, one name per domain): the Earnings-21 reader writes the
domain ``earnings`` where it wrote ``earnings_call``. Its build's files are compared after that
rename (Parquet files as rows, the manifest without its ``data_hash``, which hashes the rows)
and reported as ``PASS (renamed domain)``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from _cli import polylogue

from polylogue.corpora import load_corpus
from polylogue.models.base import BASELINE_NAMES, load_predictor
from polylogue.turntaking.dataset import load_benchmark

#: Manifest fields that record when and with what a folder was written, not what it holds.
VOLATILE = ("created", "polylogue_version", "python")
#: The intended rename, and the build whose files it changes.
RENAMED = ('"domain": "earnings_call"', '"domain": "earnings"')
RENAMED_BUILD = "build/earnings21/"
N = 120


def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    builds = {
        "ami": ["--corpus", "ami", "--limit-conversations", "4"],
        "earnings21": ["--corpus", "earnings21", "--limit-conversations", "2"],
        "transcript": ["--transcript", "examples/standup.jsonl", "--domain", "earnings"],
    }
    for name, args in builds.items():
        polylogue("build", "--out", str(out / "build" / name), "--jsonl", *args)
    runs = out / "runs"
    polylogue(
        "eval", "--model", "default", "--data", str(out / "build" / "ami"), "--out", str(runs)
    )
    (metrics,) = runs.glob("*/metrics.json")
    (out / "eval_metrics.json").write_bytes(metrics.read_bytes())
    baselines: dict[str, dict[str, object]] = {}
    inputs = load_benchmark(out / "build" / "ami").inputs("test")
    for name in BASELINE_NAMES:
        p = load_predictor(f"baseline:{name}")
        answers = [
            (x.point_id, x.decision, x.p_speak, x.raw_output, x.cues) for x in p.predict(inputs)
        ]
        baselines[name] = {"name": p.name, "describe": p.describe(), "predictions": answers}
    text = json.dumps(baselines, sort_keys=True, default=str)
    (out / "baselines.json").write_text(text + "\n", encoding="utf-8")
    conv = next(iter(load_corpus("ami")))
    lines = [{"speaker": u.speaker, "text": u.text} for u in conv.utterances[:N]]
    meeting = out / "meeting.jsonl"
    meeting.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    for domain in ("meeting", "earnings", "tv"):
        rows = polylogue("decide", str(meeting), "--as", "B", "--json", "--domain", domain)
        (out / f"decide_{domain}.jsonl").write_text(_without_latency(rows), encoding="utf-8")


def _without_latency(rows: str) -> str:
    """Decide's rows without ``latency_ms`` (wall-clock time of each decision)."""
    out = []
    for line in rows.splitlines():
        row = json.loads(line)
        row.pop("latency_ms", None)
        out.append(json.dumps(row) + "\n")
    return "".join(out)


def artefacts(root: Path) -> dict[str, Path]:
    files = [*sorted((root / "build").rglob("*")), root / "eval_metrics.json"]
    files.append(root / "baselines.json")
    files += sorted(root.glob("decide_*.jsonl"))
    return {str(p.relative_to(root)): p for p in files if p.is_file()}


def compare(before: Path, after: Path) -> bool:
    old, new = artefacts(before), artefacts(after)
    ok = True
    for name in sorted(old.keys() | new.keys()):
        if name not in old or name not in new:
            print(f"FAIL {name}: only in {'after' if name in new else 'before'}")
            ok = False
            continue
        a, b = old[name].read_bytes(), new[name].read_bytes()
        note = ""
        if name.endswith("manifest.json"):
            ma, mb = json.loads(a), json.loads(b)
            changed = [k for k in VOLATILE if ma.get(k) != mb.get(k)]
            for k in VOLATILE:
                ma.pop(k, None)
                mb.pop(k, None)
            same = ma == mb
            if not same and name.startswith(RENAMED_BUILD):
                ma.pop("data_hash"), mb.pop("data_hash")
                same = ma == mb
                note = " (renamed domain; data_hash differs)" if same else ""
            note += f" (ignored: {', '.join(changed)} differ)" if changed else ""
        else:
            same = a == b
            if not same and name.startswith(RENAMED_BUILD):
                same = _renamed(old[name]) == _renamed(new[name], rename=False)
                note = " (renamed domain)" if same else ""
        digest = hashlib.sha256(b).hexdigest()[:12]
        print(f"{'PASS' if same else 'FAIL'} {name} {digest}{note}")
        ok &= same
    print("ALL PASS" if ok else "SOME FAIL")
    return ok


def _renamed(path: Path, rename: bool = True) -> str:
    """A file's rows as JSON text, with the intended domain rename applied to ``before``."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
        text = "\n".join(json.dumps(r, sort_keys=True) for r in rows)
    else:
        text = path.read_text(encoding="utf-8")
    return text.replace(*RENAMED) if rename else text


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record the artefacts of the code on the path")
    rec.add_argument("out", type=Path)
    cmp = sub.add_parser("compare", help="PASS/FAIL per artefact of two recordings")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        record(args.out)
    else:
        sys.exit(0 if compare(args.before, args.after) else 1)


if __name__ == "__main__":
    main()
