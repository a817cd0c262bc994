"""What a new user meets in the output of ``report``, ``inspect``, ``decide``, ``build`` and the
replay examples: operating points in report rows, per-10-minute figures (or why not), the
shipped model's three-way actions, the acknowledgement of a BACKCHANNEL point, ``decide``'s
header, one-speaker transcripts, skipped acknowledgements, "1 pause", ``--format`` in the
unknown-suffix error, the examples' replay options, and a quiet ``build``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from benches import ami_benchmark
from cli_run import run_polylogue
from test_eval_support import friends_benchmark

from polylogue.evaluation.runner import load_points, run_evaluation
from polylogue.models import load_predictor

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def benches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("benches")
    return {"ami": ami_benchmark(tmp / "ami", 5), "friends": friends_benchmark(tmp / "friends")}


@pytest.fixture(scope="module")
def report(benches: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> str:
    tmp = tmp_path_factory.mktemp("report")
    for name, bench in benches.items():
        points, info = load_points(bench, "test")
        domain = "meeting" if name == "ami" else "tv"
        for point in ("balanced", "matched"):
            model = load_predictor("default", operating_point=point, domain=domain)
            run_evaluation(points, info, model, tmp / "runs", progress=False, n_boot=0)
    proc = run_polylogue(["report", str(tmp / "runs"), "--out", str(tmp / "r")])
    assert proc.returncode == 0, proc.stderr.decode()
    return (tmp / "r" / "report.md").read_text(encoding="utf-8")


def _rows(md: str, heading: str = "") -> list[list[str]]:
    """The cells of the first Markdown table after ``heading`` (header row left out)."""
    part = md.split(heading, 1)[1] if heading else md
    lines = part.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("| "))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[c.strip() for c in x.strip("|").split("|")] for x in lines[start + 2 : end]]


def test_report_rows_name_the_operating_point_and_threshold(report: str) -> None:
    models = [r[0] for r in _rows(report, "# Turn-taking evaluation") if r[1].startswith("ami")]
    assert len(models) == 2 and len(set(models)) == 2
    assert any(m.startswith("default (balanced, t=") for m in models)
    assert any(m.startswith("default (matched, t=") for m in models)


def test_report_fills_per_ten_minutes_where_times_exist_and_says_why_not(report: str) -> None:
    rows = _rows(report, "## Agent behaviour")
    ami = [r for r in rows if r[1].startswith("ami")]
    friends = [r for r in rows if r[1].startswith("friends")]
    assert ami and all(r[-1] != "–" and r[-2] != "–" for r in ami)
    assert friends and all(r[-1] == "–" and r[-2] == "–" for r in friends)
    assert "Per-10-minute columns empty for friends/test: some or all of its points" in report


def test_report_scores_the_shipped_models_three_way_actions(report: str) -> None:
    outcomes = report.split("## Three outcomes", 1)[1]
    assert "Binary model" not in outcomes
    assert outcomes.count("Three-way model: scored on its actions") == 4
    # The AMI rows count the acknowledgements it chose in the BACKCHANNEL column.
    ami = outcomes.split("— ami/test", 1)[1]
    chosen = int(ami.split("it acknowledged at ", 1)[1].split(" pause")[0].replace(",", ""))
    table = [r for r in _rows(ami) if r[0] in ("TAKE_FLOOR", "BACKCHANNEL", "SILENT")]
    assert chosen == sum(int(r[2].replace(",", "")) for r in table) > 0


def test_report_fills_per_ten_minutes_of_an_older_run_from_its_predictions(
    benches: dict[str, Path], tmp_path: Path
) -> None:
    from polylogue.evaluation.report import load_run, run_agent

    points, info = load_points(benches["ami"], "test")
    folder = run_evaluation(
        points, info, load_predictor("baseline:previous-speaker"), tmp_path, progress=False,
        n_boot=0,
    ).folder  # fmt: skip
    metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    full = dict(metrics["agent"])
    # metrics.json as runs wrote it before the per-10-minute figures existed.
    for key in ("minutes", "false_interjections_per_10min", "missed_addressed_per_10min"):
        del metrics["agent"][key]
    (folder / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    agent = run_agent(load_run(folder))
    assert agent is not None
    assert agent["false_interjections_per_10min"] == pytest.approx(
        full["false_interjections_per_10min"]
    )


def test_inspect_shows_the_acknowledgement_of_a_backchannel_point(
    benches: dict[str, Path],
) -> None:
    from polylogue.turntaking.dataset import load_benchmark

    proc = run_polylogue(["inspect", str(benches["ami"]), "--outcome", "BACKCHANNEL", "-n", "3"])
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    lines = [x for x in out.splitlines() if x.startswith("acknowledged: ")]
    assert len(lines) == 3
    bench = load_benchmark(benches["ami"])
    said = {(u.speaker, u.text) for c in bench.conversations.values() for u in c.utterances}
    for line in lines:
        who, text = line.removeprefix("acknowledged: ").split(": ", 1)
        assert (who, text) in said  # the target's own words, from the conversation
    # Other outcomes show no such line.
    other = run_polylogue(["inspect", str(benches["ami"]), "--outcome", "TAKE_FLOOR", "-n", "2"])
    assert "acknowledged:" not in other.stdout.decode()


# ----------------------------------------------------------------------------- decide


def _decide(tmp_path: Path, text: str, *args: str) -> str:
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    proc = run_polylogue(["decide", str(path), *args])
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def test_decide_prints_its_header_before_the_first_line(tmp_path: Path) -> None:
    out = _decide(tmp_path, "Ann: Morning.\nBen: Ann, can you start?\n", "--as", "Ben")
    lines = out.splitlines()
    assert lines[0].startswith("operating point matched")
    assert lines[2].startswith("1 Ann: Morning.")  # the target's own line, after the header


def test_decide_says_when_nobody_else_spoke(tmp_path: Path) -> None:
    out = _decide(tmp_path, "Ann: Morning.\nAnn: Anyone there?\n", "--as", "Ann")
    assert "Ann: nobody else spoke: nothing to decide." in out
    assert "pauses decided" not in out


def test_decide_says_one_pause_and_notes_a_skipped_acknowledgement(tmp_path: Path) -> None:
    out = _decide(
        tmp_path,
        "Ann: Morning.\nBen: Ann, can you share the numbers?\nCal: mm-hmm\n",
        "--as",
        "Ann",
    )
    assert "Ann: 1 pause decided," in out
    ack = next(x for x in out.splitlines() if x.startswith("3 Cal: mm-hmm"))
    assert "skipped: backchannel or too short" in ack


def test_an_unknown_transcript_suffix_names_the_format_flag(tmp_path: Path) -> None:
    path = tmp_path / "notes.docx"
    path.write_text("Ann: hi\n", encoding="utf-8")
    proc = run_polylogue(["decide", str(path), "--as", "Ann"])
    err = proc.stderr.decode()
    assert proc.returncode == 2
    assert "--format jsonl|csv|vtt|srt|txt" in err and "format=" not in err


def test_build_prints_no_raw_scikit_learn_warning(tmp_path: Path) -> None:
    # Five Molweni dialogues: a category too rare for every fold (scikit-learn warned).
    proc = run_polylogue(
        ["build", "--corpus", "molweni", "--limit-conversations", "5", "--out", str(tmp_path / "b")]
    )
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "UserWarning" not in err and "least populated" not in err and "sklearn" not in err


# ----------------------------------------------------------------------------- examples


def _example(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )


def test_livekit_example_help_shows_the_replay_options() -> None:
    out = _example("examples/livekit_agent.py", "--help")
    assert out.returncode == 0, out.stderr
    for flag in ("--replay", "--as", "--json", "--domain", "--role", "--alias"):
        assert flag in out.stdout


OPTIONS = ("--domain", "tv", "--role", "observer", "--alias", "Dave=Davey,D")


@pytest.mark.parametrize(
    ("example", "module"),
    [("livekit_agent.py", "livekit.agents"), ("pipecat_gate.py", "pipecat")],
)
def test_replay_examples_take_domain_role_and_alias_as_decide_does(
    example: str, module: str
) -> None:
    pytest.importorskip(module)
    standup = str(ROOT / "examples" / "standup.jsonl")
    decide = run_polylogue(["decide", standup, "--as", "Dave", "--json", *OPTIONS])
    assert decide.returncode == 0, decide.stderr.decode()
    want = [json.loads(x) for x in decide.stdout.decode().splitlines()]
    out = _example(f"examples/{example}", "--replay", standup, "--as", "Dave", "--json", *OPTIONS)
    assert out.returncode == 0, out.stderr[-2000:]
    got = [json.loads(x) for x in out.stdout.splitlines()]
    fields = ("index", "decision", "p_speak")
    assert [tuple(r[f] for f in fields) for r in got] == [tuple(r[f] for f in fields) for r in want]
    # The options change the answers (the observer never speaks).
    plain = _example(f"examples/{example}", "--replay", standup, "--as", "Dave", "--json")
    assert [json.loads(x)["decision"] for x in plain.stdout.splitlines()] != [
        r["decision"] for r in got
    ]
    bad = _example(f"examples/{example}", "--replay", standup, "--as", "Dave", "--role", "boss")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --role: unknown value 'boss'")
