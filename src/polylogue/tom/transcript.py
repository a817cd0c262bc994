"""Transcript windows for the utterance modality, aligned from AMI word-level transcripts.

MeetingToM participant letters are AMI agent letters (``nxt_agent``): the word ``you`` of YOU
item ``ES2002a_you0002`` (speaker B, "around 15.0s") is B's word at window start + 15.0 s in
``ES2002a.B.words.xml``; ``tests/test_tom_transcript.py`` checks this over the benchmark.

A window keeps the words whose time midpoint lies in ``[max(0, start), end)`` (the source
window may start before the session: it is clamped). Consecutive words of one speaker are
joined into a segment until a pause longer than ``max_gap`` or another speaker's word
intervenes. Optional annotations from AMI (dialogue acts, roles, topic/phase) are attached here
and rendered only when a prompt variant asks for them.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from polylogue.conversation import Conversation
from polylogue.corpora.ami import (
    AmiTopic,
    AmiWord,
    read_ami,
    read_ami_topics,
    read_ami_words,
    words_to_text,
)
from polylogue.tom.records import SourceWindow

#: Hesitation and non-lexical backchannel tokens removed by the discourse-marker ablation
#: (lower-case AMI spellings). Lexical backchannels ("yeah", "okay") are content and stay.
DISCOURSE_MARKERS: frozenset[str] = frozenset(
    {
        "um",
        "uh",
        "uhm",
        "umm",
        "erm",
        "er",
        "emm",
        "em",
        "hmm",
        "hm",
        "mm",
        "mmm",
        "mm-hmm",
        "mm-mm",
        "uh-huh",
        "uh-uh",
        "um-hmm",
        "ah",
        "eh",
        "huh",
    }
)

#: The four meetings of an AMI scenario series and the design phase each one covers.
SCENARIO_PHASES: dict[str, str] = {
    "a": "project kick-off meeting (1 of 4)",
    "b": "functional design meeting (2 of 4)",
    "c": "conceptual design meeting (3 of 4)",
    "d": "detailed design meeting (4 of 4)",
}


@dataclass(frozen=True, slots=True)
class TranscriptSegment:
    """Consecutive words of one speaker inside a window; times are session seconds."""

    speaker: str
    start: float
    end: float
    text: str
    #: AMI dialogue-act types of the acts this segment's words belong to (in order).
    dialogue_acts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TranscriptWindow:
    session_id: str
    #: Requested window (may start below 0) and the clamped start actually used.
    requested: SourceWindow
    start: float
    end: float
    segments: tuple[TranscriptSegment, ...]
    #: Roles per participant letter (AMI ``meetings.xml``), e.g. {"A": "project manager"}.
    roles: dict[str, str] = field(default_factory=dict)
    #: AMI topic segments overlapping the window (labels, outermost first).
    topics: tuple[str, ...] = ()

    @property
    def phase(self) -> str | None:
        return (
            SCENARIO_PHASES.get(self.session_id[-1:])
            if self.session_id[:2] in ("ES", "IS", "TS")
            else None
        )


@dataclass(frozen=True, slots=True)
class TranscriptOptions:
    """How a window is cut and rendered; part of every prompt variant's recorded options."""

    max_gap: float = 1.5
    timestamps: bool = True
    #: Times relative to the clip start (as the YOU questions' "around Ts" are), else session time.
    relative_times: bool = True
    remove_discourse_markers: bool = False
    dialogue_acts: bool = False
    roles: bool = False
    empty_text: str = "(no speech in this window)"


#: Longest word duration searched back for (no AMI word lasts this long).
_MAX_WORD_S = 30.0


class AmiSessions:
    """Per-session cache of AMI words, dialogue acts and topics (explicit, not global)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._words: dict[str, list[AmiWord]] = {}
        self._starts: dict[str, list[float]] = {}
        self._convs: dict[str, Conversation] = {}
        self._topics: dict[str, list[AmiTopic]] = {}

    def words(self, session: str) -> list[AmiWord]:
        if session not in self._words:
            self._words[session] = read_ami_words(self.folder, session)
        return self._words[session]

    def words_between(self, session: str, start: float, end: float) -> list[AmiWord]:
        """Words whose time midpoint lies in ``[start, end)`` (binary search on start times)."""
        words = self.words(session)
        if session not in self._starts:
            # read_ami_words sorts by start; an untimed word takes the previous word's time
            starts, last = [], 0.0
            for w in words:
                last = w.start if w.start is not None else last
                starts.append(last)
            self._starts[session] = starts
        starts = self._starts[session]
        lo = bisect.bisect_left(starts, start - _MAX_WORD_S)
        hi = bisect.bisect_left(starts, end)
        return [w for w in words[lo:hi] if (m := _midpoint(w)) is not None and start <= m < end]

    def conversation(self, session: str) -> Conversation:
        if session not in self._convs:
            self._convs[session] = next(iter(read_ami(self.folder, meetings=[session])))
        return self._convs[session]

    def topics(self, session: str) -> list[AmiTopic]:
        if session not in self._topics:
            self._topics[session] = read_ami_topics(self.folder, session)
        return self._topics[session]


def remove_discourse_markers(words: Sequence[AmiWord]) -> list[AmiWord]:
    """Drop :data:`DISCOURSE_MARKERS` and the punctuation that directly follows each one."""
    kept: list[AmiWord] = []
    after_marker: set[str] = set()  # speakers whose last token was a removed marker
    for w in words:
        if w.is_punct and w.speaker in after_marker:
            continue
        if not w.is_punct and w.text.lower() in DISCOURSE_MARKERS:
            after_marker.add(w.speaker)
            continue
        after_marker.discard(w.speaker)
        kept.append(w)
    return kept


def _midpoint(w: AmiWord) -> float | None:
    if w.start is None:
        return None
    return (w.start + (w.end if w.end is not None else w.start)) / 2


def _segment(words: Sequence[AmiWord], max_gap: float) -> list[list[AmiWord]]:
    """Group each speaker's words into runs split at pauses > ``max_gap``; order runs by start.

    Grouping per speaker (rather than breaking at every interleaved word of another speaker)
    keeps overlapping talk readable: a backchannel inside a long turn does not cut the turn.
    """
    open_runs: dict[str, list[AmiWord]] = {}
    runs: list[list[AmiWord]] = []
    for w in words:
        run = open_runs.get(w.speaker)
        last = run[-1] if run else None
        last_end = None if last is None else (last.end if last.end is not None else last.start)
        if run is not None and (
            w.is_punct or w.start is None or last_end is None or w.start - last_end <= max_gap
        ):
            run.append(w)
        else:
            run = [w]
            open_runs[w.speaker] = run
            runs.append(run)
    return runs


def _run_start(run: Sequence[AmiWord]) -> float:
    return min((w.start for w in run if w.start is not None), default=float("inf"))


def _dialogue_acts_for(
    conv: Conversation | None, speaker: str, start: float, end: float
) -> tuple[str, ...]:
    if conv is None:
        return ()
    acts = [
        u.dialogue_act
        for u in conv.utterances
        if u.speaker == speaker
        and u.dialogue_act
        and u.start is not None
        and u.end is not None
        and u.start <= end
        and u.end >= start
    ]
    return tuple(dict.fromkeys(a for a in acts if a))


def transcript_window(
    sessions: AmiSessions,
    session_id: str,
    window: SourceWindow,
    options: TranscriptOptions = TranscriptOptions(),
) -> TranscriptWindow:
    """Cut one session's words to ``window`` and group them into speaker segments."""
    start, end = window.clamped_start, window.end
    words = sessions.words_between(session_id, start, end)
    if options.remove_discourse_markers:
        words = remove_discourse_markers(words)
    conv = sessions.conversation(session_id) if (options.dialogue_acts or options.roles) else None
    segments = []
    for group in sorted(_segment(words, options.max_gap), key=_run_start):
        text = words_to_text(group).strip()
        if not text or all(w.is_punct for w in group):
            continue
        g_start = min(w.start for w in group if w.start is not None)
        g_end = max((w.end if w.end is not None else w.start or g_start) for w in group)
        segments.append(
            TranscriptSegment(
                speaker=group[0].speaker,
                start=g_start,
                end=g_end,
                text=text,
                dialogue_acts=_dialogue_acts_for(conv, group[0].speaker, g_start, g_end)
                if options.dialogue_acts
                else (),
            )
        )
    roles = {p.id: p.role for p in conv.participants if p.role} if conv and options.roles else {}
    topics = tuple(
        t.label
        for t in sessions.topics(session_id)
        if t.start is not None and t.end is not None and t.start < end and t.end > start
    )
    return TranscriptWindow(
        session_id=session_id,
        requested=window,
        start=start,
        end=end,
        segments=tuple(segments),
        roles=roles,
        topics=topics,
    )


def render_transcript(
    window: TranscriptWindow, options: TranscriptOptions = TranscriptOptions()
) -> str:
    """One line per segment: ``[t0-t1] B (project manager) [inf]: text``."""
    if not window.segments:
        return options.empty_text
    base = window.start if options.relative_times else 0.0
    # Relative times are measured from the *requested* start so that they match the question's
    # "around Ts" even when the window was clamped at the session start.
    if options.relative_times:
        base = window.requested.start
    lines = []
    for seg in window.segments:
        who = seg.speaker
        if options.roles and seg.speaker in window.roles:
            who = f"{seg.speaker} ({window.roles[seg.speaker]})"
        tag = (
            f" [{', '.join(seg.dialogue_acts)}]"
            if options.dialogue_acts and seg.dialogue_acts
            else ""
        )
        stamp = (
            f"[{_secs(seg.start - base)}-{_secs(seg.end - base)}s] " if options.timestamps else ""
        )
        lines.append(f"{stamp}{who}{tag}: {seg.text}")
    return "\n".join(lines)


def _secs(x: float) -> str:
    v = round(x, 1)
    return f"{0.0 if v == 0 else v:.1f}"  # never print "-0.0"
