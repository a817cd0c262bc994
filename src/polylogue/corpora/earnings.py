"""Earnings-21 reader: 44 real earnings calls as speaker turns with RTTM timings.

Layout (``folder`` = ``.../earnings21``)::

    transcripts/nlp_references/{call}.nlp   token|speaker|ts|endTs|punctuation|case|tags|wer_tags
    rttms/{call}.rttm                       SPEAKER {call} 1 start duration <NA> <NA> speaker ...
    speaker-metadata.csv                    file_id,speaker_id,speaker_name
    earnings21-file-metadata.csv            company, sector, quarter, ...

One call is one :class:`Conversation`; one utterance is one speaker turn (a maximal run of
tokens by the same speaker in the ``.nlp`` reference).

Text
    Tokens are kept as written (they already carry their casing; the ``case`` column disagrees
    with the token in ~800 places, e.g. ``GILTI`` tagged lower-case) and the ``punctuation``
    column is re-attached. Transcriber tags such as ``<inaudible>`` or ``<crosstalk>`` stay;
    only ``<silence>`` and the bare ``*`` placeholder are dropped as they carry no speech.

Timings
    The ``.nlp`` references have no times, so turns are aligned to the RTTM speaker runs
    (consecutive RTTM segments of the same speaker). The RTTMs do not always agree with the
    references: some stretches of a call are missing from one side and in a few calls the
    RTTM renumbers speakers. Alignment is therefore a monotone max-weight matching (dynamic
    programming, like an LCS) where a turn may only be matched to an RTTM run of the *same
    speaker id* whose speech time is plausible for the turn's word count; among equally long
    matchings the one with the best duration fit wins. Turns left unmatched get
    ``start``/``end`` = ``None`` rather than an invented time. See
    ``docs/corpora-friends-earnings-user.md`` for measured coverage.

Roles
    ``operator`` when the metadata name says so or the speaker uses call-operator phrases
    ("next question comes from", "press star one", ...); ``analyst`` for a speaker the operator
    introduces by name ("... comes from Jeff Sprague with Vertical Research") when the
    introduced name matches that speaker's metadata name. Otherwise ``None``.
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from polylogue.conversation import (
    Conversation,
    ConversationFormatError,
    Participant,
    Utterance,
)
from polylogue.corpora._text import csv_records, read_text, split_lines

CORPUS = "earnings21"
DOMAIN = "earnings"

_NLP_COLUMNS = ("token", "speaker", "ts", "endTs", "punctuation", "case", "tags", "wer_tags")
#: Columns a Rev ``.nlp`` file must have; the others of _NLP_COLUMNS are optional.
_NLP_REQUIRED = ("token", "speaker")
_DROPPED_TOKENS = frozenset({"<silence>", "*"})

# Speaking-rate band (words per second of RTTM speech time) inside which a turn may be matched
# to an RTTM run. Measured on the 26 calls whose turn and RTTM-run sequences agree exactly:
# turns of >= 20 words span 1.3-4.7 words/s (1st-99th percentile), median 3.3. The slack
# absorbs RTTM boundary jitter on very short turns ("Thanks." in 0.05 s).
_RATE_MIN = 0.6
_RATE_MAX = 8.0
_RATE_TYPICAL = 3.3
_SLACK_S = 1.5

_GENERIC_NAME = re.compile(r"^speaker\s*\d+$", re.IGNORECASE)
_OPERATOR_NAME = re.compile(r"\b(operator|moderator|conference call operator)\b", re.IGNORECASE)
# Phrases call operators use. Reference transcripts sometimes merge an executive's turn with
# the operator's, so one hit is not proof: the operator is the speaker with the most hits.
_OPERATOR_CUES = re.compile(
    r"(next question (?:is |will )?comes? from|first question (?:is |will )?comes? from"
    r"|question (?:is |will )?comes? from the line of|your line is (?:now )?open"
    r"|press(?:ing)? star(?:,)? (?:one|1|then)|press \*1|star one on your (?:telephone|phone)"
    r"|this concludes (?:today's|our|the) (?:conference|call|question)"
    r"|(?:we|I) will now begin the question[- ]and[- ]answer"
    r"|(?:be|am) your (?:operator|conference (?:operator|facilitator|coordinator)|moderator)"
    r"|participants are (?:now )?in (?:a )?listen[- ]only mode)",
    re.IGNORECASE,
)
# "... question comes from Jeff Sprague with Vertical Research" -> "Jeff Sprague"
_INTRODUCTION = re.compile(
    r"question (?:is |will )?comes? from (?:the line of )?"
    r"(?P<name>[A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,3}?)"
    r"(?=,| with | from | of | at | over |\.|$)"
)


@dataclass(frozen=True, slots=True)
class _Token:
    text: str
    speaker: str


@dataclass(frozen=True, slots=True)
class _Turn:
    speaker: str
    text: str
    words: int


@dataclass(frozen=True, slots=True)
class SpeakerRun:
    """Consecutive RTTM segments of one speaker: span and summed speech time."""

    speaker: str
    start: float
    end: float
    speech: float


@dataclass(frozen=True, slots=True)
class AlignmentStats:
    """How many turns of a call got RTTM timings."""

    turns: int
    rttm_runs: int
    aligned: int


def read_earnings21(
    folder: str | Path, calls: Iterable[str] | None = None
) -> Iterator[Conversation]:
    """Yield the Earnings-21 calls (all, or the given file ids) in file-id order."""
    root = Path(folder)
    nlp_dir = root / "transcripts" / "nlp_references"
    if not nlp_dir.is_dir():
        raise FileNotFoundError(f"{nlp_dir} does not exist (expected an Earnings-21 folder)")
    wanted = None if calls is None else {str(c) for c in calls}
    available = sorted(p.stem for p in nlp_dir.glob("*.nlp"))
    if wanted is not None:
        missing = wanted - set(available)
        if missing:
            raise KeyError(f"unknown Earnings-21 call(s): {', '.join(sorted(missing))}")
    names = read_speaker_names(root / "speaker-metadata.csv")
    file_meta = _read_file_metadata(root / "earnings21-file-metadata.csv")
    for call_id in available:
        if wanted is not None and call_id not in wanted:
            continue
        yield read_call(
            nlp_dir / f"{call_id}.nlp",
            root / "rttms" / f"{call_id}.rttm",
            names=names.get(call_id, {}),
            metadata=file_meta.get(call_id, {}),
        )


def read_call(
    nlp_path: Path,
    rttm_path: Path | None,
    names: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
) -> Conversation:
    """One call: turns from the ``.nlp`` reference, timings from the RTTM when it aligns."""
    call_id = nlp_path.stem
    turns = _turns(read_nlp_tokens(nlp_path))
    if not turns:
        raise ConversationFormatError(nlp_path, "", "no tokens")
    runs = read_rttm_runs(rttm_path) if rttm_path is not None and rttm_path.exists() else []
    matches = align_turns_to_runs([(t.speaker, t.words) for t in turns], runs)
    utterances = []
    for i, turn in enumerate(turns):
        j = matches.get(i)
        utterances.append(
            Utterance(
                speaker=turn.speaker,
                text=turn.text,
                start=None if j is None else round(runs[j].start, 3),
                end=None if j is None else round(runs[j].end, 3),
                id=f"{call_id}_t{i:04d}",
            )
        )
    participants = _participants(turns, names or {})
    meta: dict[str, object] = {
        "unit": "turn",
        "timing": "rttm_aligned",
        "aligned_turns": len(matches),
        "rttm_runs": len(runs),
    }
    meta.update({k: v for k, v in (metadata or {}).items() if k != "file_id"})
    return Conversation(
        id=f"earnings21_{call_id}",
        corpus=CORPUS,
        utterances=tuple(utterances),
        participants=participants,
        domain=DOMAIN,
        group=call_id,
        roster_known=False,
        source=str(nlp_path),
        metadata=meta,
    )


# ----------------------------------------------------------------------------- parsing


def read_nlp_tokens(path: Path) -> list[_Token]:
    """Tokens of one Rev ``.nlp`` reference with punctuation re-attached.

    Columns are found by name: ``token`` and ``speaker`` are required; ``punctuation`` and
    Earnings-22's ``prepunctuation`` are used when present; any other column (``ts``, ``case``,
    ``tags``, ``oldTs``, ``ali_comment``...) is allowed and ignored.
    """
    tokens: list[_Token] = []
    records = csv_records(path, read_text(path), delimiter="|", quoting=csv.QUOTE_NONE)
    header = next(records, (1, None))[1]
    if header is None:
        raise ConversationFormatError(path, "line 1", "empty file: no header row")
    columns = {name.strip(): i for i, name in enumerate(header)}
    missing = [c for c in _NLP_REQUIRED if c not in columns]
    if missing:
        raise ConversationFormatError(
            path,
            "line 1",
            f"header {'|'.join(header)!r} lacks the required column(s) {', '.join(missing)} "
            f"(a Rev .nlp file needs {'|'.join(_NLP_REQUIRED)})",
        )
    i_tok, i_spk = columns["token"], columns["speaker"]
    i_punct, i_pre = columns.get("punctuation"), columns.get("prepunctuation")
    for lineno, row in records:
        # Exactly the header's cells: a '|' inside a token would shift the speaker column.
        if len(row) != len(header):
            raise ConversationFormatError(
                path, f"line {lineno}", f"expected {len(header)} columns, got {len(row)}"
            )
        word, speaker = row[i_tok], row[i_spk].strip()
        if not speaker:
            raise ConversationFormatError(path, f"line {lineno}", "empty speaker")
        if word in _DROPPED_TOKENS:
            # The speaker column still counts: a turn made only of <silence> is a turn.
            tokens.append(_Token("", speaker))
            continue
        pre = row[i_pre] if i_pre is not None else ""
        punct = row[i_punct] if i_punct is not None else ""
        tokens.append(_Token(pre + word + punct, speaker))
    return tokens


def _turns(tokens: Sequence[_Token]) -> list[_Turn]:
    grouped: list[tuple[str, list[str]]] = []
    for tok in tokens:
        if not grouped or grouped[-1][0] != tok.speaker:
            grouped.append((tok.speaker, []))
        if tok.text:
            grouped[-1][1].append(tok.text)
    return [_Turn(spk, " ".join(words), len(words)) for spk, words in grouped]


#: RTTM row types (NIST RT-09) other than SPEAKER: read and skipped.
_RTTM_OTHER_TYPES = frozenset(
    {
        "SPKR-INFO", "SEGMENT", "NOSCORE", "NO_RT_METADATA", "LEXEME", "NON-LEX",
        "NON-SPEECH", "FILLER", "EDIT", "IP", "SU", "CB", "A/P", "NOSCORESPKR",
    }
)  # fmt: skip


def read_rttm_runs(path: Path) -> list[SpeakerRun]:
    """RTTM segments sorted by start, merged into runs of the same speaker."""
    segments: list[tuple[float, float, str]] = []
    for lineno, line in enumerate(split_lines(read_text(path)), 1):
        parts = line.split()
        if not parts or parts[0].startswith(";;"):  # blank or an RTTM comment
            continue
        kind = parts[0].upper()
        if kind in _RTTM_OTHER_TYPES:
            continue  # valid RTTM rows that carry no speech turn
        if kind != "SPEAKER":
            raise ConversationFormatError(
                path,
                f"line {lineno}",
                f"unknown RTTM row type {parts[0]!r} (expected SPEAKER or another RTTM type); "
                "skipping it would lose its speech",
            )
        try:
            start, dur, speaker = float(parts[3]), float(parts[4]), parts[7]
        except (IndexError, ValueError) as exc:
            raise ConversationFormatError(path, f"line {lineno}", f"bad RTTM row: {exc}") from exc
        if not (math.isfinite(start) and math.isfinite(dur)) or start < 0 or dur < 0:
            raise ConversationFormatError(
                path,
                f"line {lineno}",
                f"start {parts[3]!r} and duration {parts[4]!r} must be finite times >= 0",
            )
        segments.append((start, start + dur, speaker))
    segments.sort()
    runs: list[SpeakerRun] = []
    for start, end, speaker in segments:
        if runs and runs[-1].speaker == speaker:
            last = runs[-1]
            runs[-1] = SpeakerRun(
                speaker, last.start, max(last.end, end), last.speech + end - start
            )
        else:
            runs.append(SpeakerRun(speaker, start, end, end - start))
    return runs


def read_speaker_names(path: Path) -> dict[str, dict[str, str]]:
    """``{file_id: {speaker_id: name}}`` from ``speaker-metadata.csv``."""
    out: dict[str, dict[str, str]] = {}
    if not path.exists():
        return out
    for row in _metadata_rows(path, ("file_id", "speaker_id", "speaker_name")):
        out.setdefault(row["file_id"].strip(), {})[row["speaker_id"].strip()] = row[
            "speaker_name"
        ].strip()
    return out


def _read_file_metadata(path: Path) -> dict[str, dict[str, str]]:
    if not path.exists():
        return {}
    return {row["file_id"]: row for row in _metadata_rows(path, ("file_id",))}


def _metadata_rows(path: Path, required: Sequence[str]) -> Iterator[dict[str, str]]:
    """Rows of a metadata CSV as dicts; missing columns and ragged rows are located errors."""
    records = csv_records(path, read_text(path))
    header = [h.strip() for h in next(records, (1, []))[1]]
    missing = [c for c in required if c not in header]
    if missing:
        raise ConversationFormatError(path, "line 1", f"missing columns {missing}")
    for lineno, cells in records:
        if len(cells) != len(header):
            raise ConversationFormatError(
                path, f"line {lineno}", f"expected {len(header)} cells, got {len(cells)}"
            )
        yield dict(zip(header, cells, strict=True))


# ----------------------------------------------------------------------------- alignment


def plausible_duration(words: int, speech_s: float) -> bool:
    """Could ``words`` words have been spoken in ``speech_s`` seconds of RTTM speech?"""
    return words <= _RATE_MAX * (speech_s + _SLACK_S) and words >= _RATE_MIN * (speech_s - _SLACK_S)


def _fit(words: int, speech_s: float) -> float:
    """1.0 for a typical speaking rate, falling towards 0 as the rate departs from it."""
    expected = max(words, 1) / _RATE_TYPICAL
    return math.exp(-abs(math.log((speech_s + 0.5) / (expected + 0.5))))


def align_turns_to_runs(
    turns: Sequence[tuple[str, int]], runs: Sequence[SpeakerRun]
) -> dict[int, int]:
    """Monotone matching of turns ``(speaker, n_words)`` to RTTM runs; returns turn -> run.

    Maximises the number of matched pairs (same speaker id and plausible duration), then the
    summed duration fit, so an alternating A/B/A/B stretch is not matched one run off.
    Unmatched turns are simply absent from the result.

    Both sides are in time order, so a good matching stays near the diagonal ``j ~ i * m / n``:
    the dynamic programme only fills a band of half-width ``k`` runs around it (time and memory
    ``O((n + m) * k)``, one vectorised pass per turn). The band starts at :data:`_BAND_START`
    and doubles until the result is provably the unrestricted optimum (no matching that leaves
    the band can have as many pairs) or the band reaches :data:`_BAND_MAX` runs, where the best
    matching inside it is kept. Every Earnings-21 call is certified at the first width.
    """
    n, m = len(turns), len(runs)
    if n == 0 or m == 0:
        return {}
    half = _BAND_START
    while True:
        matches = _banded_alignment(turns, runs, half)
        wide_enough = half >= max(n, m) or len(matches) > _best_outside_band(n, m, half)
        if wide_enough or half >= _BAND_MAX:
            return matches
        half *= 2


#: Half-widths (in runs) of the alignment band: first try, and the cap that keeps it linear.
_BAND_START = 256
_BAND_MAX = 1024


def _band(i: int, n: int, m: int, half: int) -> tuple[int, int]:
    """Runs ``lo..hi`` (inclusive) that turn ``i`` may be compared with."""
    centre = i * m / n
    return max(0, math.floor(centre - half)), min(m - 1, math.ceil(centre + half))


def _best_outside_band(n: int, m: int, half: int) -> int:
    """Most pairs any matching through a cell outside the band could have.

    Through cell ``(i, j)`` at most ``min(i, j) + min(n - i, m - j)`` pairs can match; that
    bound is concave in ``j`` with kinks at ``j = i`` and ``j = i + m - n``, so its maximum over
    an interval is at an end or a kink.
    """
    best = -1
    for i in range(n):
        lo, hi = _band(i, n, m, half)
        for a, b in ((0, lo - 1), (hi + 1, m - 1)):
            if a > b:
                continue
            for j in {a, b, *(k for k in (i, i + m - n) if a <= k <= b)}:
                best = max(best, min(i, j) + min(n - i, m - j))
    return best


def _window(
    row: np.ndarray, lo: int, hi: int, first: int, last: int, m: int, past_the_end: bool
) -> np.ndarray:
    """Cells ``first..last`` of a banded score row held for runs ``lo..hi``.

    0 for the terminal column ``m`` (no runs left) and for every cell when ``past_the_end``
    (no turns left); -inf outside the band.
    """
    out = np.full(last - first + 1, -math.inf)
    if past_the_end:
        out[:] = 0.0
        return out
    a, b = max(first, lo), min(last, hi)
    if a <= b:
        out[a - first : b - first + 1] = row[a - lo : b - lo + 1]
    if last >= m:
        out[m - first :] = 0.0
    return out


def _banded_alignment(
    turns: Sequence[tuple[str, int]], runs: Sequence[SpeakerRun], half: int
) -> dict[int, int]:
    """The best monotone matching that stays in the band (see :func:`align_turns_to_runs`).

    ``score[i][j]`` is the best value of aligning ``turns[i:]`` with ``runs[j:]``. Skipping a
    run is free, so a row is a suffix maximum of ``max(skip the turn, match)``, computed with
    NumPy for the whole band at once. Only two flags per cell are kept for the walk back.
    """
    n, m = len(turns), len(runs)
    # A match is worth 1 plus a fit bonus below 1 / (n + 1): the bonuses of all n turns sum to
    # less than one match, so more matches always win and fit only breaks ties.
    bonus = 1.0 / (n + 1)
    codes = {s: k for k, s in enumerate(dict.fromkeys(r.speaker for r in runs))}
    run_code = np.array([codes[r.speaker] for r in runs])
    speech = np.array([r.speech for r in runs], dtype=float)
    max_words = _RATE_MAX * (speech + _SLACK_S)  # plausible_duration, vectorised
    min_words = _RATE_MIN * (speech - _SLACK_S)
    bands = [_band(i, n, m, half) for i in range(n)]
    takes: list[np.ndarray] = [np.empty(0, bool)] * n
    downs: list[np.ndarray] = [np.empty(0, bool)] * n
    below = np.zeros(0)  # score row i + 1 over its band, plus the terminal column m
    below_lo, below_hi = 0, m - 1
    for i in range(n - 1, -1, -1):
        spk, words = turns[i]
        lo, hi = bands[i]

        last_turn = i + 1 == n
        down = _window(below, below_lo, below_hi, lo, hi, m, last_turn)
        diag = _window(below, below_lo, below_hi, lo + 1, hi + 1, m, last_turn)
        sl = slice(lo, hi + 1)
        can = (run_code[sl] == codes.get(spk, -1)) & (words <= max_words[sl])
        can &= words >= min_words[sl]
        expected = max(words, 1) / _RATE_TYPICAL
        fit = np.exp(-np.abs(np.log((speech[sl] + 0.5) / (expected + 0.5))))
        take = np.where(can, 1.0 + bonus * fit + diag, -math.inf)
        cand = np.maximum(down, take)
        row = np.maximum.accumulate(cand[::-1])[::-1]
        if hi + 1 == m:
            row = np.maximum(row, 0.0)
        takes[i] = can & (row == take)
        downs[i] = row == down
        below, below_lo, below_hi = row, lo, hi
    matches: dict[int, int] = {}
    i = j = 0
    while i < n and j < m:
        lo = bands[i][0]
        if takes[i][j - lo]:
            matches[i] = j
            i += 1
            j += 1
        elif downs[i][j - lo]:
            i += 1
        else:
            j += 1
    return matches


# ----------------------------------------------------------------------------- participants


def _participants(turns: Sequence[_Turn], names: dict[str, str]) -> tuple[Participant, ...]:
    order = list(dict.fromkeys(t.speaker for t in turns))
    operators = {sid for sid in order if _OPERATOR_NAME.search(names.get(sid, ""))} or (
        _cue_operator(turns)
    )
    analysts = _introduced_analysts(turns, names, operators)
    out = []
    for sid in order:
        raw = names.get(sid, "")
        name = None if not raw or _GENERIC_NAME.match(raw) else raw
        role = "operator" if sid in operators else "analyst" if sid in analysts else None
        out.append(Participant(id=sid, name=name, role=role, aliases=name_aliases(name)))
    return tuple(out)


def _cue_operator(turns: Sequence[_Turn]) -> set[str]:
    """The one speaker with strictly the most operator-phrase turns (empty set on a tie)."""
    hits = Counter(t.speaker for t in turns if _OPERATOR_CUES.search(t.text))
    ranked = hits.most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return set()
    return {ranked[0][0]}


def name_aliases(name: str | None) -> tuple[str, ...]:
    """First and last name on their own, so "Thanks, Larry" or "Mr. Culp" can be detected."""
    if not name or _OPERATOR_NAME.search(name):
        return ()
    parts = [p for p in re.split(r"\s+", name.strip()) if p]
    if len(parts) < 2:
        return ()
    return tuple(dict.fromkeys(p for p in (parts[0], parts[-1]) if p != name))


def _introduced_analysts(
    turns: Sequence[_Turn], names: dict[str, str], operators: set[str]
) -> set[str]:
    """Speakers introduced by an operator whose metadata name matches the introduction."""
    found: set[str] = set()
    for k, turn in enumerate(turns[:-1]):
        if turn.speaker not in operators:
            continue
        intro = None
        for m in _INTRODUCTION.finditer(turn.text):
            intro = m.group("name")  # the last introduction is the one that takes the floor
        if intro is None:
            continue
        nxt = turns[k + 1].speaker
        if nxt in operators:
            continue
        if _same_person(intro, names.get(nxt, "")):
            found.add(nxt)
    return found


def _same_person(introduced: str, metadata_name: str) -> bool:
    if not metadata_name or _GENERIC_NAME.match(metadata_name):
        return False
    a = {w.lower().strip(".,") for w in introduced.split()}
    b = {w.lower().strip(".,") for w in metadata_name.split()}
    return bool(a & b)


def alignment_stats(conversation: Conversation) -> AlignmentStats:
    """Coverage of RTTM timings for a call read by :func:`read_earnings21`."""
    return AlignmentStats(
        turns=len(conversation.utterances),
        rttm_runs=int(conversation.metadata.get("rttm_runs", 0)),
        aligned=sum(1 for u in conversation.utterances if u.start is not None),
    )


__all__ = [
    "AlignmentStats",
    "SpeakerRun",
    "align_turns_to_runs",
    "alignment_stats",
    "name_aliases",
    "plausible_duration",
    "read_call",
    "read_earnings21",
    "read_nlp_tokens",
    "read_rttm_runs",
    "read_speaker_names",
]
