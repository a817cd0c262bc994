"""One registry style (corpora, model backends, CLI command modules), the reader options a
corpus declares, and one domain vocabulary with old names upgraded on reading (issue 26)."""

from __future__ import annotations

import itertools
import json
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from polylogue.cli import COMMAND_MODULES, app
from polylogue.conversation import DOMAIN_NAMES, DomainError, check_domain_name
from polylogue.corpora import CORPORA, load_corpus
from polylogue.corpora.transcripts import read_transcript
from polylogue.engine.model import DOMAINS
from polylogue.errors import InputWarning, PolylogueInputError
from polylogue.models.base import BACKENDS, ModelSpecError, load_predictor
from polylogue.registry import UnknownName
from polylogue.turntaking.dataset import (
    build_benchmark,
    load_benchmark,
    reader_options,
    save_benchmark,
)


def test_registries_name_their_entries_and_refuse_unknown_names() -> None:
    assert CORPORA.names() == ("ami", "friends", "earnings21", "icsi", "irc", "molweni")
    assert BACKENDS.names() == ("default", "baseline", "hf", "openai")
    assert "build" in COMMAND_MODULES and "eval" in COMMAND_MODULES
    with pytest.raises(UnknownName, match="unknown corpus 'nope'; known: ami, earnings21"):
        load_corpus("nope")
    # Still a KeyError for callers written before the registry.
    with pytest.raises(KeyError):
        CORPORA["nope"]


def test_the_reader_declares_its_units_and_the_build_reads_them() -> None:
    assert reader_options("ami") == {"unit": "ipu", "ipu_gap": 0.2}
    assert reader_options("ami", gap=0.5) == {"unit": "ipu", "ipu_gap": 0.5}
    assert reader_options("ami", protocol="paper") == {"unit": "da"}
    assert reader_options("ami", unit="turn") == {"unit": "turn"}
    assert reader_options("friends", unit="turn") == {}  # takes no unit option
    with pytest.raises(PolylogueInputError, match="no unit 'word'; choose one of ipu, da, turn"):
        reader_options("ami", unit="word")
    # The options are ones the real reader takes.
    conv = next(iter(load_corpus("ami", **reader_options("ami", unit="turn"))))
    assert conv.corpus == "ami" and len(conv.utterances) > 100


def test_backends_declare_their_options_and_the_cli_reads_them(tmp_path: Path) -> None:
    random = BACKENDS["baseline"]
    assert random.takes("seed") and not random.takes("prompt")
    assert BACKENDS["hf"].extra == "hf" and BACKENDS["hf"].takes("adapter")
    with pytest.raises(ModelSpecError, match="unknown option"):
        load_predictor("default", prompt=None)
    assert load_predictor("baseline:random", seed=3).describe()["seed"] == 3
    runner = CliRunner()
    data = tmp_path / "bench"
    convs = itertools.islice(load_corpus("ami", **reader_options("ami")), 1)
    save_benchmark(build_benchmark(convs), data)
    cases = [
        (["--model", "baseline:random", "--adapter", str(tmp_path)], "--adapter applies to hf"),
        (["--model", "baseline:random", "--domain", "tv"], "--domain applies to default"),
        (["--model", "baseline:random", "-O", "bogus=1"], "known: delay_s, p_speak, seed"),
    ]
    for args, message in cases:
        r = runner.invoke(app, ["eval", "--data", str(data), "--out", str(tmp_path), *args])
        assert r.exit_code == 2, r.output
        assert message in " ".join(r.output.split()), r.output


def test_one_domain_vocabulary() -> None:
    assert tuple(DOMAINS) == DOMAIN_NAMES
    conv = next(iter(load_corpus("earnings21")))
    assert conv.domain == "earnings"
    for name in DOMAIN_NAMES:
        check_domain_name(name)
    with pytest.raises(DomainError, match="unknown domain 'earnings_call'"):
        check_domain_name("earnings_call")


def _set_column(path: Path, column: str, value: str) -> None:
    table = pq.read_table(path)
    i = table.schema.get_field_index(column)
    table = table.set_column(i, column, pa.array([value] * len(table), pa.string()))
    pq.write_table(table, path)


def test_a_benchmark_with_an_old_domain_name_loads_with_one_warning(tmp_path: Path) -> None:
    folder = tmp_path / "earnings"
    convs = itertools.islice(load_corpus("earnings21"), 3)
    build = save_benchmark(build_benchmark(convs), folder)
    # What an older version wrote: the reader's old 'earnings_call' in both kinds of file.
    for name in ("conversations", "train", "validation", "test"):
        _set_column(build / f"{name}.parquet", "domain", "earnings_call")
    bench = load_benchmark(folder)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        points = [p for split in bench.splits for p in bench.points(split)]
        convs_back = bench.conversations
    assert points and {p.input.domain for p in points} == {"earnings"}
    assert {c.domain for c in convs_back.values()} == {"earnings"}
    notes = [str(w.message) for w in seen if issubclass(w.category, InputWarning)]
    assert len(notes) == 1 and "'earnings_call'" in notes[0] and "'earnings'" in notes[0], notes


def test_a_transcript_header_domain_old_new_and_unknown(tmp_path: Path) -> None:
    lines = [{"speaker": "Ann", "text": "Good morning."}, {"speaker": "Bo", "text": "Hi Ann."}]

    def transcript(domain: str) -> Path:
        path = tmp_path / f"{domain}.jsonl"
        people = [{"id": "Ann"}, {"id": "Bo"}]
        header = {"participants": people, "id": "call", "domain": domain}
        path.write_text("\n".join(json.dumps(x) for x in [header, *lines]) + "\n")
        return path

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert read_transcript(transcript("earnings_call")).domain == "earnings"
    assert sum(issubclass(w.category, InputWarning) for w in seen) == 1
    assert read_transcript(transcript("tv")).domain == "tv"
    with pytest.raises(DomainError, match=r"podcast\.jsonl: unknown domain 'podcast'"):
        read_transcript(transcript("podcast"))
    r = CliRunner().invoke(
        app, ["build", "--out", str(tmp_path / "b"), "-t", str(transcript("podcast"))]
    )
    assert r.exit_code == 2 and "unknown domain 'podcast'" in r.output


def test_meetingtom_kinds_share_the_registry_style_and_declare_their_options() -> None:
    from polylogue.tom.generators import GENERATORS, GeneratorSpecError, load_generator

    assert GENERATORS.names() == (
        "chance",
        "majority",
        "majority-cv",
        "heuristic",
        "heuristic-fixed",
        "leak",
        "hf",
        "openai",
    )
    assert GENERATORS["hf"].extra == "hf" and GENERATORS["hf"].takes("threads")
    assert GENERATORS["openai"].takes("video_mode") and not GENERATORS["openai"].takes("threads")
    assert load_generator("chance:7").describe() == {"kind": "chance", "seed": 7}
    assert load_generator("heuristic-fixed", speak_s=2.0).speak_s == 2.0  # type: ignore[attr-defined]
    refusals = [
        (("chance:seven",), {}, "whole number"),
        (("nope",), {}, "unknown model spec 'nope'; known: chance[:SEED], majority"),
        (("chance",), {"threads": 1}, "unknown option(s) for --model chance: threads"),
        (("majority",), {}, "majority labels of the evaluated records"),
        (("heuristic",), {}, "reads the AMI transcripts"),
        (("majority-cv",), {}, "needs the benchmark's records"),
        (("leak:x",), {}, "leak takes no ':' part"),
        (("openai",), {}, "openai needs a ':' part (openai:M@URL)"),
    ]
    for args, options, message in refusals:
        with pytest.raises(GeneratorSpecError) as err:
            load_generator(*args, **options)
        assert message in str(err.value)
