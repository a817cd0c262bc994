"""The benchmark format number, what reading an older one means, the error of a bad folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from polylogue.errors import PolylogueInputError, note_input

#: 2: decision points at real pauses, three outcomes, SA, paper_category.
#: 3: Molweni grouped by stretches of overlapping dialogues, its official test file pinned to
#: test (a v2 Molweni build shares messages between train and test).
#: 4: benchmark v2.1 definitions: S3 (silent participant of the exchange) apart from
#: S1 bystanders, answers to a question are floor takes, one backchannel rule for every corpus,
#: non-people and departed characters are no targets, a name inside a question is no address,
#: AMI act times from words only; ``gold.in_exchange``.
#: 5: Friends reader and presence fixes: a character who takes leave in words is
#: absent until they speak again, directions without their opening bracket are notes, speaker
#: tags whose names were dropped are not speech, a line holding another speaker's tag is split.
#: 6: Friends voices by what their label is made of (a medium, a sounding device, a
#: broadcasting role, a "voice" head), not a word list; the shared corpora's splits are
#: published with the package (a change to the points never moves a group between splits).
FORMAT_VERSION = 6
#: Key of the format number stamped in each split Parquet file's metadata.
SPLIT_FORMAT_KEY = "polylogue.format_version"
#: The manifest's ``kind``: what marks a folder as a turn-taking benchmark.
MANIFEST_KIND = "polylogue.turntaking.benchmark"


class BenchmarkFormatError(PolylogueInputError):
    """A benchmark folder is missing files or holds malformed rows."""


#: What reading an older benchmark format as the current one changes (it is upgraded on load).
UPGRADES = {
    1: "outcomes are derived from the labels (no BACKCHANNEL), there is no SA category and "
    "points sit at every utterance boundary, not at real pauses: scores are not comparable "
    "with a current build",
    2: "Molweni is grouped as before (train and test share messages), and the v2.1 "
    "definitions (S3, answers as floor takes, one backchannel rule, targets) are not applied",
    3: "the benchmark v2 definitions: no S3 (silent participants of the exchange count as "
    "S1 bystanders), answers counted as backchannels, non-people as targets (v2.1 changed them)",
    4: "Friends as before the v2.1 reader fixes: characters who take leave in words stay "
    "targets, speaker tags and directions without their opening bracket stay in the words, and "
    "a line with another speaker's tag is not split",
    5: "Friends voices by a word list (four sound sources of the shared seasons, an "
    "announcement, a news anchor, a smoke detector and an oven, stay targets)",
}


def check_format_version(version: Any, manifest: Path) -> None:
    """Read an older benchmark format with a warning that says what the upgrade means; refuse
    a newer one (or a version that is not a number).

    The upgrade is what loading already does (``DecisionGold.floor_outcome`` derives a v1
    point's outcome from its label); the warning makes it visible instead of silent.
    """
    if version == FORMAT_VERSION:
        return
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BenchmarkFormatError(
            f"{manifest}: format_version {version!r} is not a benchmark format number"
        )
    if version > FORMAT_VERSION:
        raise BenchmarkFormatError(
            f"{manifest}: benchmark format {version} is newer than this polylogue reads "
            f"({FORMAT_VERSION}); upgrade polylogue"
        )
    note_input(
        "old benchmark format",
        manifest,
        "",
        f"benchmark format {version} upgraded to format {FORMAT_VERSION} on reading: "
        f"{UPGRADES.get(version, 'an older layout')}; rebuild it with `polylogue build` "
        "(same options) for a current one",
    )
