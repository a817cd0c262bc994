"""Commands in generated reports are written as a user types them: ``python`` / ``polylogue``
for the interpreter, paths relative to the working directory when under it, else a
placeholder; never a path of the machine that wrote the report
(``polylogue.runs.portable_command``, used by the scorecard's "Made ... by" line and by
``benchmarks/lora_reproduction.py``)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from polylogue.evaluation.scorecard_pages import _by_data, _slug, html_page, markdown
from polylogue.runs import portable_command, portable_path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
#: The house rule's machine paths (tests/test_docs_rules.py).
MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:root|home|work|tmp|Users|mnt|private)/")


def test_interpreter_cwd_paths_placeholders_and_options(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    (clone / "docs").mkdir(parents=True)
    run = tmp_path / "runs" / "lora"
    argv = [
        f"{tmp_path}/venv/bin/python3.11",
        "benchmarks/lora_reproduction.py",
        "--out",
        str(run),
        "--publish",
        str(clone / "docs" / "results" / "repro"),
        f"--data-root={tmp_path}/corpora",
        "--model",
        "hf:/models/Qwen2.5-7B-Instruct",
        "-O",
        f"cache_path={tmp_path}/cache.sqlite",
        str(run / "eval" / "ami"),
        "--dry-run",
    ]
    got = portable_command(argv, cwd=clone, placeholders={str(run): "RUN_FOLDER"})
    assert got == (
        "python benchmarks/lora_reproduction.py --out RUN_FOLDER --publish docs/results/repro "
        "--data-root=DATA_ROOT --model hf:PATH -O cache_path=CACHE_PATH RUN_FOLDER/eval/ami "
        "--dry-run"
    )
    # An installed script keeps its bare name; an option's own path becomes its placeholder.
    scorecard = [f"{tmp_path}/venv/bin/polylogue", "scorecard", "--runs", f"{tmp_path}/sc_runs"]
    assert portable_command(scorecard, cwd=clone) == "polylogue scorecard --runs RUNS"
    # Spaces survive as a shell would need them; the working directory itself is ".".
    assert portable_command(["polylogue", "build", "--out", str(clone), "a b"], cwd=clone) == (
        "polylogue build --out . 'a b'"
    )
    assert portable_path(clone / "docs" / "x.json", cwd=clone) == "docs/x.json"
    assert portable_path(tmp_path / "elsewhere.json", cwd=clone) == "PATH"
    assert portable_path(tmp_path / "bench" / "ami", cwd=clone, placeholder="BENCH") == "BENCH"
    assert portable_path("docs/x.json", cwd=clone) == "docs/x.json"


@pytest.mark.parametrize("folder", ["scorecard", "scorecard-example"])
def test_committed_scorecards_are_what_the_writer_gives_from_their_json(folder: str) -> None:
    """Each committed scorecard.md is ``markdown()`` of its own scorecard.json, so its "Made
    ... by" line is the portable command, though the JSON records the machine's argv."""
    out = RESULTS / folder
    card = json.loads((out / "scorecard.json").read_text(encoding="utf-8"))
    plots = {d: f"curve-{_slug(d)}.png" for d in _by_data(card)}
    plots = {d: name for d, name in plots.items() if (out / name).exists()}
    rendered = markdown(card, plots)
    assert (out / "scorecard.md").read_text(encoding="utf-8") == rendered
    made = rendered.splitlines()[2]
    assert made.startswith("Split: test. Made ") and " by `polylogue scorecard " in made
    assert not MACHINE_PATH.search(made), made
    assert "--out" in card["manifest"]["command"]  # the record keeps the machine's argv


def test_the_committed_html_scorecard_shows_a_portable_manifest() -> None:
    """The HTML page embeds the manifest with the command, runs folder and benchmark paths as
    a user would write them; the JSON next to it keeps the machine's record."""
    out = RESULTS / "scorecard-example"
    card = json.loads((out / "scorecard.json").read_text(encoding="utf-8"))
    pngs = {d: (out / f"curve-{_slug(d)}.png").read_bytes() for d in _by_data(card)}
    page = html_page(card, pngs)
    assert (out / "scorecard.html").read_text(encoding="utf-8") == page
    assert not MACHINE_PATH.search(page), MACHINE_PATH.search(page)
    assert MACHINE_PATH.search(json.dumps(card["manifest"]))  # the record is untouched
    assert "--runs RUNS" in page and "&quot;runs_dir&quot;: &quot;RUNS&quot;" in page


def test_an_old_lora_run_record_gets_a_portable_command(tmp_path: Path) -> None:
    """A run folder written before portable commands were recorded (its ``command`` is the
    machine's) still gets a command without machine paths in its report."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import lora_reproduction as lr
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    run = tmp_path / "run2"
    record = {
        "args": {"out": str(run)},
        "command": f"cd {tmp_path}/clone && PYTHONPATH={tmp_path}/clone/src OMP_NUM_THREADS=2 "
        f"nohup nice -n 19 {tmp_path}/venv/bin/python benchmarks/lora_reproduction.py "
        f"--out {run} --train-points 48 --data-root {tmp_path}/corpora",
    }
    got = lr.portable_command(record)
    assert got == (
        "PYTHONPATH=src OMP_NUM_THREADS=2 nohup nice -n 19 python benchmarks/lora_reproduction.py "
        "--out RUN_FOLDER --train-points 48 --data-root DATA_ROOT"
    )


def test_committed_lora_reports_hold_no_machine_path() -> None:
    """lora_reproduction, lora_ddp_check and lora_memory reports, Markdown and JSON."""
    for report in sorted(RESULTS.glob("lora_*.*")):
        text = report.read_text(encoding="utf-8")
        assert not MACHINE_PATH.search(text), (report.name, MACHINE_PATH.search(text))


def test_run_keys_do_not_depend_on_where_polylogue_is_installed(tmp_path: Path) -> None:
    """The shipped model's folder is part of the default predictor's description; the run key
    hashes it relative to the installation, so the same options in another checkout find the
    same run folder (``runs.install_independent``)."""
    import polylogue
    from polylogue.evaluation.runner import DatasetInfo, run_key
    from polylogue.models.base import load_predictor
    from polylogue.runs import install_independent

    package = str(Path(polylogue.__file__).resolve().parent)
    described = load_predictor("default").describe()
    assert package in json.dumps(described)  # the description names the shipped folder...
    portable = install_independent(described)
    assert package not in json.dumps(portable)  # ...the key's input does not
    assert portable["deployment"]["model"].startswith("polylogue/")

    # The same description seen from another checkout (the package moved) keys the same run.
    elsewhere = json.loads(json.dumps(described).replace(package, str(tmp_path / "polylogue")))
    (tmp_path / "polylogue").symlink_to(package, target_is_directory=True)
    dataset = DatasetInfo(name="friends", data_hash="abc", split="test")
    assert run_key(dataset, elsewhere) == run_key(dataset, described)
    # A path outside the installation stays as it is (a user's adapter folder is its own).
    assert install_independent({"adapter": "/data/runs/a"}) == {"adapter": "/data/runs/a"}
