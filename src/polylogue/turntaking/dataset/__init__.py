"""Build, save and load turn-taking benchmark folders.

A benchmark folder holds::

    manifest.json          options, inputs and their hashes, versions, counts, data_hash
    conversations.parquet  the conversations points refer to (full annotations, for audit)
    train.parquet          decision points of each split (.jsonl too on request); "input" and
    validation.*  test.*   "gold" are separate columns, so nothing label-bearing sits among
                           the model inputs
    stats.md, stats.csv    Table-1 counts per corpus and split: our categories (I1, I2, S1,
                           S2, SA), the authors' four-way mapping, the 8-way scheme, outcomes

Points store their context *by reference* (conversation id + utterance index) because full
contexts repeated per point would be quadratic in meeting length; :class:`Benchmark` rebuilds
them as cheap views. ``BuildOptions.context_turns`` can also materialise the last K turns
into the files for users of other tools (e.g. Hugging Face ``datasets``).

One module per job: ``options`` (what determines a build, the reader options it asks for),
``make`` (points from conversations), ``assign`` (splits), ``tables`` (counts, a readable
point), ``provenance`` (input hashes and the manifest), ``save``, ``load``, ``versions``
(the format number and upgrades of older folders) and ``reuse`` (a cached build).
"""

from polylogue.turntaking.dataset.load import (
    Benchmark,
    PointKey,
    load_benchmark,
    load_split_points,
)
from polylogue.turntaking.dataset.make import (
    ANNOTATED_GROUP_MIN_SHARE,
    FIXED_SPLIT_KEY,
    BenchmarkBuild,
    build_benchmark,
)
from polylogue.turntaking.dataset.options import (
    BuildOptions,
    Protocol,
    paper_protocol_options,
    reader_options,
)
from polylogue.turntaking.dataset.provenance import (
    benchmark_manifest,
    corpus_input,
    hash_tree,
    transcript_input,
)
from polylogue.turntaking.dataset.reuse import is_current_build, load_or_build
from polylogue.turntaking.dataset.save import save_benchmark
from polylogue.turntaking.dataset.tables import (
    FINE_CATEGORIES,
    acknowledgement,
    fine_table_markdown,
    outcome_table,
    render_point,
    stats_markdown,
    table1,
)
from polylogue.turntaking.dataset.versions import (
    FORMAT_VERSION,
    BenchmarkFormatError,
    check_format_version,
)

__all__ = [
    "ANNOTATED_GROUP_MIN_SHARE",
    "FINE_CATEGORIES",
    "FIXED_SPLIT_KEY",
    "FORMAT_VERSION",
    "Benchmark",
    "BenchmarkBuild",
    "BenchmarkFormatError",
    "BuildOptions",
    "PointKey",
    "Protocol",
    "acknowledgement",
    "benchmark_manifest",
    "build_benchmark",
    "check_format_version",
    "corpus_input",
    "fine_table_markdown",
    "hash_tree",
    "is_current_build",
    "load_benchmark",
    "load_or_build",
    "load_split_points",
    "outcome_table",
    "paper_protocol_options",
    "reader_options",
    "render_point",
    "save_benchmark",
    "stats_markdown",
    "table1",
    "transcript_input",
]
