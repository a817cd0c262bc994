"""Everything that determines a build (recorded in the manifest), and the reader options a
build reads each shared corpus with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from polylogue.errors import PolylogueInputError
from polylogue.turntaking.points import (
    PointOptions,
)
from polylogue.turntaking.timeline import DEFAULT_GAP_S

Protocol = Literal["default", "paper"]


@dataclass(frozen=True)
class BuildOptions:
    """Everything that determines a build; recorded in the manifest."""

    points: PointOptions = field(default_factory=PointOptions)
    #: Merge consecutive same-speaker utterances into turns before making points.
    merge_turns: bool = False
    #: Remove exact duplicates of (context, current utterance, target, label).
    dedup: bool = True
    seed: int = 13
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    #: Stratified subsample sizes per split, e.g. {"train": 11000} (the paper's SPGI recipe).
    max_points: dict[str, int] = field(default_factory=dict)
    #: Last K context utterances written into the point files (0: context by reference only).
    context_turns: int = 0
    #: Keep only conversations with at least one annotated addressee (e.g. the 22 AMI
    #: meetings with addressee annotation, as in the paper's AMI set).
    require_addressee_annotation: bool = False
    #: "default": grouped, causal splits at natural class ratios. "paper": the authors'
    #: protocol (per-sample split stratified by their four-way category, 50/50 classes); it
    #: leaks context across splits and exists only to put numbers next to the paper's.
    protocol: Protocol = "default"
    #: Addressee-annotated groups (AMI series = teams) each of validation and test must hold.
    min_annotated_groups: int = 2


def reader_options(
    corpus: str,
    gap: float = DEFAULT_GAP_S,
    protocol: Protocol = "default",
    unit: str | None = None,
) -> dict[str, Any]:
    """Reader options a benchmark build uses for a shared corpus.

    A reader that can cut utterances several ways (AMI, :class:`~polylogue.corpora.ReaderUnits`)
    is read in its unit cut at the speaker's own silences of at least ``gap``, so every pause is
    a boundary and context is cut at word level; the paper protocol keeps whole annotated
    utterances; ``unit`` chooses another. Other readers take no options (``unit`` is ignored).
    """
    from polylogue.corpora import CORPORA

    units = CORPORA[corpus].units
    if units is None:
        return {}
    chosen = unit or (units.whole if protocol == "paper" else units.pauses)
    if chosen not in units.choices:
        raise PolylogueInputError(
            f"corpus {corpus} has no unit {chosen!r}; choose one of {', '.join(units.choices)}"
        )
    return units.options(chosen, gap)


def paper_protocol_options(seed: int = 42, **overrides: Any) -> BuildOptions:
    """Build options of the authors' protocol (reference notes D.4/A.5).

    Utterance-boundary decision points with the next-speaker label (no backchannel outcome),
    exact de-duplication, no-context points dropped, a per-sample 80/10/10 split stratified by
    their four-way category with seed 42, and 50/50 SPEAK/SILENT classes.
    """
    points = PointOptions(timing="utterance", backchannels=False)
    return BuildOptions(points=points, seed=seed, protocol="paper", **overrides)
