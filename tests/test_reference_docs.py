"""The generated reference pages (docs/reference/) equal what the code gives now.

``python scripts/reference_docs.py`` writes them from the Typer commands, the serve app's wire
models and routes, and the shipped models' operating points; a changed option, wire field or
threshold fails here until the pages are regenerated. A few facts are checked against the code
too, so the generator cannot drift into writing an empty or wrong page that still "matches".
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "reference_docs", ROOT / "scripts" / "reference_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pages() -> dict[Path, str]:
    rendered: dict[Path, str] = _generator().render()
    return rendered


def test_committed_pages_equal_the_generated_ones(pages: dict[Path, str]) -> None:
    stale = [
        str(path)
        for path, text in pages.items()
        if not (ROOT / path).is_file() or (ROOT / path).read_text(encoding="utf-8") != text
    ]
    assert not stale, f"regenerate with `python scripts/reference_docs.py`: {stale}"


def test_every_page_is_one_generated_block_of_at_most_400_lines(pages: dict[Path, str]) -> None:
    gen = _generator()
    assert {p.name for p in pages} >= {"cli.md", "serve-api.md", "operating-points.md"}
    for path, text in pages.items():
        lines = text.splitlines()
        assert lines[0] == gen.BEGIN and lines[-1] == gen.END, path
        assert lines[0].endswith(":begin -->") and lines[-1].endswith(":end -->")
        assert len(lines) <= 400, f"{path}: {len(lines)} lines"


def test_cli_pages_hold_every_command_and_option(pages: dict[Path, str]) -> None:
    import typer

    from polylogue.cli import app

    cli = "\n".join(t for p, t in pages.items() if p.name.startswith("cli"))
    assert "`--as <str>`" in cli  # decide --as
    assert "## `polylogue decide`" in cli and "## `polylogue tom run`" in cli
    assert "## `polylogue annotate create`" in cli

    def walk(cmd: object, path: str) -> None:
        for name, sub in getattr(cmd, "commands", {}).items():
            assert f"## `{path} {name}`" in cli, f"{path} {name}"
            for param in sub.params:
                for flag in (*param.opts, *param.secondary_opts):
                    if flag.startswith("-"):
                        assert flag in cli, f"{path} {name} {flag}"
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "polylogue")


def test_serve_page_holds_every_event_type_and_route(pages: dict[Path, str]) -> None:
    from typing import get_args

    from polylogue.serve import app as wire
    from polylogue.serve.rooms import _EVENT_FIELDS

    text = pages[Path("docs/reference/serve-api.md")]
    union = get_args(get_args(wire.Event)[0])
    assert len(union) >= 9
    for model in union:
        kind = get_args(model.model_fields["type"].annotation)[0]
        assert f"| `{kind}` | [{model.__name__}]" in text
        for field in model.model_fields:
            assert f"| `{field}` |" in text, (model.__name__, field)
    for field in wire.SessionIn.model_fields:
        assert f"| `{field}` |" in text
    for kind in _EVENT_FIELDS:
        assert f"| `{kind}` |" in text
    assert "| `WS` | `/v1/sessions/{sid}/stream` |" in text
    answers = pages[Path("docs/reference/serve-api-answers.md")]
    assert '"duplicate": true' in answers  # a real answer of the app to a resend
    assert '"barge_in": {"action": ' in answers
    for page in (text, answers):
        assert "/work/" not in page and "/tmp/" not in page


def test_operating_points_page_gives_the_deployed_thresholds(pages: dict[Path, str]) -> None:
    from polylogue.engine.deployment import OPERATING_POINTS, Deployment
    from polylogue.training.engine_models.operating_points import RULES

    assert set(RULES) == set(OPERATING_POINTS)
    text = pages[Path("docs/reference/operating-points.md")]
    polite = Deployment.resolve(domain="meeting", operating_point="polite")
    floors = text.split("## Floor thresholds by domain")[1].split("\n## ")[0]
    row = next(line for line in floors.splitlines() if line.startswith("| `polite` |"))
    assert row.split("|")[2].strip() == f"{polite.thresholds.take_floor:g}"
    chat = Deployment.resolve(domain="chat", operating_point="matched")
    assert f"{chat.thresholds.take_floor:g}" in text
    assert "weights/chat/model.json" in text


def test_check_names_a_stale_page(tmp_path: Path, pages: dict[Path, str]) -> None:
    """``stale`` names the page that differs from the code (on a copy); ``--check`` passes on
    the committed pages."""
    gen = _generator()
    for path, text in pages.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    assert gen.stale(tmp_path, pages) == []
    target = tmp_path / "docs" / "reference" / "cli.md"
    target.write_text(target.read_text(encoding="utf-8").replace("--as", "--who"), encoding="utf-8")
    assert gen.stale(tmp_path, pages) == [Path("docs/reference/cli.md")]
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "reference_docs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert result.returncode == 0, result.stderr
