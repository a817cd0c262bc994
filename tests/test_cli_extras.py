"""A command whose optional extra is missing says what to install (one line, exit 2).

The shared venv has every extra, so a core install is reproduced by hiding the extra's
modules (``sys.modules[name] = None`` makes ``import name`` fail as if it were absent).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from polylogue.extras import MODULE_EXTRAS, MissingExtra, extra_for_missing_module, require_extra

ROOT = Path(__file__).resolve().parents[1]


def _run_without(modules: list[str], args: list[str]) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        f"for m in {modules!r}: sys.modules[m] = None\n"
        "from polylogue.cli import main\n"
        f"sys.argv = ['polylogue', *{args!r}]\n"
        "main()\n"
    )
    env = {**os.environ, "COLUMNS": "300"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )


def test_annotate_serve_without_fastapi_names_the_extra(tmp_path: Path) -> None:
    proc = _run_without(["fastapi"], ["annotate", "serve", "--db", str(tmp_path / "s.sqlite")])
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'polylogue[annotate]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_train_without_torch_names_the_train_extra(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    bench.mkdir()
    proc = _run_without(
        ["torch"], ["train", "--model", "smollm2", "--data", str(bench), "-o", str(tmp_path / "r")]
    )
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'polylogue[train]'" in proc.stderr and "torch" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_serve_without_starlette_names_the_serve_extra() -> None:
    proc = _run_without(["starlette"], ["serve", "--port", "1"])
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'polylogue[serve]'" in proc.stderr


def test_require_extra_passes_when_installed_and_names_the_first_missing() -> None:
    require_extra("annotate", "json", "sqlite3")  # stdlib: always present
    with pytest.raises(MissingExtra) as info:
        require_extra("video", "json", "polylogue_no_such_module_xyz", what="polylogue tom media")
    assert info.value.extra == "video" and info.value.module == "polylogue_no_such_module_xyz"
    assert "pip install 'polylogue[video]'" in str(info.value)


def test_every_mapped_extra_exists_in_pyproject() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for extra in set(MODULE_EXTRAS.values()):
        assert f"\n{extra} = [" in text, extra
    err = extra_for_missing_module(
        ModuleNotFoundError("No module named 'torch.nn'", name="torch.nn")
    )
    assert err is not None and err.extra == "hf"
    assert extra_for_missing_module(ModuleNotFoundError("x", name="polylogue.nope")) is None
