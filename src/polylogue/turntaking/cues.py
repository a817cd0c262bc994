"""Lexical cues in an utterance: who is addressed, who is referenced, is it complete.

These rules define the benchmark categories (see docs/benchmark.md) and are reused as features
by the shipped model, so they are pure functions of (utterance text, participants).

Name and role matching is word-bounded and case-aware:

* In a conversation whose transcript keeps capitalisation, a name only matches in its
  capitalised form ("Will" the person, not "will" the verb).
* In an all-lower-case transcript names match in lower case, except names that are ordinary
  English words (see ``COMMON_WORD_NAMES``), which then never match.
* A one-letter participant id (AMI's ``A``..``E``) is never used as a name, so the article
  "a" can never count as a mention of participant A.
* Upper-case role codes ("PM", "UI") match only as upper-case tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from polylogue.conversation import DESCRIPTOR_WORDS, Participant, Utterance

# Names that are also ordinary words; in lower-cased transcripts they are ambiguous.
COMMON_WORD_NAMES = frozenset(
    {
        "will",
        "may",
        "june",
        "april",
        "august",
        "mark",
        "bill",
        "grant",
        "frank",
        "joy",
        "hope",
        "rich",
        "art",
        "pat",
        "sue",
        "don",
        "ray",
        "guy",
        "rose",
        "faith",
        "glen",
        "jack",
        "joe",
        "dean",
        "drew",
        "gene",
        "hunter",
        "major",
        "page",
        "sky",
        "summer",
        "victor",
        "wade",
        "gunther",
        "carol",
        "ben",
        "max",
        "chase",
        "cliff",
        "dawn",
        "eve",
        "iris",
        "ivy",
        "jean",
        "jewel",
        "lane",
        "miles",
        "nick",
        "penny",
        "robin",
        "sandy",
        "stone",
        "tim",
        "amber",
        "operator",
        "professor",
        "grad",
        "undergrad",
        "postdoc",
        "phd",
    }
)

# Words that may precede a vocative name at the start of an utterance ("Okay Ross, ...").
_OPENERS = (
    r"hey|hi|hello|oh|okay|ok|so|well|and|but|yes|yeah|yep|no|nope|right|alright|thanks|"
    r"thank\s+you|um|uh|now|look|listen|sorry|excuse\s+me|please|come\s+on|good\s+morning|"
    r"morning|bye|goodbye|great|cool|sure|wait|don't\s+worry|my\s+dear|dear|sweet"
)
_GREETERS = r"hey|hi|hello|thanks|thank\s+you|bye|goodbye|morning|good\s+morning|welcome|sorry"
# Words that follow a vocative name said without a comma ("Rachel you have to read this",
# "Okay look, Rachel I know"). Verbs like "is"/"can" are left out: "Rachel is here" is about
# Rachel, not to her.
_AFTER_VOCATIVE = (
    r"you|you're|you've|you'll|your|I|I'm|I've|I'll|we|we're|let's|please|listen|look|wait|"
    r"stop|don't|why|what|how|where|when|who|honey|sweetie|come|hold|guess|tell|give|get|this"
)


FILLER_WORDS = frozenset(
    {
        "um",
        "uh",
        "er",
        "erm",
        "ah",
        "oh",
        "hm",
        "hmm",
        "mm",
        "mhm",
        "mm-hmm",
        "mmhmm",
        "uh-huh",
        "uhhuh",
        "huh",
        "uh-uh",
        "mm-mm",
        "eh",
        "ehm",
        "em",
        "hmmm",
        "mmm",
        "ooh",
        "umm",
        "uhh",
        "ahh",
        "ohh",
    }
)
_FILLER_TOKEN = re.compile(
    r"^(?:u+m+|u+h+|e+r+m*|a+h+|o+h+|h+m+|m+h*m+|m+-?h+m+|u+h+-?h+u+h+|h+u+h+|e+h+|e+m+)$"
)
_PUNCT = re.compile(r"[^\w\s'-]+")
_WORD = re.compile(r"[\w'-]+")


def strip_punctuation(text: str) -> str:
    return re.sub(r"[^\w\s]", "", text).strip()


def is_filler_only(text: str) -> bool:
    """True for utterances made only of fillers and backchannel sounds (um, uh-huh, mm-hmm)."""
    words = _WORD.findall(text.lower())
    if not words:
        return True
    return all(
        w.strip("-'") in FILLER_WORDS or bool(_FILLER_TOKEN.match(w.strip("-'"))) for w in words
    )


#: Words an acknowledgement may consist of ("mm-hmm", "yeah right", "okay", "I see").
BACKCHANNEL_WORDS = frozenset(
    {
        "yeah", "yes", "yep", "yup", "yea", "right", "okay", "ok", "sure", "alright",
        "exactly", "true", "really", "wow", "cool", "great", "gotcha", "i", "see", "indeed",
        "absolutely", "definitely", "totally", "uh-huh", "mm-hmm", "mhm", "aha", "ah-ha",
    }
)  # fmt: skip
_HESITATION = re.compile(r"^(?:u+m+|u+h+|e+r+m*|e+h*m+)$")
#: The longest acknowledgement, in words.
BACKCHANNEL_MAX_WORDS = 4


def is_lexical_backchannel(text: str) -> bool:
    """Only acknowledgement words and fillers ("Mm-hmm.", "Yeah, right.", "Oh, I see")."""
    words = [w.strip("-'") for w in _WORD.findall(text.lower())]
    words = [w for w in words if w]
    if not words or len(words) > BACKCHANNEL_MAX_WORDS:
        return False
    if words in (["i"], ["see"]):
        return False
    if all(_HESITATION.match(w) for w in words):
        return False  # "Uh", "Um": a hesitation starts a turn, it acknowledges nothing
    return all(
        w in BACKCHANNEL_WORDS or w in FILLER_WORDS or bool(_FILLER_TOKEN.match(w)) for w in words
    )


def is_too_short(text: str, min_chars: int = 3) -> bool:
    """Fewer than ``min_chars`` characters after removing punctuation (the paper's filter)."""
    return len(strip_punctuation(text).replace(" ", "")) < min_chars


def looks_incomplete(text: str) -> bool:
    """Trailing-off or cut-off utterance: '...', a dash, a trailing filler or <= 2 words."""
    t = text.strip()
    if t.endswith(("...", "…", "-", "--", "—")):
        return True
    words = _WORD.findall(t.lower())
    if len(words) <= 2:
        return True
    return words[-1] in FILLER_WORDS or words[-1] in {"and", "but", "or", "so", "the", "a", "to"}


_LEAD = (
    r"(?:(?:okay|ok|so|well|all right|alright|anyway|yeah|um|uh|oh|listen|look|then|and|but|no|"
    r"y'know what|you know what)[,.!]*\s+)*"
)
#: "I'm gonna go", "I gotta go", "I have to get going", "I'm outta here" (first person only).
_LEAVING = re.compile(
    r"\bI(?:'m| am) (?:gonna|going to) (?:go|get going|take off|head|split|leave)\b"
    r"|\bI (?:gotta|got to|have to|'ve got to|'ve gotta|have got to|need to|should|better|"
    r"'d better|must) (?:go|get going|run|head|take off|split|be going|leave|get back)\b"
    r"|\bI(?:'m| am) (?:leaving|off|outta here|out of here|heading|taking off|going home)\b",
    re.IGNORECASE,
)
#: A farewell sentence: "Bye.", "Okay, bye.", "See ya pals.", "Thanks!", "I'll see you later."
_FAREWELL = re.compile(
    _LEAD + r"(?:bye(?:-bye)?|goodbye|good-bye|see (?:you|ya)\b|later\b|thanks|thank you|"
    r"good ?night|take care|I'll see you|I will see you|I'll talk to you)[^?]*$",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def says_own_departure(text: str) -> bool:
    """The speaker announces that they are leaving and takes leave: the utterance **ends on a
    farewell sentence** and one of the two sentences before it says "I'm gonna go", "I gotta
    go", "I'm outta here"... ("I'm gonna go wash up first. Thanks!", "Well, ok then. I'm gonna
    go. Bye."). Either half alone is not enough: "I gotta go." is often talked out of, and a
    "Bye." is said to someone who leaves as often as by them (docs/benchmark.md, presence).
    """
    sentences = [s for s in _SENTENCE.split(text.strip()) if s]
    if len(sentences) < 2 or not _FAREWELL.match(sentences[-1]):
        return False
    return any(_LEAVING.search(s) for s in sentences[-3:-1])


def is_question(text: str) -> bool:
    """The utterance ends on a question mark: its last sentence asks something."""
    return text.rstrip(" \t\"')]\u201d\u2019").endswith("?")


def is_cased(utterances: Iterable[Utterance]) -> bool:
    """Does the transcript keep capitalisation (beyond the pronoun 'I')?"""
    for u in utterances:
        for w in _WORD.findall(u.text):
            if w[0].isupper() and w not in {"I", "I'm", "I'll", "I've", "I'd"}:
                return True
    return False


@dataclass(frozen=True, slots=True)
class _Patterns:
    mention: re.Pattern[str]  # any word-bounded mention of a name or role
    vocative: re.Pattern[str]  # the name/role used to address


@dataclass(frozen=True, slots=True)
class _Matcher:
    pid: str
    own: _Patterns | None  # names/roles that only this participant has
    shared: _Patterns | None  # names shared with someone else ("Brian" for two Brians)
    role_only: bool  # True when no personal name is known (mentions are role mentions)


def _name_variants(p: Participant) -> list[str]:
    names: list[str] = []
    for n in (p.name, *p.aliases):
        if not n:
            continue
        n = n.strip()
        names.append(n)
        parts = n.split()
        if len(parts) > 1 and p.name == n and parts[0].lower().strip(".") not in DESCRIPTOR_WORDS:
            names.append(parts[0])  # first name: "Larry Culp" -> "Larry"; not "The Teacher"
    out = []
    for n in dict.fromkeys(names):
        if len(n) < 2 or (n == p.id and len(p.id) < 2):
            continue
        out.append(n)
    return out


def _role_variants(p: Participant) -> list[str]:
    if not p.role or p.role.lower() in {"group", "unknown"}:
        return []
    return [p.role]


def _is_code(term: str) -> bool:
    return len(term) <= 3 and term.isupper()


def _term_pattern(term: str, cased: bool) -> str | None:
    """Regex for one name/role term, or None if it cannot be matched safely."""
    words = term.split()
    if _is_code(term):
        return r"(?<![\w'])" + re.escape(term) + r"(?![\w'])" if cased else None
    if not cased and term.lower() in COMMON_WORD_NAMES:
        return None
    body = r"\s+".join(re.escape(w) for w in words)
    # A possessive ("Bob's") is still a mention of Bob.
    if cased and term[:1].isupper():
        return r"(?<![\w'])" + body + r"(?:'s)?(?![\w'])"
    return r"(?i:(?<![\w'])" + body + r"(?:'s)?(?![\w']))"


def _patterns(terms: list[str]) -> _Patterns | None:
    if not terms:
        return None
    alt = "(?:" + "|".join(terms) + ")"
    # A name followed by "?" is only a vocative where it stands alone or after a comma
    # ("Ross?", "Okay, Ross?", "..., Ross?"): inside a question it is talked about ("Who's
    # Paul?", "Where's Chandler?"). A name followed by ":" is a speaker tag merged into the
    # line ("Who? Joey: Me."), not address.
    voc = (
        rf"^\W*(?:(?i:{_OPENERS})\W+)*{alt}\s*(?:[,!?;]|\.|$)"  # "Ross, ..." / "Okay Ross."
        rf"|[,;]\s*{alt}\s*[.!?]*\s*$"  # "..., Ross?"
        rf"|[,;.!?]\s*{alt}\s*[,!?]"  # "... . Ross, what ..."
        rf"|(?i:{_GREETERS})[\s,]+{alt}(?![\w'])"  # "thanks Ross" / "hi Ross"
        # "Rachel you have to read this", "Okay look, Rachel I know": no comma, but a word
        # that only an addressee can be followed by.
        rf"|(?:^|[.!?]\s+)\W*(?:(?i:{_OPENERS})\W+)*{alt}\s+(?i:{_AFTER_VOCATIVE})(?![\w'])"
        # "Run Phoebe run.", "Go Ross go!": a word repeated around the name.
        rf"|(?:^|[.!?]\s+)\W*(?P<rep>[A-Za-z]+)\s+{alt}\s+(?i:(?P=rep))(?![\w'])"
        # Identifying the addressee: "You're the Project Manager.", "The industrial designer
        # - that's you.", "it's your turn, the marketing expert".
        rf"|(?i:you're|you\s+are)\s+{alt}(?![\w'])"
        rf"|{alt}\s*[-\u2013\u2014,]*\s*(?i:that's|that\s+is)\s+(?i:you)(?![\w'])"
    )
    return _Patterns(mention=re.compile(alt), vocative=re.compile(voc))


def build_matchers(participants: Sequence[Participant], cased: bool) -> dict[str, _Matcher]:
    """Compile mention and vocative patterns once per conversation.

    A name several participants share (two people called Brian) is kept apart: a match on it
    is attributed at cue time to whichever of them spoke most recently.
    """
    variants = {p.id: participant_terms(p) for p in participants}
    owners: dict[str, set[str]] = {}
    for pid, (names, roles) in variants.items():
        for t in (*names, *roles):
            owners.setdefault(t.lower(), set()).add(pid)
    return {p.id: participant_matcher(p.id, *variants[p.id], owners, cased) for p in participants}


def participant_terms(p: Participant) -> tuple[list[str], list[str]]:
    """The names (with first names) and roles a participant can be called by."""
    return _name_variants(p), _role_variants(p)


def participant_matcher(
    pid: str, names: list[str], roles: list[str], owners: Mapping[str, set[str]], cased: bool
) -> _Matcher:
    """One participant's matcher; ``owners`` maps each lower-cased term to who bears it."""
    own: list[str] = []
    shared: list[str] = []
    for t in (*names, *roles):
        pat = _term_pattern(t, cased)
        if pat and t in roles and not _is_code(t):
            # A role is said with its article: "The Marketing Expert." hands D the floor.
            pat = r"(?:(?i:the)\s+)?" + pat
        if pat:
            (shared if len(owners[t.lower()]) > 1 else own).append(pat)
    # Upper-case codes among the aliases ("PM") are role codes, not names.
    has_name = any(_term_pattern(n, cased) for n in names if not _is_code(n))
    return _Matcher(pid, _patterns(own), _patterns(shared), role_only=not has_name)


@dataclass(frozen=True, slots=True)
class UtteranceCues:
    """Who an utterance addresses or references, and why."""

    addressed: dict[
        str, str
    ]  # participant id -> evidence ("annotation", "note", "vocative", "role")
    referenced: dict[str, str]  # participant id -> evidence ("name", "role")
    annotated: bool  # the corpus annotates addressees for this utterance


def utterance_cues(
    utterance: Utterance,
    matchers: dict[str, _Matcher],
    present: Iterable[str] | None = None,
    last_spoke: Mapping[str, int] | None = None,
    previous: Utterance | None = None,
) -> UtteranceCues:
    """Address and reference cues of ``utterance`` for every participant (speaker excluded).

    Annotated addressees (AMI ``addressee``, Friends "(to X)" notes) are trusted first; a
    vocative name/role in the text counts as address too, unless the annotation names other
    addressees. A participant who is mentioned without being addressed is "referenced".
    ``last_spoke`` (participant -> index of their latest utterance) resolves shared names.
    A bare name answering someone else's question (``previous``: "Who did you miss the
    most?" - "Monica.") names the answer, it does not address that person.
    """
    addressed: dict[str, str] = {}
    referenced: dict[str, str] = {}
    candidates = set(matchers) if present is None else set(present)
    candidates.discard(utterance.speaker)
    annotated = utterance.addressees is not None
    if utterance.addressees:
        evidence = "note" if utterance.note else "annotation"
        for a in utterance.addressees:
            if a != utterance.speaker:
                addressed[a] = evidence
    text = utterance.text
    vocative_allowed = not utterance.addressees
    bare_answer = (
        previous is not None
        and previous.speaker != utterance.speaker
        and is_question(previous.text)
        and not is_question(text)
    )
    bare_text = strip_punctuation(text) if bare_answer else ""
    shared_hits: list[tuple[str, bool]] = []
    for pid in sorted(candidates):
        m = matchers.get(pid)
        if m is None:
            continue
        if m.own is not None and m.own.mention.search(text):
            vocative = m.own.vocative.search(text) is not None and vocative_allowed
            if vocative and bare_answer and m.own.mention.fullmatch(bare_text):
                vocative = False
            _record(pid, m, vocative, addressed, referenced)
        elif m.shared is not None and m.shared.mention.search(text):
            shared_hits.append(
                (pid, m.shared.vocative.search(text) is not None and vocative_allowed)
            )
    if shared_hits and last_spoke:
        spoken = [(last_spoke[pid], pid, voc) for pid, voc in shared_hits if pid in last_spoke]
        if spoken:
            _, pid, voc = max(spoken)
            _record(pid, matchers[pid], voc, addressed, referenced)
    return UtteranceCues(addressed=addressed, referenced=referenced, annotated=annotated)


def _record(
    pid: str, m: _Matcher, vocative: bool, addressed: dict[str, str], referenced: dict[str, str]
) -> None:
    if pid in addressed:
        return
    if vocative:
        addressed[pid] = "role" if m.role_only else "vocative"
    else:
        referenced[pid] = "role" if m.role_only else "name"
