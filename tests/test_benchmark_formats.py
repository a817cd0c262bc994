"""Benchmark folders: Parquet by default, JSONL on request; every layout loads alike, and the
light loaders (point index, points by id) agree with the full one."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest

from polylogue.corpora import load_corpus
from polylogue.turntaking.dataset import (
    BuildOptions,
    build_benchmark,
    load_benchmark,
    save_benchmark,
)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    convs = list(itertools.islice(load_corpus("friends"), 30))
    build = build_benchmark(convs, BuildOptions())
    root = tmp_path_factory.mktemp("formats")
    both = save_benchmark(build, root / "both", formats=("parquet", "jsonl"))
    default = save_benchmark(build, root / "default")
    jsonl_only = root / "jsonl-only"  # an older folder without Parquet splits
    shutil.copytree(both, jsonl_only)
    for p in jsonl_only.glob("*.parquet"):
        if p.name != "conversations.parquet":
            p.unlink()
    return {"both": both, "default": default, "jsonl": jsonl_only}


def test_parquet_by_default_jsonl_on_request(folders: dict[str, Path]) -> None:
    assert not list(folders["default"].glob("t*.jsonl"))
    assert (folders["default"] / "test.parquet").is_file()
    assert (folders["both"] / "test.jsonl").is_file() and (
        folders["both"] / "test.parquet"
    ).is_file()
    hashes = {load_benchmark(f).data_hash for f in folders.values()}
    assert len(hashes) == 1  # the format does not change the data
    with pytest.raises(ValueError, match="formats"):
        save_benchmark(
            build_benchmark([], BuildOptions()), folders["both"].parent / "x", formats=("csv",)
        )


def test_every_layout_loads_the_same_points(folders: dict[str, Path]) -> None:
    loaded = {k: load_benchmark(f).points("test") for k, f in folders.items()}
    ref = loaded["both"]
    assert ref
    for points in loaded.values():
        assert [p.point_id for p in points] == [p.point_id for p in ref]
        assert [p.gold for p in points] == [p.gold for p in ref]
        assert [tuple(p.input.history) for p in points] == [tuple(p.input.history) for p in ref]
        assert [p.input.present for p in points] == [p.input.present for p in ref]


def test_point_index_and_points_by_id_agree_with_points(folders: dict[str, Path]) -> None:
    for folder in folders.values():
        full = load_benchmark(folder).points("test")
        light = load_benchmark(folder)
        index = light.point_index("test")
        assert [(k.point_id, k.category, k.outcome) for k in index] == [
            (p.point_id, p.gold.category.value, p.gold.floor_outcome.value) for p in full
        ]
        chosen = [full[0].point_id, full[-1].point_id]
        picked = light.points_by_id("test", reversed(chosen))
        assert [p.point_id for p in picked] == chosen  # split order
        assert tuple(picked[0].input.history) == tuple(full[0].input.history)
        assert picked[1].input.target == full[-1].input.target
        # only the conversations of the picked points were read
        assert set(light._visible) == {
            full[0].input.conversation_id,
            full[-1].input.conversation_id,
        }
