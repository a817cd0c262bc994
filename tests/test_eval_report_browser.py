"""``polylogue report``'s HTML page as a reader sees it: rendered by Debian's Chromium.

Three real runs on a Friends benchmark (the shipped model and the two constant baselines) go
through the real ``polylogue report`` command; the page is opened from disk in Chromium and
checked on the screenshot itself: the three-outcome section is an HTML table (not Markdown in
``<pre>``), the dot at the decision threshold sits where the table's numbers put it, the 0/1
baselines are markers rather than lines across the curves, and the legend lies outside both
plots. Set ``POLYLOGUE_SCREENSHOTS=1`` to copy the screenshot to ``docs/screenshots/``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from browsers import VIEWPORT, launch_chromium, require_chromium
from test_eval_support import friends_benchmark

from polylogue.evaluation.runner import load_points, run_evaluation
from polylogue.models import load_predictor

pytestmark = pytest.mark.slow

playwright_api = require_chromium()
DOCS_SHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"

# matplotlib's default colour cycle: one colour per run, in the order the runs are given.
TAB_BLUE, TAB_ORANGE, TAB_GREEN = (31, 119, 180), (255, 127, 14), (44, 160, 44)
MODELS = ("default", "baseline:always-silent", "baseline:always-speak")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("report")
    bench = friends_benchmark(tmp / "bench")
    points, info = load_points(bench, "test")
    folders = [
        run_evaluation(
            points, info, load_predictor(m), tmp / "runs", progress=False, n_boot=0
        ).folder
        for m in MODELS
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "polylogue.cli", "report", *map(str, folders), "-o", str(tmp / "r")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    metrics = [json.loads((f / "metrics.json").read_text(encoding="utf-8")) for f in folders]
    manifest = json.loads((folders[0] / "manifest.json").read_text(encoding="utf-8"))
    shots = tmp / "shots"
    shots.mkdir()
    with playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto((tmp / "r" / "report.html").resolve().as_uri())
        page.wait_for_load_state("load")
        outcome_head = page.locator("h2", has_text="Three outcomes")
        outcome_tables = page.locator("h2:has-text('Three outcomes') ~ table.outcomes")
        info_dom = {
            "pre": page.locator("pre").count(),
            "outcome_heading": outcome_head.count(),
            "outcome_tables": outcome_tables.count(),
            "outcome_header": outcome_tables.first.locator("th").all_inner_texts()
            if outcome_tables.count()
            else [],
            "outcome_box": outcome_tables.first.bounding_box() if outcome_tables.count() else None,
            "text": page.locator("body").inner_text(),
        }
        img = page.locator("img[alt^='Threshold curves']")
        img.scroll_into_view_if_needed()
        shot = shots / "report-threshold-curves.png"
        img.screenshot(path=str(shot))
        page.screenshot(path=str(shots / "report_page.png"), full_page=True)
        natural = page.evaluate(
            "() => { const i = document.querySelector(\"img[alt^='Threshold curves']\");"
            " return [i.naturalWidth, i.naturalHeight, i.clientWidth, i.clientHeight]; }"
        )
        browser.close()
    if os.environ.get("POLYLOGUE_SCREENSHOTS"):
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS_SHOTS / shot.name)
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")).astype(int)
    return {
        "dom": info_dom,
        "pixels": pixels,
        "natural": natural,
        "metrics": metrics,
        "threshold": float(manifest["model"]["description"]["threshold"]),
        "shot": shot,
    }


def _mask(pixels: np.ndarray, rgb: tuple[int, int, int], tol: int = 40) -> np.ndarray:
    return np.all(np.abs(pixels - np.array(rgb)) <= tol, axis=2)


def _axes_boxes(pixels: np.ndarray) -> list[tuple[int, int, int, int]]:
    """(left, top, right, bottom) pixel columns/rows of each plot's black frame, left to right."""
    dark = np.all(pixels < 90, axis=2)
    cols = np.flatnonzero(dark.sum(axis=0) > 0.5 * pixels.shape[0] * 0.6)
    # Frame columns come in pairs (left and right spine of each plot); merge adjacent columns.
    groups: list[list[int]] = []
    for c in cols:
        if groups and c - groups[-1][-1] <= 2:
            groups[-1].append(int(c))
        else:
            groups.append([int(c)])
    assert len(groups) == 4, f"expected two framed plots, found spine columns {groups}"
    boxes = []
    for left, right in ((groups[0], groups[1]), (groups[2], groups[3])):
        x0, x1 = int(np.mean(left)), int(np.mean(right))
        rows = np.flatnonzero(dark[:, x0 + 3 : x1 - 3].sum(axis=1) > 0.9 * (x1 - x0 - 6))
        assert len(rows) >= 2, "no top/bottom frame found"
        boxes.append((x0, int(rows.min()), x1, int(rows.max())))
    return boxes


def _blobs(mask: np.ndarray, size: int = 5) -> np.ndarray:
    """Pixels whose whole ``size``x``size`` neighbourhood is in ``mask``: filled markers, not
    lines (the curves are about 2 px wide, the dotted threshold line 1.5 px)."""
    h, w = mask.shape
    r = size // 2
    out = np.ones((h - 2 * r, w - 2 * r), dtype=bool)
    for dy in range(size):
        for dx in range(size):
            out &= mask[dy : h - 2 * r + dy, dx : w - 2 * r + dx]
    full = np.zeros_like(mask)
    full[r : h - r, r : w - r] = out
    return full


def _inside(box: tuple[int, int, int, int], mask: np.ndarray, grow: int = 0) -> np.ndarray:
    x0, y0, x1, y1 = box[0] - grow, box[1] - grow, box[2] + grow, box[3] + grow
    sub = np.zeros_like(mask)
    sub[y0 + 2 : y1 - 1, x0 + 2 : x1 - 1] = mask[y0 + 2 : y1 - 1, x0 + 2 : x1 - 1]
    return sub


def _to_pixel(
    box: tuple[int, int, int, int], x: float, y: float, xmax: float
) -> tuple[float, float]:
    x0, y0, x1, y1 = box
    return x0 + x / xmax * (x1 - x0), y1 - y / 100 * (y1 - y0)


def test_three_outcomes_is_an_html_table(report: dict[str, Any]) -> None:
    dom = report["dom"]
    assert dom["pre"] == 0 and dom["outcome_heading"] == 1
    assert dom["outcome_tables"] == len(MODELS)  # one confusion table per run
    assert dom["outcome_header"][:4] == ["Gold \\ predicted", "TAKE_FLOOR", "BACKCHANNEL", "SILENT"]
    assert dom["outcome_box"]["width"] > 300 and dom["outcome_box"]["height"] > 60
    assert "|---" not in dom["text"] and "###" not in dom["text"]


def test_threshold_dot_sits_at_the_tables_numbers(report: dict[str, Any]) -> None:
    px = report["pixels"]
    assert report["natural"][:2] == report["natural"][2:]  # shown 1:1, so pixels map directly
    left, right = _axes_boxes(px)
    m = report["metrics"][0]
    t = report["threshold"]
    dots = _blobs(_mask(px, TAB_BLUE))
    for box, (x, y, xmax) in (
        (left, (t, 100 * m["balanced_accuracy"], 1.0)),
        (right, (100 * m["false_interruption_rate"], 100 * m["missed_turn_rate"], 100.0)),
    ):
        found = np.argwhere(_inside(box, dots))
        assert len(found), f"no threshold dot in the plot at {box}"
        cy, cx = found.mean(axis=0)
        ex, ey = _to_pixel(box, x, y, xmax)
        # One pixel is about 0.3 points of balanced accuracy here.
        assert abs(cx - ex) <= 1.5 and abs(cy - ey) <= 1.5, (box, (cx, cy), (ex, ey))


def test_constant_baselines_are_markers_not_lines(report: dict[str, Any]) -> None:
    px = report["pixels"]
    left, right = _axes_boxes(px)
    for rgb, m in ((TAB_ORANGE, report["metrics"][1]), (TAB_GREEN, report["metrics"][2])):
        mask = _mask(px, rgb)
        assert _inside(left, mask).sum() == 0  # no line across the threshold plot
        in_right = _inside(right, mask, grow=8)  # a corner marker is drawn over the frame
        found = np.argwhere(_blobs(in_right))
        assert len(found) and in_right.sum() < 200  # one marker, no diagonal
        cy, cx = found.mean(axis=0)
        ex, ey = _to_pixel(
            right, 100 * m["false_interruption_rate"], 100 * m["missed_turn_rate"], 100.0
        )
        assert abs(cx - ex) <= 2.5 and abs(cy - ey) <= 2.5, (rgb, (cx, cy), (ex, ey))


def test_legend_lies_outside_both_plots(report: dict[str, Any]) -> None:
    px = report["pixels"]
    left, right = _axes_boxes(px)
    bottom = max(left[3], right[3])
    for rgb in (TAB_BLUE, TAB_ORANGE, TAB_GREEN):
        mask = _mask(px, rgb)
        below = mask[bottom + 30 :, :]
        assert below.sum() > 10, f"no legend entry in {rgb} below the plots"
    # Inside the plots, no legend frame: no long run of its light grey edge.
    grey = _mask(px, (204, 204, 204), tol=12)
    for box in (left, right):
        assert not (_inside(box, grey).sum(axis=1) > 60).any()
