"""Friends reader: one scene of the TV series is one :class:`Conversation`.

Two sources live under ``folder`` (= ``.../friends``):

``friends-r-package/derived_csv/friends.csv`` (seasons 1-8 and 10; season 9 is held out)
    Columns ``text, speaker, season, episode, scene, utterance``. The packager dropped the
    "(to X)" notes, so these utterances carry no addressing (``addressees=None``).
``character-mining/json/friends_season_10.json`` (EmoryNLP, season 10 only)
    Keeps ``transcript_with_note``, whose "(to Ross)" notes are explicit addressee cues.

``source="all"`` reads season 10 from the JSON and every other season from the CSV; the CSV's
season 10 is the same transcript (all 5,479 rows line up with the JSON utterance ids and texts,
bar one line the CSV files as a stage direction), so nothing is duplicated.

Decisions (see ``docs/corpora-friends-earnings-user.md``):

* ``Scene Directions`` rows and JSON utterances without speakers are not speech; they are kept
  in ``metadata["directions"]``. Bracketed or parenthesised directions inside a line are
  stripped from ``text``; a line with no speech left is dropped.
* Lines spoken by several characters at once (CSV ``#ALL#`` or an empty speaker, JSON
  ``speakers`` with more than one name) get the pseudo-participant ``ALL`` (``role="group"``).
  It is real speech and stays in the context, but a builder must never use it as a target.
  For JSON lines the individual speakers are kept in the note.
* Participants are the scene's speakers (and annotated addressees) in order of first
  appearance, ``roster_known=False``: a character is only known to be present once they speak
  or are addressed, never from a whole-scene roster.
* ``Participant.id`` is the canonical name ("Ross Geller"); ``name`` is what people call them
  ("Ross"); ``aliases`` hold nicknames of the main characters ("Rach", "Pheebs").
* A JSON line is split at each addressing note, because the addressee can change mid-line:
  "Thank you. (to Charlie) I can't believe..." gives "Thank you." (no annotation) and
  "I can't believe..." addressed to Charlie. Resolution of the note is described in
  :func:`resolve_addressees`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Literal

from polylogue.conversation import (
    DESCRIPTOR_WORDS,
    GROUP_ROLE,
    VOICE_ROLE,
    Conversation,
    ConversationFormatError,
    Participant,
    Utterance,
)
from polylogue.corpora._text import csv_records, load_json_file, read_text

CORPUS = "friends"
DOMAIN = "tv"
GROUP_SPEAKER = "ALL"
CSV_PATH = Path("friends-r-package") / "derived_csv" / "friends.csv"
S10_JSON_PATH = Path("character-mining") / "json" / "friends_season_10.json"

Source = Literal["all", "csv", "s10json"]

_CSV_COLUMNS = ("text", "speaker", "season", "episode", "scene", "utterance")
_DIRECTIONS_SPEAKER = "Scene Directions"
# Speaker labels for lines said by several characters at once (empty = the CSV's multi-speaker
# lines, whose names the packager dropped; the JSON lists them).
_GROUP_LABELS = frozenset(
    {"", "#ALL#", "Both", "Together", "Guys", "The Guys", "The Girls", "Kids"}
)

# Nicknames the friends use for each other on screen (used as aliases for vocative detection).
_NICKNAMES: dict[str, tuple[str, ...]] = {
    "Rachel Green": ("Rach",),
    "Phoebe Buffay": ("Pheebs", "Pheebes"),
    "Joey Tribbiani": ("Joe",),
    "Frank Buffay Jr.": ("Frank Jr.", "Frank Jr"),
}
# Short forms that only appear in stage notes ("back to Mon and Chan"); too ambiguous as
# aliases in speech ("C'mon" contains the word "mon").
_NOTE_ONLY_NICKNAMES: dict[str, str] = {"mon": "Monica Geller", "chan": "Chandler Bing"}

_TITLES = frozenset({"mr", "mrs", "ms", "miss", "dr", "doctor", "professor", "prof", "sir"})
_ROLE_WORDS = frozenset(
    {
        "guy", "woman", "man", "girl", "boy", "waiter", "waitress", "director", "doctor",
        "nurse", "fireman", "passenger", "attendant", "friend", "customer", "host", "officer",
        "student", "all", "kid", "lady", "gentleman", "casting", "agent", "interviewer",
        "receptionist", "clerk", "announcer", "voice", "priest", "minister", "dad", "mom",
    }
)  # fmt: skip

# A stage note: (...) or [...] or the transcribers' stray {...) ; unclosed notes run to the end.
_NOTE = re.compile(r"\([^()]*(?:\)|$)|\[[^\[\]]*(?:\]|$)|\{[^{}()]*(?:[})]|$)")
# "(to Ross)", "(To Monica and Chandler.)", "(back to Mon and Chan)", "(announces to Amy)"
_ADDRESS_NOTE = re.compile(
    r"^(?:(?:back|turns|turning|turns back|announces|says|whispers|whispering|yells|"
    r"yelling|shouts|shouting|continues|then)\s+)?to\s+(?P<target>.+)$",
    re.IGNORECASE,
)
_GROUP_TARGETS = frozenset(
    {
        "all", "everybody", "everyone", "the others", "the rest", "the group", "the gang",
        "the room", "the crowd", "them", "them all", "all of them", "both", "both of them",
        "the whole group", "everyone else", "everybody else",
    }
)  # fmt: skip
_FUZZY_RATIO = 0.85
_SELF_TARGETS = frozenset({"himself", "herself", "themselves", "self"})


@dataclass(slots=True)
class _Scene:
    season: int
    episode: int
    scene: int
    utterances: list[Utterance] = field(default_factory=list)
    directions: list[str] = field(default_factory=list)
    dropped_lines: int = 0


# ----------------------------------------------------------------------------- public API


class FriendsPartMissing(UserWarning):
    """One of the two Friends sources is absent; the reader used what is there."""


def read_friends(
    folder: str | Path,
    source: Source = "all",
    seasons: Iterable[int] | None = None,
) -> Iterator[Conversation]:
    """Yield Friends scenes as conversations, ordered by season, episode and scene.

    With ``source="all"`` whichever of the two files is present is read: the CSV alone is a
    valid corpus (season 10 then comes from it, without addressee notes), the JSON alone gives
    season 10. What was skipped is reported once as a :class:`FriendsPartMissing` warning (the
    missing JSON only when the CSV does hold season 10).
    """
    if source not in ("all", "csv", "s10json"):
        raise ValueError(f"source must be 'all', 'csv' or 's10json', not {source!r}")
    root = Path(folder)
    wanted = None if seasons is None else {int(s) for s in seasons}
    csv_path, json_path = root / CSV_PATH, root / S10_JSON_PATH
    csv_season10_warning = False  # the JSON is absent: say so if the CSV has season 10
    if source == "all":
        has_csv, has_json = csv_path.is_file(), json_path.is_file()
        if not has_csv and not has_json:
            raise FileNotFoundError(
                f"{root} has no Friends transcripts: expected {CSV_PATH} and/or {S10_JSON_PATH}"
            )
        if not has_json:
            csv_season10_warning = True
            source = "csv"
        elif not has_csv:
            warnings.warn(
                f"{csv_path} is absent: seasons 1-8 are skipped, only season 10 (JSON) is read",
                FriendsPartMissing,
                stacklevel=2,
            )
            source = "s10json"
    if source in ("all", "csv"):
        # With "all", season 10 comes from the annotated JSON instead of the CSV.
        exclude = {10} if source == "all" else set()
        if wanted is None or wanted - exclude:
            for conv in read_friends_csv(csv_path, seasons=wanted, exclude_seasons=exclude):
                # Only when season 10 is read: a CSV of other seasons (a season-9 folder)
                # loses nothing without the JSON.
                if csv_season10_warning and conv.metadata["season"] == 10:
                    csv_season10_warning = False
                    warnings.warn(
                        f"{json_path} is absent: season 10 is read from the CSV, without the "
                        "'(to X)' addressee notes",
                        FriendsPartMissing,
                        stacklevel=2,
                    )
                yield conv
    if source in ("all", "s10json") and (wanted is None or 10 in wanted):
        yield from read_friends_s10_json(json_path)


def read_friends_csv(
    path: str | Path,
    seasons: Iterable[int] | None = None,
    exclude_seasons: Iterable[int] = (),
) -> Iterator[Conversation]:
    """Scenes from the R package's ``friends.csv`` (no addressee annotation)."""
    path = Path(path)
    wanted = None if seasons is None else {int(s) for s in seasons}
    excluded = {int(s) for s in exclude_seasons}
    current: _Scene | None = None
    records = csv_records(path, read_text(path))
    header = next(records, (1, []))[1]
    missing = set(_CSV_COLUMNS) - set(header)
    if missing:
        raise ConversationFormatError(path, "line 1", f"missing columns {sorted(missing)}")
    seen: set[tuple[int, int, int, int]] = set()
    for lineno, cells in records:
        if len(cells) != len(header):
            raise ConversationFormatError(
                path, f"line {lineno}", f"expected {len(header)} cells, got {len(cells)}"
            )
        row = dict(zip(header, cells, strict=True))
        numbers = _csv_numbers(row, path, lineno)
        if numbers in seen:
            raise ConversationFormatError(
                path, f"line {lineno}", f"duplicate utterance {_row_id(numbers)}"
            )
        seen.add(numbers)
        key = numbers[:3]
        if key[0] in excluded or (wanted is not None and key[0] not in wanted):
            continue
        if current is None or (current.season, current.episode, current.scene) != key:
            if current is not None:
                conv = _scene_conversation(current, path, "csv")
                if conv is not None:
                    yield conv
            current = _Scene(*key)
        speaker, text = row["speaker"].strip(), row["text"]
        if speaker == _DIRECTIONS_SPEAKER:
            current.directions.append(text.strip())
            continue
        spoken, notes = split_notes(text)
        if speaker in _GROUP_LABELS and speaker not in ("", "#ALL#"):
            notes.insert(0, f"(spoken together: {speaker})")
        if not spoken:
            current.dropped_lines += 1
            continue
        uid = _row_id(numbers)
        current.utterances.append(
            Utterance(
                speaker=GROUP_SPEAKER if speaker in _GROUP_LABELS else speaker,
                text=spoken,
                id=uid,
                note=" ".join(notes) or None,
            )
        )
    if current is not None:
        conv = _scene_conversation(current, path, "csv")
        if conv is not None:
            yield conv


#: A speaker tag left inside another character's line after a sentence end ("Maybe. Joey:
#: Wait. Your 'not a real date' tonight is with Paul the Wine Guy?").
_MERGED_TAG = re.compile(r"(?:(?<=[.!?] )|(?<=\.\.\.))([A-Za-z][a-z]+): (?=\S)")


def split_merged_tags(utterances: Sequence[Utterance]) -> list[Utterance]:
    """Split a line at a speaker tag of another speaker of the scene: the words after "Joey:"
    are Joey's line (id ``<id>.2``). A tag counts only after a sentence end and only when it is
    (any case) what the scene calls one of its other speakers; "Okay, Monica: Right foot red."
    (after a comma) and "Funny: Ha-Ha" (no such speaker) stay as they are."""
    names = {display_name(u.speaker).lower(): u.speaker for u in utterances}
    out: list[Utterance] = []
    for u in utterances:
        m = _MERGED_TAG.search(u.text)
        other = names.get(m.group(1).lower()) if m else None
        if m is None or other is None or other == u.speaker or other == GROUP_SPEAKER:
            out.append(u)
            continue
        out.append(replace(u, text=u.text[: m.start()].strip()))
        out.append(replace(u, speaker=other, text=u.text[m.end() :].strip(), id=f"{u.id}.2"))
    return out


def read_friends_s10_json(path: str | Path) -> Iterator[Conversation]:
    """Season 10 scenes from EmoryNLP character-mining, with "(to X)" addressees."""
    path = Path(path)
    try:
        data = load_json_file(path)
    except OSError as exc:
        raise ConversationFormatError(path, "", f"cannot read file: {exc}") from exc
    _check_s10_structure(data, path)
    for episode in data.get("episodes", []):
        episode_speakers = _episode_speakers(episode)
        for scene in episode.get("scenes", []):
            conv = _json_scene(scene, episode_speakers, path)
            if conv is not None:
                yield conv


def _csv_numbers(row: dict[str, str], path: Path, lineno: int) -> tuple[int, int, int, int]:
    """``(season, episode, scene, utterance)`` of a CSV row; each a whole number >= 0."""
    out = []
    for col in ("season", "episode", "scene", "utterance"):
        value = row[col].strip()
        if not value.isdigit() or len(value) > 9:  # also refuses "-1", "1.5", "" and 5,000 digits
            raise ConversationFormatError(
                path,
                f"line {lineno}",
                f"{col} {row[col][:40]!r} is not a whole number from 0 to 999,999,999",
            )
        out.append(int(value))
    return out[0], out[1], out[2], out[3]


def _row_id(numbers: tuple[int, int, int, int]) -> str:
    season, episode, scene, utterance = numbers
    return f"s{season:02d}e{episode:02d}c{scene:02d}u{utterance:03d}"


def _check_s10_structure(data: Any, path: Path) -> None:
    """The EmoryNLP layout: episodes -> scenes -> utterances with a list of speaker names.

    Checked up front so a damaged file is a located error, not an AttributeError half-way or
    (for ``"speakers": "Ross Geller"``) a line "spoken together by R, o, s, s...".
    """

    def need(ok: bool, where: str, what: str) -> None:
        if not ok:
            raise ConversationFormatError(path, where, f"expected {what}")

    need(isinstance(data, dict), "", "an object with 'episodes'")
    episodes = data.get("episodes", [])
    need(isinstance(episodes, list), "episodes", "a list")
    seen: dict[str, str] = {}
    for e, episode in enumerate(episodes):
        where = f"episodes[{e}]"
        need(isinstance(episode, dict), where, "an object")
        scenes = episode.get("scenes", [])
        need(isinstance(scenes, list), f"{where}.scenes", "a list")
        for c, scene in enumerate(scenes):
            s_where = f"{where}.scenes[{c}]"
            need(isinstance(scene, dict), s_where, "an object")
            utterances = scene.get("utterances") or []
            need(isinstance(utterances, list), f"{s_where}.utterances", "a list")
            for k, u in enumerate(utterances):
                u_where = f"{s_where}.utterances[{k}]"
                need(isinstance(u, dict), u_where, "an object")
                speakers = u.get("speakers") or []
                need(
                    isinstance(speakers, list) and all(isinstance(x, str) for x in speakers),
                    f"{u_where}.speakers",
                    "a list of names",
                )
                for key in ("transcript", "transcript_with_note"):
                    need(isinstance(u.get(key) or "", str), f"{u_where}.{key}", "a string")
                uid = str(u.get("utterance_id", ""))
                if uid and seen.setdefault(uid, u_where) != u_where:
                    raise ConversationFormatError(
                        path, u_where, f"duplicate utterance_id {uid!r} (also {seen[uid]})"
                    )


def split_notes(text: str) -> tuple[str, list[str]]:
    """Spoken text without stage notes, and the notes in order."""
    text = bracket_orphan_directions(text)
    notes = [m.group(0).strip() for m in _NOTE.finditer(text)]
    spoken = _squash(_TAG_COLON.sub(" ", _NOTE.sub(" ", text)))
    return spoken, notes


#: The colon of a speaker tag whose name the packager dropped (season 1: ": Really? : Sure, we
#: have scones left!"): a colon at the start of a line or right after a sentence end.
_TAG_COLON = re.compile(r"(?:^|(?<=[.!?]))\s*:\s+")


#: Where a sentence ends (the start of an orphan direction is after the last one before it).
_SENTENCE_END = re.compile(r"(?:[.!?]+[\"']?|\.\.\.)\s+")


def bracket_orphan_directions(text: str) -> str:
    """Restore the lost opening bracket of a stage direction.

    Some transcribed lines keep a direction's closing ``)`` or ``]`` but lost its opener:
    "So, did you play in college? sweatshirt he's wearing.)", "Oh, that is so hot. She walks
    around him to the other side)". Such a direction starts after the last sentence end before
    the closer (or at the start of the line), so an opener is put there and the direction then
    goes to the notes like any other. A closer right after a digit or a single letter is a list
    label, not a direction ("question 1) You and uh..."), and is left alone.
    """
    out = text
    depth = {")": 0, "]": 0}
    opener = {"(": ")", "{": ")", "[": "]"}  # "{she leaves)": the transcribers' stray brace
    i = 0
    while i < len(out):
        ch = out[i]
        if ch in opener:
            depth[opener[ch]] += 1
        elif ch in depth:
            if depth[ch]:
                depth[ch] -= 1
            elif not re.search(r"(?:\d|\b\w)$", out[:i]):
                head = out[:i].rstrip(" .!?")
                ends = list(_SENTENCE_END.finditer(head))
                start = ends[-1].end() if ends else len(head) - len(head.lstrip())
                out = out[:start] + ("(" if ch == ")" else "[") + out[start:]
                i += 1
        i += 1
    return out


def display_name(canonical: str) -> str:
    """What characters call each other: "Ross Geller" -> "Ross"; roles and descriptions
    ("The Teacher", "Big Bully") stay whole."""
    words = canonical.split()
    if len(words) < 2:
        return canonical
    low = [w.lower().strip(".#") for w in words]
    if (
        low[0] in _TITLES
        or low[0] in DESCRIPTOR_WORDS  # "The Teacher", "Big Bully": a description, not a name
        or any(w in _ROLE_WORDS for w in low)
        or any(ch.isdigit() or ch in "#'" for ch in canonical)
        or not all(w[:1].isupper() for w in words)
    ):
        return canonical
    return words[0]


# Voices that cannot take part in the scene (TV and radio, answering machines, tapes,
# intercoms and announcements, broadcasters, sounding devices) speak, but are never present
# and never a benchmark target. A label is a voice by what it is made of, not by a list of the
# labels the shared seasons happen to use: a transcriber names such a speaker by its sound
# source ("Hypnosis Tape", "Smoke Detector"), by the medium it comes through ("Man On Tv",
# "Woman On Tape", "Gary's Radio"), as a disembodied voice ("Phone Voice", "Janice's Voice")
# or by a broadcasting role ("Tv Announcer", "Anchorwoman", "Narrator"). A person on the phone
# hears and answers, so "On Phone" alone does not make a voice. docs/benchmark.md lists what
# this still misses (people on TV labelled by their own name, "Jay Leno").
#: Media a voice comes through.
VOICE_MEDIA = frozenset(
    {
        "tv", "television", "telly", "radio", "tape", "tapes", "cd", "recording",
        "recorded", "commercial", "broadcast", "intercom", "loudspeaker", "speakerphone",
        "machine", "message", "announcement", "webcast", "podcast",
    }
)  # fmt: skip
#: Devices that sound or talk.
VOICE_DEVICES = frozenset(
    {
        "computer", "alarm", "detector", "oven", "microwave", "timer", "doorbell", "buzzer",
        "gps", "siren", "beeper", "pager",
    }
)  # fmt: skip
#: Roles whose words reach the scene through a medium.
VOICE_ROLES = frozenset(
    {
        "announcer", "newscaster", "sportscaster", "broadcaster", "anchor", "anchorman",
        "anchorwoman", "newsreader", "narrator", "dj", "weatherman", "weatherwoman",
        "commentator",
    }
)  # fmt: skip
_VOICE_WORDS = VOICE_MEDIA | VOICE_DEVICES | VOICE_ROLES
_LABEL_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def is_voice_label(label: str) -> bool:
    """Whether a speaker label names a voice that cannot take part (see the note above):
    a word of a medium, a sounding device or a broadcasting role, or a "voice" head
    ("Voice", "Hold Voice", "Man's Voice", "Voice Over", "V.O.").

    >>> [is_voice_label(x) for x in ("Tv Doctor", "Phone Voice", "Woman On Tape", "Ross")]
    [True, True, True, False]
    """
    low = label.lower().replace("v.o.", " voiceover ")
    words = [w.removesuffix("'s") for w in _LABEL_WORD.findall(low)]
    if any(w in _VOICE_WORDS for w in words):
        return True
    return any(w in ("voice", "voices", "voiceover") for w in words)


def participant_for(canonical: str) -> Participant:
    if canonical == GROUP_SPEAKER:
        return Participant(id=GROUP_SPEAKER, name=None, role=GROUP_ROLE)
    if is_voice_label(canonical):
        return Participant(id=canonical, name=None, role=VOICE_ROLE)
    name = display_name(canonical)
    aliases = tuple(a for a in (canonical, *_NICKNAMES.get(canonical, ())) if a != name)
    return Participant(id=canonical, name=name, aliases=aliases)


def resolve_addressees(
    target: str,
    speaker: str,
    candidates: Sequence[str],
    fallback: Sequence[str],
    spoken_so_far: Sequence[str],
) -> tuple[str, ...] | None:
    """Participant ids named by the target of a "(to ...)" note.

    ``target`` is the note text after "to". It is split on commas and "and"; each part is
    resolved by its longest leading run of words (up to four) that names a scene speaker
    (``candidates``), else an episode speaker (``fallback``); trailing description is ignored
    ("Joey who has a pizza box" -> Joey). Group targets ("all", "everybody", "the others")
    resolve to everyone who has spoken earlier in the scene except the speaker, since that is
    all a listener could know. "himself"/"herself" and non-speaking targets ("the dog",
    "Emma") give ``()``: annotated, but no participant is addressed. Returns ``None`` only
    for an empty target.
    """
    t = _squash(target.strip(" .,;:!?-")).lower()
    if not t:
        return None
    if t in _SELF_TARGETS:
        return ()
    found: list[str] = []
    for part in re.split(r"\s*,\s*|\s+and\s+|\s*&\s*", t):
        part = part.strip(" .")
        if not part:
            continue
        if any(part == g or part.startswith(g + " ") for g in _GROUP_TARGETS):
            found.extend(s for s in spoken_so_far if s not in (speaker, GROUP_SPEAKER))
            continue
        pid = (
            _match_name(part, candidates)
            or _match_name(part, fallback)
            or _match_name(part, candidates, fuzzy=True)
        )
        if pid is not None:
            found.append(pid)
    return tuple(p for p in dict.fromkeys(found) if p != speaker)


# ----------------------------------------------------------------------------- internals


def _squash(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def _clean_segment_text(text: str) -> str:
    """Tidy the seams left where notes were cut out: "Excuse me. . That" -> "Excuse me. That"."""
    text = _squash(text)
    text = re.sub(r"([.!?,;:])(?:\s+[.,;:](?!\.))+(?=\s|$)", r"\1", text)
    return re.sub(r"^(?:[,;:]|\.(?!\.))\s*", "", text)


def _norm(s: str) -> str:
    return _squash(re.sub(r"[.\"]", "", s.lower()))


def _name_keys(canonical: str) -> set[str]:
    p = participant_for(canonical)
    keys = {_norm(canonical), _norm(p.display_name), *(_norm(a) for a in p.aliases)}
    words = _norm(canonical).split()
    if words and words[0] in _TITLES and len(words) > 1:
        keys.add(" ".join(words[1:]))
    keys |= {k for k, v in _NOTE_ONLY_NICKNAMES.items() if v == canonical}
    return keys


def _match_name(part: str, candidates: Sequence[str], fuzzy: bool = False) -> str | None:
    words = _norm(part).split()
    for prefix in ("the", "his", "her", "their"):
        if words and words[0] == prefix and len(words) > 1:
            words = words[1:]
            break
    index: dict[str, list[str]] = {}
    for c in candidates:
        if c == GROUP_SPEAKER:
            continue
        for k in _name_keys(c):
            index.setdefault(k, []).append(c)
    for n in range(min(4, len(words)), 0, -1):
        hits = list(dict.fromkeys(index.get(" ".join(words[:n]), [])))
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            return None  # ambiguous ("Geller"): better unannotated than wrong
    if fuzzy:
        # Fan transcripts misspell guest names ("mr Zellner" for the speaker "Mr. Zelner").
        for n in range(min(4, len(words)), 0, -1):
            key = " ".join(words[:n])
            if len(key) < 5:
                continue
            close = {
                c
                for k, cs in index.items()
                for c in cs
                if len(k) >= 5 and SequenceMatcher(a=key, b=k).ratio() >= _FUZZY_RATIO
            }
            if len(close) == 1:
                return close.pop()
    return None


def _episode_speakers(episode: dict[str, Any]) -> list[str]:
    out: dict[str, None] = {}
    for scene in episode.get("scenes", []):
        for u in scene.get("utterances", []):
            for s in u.get("speakers") or []:
                if s not in _GROUP_LABELS:
                    out.setdefault(s, None)
    return list(out)


@dataclass(slots=True)
class _Segment:
    text: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    address_target: str | None = None
    must_resolve: bool = False


def _segments(raw: str) -> list[_Segment]:
    """Split a line at addressing notes; other notes stay with their segment."""
    segments = [_Segment()]
    pos = 0
    for m in _NOTE.finditer(raw):
        segments[-1].text.append(raw[pos : m.start()])
        pos = m.end()
        note = m.group(0).strip()
        inner = note.strip("()[]{} ").rstrip(".")
        addr = _ADDRESS_NOTE.match(inner)
        if addr is not None and m.group(0)[0] == "(":
            segments.append(
                _Segment(
                    notes=[note],
                    address_target=addr.group("target"),
                    # "(back to Central Perk)" is a scene cut, not addressing: a note with a
                    # verb before "to" only counts when it names someone.
                    must_resolve=not inner.lower().startswith("to "),
                )
            )
        else:
            segments[-1].notes.append(note)
    segments[-1].text.append(raw[pos:])
    # Segments without speech hand their notes on: a leading "(pause)" goes to the next
    # segment; a trailing "(to Rachel)" with nothing said after it addresses nothing we can
    # see, so it stays a plain note of the previous segment.
    merged: list[_Segment] = []
    pending: list[str] = []
    for seg in segments:
        if _squash(" ".join(seg.text)):
            seg.notes[:0] = pending
            pending = []
            merged.append(seg)
        elif merged:
            merged[-1].notes.extend(seg.notes)
        else:  # leading, or "(to X) (to Y) text" where only the last note addresses
            pending.extend(seg.notes)
    if pending and merged:
        merged[-1].notes.extend(pending)
    return merged


def _json_scene(
    scene: dict[str, Any], episode_speakers: Sequence[str], path: Path
) -> Conversation | None:
    scene_id = str(scene.get("scene_id", ""))
    m = re.fullmatch(r"s(\d+)_e(\d+)_c(\d+)", scene_id)
    if m is None:
        raise ConversationFormatError(
            path, f"scene {scene_id!r}", "scene_id is not like s10_e01_c01"
        )
    sc = _Scene(int(m[1]), int(m[2]), int(m[3]))
    raw_utts = scene.get("utterances") or []
    scene_speakers = list(
        dict.fromkeys(
            s for u in raw_utts for s in (u.get("speakers") or []) if s not in _GROUP_LABELS
        )
    )
    spoken_so_far: list[str] = []
    for u in raw_utts:
        uid = str(u.get("utterance_id", ""))
        speakers = [str(s) for s in u.get("speakers") or []]
        raw = u.get("transcript_with_note") or u.get("transcript") or ""
        if not speakers:
            if raw.strip():
                sc.directions.append(raw.strip())
            continue
        group_line = len(speakers) > 1 or speakers[0] in _GROUP_LABELS
        speaker = GROUP_SPEAKER if group_line else speakers[0]
        segs = [s for s in _segments(bracket_orphan_directions(raw)) if _squash(" ".join(s.text))]
        if not segs:
            sc.dropped_lines += 1
            continue
        for k, seg in enumerate(segs):
            notes = list(seg.notes)
            if group_line and k == 0 and speakers != ["#ALL#"]:
                notes.insert(0, f"(spoken together by {', '.join(speakers)})")
            addressees = None
            if seg.address_target is not None:
                addressees = resolve_addressees(
                    seg.address_target,
                    speaker,
                    scene_speakers,
                    [s for s in episode_speakers if s not in scene_speakers],
                    spoken_so_far,
                )
                if seg.must_resolve and not addressees:
                    addressees = None
            sc.utterances.append(
                Utterance(
                    speaker=speaker,
                    text=_clean_segment_text(" ".join(seg.text)),
                    addressees=addressees,
                    id=uid if len(segs) == 1 else f"{uid}.{k + 1}",
                    note=" ".join(notes) or None,
                )
            )
        if speaker not in spoken_so_far:
            spoken_so_far.append(speaker)
    return _scene_conversation(sc, path, "s10json")


def _scene_conversation(sc: _Scene, path: Path, source: str) -> Conversation | None:
    if not sc.utterances:
        return None
    if source == "csv":
        sc.utterances = split_merged_tags(sc.utterances)
    # Order of first appearance as speaker or addressee (addressees can be silent characters).
    order: dict[str, None] = {}
    for u in sc.utterances:
        order.setdefault(u.speaker, None)
        for a in u.addressees or ():
            order.setdefault(a, None)
    episode = f"s{sc.season:02d}e{sc.episode:02d}"
    meta: dict[str, Any] = {
        "season": sc.season,
        "episode": sc.episode,
        "scene": sc.scene,
        "source": source,
        "directions": sc.directions,
    }
    if sc.dropped_lines:
        meta["dropped_non_speech_lines"] = sc.dropped_lines
    return Conversation(
        id=f"friends_{episode}c{sc.scene:02d}",
        corpus=CORPUS,
        utterances=tuple(sc.utterances),
        participants=tuple(participant_for(s) for s in order),
        domain=DOMAIN,
        group=episode,
        roster_known=False,
        source=str(path),
        metadata=meta,
    )


__all__ = [
    "CORPUS",
    "GROUP_SPEAKER",
    "bracket_orphan_directions",
    "display_name",
    "participant_for",
    "read_friends",
    "read_friends_csv",
    "read_friends_s10_json",
    "resolve_addressees",
    "split_merged_tags",
    "split_notes",
]
