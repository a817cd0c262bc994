"""Before/after check of a runtime refactor: model files, eval metrics and live decisions.

    # with the old code first on the path, then with the new one:
    PYTHONPATH=OLD/src .venv/bin/python benchmarks/blocks_unchanged.py record BEFORE --work W
    PYTHONPATH=NEW/src .venv/bin/python benchmarks/blocks_unchanged.py record AFTER --work W
    PYTHONPATH=NEW/src .venv/bin/python benchmarks/blocks_unchanged.py compare BEFORE AFTER

Written for issue 26's feature-block seam (``engine/blocks.py``): the seam must change no
number. ``record`` writes, with whatever ``polylogue`` is importable:

* ``shipped.json``: SHA-256 of every file of the shipped model folders (general and chat);
* ``train-general/``, ``train-chat/``: model folders trained by ``train_default_model`` on a
  small Molweni benchmark (40 rounds, one thread; the chat one with the chat block);
* ``eval-*/``: ``polylogue eval --model default`` (``metrics.json`` and the predictions) on a
  small AMI benchmark (general model) and a small Molweni one (``--domain chat``);
* ``decide-*.jsonl``: ``polylogue decide --json`` on the first 120 utterances of the first AMI
  meeting (``--domain meeting``) and the first 300 messages of an Ubuntu IRC log (``--domain
  chat``);
* ``serve-*.json``: the same streams as events of one ``polylogue serve`` session each;
* ``live-*``: a :class:`LiveConversation` fed half the stream, its snapshot
  (``live-*-snapshot.json``), then the other half (``live-*-rest.json``).

``compare`` prints PASS/FAIL per artefact. Files must be byte-identical, except what is
named: ``train_seconds`` (wall time) and the ``blocks`` record in a trained model.json;
latency fields in decisions and predictions (``server_ms`` in serve replies); ``cached``
flags. The CLI and serve children run with ``PYTHONHASHSEED=0`` (see :func:`record`).
``compare`` also restores the BEFORE snapshots with the code it runs under and continues them:
the decisions must be BEFORE's (old snapshots still load) and the restored snapshot must equal
BEFORE's.

The benchmarks (``--work``, built once with ``polylogue build``) are shared by both records.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from _cli import polylogue

#: Keys that carry timings or cache provenance, not decisions: dropped before comparing.
_VOLATILE = frozenset({"latency_ms", "latency_s", "server_ms", "cached"})
#: model.json keys a retrained folder may differ in: wall time, and the blocks record the
#: seam adds (its content is checked against the features by ``load_model``).
_MODEL_JSON_ALLOWED = ("train_seconds", "blocks")
N_MEETING = 120
N_CHAT = 300


def _strip(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _strip(x) for k, x in v.items() if k not in _VOLATILE}
    if isinstance(v, list):
        return [_strip(x) for x in v]
    return v


def _dump(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------- inputs


def _benchmarks(work: Path) -> dict[str, Path]:
    out = {
        "ami": (work / "bench-ami", ["--corpus", "ami", "--limit-conversations", "8"]),
        "molweni": (
            work / "bench-molweni",
            ["--corpus", "molweni", "--limit-conversations", "150"],
        ),
    }
    for folder, args in out.values():
        if not (folder / "manifest.json").is_file():
            polylogue("build", "-o", str(folder), *args)
    return {k: v[0] for k, v in out.items()}


def _streams() -> dict[str, tuple[str, str, list[dict[str, Any]]]]:
    """name -> (domain, agent, lines): the first AMI meeting (untimed, as the deployment test
    replays it) and the start of the first Ubuntu IRC log (timed)."""
    from polylogue.corpora import load_corpus

    meeting = next(iter(load_corpus("ami")))
    m_lines = [{"speaker": u.speaker, "text": u.text} for u in meeting.utterances[:N_MEETING]]
    irc = next(iter(load_corpus("irc")))
    c_lines: list[dict[str, Any]] = [
        {"speaker": u.speaker, "text": u.text, "start": u.start, "end": u.end}
        for u in irc.utterances[:N_CHAT]
    ]
    chat_agent = Counter(x["speaker"] for x in c_lines).most_common(1)[0][0]
    return {"meeting": ("meeting", "B", m_lines), "chat": ("chat", chat_agent, c_lines)}


# ----------------------------------------------------------------------------- record


def _shipped() -> dict[str, str]:
    from polylogue.engine.model import DEFAULT_MODEL_DIR

    return {
        str(p.relative_to(DEFAULT_MODEL_DIR)): _sha(p)
        for p in sorted(DEFAULT_MODEL_DIR.rglob("*"))
        if p.is_file()
    }


def _train(bench: Path, out: Path) -> None:
    from polylogue.training.chat_model import chat_train_options
    from polylogue.training.default_model import TrainOptions, train_default_model
    from polylogue.turntaking.dataset import load_benchmark

    small = {"num_boost_round": 40, "backchannel_rounds": 40, "threads": 1}
    for name, opts in (
        ("general", TrainOptions(**small)),  # type: ignore[arg-type]
        ("chat", chat_train_options(**small)),
    ):
        result = train_default_model([load_benchmark(bench)], opts, log=lambda _: None)
        result.model.save(out / f"train-{name}")


def _eval(bench: Path, out: Path, name: str, *opts: str) -> None:
    runs = out / f"runs-{name}"
    args = ["-d", str(bench), "--model", "default", "--out", str(runs), "--n-boot", "200"]
    polylogue("eval", *args, "--no-progress", *opts)
    (run,) = [p.parent for p in runs.rglob("metrics.json")]
    dest = out / f"eval-{name}"
    dest.mkdir()
    (dest / "metrics.json").write_bytes((run / "metrics.json").read_bytes())
    rows = [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines()]
    _dump(dest / "predictions.json", _strip(rows))


def _decide(out: Path, name: str, domain: str, agent: str, lines: list[dict[str, Any]]) -> None:
    path = out / f"{name}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    rows = polylogue("decide", str(path), "--as", agent, "--json", "--domain", domain)
    _dump(out / f"decide-{name}.json", _strip([json.loads(x) for x in rows.splitlines() if x]))


def _serve(out: Path, streams: dict[str, tuple[str, str, list[dict[str, Any]]]]) -> None:
    import httpx

    from polylogue.serve.local import polylogue_serve

    with polylogue_serve("--state", str(out / "serve.sqlite")) as url:
        for name, (domain, agent, lines) in streams.items():
            r = httpx.post(
                f"{url}/v1/sessions", json={"agent": agent, "deployment": {"domain": domain}}
            )
            r.raise_for_status()
            sid = r.json()["session_id"]
            events = [{"type": "utterance", "seq": i, **x} for i, x in enumerate(lines)]
            res = httpx.post(f"{url}/v1/sessions/{sid}/events", json=events, timeout=300)
            res.raise_for_status()
            _dump(out / f"serve-{name}.json", _strip(res.json()["results"]))


def _feed(live: Any, lines: list[dict[str, Any]]) -> list[Any]:
    from polylogue.conversation import Utterance

    utts = [Utterance(x["speaker"], x["text"], x.get("start"), x.get("end")) for x in lines]
    return [_strip(live.utterance(u).to_dict()) for u in utts]


def _live(out: Path, streams: dict[str, tuple[str, str, list[dict[str, Any]]]]) -> None:
    from polylogue.engine.deployment import Deployment
    from polylogue.engine.live import LiveConversation

    for name, (domain, agent, lines) in streams.items():
        live = LiveConversation.start(agent, deployment=Deployment.resolve(domain=domain))
        half = len(lines) // 2
        first = _feed(live, lines[:half])
        _dump(out / f"live-{name}-snapshot.json", live.to_dict())
        rest = _feed(live, lines[half:])
        _dump(out / f"live-{name}-first.json", first)
        _dump(out / f"live-{name}-rest.json", rest)


def record(out: Path, work: Path) -> None:
    out.mkdir(parents=True, exist_ok=False)
    # ``evaluation.metrics.listener_minutes`` sums over a set of (conversation, listener)
    # pairs, so the last digits of ``minutes`` and the per-10-minute rates in metrics.json
    # follow the string-hash seed: the CLI and serve children get a fixed one.
    os.environ["PYTHONHASHSEED"] = "0"
    benches = _benchmarks(work)
    _dump(out / "shipped.json", _shipped())
    _train(benches["molweni"], out)
    _eval(benches["ami"], out, "ami")
    _eval(benches["molweni"], out, "molweni-chat", "--domain", "chat")
    streams = _streams()
    for name, (domain, agent, lines) in streams.items():
        _decide(out, name, domain, agent, lines)
    _serve(out, streams)
    _live(out, streams)
    print(f"recorded {out}")


# ----------------------------------------------------------------------------- compare


def _same_file(a: Path, b: Path) -> tuple[bool, str]:
    if not a.is_file() or not b.is_file():
        return False, "missing"
    return a.read_bytes() == b.read_bytes(), "byte-identical"


def _same_model_folder(a: Path, b: Path) -> tuple[bool, str]:
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    bad = [n for n in names if n != "model.json" and not _same_file(a / n, b / n)[0]]
    ma = json.loads((a / "model.json").read_text())
    mb = json.loads((b / "model.json").read_text())
    # The seam writes the blocks record and no longer the chat-only ``feature_blocks``
    # list: one fact, one key. Both say the same blocks (checked here).
    blocks_a = ["base", *ma.pop("feature_blocks", [])]
    blocks_b = [blk["name"] for blk in mb.get("blocks", [])] or [
        "base",
        *mb.pop("feature_blocks", []),
    ]
    mb.pop("feature_blocks", None)
    differ = sorted(
        k for k in set(ma) | set(mb) if k not in _MODEL_JSON_ALLOWED and ma.get(k) != mb.get(k)
    )
    ok = not bad and not differ and blocks_a == blocks_b
    return ok, (
        f"weights byte-identical; model.json equal but for {', '.join(_MODEL_JSON_ALLOWED)}"
        f" (blocks {blocks_b})"
        if ok
        else f"differ: files {bad}, model.json keys {differ}, blocks {blocks_a} vs {blocks_b}"
    )


def _restored(before: Path, name: str) -> tuple[bool, str]:
    """BEFORE's snapshot restored by this code: same snapshot back, same decisions after."""
    from polylogue.engine.live import LiveConversation, snapshot_deployment

    snap = json.loads((before / f"live-{name}-snapshot.json").read_text())
    lines = _streams()[name][2]
    live = LiveConversation.from_dict(snap, snapshot_deployment(snap))
    again = json.loads(json.dumps(live.to_dict(), sort_keys=True))
    rest = _feed(live, lines[len(lines) // 2 :])
    want = json.loads((before / f"live-{name}-rest.json").read_text())
    ok = again == snap and rest == want
    return ok, f"v{snap['version']} snapshot restored, {len(rest)} decisions after it"


def compare(before: Path, after: Path) -> bool:
    checks: list[tuple[str, tuple[bool, str]]] = [
        ("shipped model files", _same_file(before / "shipped.json", after / "shipped.json"))
    ]
    for name in ("general", "chat"):
        checks.append(
            (
                f"trained {name} model",
                _same_model_folder(before / f"train-{name}", after / f"train-{name}"),
            )
        )
    for name in ("ami", "molweni-chat"):
        for f in ("metrics.json", "predictions.json"):
            pair = (before / f"eval-{name}" / f, after / f"eval-{name}" / f)
            checks.append((f"eval {name} {f}", _same_file(*pair)))
    for name in ("meeting", "chat"):
        for kind in ("decide", "serve"):
            f = f"{kind}-{name}.json"
            checks.append((f"{kind} {name}", _same_file(before / f, after / f)))
        for part in ("first", "snapshot", "rest"):
            f = f"live-{name}-{part}.json"
            checks.append((f"live {name} {part}", _same_file(before / f, after / f)))
        checks.append((f"live {name} BEFORE snapshot restored", _restored(before, name)))
    for what, (ok, how) in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {what}  ({how})")
    return all(ok for _, (ok, _) in checks)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    r.add_argument("--work", type=Path, required=True, help="Folder for the built benchmarks.")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.cmd == "record":
        record(args.out, args.work)
    else:
        sys.exit(0 if compare(args.before, args.after) else 1)


if __name__ == "__main__":
    main()
