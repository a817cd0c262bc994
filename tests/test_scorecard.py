"""``polylogue scorecard`` end to end on small real Friends and AMI benchmarks.

The command runs the shipped model at two operating points and the two baseline rules through
the same runner as ``eval``; the tests check the folder it writes against the runs' own files,
that it reuses ``eval``'s run folders, that a killed scorecard resumes without redoing finished
runs, that the HTML shows its plots in a real Chromium, that bad input is one clear line, and
that a doc table marked with the scorecard it came from is checked cell by cell.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from benches import ami_benchmark
from cli_run import run_polylogue
from test_eval_support import friends_benchmark

from polylogue.evaluation.scorecard import METRIC_KEYS
from polylogue.evaluation.scorecard_docs import DocTable, check_doc, find_tables, update_doc
from polylogue.turntaking.dataset import load_benchmark

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
MODELS = ["--model", "default", "--model", "baselines"]
POINTS = ["--operating-point", "balanced", "--operating-point", "matched"]


@pytest.fixture(scope="module")
def benches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("benches")
    return {
        "friends": friends_benchmark(tmp / "friends"),
        "ami": ami_benchmark(tmp / "ami", 5),
    }


def _scorecard(
    benches: dict[str, Path], out: Path, runs: Path, *extra: str
) -> subprocess.CompletedProcess[bytes]:
    args = ["scorecard", "--out", str(out), "--runs", str(runs), "--no-progress", "--n-boot", "200"]
    for b in benches.values():
        args += ["--data", str(b)]
    return run_polylogue([*args, *MODELS, *POINTS, *extra])


@pytest.fixture(scope="module")
def card(benches: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("card")
    proc = _scorecard(benches, tmp / "out", tmp / "runs")
    assert proc.returncode == 0, proc.stderr.decode()
    data = json.loads((tmp / "out" / "scorecard.json").read_text(encoding="utf-8"))
    return {"json": data, "out": tmp / "out", "runs": tmp / "runs", "stdout": proc.stdout}


def test_every_data_model_and_point_is_a_row_whose_numbers_are_the_runs(
    card: dict[str, Any], benches: dict[str, Path]
) -> None:
    sc = card["json"]
    rows = {(e["data"], e["model"], e["operating_point"]) for e in sc["entries"]}
    expected = {
        (b.name, m, p)
        for b in benches.values()
        for m, p in (
            ("default", "balanced"),
            ("default", "matched"),
            ("baseline:previous-speaker", None),
            ("baseline:explicit-address", None),
        )
    }
    assert rows == expected
    for e in sc["entries"]:
        folder = card["runs"] / e["run"]
        metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
        assert metrics["complete"] is True
        assert e["metrics"] == {k: metrics[k] for k in METRIC_KEYS if k in metrics}
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["model"]["spec"] == e["model"]
        if e["kind"] == "default":
            dep = manifest["model"]["description"]["deployment"]
            assert dep["operating_point"] == e["operating_point"]
            assert e["threshold"] == manifest["model"]["description"]["threshold"]
        # The four-way table covers every point once.
        assert sum(e["four_way"]["n"].values()) == metrics["n"]
    # Two points of one model are two different runs with different decisions.
    ami = {e["operating_point"]: e for e in sc["entries"] if e["data"] == "ami"}
    assert ami["balanced"]["run"] != ami["matched"]["run"]
    assert ami["balanced"]["threshold"] != ami["matched"]["threshold"]
    # The manifest names each data by its hash and every run folder.
    hashes = {d["label"]: d["data_hash"] for d in sc["manifest"]["data"]}
    for name, b in benches.items():
        assert hashes[name] == load_benchmark(b).data_hash
    assert sorted(sc["manifest"]["runs"]) == sorted(e["run"] for e in sc["entries"])
    assert sc["manifest"]["versions"]["polylogue"]


def test_per_ten_minutes_where_times_exist_and_curves_for_the_model(card: dict[str, Any]) -> None:
    sc = card["json"]
    for e in sc["entries"]:
        agent = e["metrics"]["agent"]
        if e["data"] == "ami":  # timed pauses
            assert agent["false_interjections_per_10min"] is not None
            assert agent["missed_addressed_per_10min"] is not None
        else:  # Friends scripts carry no times
            assert "false_interjections_per_10min" not in agent
    md = (card["out"] / "scorecard.md").read_text(encoding="utf-8")
    assert "points have no pause time (no times in the transcript)" in md
    for e in sc["entries"]:
        assert (e["untimed_points"] == 0) == (e["data"] == "ami")
    # One curve per data for the shipped model (probabilities); none for the 0/1 rules.
    curves = {(c["data"], c["model"]) for c in sc["curves"]}
    assert curves == {("ami", "default"), ("friends", "default")}
    ami = next(c for c in sc["curves"] if c["data"] == "ami")
    assert all(v is not None for v in ami["false_interjections_per_hour"])
    # Speaking at every pause (threshold 0) is right on every SPEAK point and no SILENT one.
    assert ami["balanced_accuracy"][0] == 0.5
    # Speaking at every pause interjects most; never speaking, least.
    assert ami["false_interjections_per_hour"][0] >= ami["false_interjections_per_hour"][-1]
    assert ami["missed_addressed_per_hour"][0] <= ami["missed_addressed_per_hour"][-1]
    # The curve is the pure threshold rule (P(SPEAK) >= t alone; a run's deployment also
    # speaks at every addressed pause and acknowledges at some): raising t never adds a false
    # interjection and never answers an addressed turn it missed.
    fi_curve = ami["false_interjections_per_hour"]
    miss_curve = ami["missed_addressed_per_hour"]
    assert all(a >= b - 1e-9 for a, b in itertools.pairwise(fi_curve))
    assert all(a <= b + 1e-9 for a, b in itertools.pairwise(miss_curve))


def test_pages_quote_the_paper_and_the_three_outcomes(card: dict[str, Any]) -> None:
    md = (card["out"] / "scorecard.md").read_text(encoding="utf-8")
    assert "per category (the paper's four-way mapping)" in md
    assert "paper: LLaMA3.1-8B-instruct, fine-tuned (Table 3, their split)" in md
    assert "| 100.0 | 63.2 | 86.7 | 69.4 | 72.3 | 71.8 | 72.5 |" in md
    assert "three outcomes, default @ matched" in md
    assert "three outcomes, baseline" not in md  # the rules give no acknowledgements
    for name in ("scorecard.md", "scorecard.html", "scorecard.json"):
        assert (card["out"] / name).is_file()
    assert b"open in a browser: file://" in card["stdout"]


def test_scorecard_reuses_the_run_folders_of_eval(benches: dict[str, Path], tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = run_polylogue(
        ["eval", "--data", str(benches["ami"]), "--out", str(runs), "--operating-point",
         "matched", "--domain", "meeting", "--no-progress", "--n-boot", "200"]
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    (folder,) = [p for p in runs.iterdir() if not p.name.startswith("_")]
    before = (folder / "predictions.jsonl").stat().st_mtime_ns
    proc = run_polylogue(
        ["scorecard", "--data", str(benches["ami"]), "--model", "default", "--operating-point",
         "matched", "--runs", str(runs), "--out", str(tmp_path / "sc"), "--no-progress",
         "--n-boot", "200"]
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    sc = json.loads((tmp_path / "sc" / "scorecard.json").read_text(encoding="utf-8"))
    assert [e["run"] for e in sc["entries"]] == [folder.name]
    assert (folder / "predictions.jsonl").stat().st_mtime_ns == before


def test_a_killed_scorecard_resumes_without_redoing_finished_runs(
    benches: dict[str, Path], tmp_path: Path
) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    data = ["--data", str(benches["ami"]), "--data", str(benches["friends"])]
    args = ["scorecard", "--out", str(out), "--runs", str(runs), "--no-progress", *data]
    args += [*MODELS, *POINTS]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "polylogue.cli", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    finished: list[Path] = []
    while time.monotonic() < deadline and proc.poll() is None:
        finished = [p for p in runs.glob("*/metrics.json")] if runs.is_dir() else []
        if finished:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert finished, "the scorecard never finished a run"
    assert not (out / "scorecard.json").exists(), "killed before writing its pages"
    kept = {
        p.parent.name: (p.parent / "predictions.jsonl").read_bytes()
        for p in runs.glob("*/metrics.json")
    }
    resumed = run_polylogue(args)
    assert resumed.returncode == 0, resumed.stderr.decode()
    sc = json.loads((out / "scorecard.json").read_text(encoding="utf-8"))
    assert len(sc["entries"]) == 8 and all(e["complete"] for e in sc["entries"])
    for name, data in kept.items():  # finished runs were read back, not predicted again
        assert (runs / name / "predictions.jsonl").read_bytes() == data


def test_html_shows_its_plots_in_chromium(card: dict[str, Any]) -> None:
    from browsers import VIEWPORT, launch_chromium, require_chromium

    api = require_chromium()
    with api.sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto((card["out"] / "scorecard.html").resolve().as_uri())
        page.wait_for_load_state("load")
        images = page.locator("img.curve")
        assert images.count() == 2  # one per data
        shown = []
        for i in range(images.count()):
            img = images.nth(i)
            img.scroll_into_view_if_needed()
            size = img.evaluate("i => [i.naturalWidth, i.naturalHeight, i.clientWidth]")
            box = img.bounding_box()
            shown.append((size, box, img.get_attribute("src")[:22]))
        tables = page.locator("table").count()
        text = page.locator("body").inner_text()
        browser.close()
    for (natural_w, natural_h, client_w), box, src in shown:
        assert src == "data:image/png;base64,"
        assert natural_w > 300 and natural_h > 200 and client_w > 300
        assert box is not None and box["width"] > 300 and box["height"] > 150
    assert tables >= 2 * 2 + 2  # main + four-way per data, three outcomes
    assert "their split" in text and "BalAcc (95% CI)" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", "no/such/folder"], "--data no/such/folder: not a benchmark folder"),
        (["--data", "switchboard"], "not a shared corpus; give a folder written by"),
        (["--model", "baseline:loud"], "unknown baseline 'loud'"),
        (["--model", "gpt4"], "--model gpt4:"),
        (["--operating-point", "shy"], "--operating-point shy: unknown; choose from balanced"),
        (["--adapter", "docs"], "--adapter docs names no base model: give it with --model hf:"),
    ],
)
def test_bad_input_is_one_line(
    args: list[str], message: str, benches: dict[str, Path], tmp_path: Path
) -> None:
    base = ["scorecard", "--out", str(tmp_path / "o"), "--runs", str(tmp_path / "r")]
    if "--data" not in args:
        base += ["--data", str(benches["ami"])]
    proc = run_polylogue([*base, *args])
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_a_corpus_name_is_built_once_into_the_user_cache(tmp_path: Path) -> None:
    env = {"POLYLOGUE_CACHE": str(tmp_path / "cache")}
    args = ["scorecard", "--data", "friends", "--limit-conversations", "6", "--model",
            "baseline:previous-speaker", "--runs", str(tmp_path / "runs"), "--out",
            str(tmp_path / "o"), "--no-progress", "--n-boot", "0"]  # fmt: skip
    first = run_polylogue(args, env=env)
    assert first.returncode == 0, first.stderr.decode()
    assert b"building friends-first6" in first.stderr
    (built,) = (tmp_path / "cache" / "benchmarks").iterdir()
    assert (built / "manifest.json").is_file()
    inputs = load_benchmark(built).manifest["inputs"]
    assert set(inputs) == {"friends"} and inputs["friends"]["sha256"]
    again = run_polylogue(args, env=env)
    assert again.returncode == 0 and b"building" not in again.stderr


# ----------------------------------------------------------------------------- doc tables


DOC = ROOT / "docs" / "scorecard.md"


def test_the_docs_example_table_equals_a_regenerated_scorecard(tmp_path: Path) -> None:
    """docs/scorecard.md's marked table is regenerated here with the command printed above
    it (a small Friends build in a fresh cache) and checked cell by cell."""
    table = _example_table()
    named = table.scorecard.relative_to(ROOT)
    out = tmp_path / named.parent
    command = _doc_command()
    env = {"POLYLOGUE_CACHE": str(tmp_path / "cache")}
    proc = run_polylogue(
        [*command, "--out", str(out), "--runs", str(tmp_path / "runs"), "--no-progress"], env=env
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert check_doc(DOC, tmp_path) == []
    # The committed scorecard is the one the command writes (same figures).
    committed = json.loads(table.scorecard.read_text(encoding="utf-8"))
    fresh = json.loads((out / "scorecard.json").read_text(encoding="utf-8"))
    assert [e["metrics"] for e in fresh["entries"]] == [e["metrics"] for e in committed["entries"]]


def _example_table() -> DocTable:
    (table,) = [t for t in find_tables(DOC, ROOT) if "scorecard-example" in str(t.scorecard)]
    return table


def test_every_marked_table_in_the_docs_matches_its_scorecard() -> None:
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        assert check_doc(doc, ROOT) == [], doc


def _doc_command() -> list[str]:
    """The ``polylogue scorecard`` command written in the code block above the marked table."""
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- scorecard-command -->", 1)[1].split("```", 2)[1]
    line = " ".join(x.strip().rstrip("\\") for x in block.strip().splitlines()[1:])
    args = line.split()
    assert args[0] == "polylogue" and args[1] == "scorecard", args
    out = args.index("--out")
    return args[1:out] + args[out + 2 :]


def test_a_changed_cell_is_named_and_update_rewrites_it(tmp_path: Path) -> None:
    table = _example_table()
    doc = tmp_path / "doc.md"
    text = DOC.read_text(encoding="utf-8")
    # The copy names its scorecards by absolute path (it lives outside the repository).
    doc.write_text(text.replace("scorecard: docs/", f"scorecard: {ROOT}/docs/"), encoding="utf-8")
    assert check_doc(doc) == []
    row = table.rows[0]
    col = table.header.index("Speak ratio")
    wrong = "| " + " | ".join([*row[:col], "9.99", *row[col + 1 :]]) + " |"
    lines = doc.read_text(encoding="utf-8").splitlines()
    lines[table.span[0] + 2] = wrong
    doc.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (problem,) = check_doc(doc)
    assert "Speak ratio: the doc says '9.99'" in problem
    proc = run_polylogue(["scorecard", "--check-doc", str(doc)])
    assert proc.returncode == 1 and b"Speak ratio" in proc.stdout
    assert update_doc(doc) == 2
    assert check_doc(doc) == []


def _doc_copy(tmp_path: Path) -> Path:
    doc = tmp_path / "doc.md"
    text = DOC.read_text(encoding="utf-8")
    doc.write_text(text.replace("scorecard: docs/", f"scorecard: {ROOT}/docs/"), encoding="utf-8")
    return doc


def test_update_never_deletes_a_row_it_cannot_match(tmp_path: Path) -> None:
    """A row whose Data/Model/Point the scorecard lacks: an error naming the doc, the line
    and the row, exit status 2, the doc byte for byte as it was."""
    table = _example_table()
    doc = _doc_copy(tmp_path)
    lines = doc.read_text(encoding="utf-8").splitlines()
    row = table.rows[1]
    lines[table.span[0] + 3] = "| " + " | ".join([row[0], "default", "chatty", *row[3:]]) + " |"
    doc.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = doc.read_bytes()
    proc = run_polylogue(["scorecard", "--update-doc", str(doc)])
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert f"{doc}:{table.span[0] + 4}: the row " in err and "chatty" in err
    assert "left unchanged" in err
    assert doc.read_bytes() == before
    check = run_polylogue(["scorecard", "--check-doc", str(doc)])
    assert check.returncode == 1 and b"no entry" in check.stdout


@pytest.mark.parametrize(
    "marker",
    [
        "<!-- scorecards: {path} -->",
        "<!-- Scorecard: {path} -->",
        "<!-- scorecard {path} -->",
        "<!-- scorcard: {path} -->",
        "<!-- score-card: {path} -->",
        "<!-- scorecard: {path} ->",
        "<!-- scorecard: -->",
    ],
)
def test_a_misspelt_marker_is_an_error_never_a_skipped_table(tmp_path: Path, marker: str) -> None:
    table = _example_table()
    doc = _doc_copy(tmp_path)
    lines = doc.read_text(encoding="utf-8").splitlines()
    lines[table.line - 1] = marker.format(path=table.scorecard)
    doc.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = doc.read_bytes()
    problems = check_doc(doc)
    assert any(
        p.startswith(f"{doc}:{table.line}: a scorecard marker that does not parse")
        for p in problems
    ), problems
    check = run_polylogue(["scorecard", "--check-doc", str(doc)])
    assert check.returncode == 1 and b"does not parse" in check.stdout
    assert b"every scorecard table matches" not in check.stdout
    update = run_polylogue(["scorecard", "--update-doc", str(doc)])
    assert update.returncode == 2 and b"does not parse" in update.stderr
    assert doc.read_bytes() == before


def test_markers_inside_code_blocks_and_other_comments_are_text(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- scorecard-command -->\n```markdown\n<!-- scorecards: x.json -->\n| a |\n```\n"
        "<!-- generated by `polylogue scorecard` -->\n",
        encoding="utf-8",
    )
    assert check_doc(doc) == []
