"""AMI Meeting Corpus reader (manual annotations, NXT XML release 1.6.2).

Layout read (``folder`` is the corpus folder holding ``ami_public_manual_1.6.2/``, or that
release folder itself):

* ``words/{M}.{X}.words.xml``: speaker ``X``'s tokens in document order: ``w`` (a word or, with
  ``punc="true"``, a punctuation mark; ``starttime``/``endtime`` in seconds) and non-word
  elements (``vocalsound``, ``disfmarker``, ``gap``, ``transformerror``).
* ``dialogueActs/{M}.{X}.dialog-act.xml``: ``dact`` elements; a ``nite:child`` href selects an
  id or an inclusive id *range* of the words file, a ``da-aspect`` pointer names the DA type in
  ``ontologies/da-types.xml`` and ``addressee`` (22 meetings only) lists agent letters.
* ``corpusResources/meetings.xml``: meeting type, ``seen_type`` split and the roster (agent
  letter, anonymous ``global_name``, scenario role PM/ID/UI/ME).
* ``topics/{M}.topic.xml`` + ``ontologies/default-topics.xml``: nested topic segments.

Public API:

* :func:`read_ami` -> one :class:`~polylogue.conversation.Conversation` per meeting.
* :func:`read_ami_words` -> time-stamped words of a meeting (all speakers, in time order).
* :func:`read_ami_topics` -> topic segments of a meeting with start/end times.
* :func:`ami_meetings` / :func:`ami_meeting_info` -> meetings present and their metadata.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from polylogue.conversation import (
    DEFAULT_GAP_S,
    Conversation,
    ConversationFormatError,
    Participant,
    Utterance,
    effective_gap,
    merge_turns,
)
from polylogue.corpora._detokenize import detokenize, has_word, is_punctuation
from polylogue.corpora._xml import (
    NITE_ID,
    NiteRef,
    child_elements,
    element_refs,
    element_where,
    ontology_names,
    parse_xml,
    pointer_ref,
)

RELEASE_DIR = "ami_public_manual_1.6.2"

#: Scenario role codes in ``meetings.xml`` -> the role name people use in the meetings.
ROLE_NAMES: dict[str, str] = {
    "PM": "project manager",
    "ID": "industrial designer",
    "UI": "user interface designer",
    "ME": "marketing expert",
}

# First letter of a meeting id = recording site.
_SITES = {"E": "University of Edinburgh", "I": "IDIAP", "T": "TNO"}
_MEETING_ID = re.compile(r"^(?P<series>[A-Z]{2}\d{4})(?P<session>[a-z]?)$")
_DA_FILE = re.compile(r"^(?P<meeting>[^.]+)\.(?P<speaker>[A-Z])\.dialog-act\.xml$")
_WORDS_FILE = re.compile(r"^(?P<meeting>[^.]+)\.(?P<speaker>[A-Z])\.words\.xml$")

Unit = Literal["da", "turn", "ipu"]

#: Default silence (s) between one speaker's words that splits a dialogue act (``unit="ipu"``).
DEFAULT_IPU_GAP = DEFAULT_GAP_S


# ----------------------------------------------------------------------------- public types


@dataclass(frozen=True, slots=True)
class AmiWord:
    """One ``w`` token of a words file.

    ``text`` is normalised for reading: AMI's spelled-letter underscores are removed
    (``L_C_D_s`` -> ``LCDs``). ``is_punct`` is True for punctuation tokens (``punc="true"`` or
    punctuation-only text). Times are seconds; ``None`` where the file gives none.
    """

    speaker: str
    text: str
    start: float | None
    end: float | None
    is_punct: bool
    word_id: str


@dataclass(frozen=True, slots=True)
class AmiTopic:
    """A topic segment from ``topics/{M}.topic.xml``.

    ``label`` is the annotator's free description when given (``other_description`` or
    ``description``), else the ``default-topics.xml`` type name (``opening``, ``discussion``...).
    ``start``/``end`` span all timed elements of the topic *and its sub-topics*. ``depth`` is 0
    for top-level topics; sub-topics follow their parent in the list (document pre-order).
    """

    start: float | None
    end: float | None
    label: str
    topic_id: str
    depth: int = 0
    type_name: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class AmiSpeaker:
    """A roster entry of ``meetings.xml``."""

    letter: str
    global_name: str | None
    role_code: str | None
    channel: str | None

    @property
    def role(self) -> str | None:
        if self.role_code is None:
            return None
        return ROLE_NAMES.get(self.role_code, self.role_code)


@dataclass(frozen=True, slots=True)
class AmiMeetingInfo:
    """Meeting-level metadata of ``meetings.xml``."""

    meeting: str
    meeting_type: str | None
    seen_type: str | None
    visibility: str | None
    duration_s: float | None
    date: str | None
    topic: str | None
    speakers: tuple[AmiSpeaker, ...] = field(default=())

    @property
    def series(self) -> str:
        return ami_series(self.meeting)


def ami_series(meeting: str) -> str:
    """The meeting series (``ES2008a`` -> ``ES2008``): the same people in 4 sessions."""
    m = _MEETING_ID.match(meeting)
    return m["series"] if m else meeting


# ----------------------------------------------------------------------------- folders


def release_dir(folder: str | Path) -> Path:
    """The release folder, given the corpus folder or the release folder itself."""
    base = Path(folder)
    for cand in (base / RELEASE_DIR, base):
        if (cand / "words").is_dir() and (cand / "dialogueActs").is_dir():
            return cand
    raise FileNotFoundError(
        f"{base} is not an AMI manual-annotation folder (expected {RELEASE_DIR}/words and "
        f"{RELEASE_DIR}/dialogueActs beneath it)"
    )


def ami_meetings(folder: str | Path) -> list[str]:
    """Meetings that have dialogue-act annotation in this copy, sorted.

    (Meetings listed in ``meetings.xml`` but absent here, e.g. reserved ones, are not included.)
    """
    return sorted(_speaker_files(release_dir(folder)).keys())


def _speaker_files(rel: Path) -> dict[str, list[str]]:
    """meeting -> sorted agent letters with a dialogue-act file."""
    out: dict[str, list[str]] = {}
    for p in (rel / "dialogueActs").glob("*.dialog-act.xml"):
        m = _DA_FILE.match(p.name)
        if m:
            out.setdefault(m["meeting"], []).append(m["speaker"])
    return {k: sorted(v) for k, v in out.items()}


def ami_meeting_info(folder: str | Path) -> dict[str, AmiMeetingInfo]:
    """All meetings of ``corpusResources/meetings.xml`` (including ones absent from this copy)."""
    path = release_dir(folder) / "corpusResources" / "meetings.xml"
    root = parse_xml(path)
    out: dict[str, AmiMeetingInfo] = {}
    for el in child_elements(root):
        if el.tag != "meeting":
            continue
        obs = el.get("observation")
        if not obs:
            raise ConversationFormatError(path, element_where(el), "meeting without observation")
        speakers = tuple(
            sorted(
                (
                    AmiSpeaker(
                        letter=_required(s, "nxt_agent", path),
                        global_name=s.get("global_name"),
                        role_code=s.get("role"),
                        channel=s.get("channel"),
                    )
                    for s in child_elements(el)
                    if s.tag == "speaker"
                ),
                key=lambda s: s.letter,
            )
        )
        out[obs] = AmiMeetingInfo(
            meeting=obs,
            meeting_type=el.get("type"),
            seen_type=el.get("seen_type"),
            visibility=el.get("visibility"),
            duration_s=_float_attr(el, "duration", path),
            date=el.get("dateOnly"),
            topic=el.get("topic"),
            speakers=speakers,
        )
    return out


# ----------------------------------------------------------------------------- words files


@dataclass(slots=True)
class _WordsFile:
    """One speaker's words file as parallel columns in document order."""

    path: Path
    speaker: str
    ids: list[str]
    tags: list[str]
    texts: list[str]
    starts: list[float | None]
    ends: list[float | None]
    punct: list[bool]
    position: dict[str, int]

    def span(self, ref: NiteRef) -> range:
        """Positions selected by ``ref`` (a range is inclusive, in document order)."""
        first = self.position[ref.start]  # KeyError = dangling reference
        last = self.position[ref.end] if ref.end is not None else first
        if last < first:
            raise ValueError(f"range {ref.start}..{ref.end} runs backwards")
        return range(first, last + 1)

    def anchor_time(self, pos: int) -> float:
        """The nearest known time at or before ``pos`` (to place untimed items in order)."""
        for i in range(pos, -1, -1):
            t = self.starts[i] if self.starts[i] is not None else self.ends[i]
            if t is not None:
                return t
        return 0.0


def _load_words(path: Path, speaker: str) -> _WordsFile:
    root = parse_xml(path)
    wf = _WordsFile(path, speaker, [], [], [], [], [], [], {})
    for el in child_elements(root):
        nid = el.get(NITE_ID)
        if nid is None:
            raise ConversationFormatError(path, element_where(el), "element without nite:id")
        if nid in wf.position:
            raise ConversationFormatError(path, element_where(el), f"duplicate id {nid}")
        tag = el.tag.rpartition("}")[2]
        text = _normalise_word(el.text or "") if tag == "w" else ""
        wf.position[nid] = len(wf.ids)
        wf.ids.append(nid)
        wf.tags.append(tag)
        wf.texts.append(text)
        wf.starts.append(_float_attr(el, "starttime", path))
        wf.ends.append(_float_attr(el, "endtime", path))
        wf.punct.append(tag == "w" and (el.get("punc") == "true" or is_punctuation(text)))
    return wf


def _normalise_word(text: str) -> str:
    # AMI writes spelled-out letters as "T_V_", "L_C_D_s"; readers expect "TV", "LCDs".
    text = text.strip()
    return text.replace("_", "") if "_" in text else text


class _WordsCache:
    """Lazily loaded words files of one meeting, keyed by file name."""

    def __init__(self, rel: Path) -> None:
        self._dir = rel / "words"
        self._files: dict[str, _WordsFile] = {}
        self._claimed: dict[int, set[int]] = {}

    def get(self, name: str, referrer: Path, where: str) -> _WordsFile:
        wf = self._files.get(name)
        if wf is None:
            m = _WORDS_FILE.match(name)
            path = self._dir / name
            if m is None or not path.is_file():
                raise ConversationFormatError(
                    referrer, where, f"reference to missing words file {name!r}"
                )
            wf = self._files[name] = _load_words(path, m["speaker"])
        return wf

    def claim(self, wf: _WordsFile, span: range) -> None:
        """Record that a dialogue act holds the words at ``span`` (see :meth:`unclaimed`)."""
        self._claimed.setdefault(id(wf), set()).update(span)

    def unclaimed(self, name: str) -> list[list[int]]:
        """Runs of consecutive timed words of words file ``name`` that no act holds."""
        wf = self._files.get(name)
        if wf is None:
            return []
        claimed = self._claimed.get(id(wf), set())
        runs: list[list[int]] = []
        for i in range(len(wf.ids)):
            if i in claimed or wf.tags[i] != "w" or not wf.texts[i]:
                if runs and runs[-1] and i in claimed:
                    runs.append([])
                continue
            if not runs:
                runs.append([])
            runs[-1].append(i)
        return [r for r in runs if any(not wf.punct[i] and wf.starts[i] is not None for i in r)]

    def resolve(self, ref: NiteRef, referrer: Path, where: str) -> tuple[_WordsFile, range]:
        wf = self.get(ref.file, referrer, where)
        try:
            return wf, wf.span(ref)
        except KeyError as exc:
            raise ConversationFormatError(
                referrer, where, f"dangling reference: id {exc.args[0]} is not in {ref.file}"
            ) from exc
        except ValueError as exc:
            raise ConversationFormatError(referrer, where, str(exc)) from exc


def read_ami_words(folder: str | Path, meeting: str) -> list[AmiWord]:
    """All ``w`` tokens of a meeting (every speaker), sorted by (start, end, speaker).

    Non-word elements (laughter, disfluency markers, gaps) are left out. Punctuation tokens are
    kept and flagged (their times equal the preceding word's end); join a slice of words into
    readable text with :func:`words_to_text`. A word without times keeps ``None`` and is placed
    after the nearest earlier timed token of the same speaker.
    """
    rel = release_dir(folder)
    letters = _meeting_word_letters(rel, meeting)
    rows: list[tuple[float, float, str, int, AmiWord]] = []
    for letter in letters:
        wf = _load_words(rel / "words" / f"{meeting}.{letter}.words.xml", letter)
        for i, tag in enumerate(wf.tags):
            if tag != "w" or not wf.texts[i]:
                continue
            start, end = wf.starts[i], wf.ends[i]
            anchor = start if start is not None else wf.anchor_time(i)
            word = AmiWord(letter, wf.texts[i], start, end, wf.punct[i], wf.ids[i])
            rows.append((anchor, end if end is not None else anchor, letter, i, word))
    rows.sort(key=lambda r: r[:4])
    return [r[4] for r in rows]


def words_to_text(words: Sequence[AmiWord]) -> str:
    """Readable text of consecutive words (punctuation and clitics re-attached)."""
    return detokenize([w.text for w in words], [w.is_punct for w in words])


def _meeting_word_letters(rel: Path, meeting: str) -> list[str]:
    letters = sorted(
        m["speaker"]
        for p in (rel / "words").glob(f"{meeting}.*.words.xml")
        if (m := _WORDS_FILE.match(p.name)) and m["meeting"] == meeting
    )
    if not letters:
        raise ValueError(f"AMI meeting {meeting!r} has no words files in {rel / 'words'}")
    return letters


# ----------------------------------------------------------------------------- topics


def read_ami_topics(folder: str | Path, meeting: str) -> list[AmiTopic]:
    """Topic segments of a meeting in document pre-order (sub-topics after their parent).

    Returns ``[]`` for meetings without a topic file (ES2006c, ES2015b, ES2015c).
    """
    rel = release_dir(folder)
    path = rel / "topics" / f"{meeting}.topic.xml"
    if not path.is_file():
        return []
    names = ontology_names(rel / "ontologies" / "default-topics.xml")
    root = parse_xml(path)
    words = _WordsCache(rel)
    out: list[AmiTopic] = []

    def visit(el: Any, depth: int) -> tuple[float | None, float | None]:
        where = element_where(el)
        tid = el.get(NITE_ID) or where
        slot = len(out)
        out.append(AmiTopic(None, None, "", tid))  # placeholder keeps pre-order
        times: list[float] = []
        for ref in element_refs(el, path):
            wf, span = words.resolve(ref, path, where)
            times.extend(t for i in span for t in (wf.starts[i], wf.ends[i]) if t is not None)
        for sub in child_elements(el):
            if sub.tag == "topic":
                times.extend(t for t in visit(sub, depth + 1) if t is not None)
        ptr = pointer_ref(el, "scenario_topic_type", path)
        type_name = None
        if ptr is not None:
            type_name = names.get(ptr.start)
            if type_name is None:
                raise ConversationFormatError(path, where, f"unknown topic type {ptr.start}")
        # Most files point at a default-topics type and add other_description for "other";
        # a few (IB4003, IS1006d, TS3009b-d, ...) only give a free "description".
        description = (el.get("other_description") or el.get("description") or "").strip() or None
        start, end = (min(times), max(times)) if times else (None, None)
        out[slot] = AmiTopic(
            start=start,
            end=end,
            label=description or type_name or "unlabelled",
            topic_id=tid,
            depth=depth,
            type_name=type_name,
            description=description,
        )
        return start, end

    for el in child_elements(root):
        if el.tag == "topic":
            visit(el, 0)
    return out


# ----------------------------------------------------------------------------- dialogue acts


@dataclass(frozen=True, slots=True)
class _Da:
    sort_key: tuple[float, float, str, int]
    utterance: Utterance
    #: Word-level timing for ``unit="ipu"``: (token, is_punct, start, end) in document order.
    tokens: tuple[tuple[str, bool, float | None, float | None], ...] = ()


def _read_dialogue_acts(
    rel: Path,
    meeting: str,
    letter: str,
    da_types: dict[str, str],
    words: _WordsCache,
    participants: frozenset[str],
    keep_tokens: bool = False,
) -> tuple[list[_Da], int]:
    """One speaker's dialogue acts with words, and the number dropped for having none.

    ``participants`` are the meeting's agent letters; an addressee outside them is an error.
    """
    path = rel / "dialogueActs" / f"{meeting}.{letter}.dialog-act.xml"
    root = parse_xml(path)
    out: list[_Da] = []
    dropped = 0
    for seq, el in enumerate(child_elements(root)):
        if el.tag != "dact":
            continue
        where = element_where(el)
        did = el.get(NITE_ID)
        if did is None:
            raise ConversationFormatError(path, where, "dact without nite:id")
        w = _act_words(el, path, where, words, keep_tokens)
        if not any(has_word(t) and not p for t, p in zip(w.tokens, w.punct, strict=True)):
            dropped += 1  # only non-verbal sounds, gaps or punctuation
            continue
        act = _act_type(el, path, where, da_types)
        start = w.starts[0] if w.starts else None
        end = w.ends[-1] if w.ends else None
        if start is not None and end is not None and end < start:
            # Single words may end before they start (61 in the release); whole acts never do.
            raise ConversationFormatError(
                path, where, f"dialogue act ends ({end}) before it starts ({start})"
            )
        utt = Utterance(
            speaker=letter,
            text=detokenize(w.tokens, w.punct),
            start=start,
            end=end,
            addressees=_act_addressees(el, path, where, participants),
            dialogue_act=act,
            id=did,
            note=(el.get("comment") or "").strip() or None,
        )
        key_start = start if start is not None else (w.anchor or 0.0)
        out.append(
            _Da((key_start, end if end is not None else key_start, letter, seq), utt, w.timed)
        )
    return out, dropped


@dataclass(frozen=True, slots=True)
class _ActWords:
    """The words a dialogue act points at (``w`` elements with text), in document order."""

    tokens: list[str]
    punct: list[bool]
    #: Known word start and end times (words without one are skipped, so not aligned).
    starts: list[float]
    ends: list[float]
    #: (token, is_punct, start, end) per word, when word timing is kept (``unit="ipu"``).
    timed: tuple[tuple[str, bool, float | None, float | None], ...]
    #: Time of the act's first referenced element or the nearest timed one before it.
    anchor: float | None


def _act_words(el: Any, path: Path, where: str, words: _WordsCache, keep_tokens: bool) -> _ActWords:
    tokens: list[str] = []
    punct: list[bool] = []
    starts: list[float] = []
    ends: list[float] = []
    timed: list[tuple[str, bool, float | None, float | None]] = []
    anchor: float | None = None
    # Punctuation tokens carry times too, sometimes those of a neighbouring gap (an act "So"
    # whose "." starts 2.8 s earlier): an act's times come from its words, punctuation only
    # when no word is timed.
    p_starts: list[float] = []
    p_ends: list[float] = []
    for ref in element_refs(el, path):
        wf, span = words.resolve(ref, path, where)
        words.claim(wf, span)
        if anchor is None:
            anchor = wf.anchor_time(span.start)
        for i in span:
            if wf.tags[i] != "w" or not wf.texts[i]:
                continue
            tokens.append(wf.texts[i])
            punct.append(wf.punct[i])
            if (s := wf.starts[i]) is not None:
                (p_starts if wf.punct[i] else starts).append(s)
            if (e := wf.ends[i]) is not None:
                (p_ends if wf.punct[i] else ends).append(e)
            if keep_tokens:
                timed.append((wf.texts[i], wf.punct[i], wf.starts[i], wf.ends[i]))
    if not starts and not ends:
        starts, ends = p_starts, p_ends
    return _ActWords(tokens, punct, starts, ends, tuple(timed), anchor)


def _act_type(el: Any, path: Path, where: str, da_types: dict[str, str]) -> str | None:
    """The act's dialogue-act type name (None when it has no ``da-aspect`` pointer)."""
    ptr = pointer_ref(el, "da-aspect", path)
    if ptr is None:
        return None
    act = da_types.get(ptr.start)
    if act is None:
        raise ConversationFormatError(path, where, f"unknown DA type {ptr.start}")
    return act


def _act_addressees(
    el: Any, path: Path, where: str, participants: frozenset[str]
) -> tuple[str, ...] | None:
    addressees = _addressees(el.get("addressee"))
    unknown = sorted(set(addressees or ()) - participants)
    if unknown:
        raise ConversationFormatError(
            path,
            where,
            f"addressee {', '.join(unknown)} is not a participant "
            f"(speakers: {', '.join(sorted(participants))})",
        )
    return addressees


def split_dialogue_act(da: _Da, gap: float) -> list[_Da]:
    """Pieces of a dialogue act split wherever its speaker is silent for at least ``gap`` s.

    A pause in the conversation can fall inside a dialogue act (the speaker stops, nobody
    else speaks, the speaker goes on): splitting at the speaker's own word gaps makes every
    such pause a boundary between pieces, so context can be cut at word level. Pieces keep the
    act's addressees, type and note; ids get ``+k`` suffixes (k >= 1) for the second piece on.
    Punctuation and untimed tokens stay with the preceding word.
    """
    u = da.utterance
    pieces: list[list[tuple[str, bool, float | None, float | None]]] = [[]]
    last_end: float | None = None
    for tok in da.tokens:
        _, punct, start, end = tok
        if (
            not punct
            and start is not None
            and last_end is not None
            and start - last_end >= effective_gap(gap)
            and any(not p for _, p, _, _ in pieces[-1])
        ):
            pieces.append([])
        pieces[-1].append(tok)
        if end is not None and not punct:
            last_end = end
    if len(pieces) == 1:
        return [_Da(da.sort_key, u)]
    out: list[_Da] = []
    for k, toks in enumerate(pieces):
        words_only = [(t, p) for t, p, _, _ in toks]
        if not any(has_word(t) and not p for t, p in words_only):
            continue  # a piece of only vocal noise/punctuation carries no speech
        starts = [s for _, p, s, _ in toks if s is not None and not p]
        ends = [e for _, p, _, e in toks if e is not None and not p]
        start = starts[0] if starts else None
        end = ends[-1] if ends else None
        piece = Utterance(
            speaker=u.speaker,
            text=detokenize([t for t, _ in words_only], [p for _, p in words_only]),
            start=start,
            end=end,
            addressees=u.addressees,
            dialogue_act=u.dialogue_act,
            id=u.id if k == 0 else f"{u.id}+{k}",
            note=u.note,
        )
        key_start = start if start is not None else da.sort_key[0]
        out.append(
            _Da(
                (key_start, end if end is not None else key_start, u.speaker, da.sort_key[3]), piece
            )
        )
    return out


def _unassigned_words(words: _WordsCache, meeting: str, letter: str) -> list[_Da]:
    """Words of ``letter`` that belong to no dialogue act, as act-less utterances.

    They are speech all the same (39 words in 12 meetings): dropping them would make the
    builder see a pause where the speaker goes on talking. No type, no addressee."""
    name = f"{meeting}.{letter}.words.xml"
    wf = words._files.get(name)
    if wf is None:  # the speaker has no dialogue acts
        return []
    out: list[_Da] = []
    for k, run in enumerate(words.unclaimed(name)):
        toks = tuple((wf.texts[i], wf.punct[i], wf.starts[i], wf.ends[i]) for i in run)
        if not any(has_word(t) and not p for t, p, _, _ in toks):
            continue
        starts = [st for _, p, st, _ in toks if st is not None and not p]
        ends = [e for _, p, _, e in toks if e is not None and not p]
        start = starts[0] if starts else None
        end = max(ends) if ends else None
        if start is None or end is None or end < start:
            continue
        utt = Utterance(
            speaker=letter,
            text=detokenize([t for t, _, _, _ in toks], [p for _, p, _, _ in toks]),
            start=start,
            end=end,
            id=f"{meeting}.{letter}.unassigned.{k}",
        )
        out.append(_Da((start, end, letter, -1 - k), utt, toks))
    return out


def _addressees(value: str | None) -> tuple[str, ...] | None:
    # An empty attribute (one DA in ES2009d) is not a legal value of the scheme, which always
    # names one agent or a group, so it counts as unannotated.
    if value is None:
        return None
    letters = tuple(dict.fromkeys(a.strip() for a in value.split(",") if a.strip()))
    return letters or None


def _read_meeting(
    rel: Path,
    meeting: str,
    letters: Sequence[str],
    info: AmiMeetingInfo | None,
    da_types: dict[str, str],
    ipu_gap: float | None = None,
) -> Conversation:
    words = _WordsCache(rel)
    das: list[_Da] = []
    dropped = 0
    roster = {s.letter: s for s in info.speakers} if info else {}
    agents = frozenset(roster) | frozenset(letters)
    for letter in letters:
        part, n = _read_dialogue_acts(
            rel, meeting, letter, da_types, words, agents, keep_tokens=ipu_gap is not None
        )
        das.extend(part)
        dropped += n
    unassigned = [d for letter in letters for d in _unassigned_words(words, meeting, letter)]
    das.extend(unassigned)
    if ipu_gap is not None:
        das = [piece for d in das for piece in split_dialogue_act(d, ipu_gap)]
    das.sort(key=lambda d: d.sort_key)
    utterances = tuple(d.utterance for d in das)

    unlisted = sorted(set(letters) - set(roster))
    participants = tuple(
        Participant(
            id=letter,
            name=None,  # AMI participants are anonymous; first names are not annotated
            role=roster[letter].role if letter in roster else None,
            aliases=_role_aliases(roster.get(letter)),
        )
        for letter in sorted(agents)
    )
    metadata: dict[str, Any] = {
        "unit": "da" if ipu_gap is None else "ipu",
        "series": ami_series(meeting),
        "meeting_type": info.meeting_type if info else None,
        "seen_type": info.seen_type if info else None,
        "visibility": info.visibility if info else None,
        "scenario": _scenario(info),
        "site": _SITES.get(meeting[:1]),
        "duration_s": info.duration_s if info else None,
        "date": info.date if info else None,
        "addressee_annotated": any(u.addressees is not None for u in utterances),
        "dropped_dialogue_acts": dropped,
        "unassigned_word_runs": len(unassigned),
        "speakers": {
            s.letter: {"global_name": s.global_name, "role_code": s.role_code, "channel": s.channel}
            for s in (info.speakers if info else ())
        },
    }
    if ipu_gap is not None:
        metadata["ipu_gap_s"] = ipu_gap
    if unlisted:
        metadata["speakers_not_in_roster"] = unlisted
    return Conversation(
        id=meeting,
        corpus="ami",
        utterances=utterances,
        participants=participants,
        domain="meeting",
        group=ami_series(meeting),
        roster_known=info is not None,
        source=str(rel / "dialogueActs" / f"{meeting}.*.dialog-act.xml"),
        metadata=metadata,
    )


def _role_aliases(speaker: AmiSpeaker | None) -> tuple[str, ...]:
    # The role code ("PM") is how the scenario documents refer to the person.
    return (speaker.role_code,) if speaker is not None and speaker.role_code else ()


def _scenario(info: AmiMeetingInfo | None) -> str | None:
    if info is None:
        return None
    if info.meeting_type == "scenario":
        return "remote control design"  # every AMI scenario meeting is the same design task
    return info.topic


def read_ami(
    folder: str | Path,
    meetings: Iterable[str] | None = None,
    unit: Unit = "da",
    include_unannotated: bool = True,
    ipu_gap: float = DEFAULT_IPU_GAP,
) -> Iterator[Conversation]:
    """Yield one conversation per AMI meeting, in meeting-id order.

    * ``unit="da"``: one utterance per dialogue act with at least one word; text is the
      detokenised words (``okay , so we 're`` -> ``okay, so we're``), ``start``/``end`` the first
      word's start and last word's end, ``dialogue_act`` the ``da-types.xml`` name (``inf``,
      ``el.inf``, ``bck``...), ``addressees`` the annotated agent letters (``None`` if not
      annotated), ``id`` the ``dact`` id and ``note`` the annotator's comment. Acts of all
      speakers are sorted by (start, end, speaker).
    * ``unit="turn"``: consecutive acts of one speaker merged (:func:`merge_turns`).
    * ``unit="ipu"``: dialogue acts split at every silence of at least ``ipu_gap`` seconds
      between the speaker's own words (:func:`split_dialogue_act`); used by the turn-taking
      benchmark so that a pause inside an act is a boundary and context is cut at word level.
    * Participants are the ``meetings.xml`` roster (``roster_known=True``): ``id`` = agent letter,
      ``role`` = e.g. ``"project manager"`` with the code (``"PM"``) as alias, ``name=None``.
    * ``group`` is the meeting series (``ES2008`` for ES2008a-d), so splits keep series apart.
    * ``include_unannotated=False`` keeps only meetings with addressee annotation.

    Raises :class:`ConversationFormatError` for malformed XML or a dangling word reference,
    ``ValueError`` for a requested meeting that this copy does not have.
    """
    if unit not in ("da", "turn", "ipu"):
        raise ValueError(f"unit must be 'da', 'turn' or 'ipu', not {unit!r}")
    if unit == "ipu" and not (ipu_gap >= 0):  # also rejects NaN
        raise ValueError(f"ipu_gap must be a non-negative number of seconds, not {ipu_gap!r}")
    rel = release_dir(folder)
    files = _speaker_files(rel)
    if isinstance(meetings, str):  # one id, not an iterable of characters
        meetings = [meetings]
    wanted = sorted(files) if meetings is None else list(dict.fromkeys(meetings))
    missing = [m for m in wanted if m not in files]
    if missing:
        raise ValueError(
            f"AMI meeting(s) without dialogue-act files in {rel}: {', '.join(missing)}"
        )
    info = ami_meeting_info(rel)
    da_types = ontology_names(rel / "ontologies" / "da-types.xml")
    for meeting in wanted:
        conv = _read_meeting(
            rel,
            meeting,
            files[meeting],
            info.get(meeting),
            da_types,
            ipu_gap=ipu_gap if unit == "ipu" else None,
        )
        if not include_unannotated and not conv.metadata["addressee_annotated"]:
            continue
        yield merge_turns(conv) if unit == "turn" else conv


# ----------------------------------------------------------------------------- helpers


def _required(el: Any, attr: str, path: Path) -> str:
    value = el.get(attr)
    if not value:
        raise ConversationFormatError(path, element_where(el), f"missing attribute {attr!r}")
    return str(value)


def _float_attr(el: Any, attr: str, path: Path) -> float | None:
    value = el.get(attr)
    if value is None or value == "":
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise ConversationFormatError(
            path, element_where(el), f"attribute {attr}={value!r} is not a number"
        ) from None
    # float() accepts "inf", "1e999" and "NaN", which would reach benchmarks as bare NaN.
    if not math.isfinite(seconds) or seconds < 0:
        raise ConversationFormatError(
            path, element_where(el), f"attribute {attr}={value!r} is not a finite time >= 0"
        )
    return seconds


__all__ = [
    "ROLE_NAMES",
    "AmiMeetingInfo",
    "AmiSpeaker",
    "AmiTopic",
    "AmiWord",
    "ami_meeting_info",
    "ami_meetings",
    "ami_series",
    "read_ami",
    "read_ami_topics",
    "read_ami_words",
    "release_dir",
    "split_dialogue_act",
    "words_to_text",
]
