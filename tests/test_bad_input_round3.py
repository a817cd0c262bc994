"""Bad input, round three (issue 34, items 8-9): damaged Parquet pages, benchmark folders that
mix two builds, operating points on a tiny benchmark, LiveKit speech events with impossible
times, and framework identities holding control or bidi characters. Real benchmarks built
from Friends, the real CLI, the real LiveKit and Pipecat objects."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
from pathlib import Path

import pytest
from benches import friends_benchmark
from cli_run import located_error, run_polylogue

from polylogue.conversation import Participant
from polylogue.engine.model import model_dir_for

pytestmark = pytest.mark.slow


def _run(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    return run_polylogue(args, None, env={"COLUMNS": "400"})


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return friends_benchmark(tmp_path_factory.mktemp("b3") / "friends3", 3)


def _copy(bench: Path, tmp_path: Path, name: str = "b") -> Path:
    out = tmp_path / name
    shutil.copytree(bench, out)
    return out


def _damage_pages(path: Path, where: float) -> None:
    """Flip 16 bytes at ``where`` (a fraction) into every column chunk's pages."""
    import pyarrow.parquet as pq

    md = pq.ParquetFile(path).metadata
    data = bytearray(path.read_bytes())
    for rg in range(md.num_row_groups):
        for i in range(md.num_columns):
            c = md.row_group(rg).column(i)
            at = c.data_page_offset + int(c.total_compressed_size * where)
            for k in range(at, min(at + 16, c.data_page_offset + c.total_compressed_size)):
                data[k] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("file", ["test.parquet", "conversations.parquet"])
@pytest.mark.parametrize("where", [0.0, 0.5])
def test_a_damaged_page_is_one_error_naming_the_file(
    bench: Path, tmp_path: Path, file: str, where: float
) -> None:
    folder = _copy(bench, tmp_path)
    _damage_pages(folder / file, where)
    runs = tmp_path / "runs"
    for args in (
        ["eval", "-d", str(folder), "-m", "baseline:always-speak", "--out", str(runs)],
        ["inspect", str(folder), "-n", "1"],
    ):
        located_error(_run(args), str(folder / file), "Parquet")


def _stamp(split: Path, version: str | None) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(split)
    meta = {k: v for k, v in (table.schema.metadata or {}).items() if b"polylogue" not in k}
    if version is not None:
        meta[b"polylogue.format_version"] = version.encode()
    pq.write_table(table.replace_schema_metadata(meta), split)


def test_a_folder_mixing_two_builds_is_refused(bench: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    # A split stamped with another format than the manifest's.
    folder = _copy(bench, tmp_path, "stamped")
    _stamp(folder / "test.parquet", "4")
    for args in (
        ["eval", "-d", str(folder), "-m", "baseline:always-speak", "--out", str(runs)],
        ["inspect", str(folder), "-n", "1"],
    ):
        located_error(_run(args), str(folder / "test.parquet"), "format-4 split", "two builds")
    # An unstamped split (an older build) from a folder of another size: the counts differ.
    other = friends_benchmark(tmp_path / "friends4", 4)
    folder = _copy(bench, tmp_path, "counted")
    shutil.copy(other / "test.parquet", folder / "test.parquet")
    _stamp(folder / "test.parquet", None)
    located_error(
        _run(["inspect", str(folder), "-n", "1"]), "where the manifest counts", "two builds"
    )
    # The untouched folder still reads.
    assert _run(["inspect", str(bench), "-n", "1"]).returncode == 0


def test_operating_points_on_a_tiny_benchmark_is_an_error_that_writes_nothing(
    bench: Path, tmp_path: Path
) -> None:
    model = tmp_path / "model"
    shutil.copytree(model_dir_for("meeting"), model)
    before = (model / "model.json").read_bytes()
    args = ["operating-points", "-d", str(bench), "--model-dir", str(model), "--write"]
    # Three conversations leave the validation split empty: an error, nothing written.
    located_error(_run(args), str(bench), "the validation split has 0 SPEAK and 0 SILENT", "20")
    assert (model / "model.json").read_bytes() == before
    # Their test split (477 points) is enough: thresholds that are probabilities.
    done = _run([*args, "--split", "test"])
    assert done.returncode == 0, done.stderr.decode()
    chosen = json.loads((model / "model.json").read_text())["operating_points"]
    floors = [v["take_floor"] for point in chosen.values() for v in point.values()]
    assert floors and all(0.0 < t <= 1.0 for t in floors)


# ----------------------------------------------------------------------------- adapters


def _speech(kind: str, text: str, speaker: str | None, start: float, end: float):  # type: ignore[no-untyped-def]
    from livekit.agents import stt
    from livekit.agents.language import LanguageCode

    data = stt.SpeechData(LanguageCode("en"), text, start, end, 1.0, speaker_id=speaker)
    return stt.SpeechEvent(stt.SpeechEventType(kind), alternatives=[data])


def test_livekit_drops_and_logs_events_with_impossible_times(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("livekit.agents")
    from polylogue.adapters.livekit import MultiPartySession

    roster = [Participant("alice", "Alice"), Participant("bob", "Bob"), Participant("dave", "Dave")]
    mp = MultiPartySession("Dave", roster)
    bad = [
        ("final_transcript", float("inf"), float("inf")),
        ("final_transcript", 5.0, float("nan")),
        ("final_transcript", 8.0, 3.0),  # reversed
        ("final_transcript", -4.0, 2.0),
        ("interim_transcript", 1.0, float("inf")),
    ]

    async def run() -> list:
        out = [await mp.on_speech_event(_speech("final_transcript", "Morning all.", "alice", 1, 2))]
        for kind, start, end in bad:
            out.append(
                await mp.on_speech_event(_speech(kind, "Dave, you there?", "bob", start, end))
            )
        out.append(
            await mp.on_speech_event(_speech("final_transcript", "Dave, ready?", "bob", 3, 4))
        )
        return out

    with caplog.at_level(logging.WARNING, logger="polylogue.adapters"):
        first, *dropped, last = asyncio.run(run())
    assert first is not None and dropped == [None] * len(bad)
    assert last is not None and last.speaker == "bob" and last.action is not None
    assert mp.live.clock == 4.0  # the dropped events never moved the clock
    assert [h.text for h in mp.room.recent] == ["Morning all.", "Dave, ready?"]
    logged = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(logged) == len(bad), logged


@pytest.mark.parametrize("adapter", ["livekit", "pipecat"])
def test_identities_with_control_or_bidi_characters_are_cleaned(adapter: str) -> None:
    if adapter == "livekit":
        pytest.importorskip("livekit.agents")
        from polylogue.adapters.livekit import MultiPartySession

        gate = MultiPartySession("Dave", [Participant("dave", "Dave")])
        join = gate.room.join
    else:
        pytest.importorskip("pipecat")
        from polylogue.adapters.pipecat import PolylogueGate

        gate = PolylogueGate("Dave", [Participant("dave", "Dave")])
        join = gate.participant_joined
    join("alice\u202e", "Alice\nDave: yes")  # a bidi override; a newline forging a line
    join("b\x00ob", "Bob\u2066")
    join("\u202e\u202c", None)  # nothing left once cleaned: ignored
    people = {p: gate.live.engine.participants[p].name for p in gate.live.present}
    assert people == {"dave": "Dave", "alice": "Alice Dave: yes", "b ob": "Bob"}
    said = " ".join(gate.room.warnings)
    assert "read as 'alice'" in said and "blank once cleaned" in said
    heard = gate.room.final("alice\u202e", "Dave, can you check the logs?", 1.0, 2.0)
    assert heard is not None and heard[0].speaker == "alice"
    assert json.dumps(people).count("\\n") == 0
