"""Who the words of an utterance put the turn to: one address verdict per utterance.

A live agent reads its transcript through a speech recognizer, which often writes no commas,
no question marks and no capitals ("dave can you check the logs"). The verdict is therefore
read off the utterance's **recognizer rendering** (:func:`polylogue.rendering.recognizer_text`:
lower case, no punctuation, stage directions dropped) and the names of the participants, so
"Dave, can you check the logs?" and "dave can you check the logs" get the same verdict. It
says who is addressed, by which words, and how:

* ``name-start`` / ``name-middle`` / ``name-end``: a name (id, name, first name, alias or a
  role of several words, "the project manager") used as a vocative: at the start ("dave since
  you wrote it what broke"), inside before a request ("i looked so dave can you check"), or at
  the end ("can we ship it dave");
* ``after-greeting``: after "thanks", "hi", "bye", "thank you"... ("thanks anna dave any
  update" addresses Anna and Dave) or after an opener or a filler ("ok dave", "um dave");
* ``alone``: the utterance is only the name ("Dave?"), unless it answers another speaker's
  question ("who wrote it" - "dave" names the answer);
* ``introduction``: "this is dave", "meet dave" (said by someone else: the newcomer is greeted);
* ``earlier-in-turn``: the speaker's previous utterance, in the same turn, addressed them;
* ``follow-up``: a question to "you" that names nobody, right after the addressee spoke
  something more than a filler or an acknowledgement ("can you check the logs", "what do you
  think", "did you see that"; recognised from its words: an auxiliary or a wh-word with "you",
  or a "you" tag at the end; a question mark in the original text also counts); a "you" in
  text read out ("it says your bill will rise") asks nobody;
* ``you-after``: the same without a question by its words, on a recognizer's text only: a
  "you" statement right after the addressee spoke ("you worked in a mine", "so you're really
  not going": a recognizer drops the question mark that made them questions). Written text
  says it with its own question mark, so there a "you" statement asks nobody. (Gating it by
  the punctuation restorer's P(question) was tried: it spared two generic "you" lines of the
  development probe and lost 7 to 17 points of the corpora's recognizer follow-ups.);
* ``dyad-question``: with two people in the room, a question by its words that calls nobody
  else ("how long should it be") asks the other one.

Words that call someone by relation or endearment ("honey can you get the door", "kids get
your shoes": :data:`ADDRESS_TERMS`) call someone the roster does not name: the verdict's
``off_roster`` is set and no "you" in them asks the previous speaker.

A name used in the third person is *mentioned*, never addressed: after a preposition or a
verb that takes it as an object ("i told dave", "ask dave", "with dave"), as a possessive
("dave's code"), or as the subject of a verb ("dave said", "dave is", "dave wrote it",
"dave will"). A question to someone else (a vocative to another person, or a group word:
"you guys", "everyone") is not a follow-up to the previous speaker.

**Exact rules and a learned model.** A possessive, an introduction, a name after a greeting
or a thanks ("thanks mark", "hi there dave"), a name alone, a name set off by written commas
and a preposition's object are decided by rule: there the words say it plainly. Every other
name (a name followed by a verb, inside a long line, at the end of a verbless question; a
roster name that is also an everyday word, :data:`polylogue.turntaking.cues.COMMON_WORD_NAMES`)
gets the rulebook's reading below, weighed by the learned address model
(:mod:`polylogue.turntaking.address_model`, trained from the corpora): the model turns a
vocative reading into a mention below its ``threshold`` and a mention into a vocative at or
above its ``override``. ``address_verdict(..., model=None)`` gives the rulebook's reading
alone. Names are matched by spelling and, for a recognizer's near misses ("shawn" for Sean),
by sound (:mod:`polylogue.turntaking.sounds`). One-letter ids (AMI's ``A``..``E``) and
upper-case role codes ("PM") are never names here: a recognizer writes "me", "id" and "a" for
them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from polylogue.conversation import Participant
from polylogue.rendering import recognizer_text
from polylogue.turntaking.address_model import (
    AddressModel,
    Candidate,
    candidate_features,
    load_address_model,
)
from polylogue.turntaking.cues import (
    COMMON_WORD_NAMES,
    is_filler_only,
    is_lexical_backchannel,
    participant_terms,
)
from polylogue.turntaking.sounds import SoundIndex, ascii_fold

#: An everyday word the recognizer was unsure of that sounds like a roster name is read as
#: that name (the address model judges it as it judges a name), not as the everyday word.
UNSURE_EVERYDAY_AS_NAME = True
#: Words a recognizer was unsure of that may be joined into one name (two, or three words),
#: when at least this many of them are unsure.
UNSURE_JOIN_NEEDS = 1

#: The kinds of address, in the order the module docstring explains them.
ADDRESS_KINDS: tuple[str, ...] = (
    "name-start",
    "name-middle",
    "name-end",
    "after-greeting",
    "alone",
    "introduction",
    "earlier-in-turn",
    "follow-up",
    "you-after",
    "dyad-question",
)

_TOKEN = re.compile(r"[\w']+")
# Stage directions ("(to Ross)", "[laughs]") are notes about the words, not words.
_DIRECTION = re.compile(r"\([^)]*\)?|\[[^\]]*\]?|\{[^}]*\}?")

#: Words that close the next name's turn instead of handing it the floor.
_THANKS = frozenset({"thanks", "bye", "goodbye", "cheers"})

_GREETINGS = frozenset(
    {"hey", "hi", "hello", "thanks", "bye", "goodbye", "morning", "afternoon", "evening", "welcome",
     "cheers", "congratulations", "congrats", "night", "goodnight", "sorry", "howdy", "yo"}
)  # fmt: skip
#: Words that may stand before a vocative at the start of a sentence ("ok dave", "so dave").
_OPENERS = frozenset(
    {"ok", "okay", "alright", "right", "so", "well", "now", "and", "but", "yes", "yeah", "yep",
     "no", "nope", "oh", "um", "uh", "uhm", "er", "erm", "ah", "hmm", "mm", "look", "listen",
     "great", "cool", "good", "fine", "sure", "anyway", "wait", "please", "excuse", "me",
     "dear", "my", "actually", "then", "also", "anyways", "oops", "wow", "hey", "you", "thank",
     "all", "sorry"}
)  # fmt: skip
_AUX = frozenset(
    {"can", "could", "would", "will", "shall", "should", "do", "did", "are", "were", "have", "am",
     "had", "is", "was", "may", "might", "must", "won't", "can't", "don't", "didn't",
     "couldn't", "wouldn't", "shouldn't", "aren't", "weren't", "haven't", "isn't", "wasn't",
     "does", "doesn't", "has", "hasn't"}
)  # fmt: skip
_WH = frozenset(
    {"what", "what's", "whats", "who", "who's", "whom", "whose", "which", "when", "where",
     "where's", "why", "how", "how's"}
)  # fmt: skip
_YOU = frozenset({"you", "your", "you're", "you've", "you'll", "you'd", "yours", "ya", "yourself"})
#: After a name, a sign that the name is the subject of a clause (third person).
_SUBJECT_NEXT = frozenset(
    {"is", "was", "has", "had", "said", "says", "does", "doesn't", "isn't", "wasn't",
     "hasn't", "hadn't", "didn't", "and", "or", "who", "whose", "thinks", "wants",
     "went", "got", "gets", "never", "always", "also", "too", "knows", "told",
     "asked", "wrote", "made", "did", "came", "left", "took", "gave", "knew", "thought",
     "saw", "found", "sent", "ran", "broke", "brought", "bought", "kept", "seems", "seemed",
     "from", "of", "in", "at", "on", "with", "over", "himself", "herself",
     "'s", "isnt", "wasnt", "doesnt", "didnt", "already", "still", "used"}
)  # fmt: skip
#: Modals after a name: a request when "you"/"we"/"i" follows ("dave can you"), else the
#: name is their subject ("dave can do it", "dave will be late").
_MODALS = frozenset(
    {"can", "could", "would", "will", "should", "shall", "might", "may", "must", "won't",
     "can't", "couldn't", "wouldn't", "shouldn't", "do", "don't", "are", "were", "have",
     "haven't", "aren't", "did"}
)  # fmt: skip
_REQUEST_SUBJECTS = frozenset({"you", "your", "we", "i", "ya", "u"})
#: After "is"/"can"... following a name, a subject that makes it a question to the name.
_INVERTED_SUBJECTS = _REQUEST_SUBJECTS | frozenset(
    {"he", "she", "they", "anyone", "anybody", "everyone"}
)
#: Conjunctions: a name after one and before "you" starts a clause put to it.
_CONJUNCTIONS = frozenset(
    {"that", "if", "when", "because", "so", "then", "since", "and", "but", "or", "though"}
)
#: Adverbs between a subject and its verb ("joey kinda disabled it").
_ADVERBS = frozenset(
    {"sure", "kinda", "really", "actually", "probably", "totally", "definitely", "obviously",
     "apparently", "clearly", "certainly", "sort", "kind", "finally", "already", "still",
     "usually", "often", "sometimes", "basically", "literally", "honestly", "just"}
)  # fmt: skip
#: Pronouns of the speaker and the listener: after "and dave" they start a clause to Dave.
_FIRST_SECOND = frozenset(
    {"i", "i'm", "i'd", "i'll", "i've", "we", "we're", "we'd", "we'll", "we've", "you",
     "you're", "you'd", "you'll", "you've", "your", "let's"}
)  # fmt: skip
#: Verb forms a singular name cannot be the subject of.
_NOT_THIRD_PERSON = frozenset(
    {"do", "don't", "are", "aren't", "were", "weren't", "have", "haven't", "am"}
)
#: "ross is that true", "dave is it ready": a question to the name after "is"/"was" only.
_DEMONSTRATIVES = frozenset({"it", "that", "this", "there"})
_IRREGULAR_PAST = frozenset(
    {"said", "told", "made", "met", "sat", "stood", "kept", "lost", "won", "wore", "ate",
     "drank", "drove", "flew", "fell", "felt", "held", "hid", "hit", "hurt", "knew", "led",
     "lent", "meant", "paid", "quit", "rode", "rang", "sang", "sank", "shot", "shut", "slept",
     "spent", "spoke", "stole", "swam", "swore", "threw", "understood", "woke", "wrote",
     "became", "began", "bit", "blew", "chose", "dug", "drew", "forgot", "forgave", "froze",
     "grew", "hung", "heard", "taught", "bought", "caught", "fought", "thought", "brought",
     "sought", "went", "came", "gave", "took", "saw", "got", "did", "had", "was", "left",
     "ran", "broke", "sent", "found", "built", "dealt", "fed", "fled", "laid", "lit", "sold",
     "stuck", "struck", "swung", "tore", "wept", "won't", "would", "could", "should"}
)  # fmt: skip
#: Before a name, a word that makes it an object or a complement (third person).
_OBJECT_BEFORE = frozenset(
    {"to", "with", "about", "for", "from", "at", "like", "than", "by", "of", "as", "on", "in",
     "into", "onto", "and", "or", "nor", "is", "was", "are", "were", "be", "been", "being",
     "that", "if", "tell", "told", "ask", "asked", "call", "called", "calling", "see", "saw",
     "seen", "met", "meet", "know", "knew", "known", "love", "loves", "loved", "hate", "hates",
     "need", "needs", "needed", "want", "wants", "wanted", "help", "helped", "invite",
     "invited", "email", "emailed", "ping", "pinged", "text", "texted", "remind", "reminded",
     "introduce", "introduced", "trust", "blame", "believe", "miss", "missed", "find", "found",
     "bring", "brought", "kiss", "kissed", "marry", "married", "date", "dated", "dating",
     "hire", "hired", "fire", "fired", "pay", "paid", "get", "got", "let", "make", "made",
     "the", "a", "an", "his", "her", "my", "our", "their", "its", "poor", "mr", "mrs", "ms",
     "dr", "uncle", "aunt", "little", "old", "big", "including", "without", "against",
     "behind", "between", "under", "over", "after", "before", "around", "near", "named",
     "where's", "who's", "whos", "wheres", "where", "who", "said", "says", "say", "tells",
     "asks", "thank", "when", "because", "since", "not", "even", "only", "just",
     "both", "either", "neither", "whether", "unlike", "per", "via", "cc", "forward",
     "heard", "hear", "follow", "followed", "join", "joined", "joining", "visit", "visited",
     "beat", "beats", "likes", "liked", "sister", "brother", "mom", "dad", "wife",
     "husband", "girlfriend", "boyfriend", "friend", "except", "vs", "versus", "it's",
     "that's", "he's", "she's", "leave", "hug", "dump", "choose", "pick", "push",
     "kill", "watch", "show", "give", "send", "take", "fix", "sue", "forget", "some",
     "any", "every", "another", "whom", "whose", "until", "till", "while", "although",
     "though", "unless", "upon", "within", "beside", "besides", "among", "toward",
     "towards", "through", "throughout", "during", "outside", "inside", "ditch", "dumping",
     "seeing", "marrying", "kissing", "telling", "asking", "remember", "teach", "scare",
     "tease", "annoy", "bother", "impress", "surprise", "up", "thinking",
     "leaving", "helping", "meeting", "watching", "hugging", "becoming"}
)  # fmt: skip
#: After a vocative inside a sentence: what only an addressee is followed by.
_VOCATIVE_NEXT = frozenset(
    {"you", "your", "you're", "you've", "you'll", "you'd", "i", "i'm", "i've", "i'll", "i'd",
     "we", "we're", "we've", "we'll", "let's", "please", "listen", "look", "wait", "stop",
     "don't", "do", "what", "what's", "how", "how's", "where", "why", "when", "who", "which",
     "any", "anything", "since", "quick", "tell", "give", "go", "check", "take", "come",
     "hold", "guess", "try", "help", "thanks", "thank", "here's", "over", "one", "real",
     "can", "could", "would", "will", "did", "are", "have", "if", "it's", "that's", "just",
     "honey", "sweetie", "buddy", "man", "mate", "sir", "ma'am", "let", "put", "make",
     "is", "shall", "should", "remember", "sorry", "hey", "hi", "okay", "ok", "right", "yes",
     "no", "yeah", "great", "good", "nice", "well", "so", "um", "uh"}
)  # fmt: skip
#: After a name inside a sentence, words that only an addressee is followed by, whatever
#: stands before the name ("... it dave any update", "... so dave what do you think").
_STRONG_NEXT = _YOU | frozenset(
    {"any", "please", "what", "what's", "how", "how's", "why", "quick", "thoughts"}
)
#: Words that make a "you" a group ("you guys", "y'all"); "everyone", "anyone"... only where a
#: vocative stands (first or last) and "you all", "all of you".
_GROUP = frozenset({"guys", "y'all", "yall", "folks"})
_GROUP_VOCATIVE = frozenset({"everyone", "everybody", "anyone", "anybody", "all", "people"})


def to_group(words: Sequence[str]) -> bool:
    """Is a "you" in these words plural ("you guys", "you all", "everyone what do you ...")?"""
    if any(w in _GROUP for w in words):
        return True
    for a, b in itertools.pairwise(words):
        if a == "you" and b in ("all", "people", "both", "two", "three", "lot"):
            return True
    if any(
        a == "all" and b == "of" and c == "you"
        for a, b, c in zip(words, words[1:], words[2:], strict=False)
    ):
        return True
    i = 0
    while i < len(words) - 1 and words[i] in _OPENERS and words[i] not in _GROUP_VOCATIVE:
        i += 1
    return bool(words) and (words[i] in _GROUP_VOCATIVE or words[-1] in _GROUP_VOCATIVE)


#: "you" tags that close a question ("... don't you", "... did you").
_TAG_AUX = frozenset(
    {"don't", "didn't", "aren't", "won't", "can't", "haven't", "wouldn't", "couldn't",
     "do", "did", "are", "will", "can", "have", "would", "could", "weren't", "were"}
)  # fmt: skip
_FILLERS = frozenset({"um", "uh", "uhm", "er", "erm", "ah", "oh", "hmm", "mm", "so", "well"})

#: The rulebook's lexicon as word classes, the address model's features (a word may be in
#: several classes).
WORD_CLASSES: dict[str, tuple[str, ...]] = {}
for _cls, _words in (
    ("greeting", _GREETINGS), ("thanks", _THANKS), ("opener", _OPENERS), ("aux", _AUX),
    ("wh", _WH), ("you", _YOU), ("subject-next", _SUBJECT_NEXT), ("modal", _MODALS),
    ("conj", _CONJUNCTIONS), ("adverb", _ADVERBS), ("first-second", _FIRST_SECOND),
    ("past", _IRREGULAR_PAST), ("object-before", _OBJECT_BEFORE),
    ("vocative-next", _VOCATIVE_NEXT), ("group", _GROUP | _GROUP_VOCATIVE),
    ("tag-aux", _TAG_AUX), ("filler", _FILLERS),
):  # fmt: skip
    for _w in _words:
        WORD_CLASSES[_w] = (*WORD_CLASSES.get(_w, ()), _cls)


@dataclass(frozen=True, slots=True)
class Address:
    """One participant the words address or mention, how, and by which words."""

    pid: str
    kind: str
    words: str


@dataclass(frozen=True, slots=True)
class AddressVerdict:
    """Who one utterance addresses (``addressed``) and names without addressing
    (``mentioned``), read from its words alone (see the module docstring)."""

    addressed: tuple[Address, ...] = ()
    mentioned: tuple[Address, ...] = ()
    #: A question to "you" that names nobody as addressee (whoever spoke before is asked).
    you_question: bool = False
    #: The words call someone outside the roster ("honey can you get the door", "kids get
    #: your shoes"): nobody in the room is asked, whatever "you" follows.
    off_roster: bool = False
    #: The words speak to "you" (not a filler "you know", a "thank you", a "you guys" or
    #: text read out), whether or not anyone is addressed by them.
    to_you: bool = False

    @property
    def addressees(self) -> tuple[str, ...]:
        return tuple(a.pid for a in self.addressed)

    def of(self, pid: str) -> Address | None:
        """How ``pid`` is addressed, or None."""
        return next((a for a in self.addressed if a.pid == pid), None)

    def mention_of(self, pid: str) -> Address | None:
        return next((a for a in self.mentioned if a.pid == pid), None)

    def to_dict(self, target: str | None = None) -> dict[str, object]:
        """``{"addressees", "by", "kind"}``; with ``target``: the target's own verdict
        ("addressed", "named", "someone else addressed" or "not named") and its words."""
        first = self.of(target) if target is not None else None
        first = first or (self.addressed[0] if self.addressed else None)
        out: dict[str, object] = {
            "addressees": list(self.addressees),
            "by": first.words if first else None,
            "kind": first.kind if first else None,
        }
        if target is not None:
            out["target"] = self.relation(target)
            mention = self.mention_of(target)
            if self.of(target) is None and mention is not None:
                out["by"], out["kind"] = mention.words, mention.kind
        return out

    def relation(self, target: str) -> str:
        """The target's relation to the words: addressed, named, someone else addressed, not
        named."""
        if self.of(target) is not None:
            return "addressed"
        if self.mention_of(target) is not None:
            return "named"
        if self.addressed or self.off_roster:
            return "someone else addressed"
        return "not named"


NO_ADDRESS = AddressVerdict()


@dataclass(frozen=True, slots=True)
class PriorTurn:
    """What the verdict needs to know about the talk just before an utterance."""

    #: The speaker of the turn before the current speaker's turn, and their last words (a
    #: third person's "mm-hmm" in between skipped).
    speaker: str | None = None
    text: str = ""
    #: The current speaker's previous utterance in this turn was addressed to these.
    earlier: tuple[str, ...] = ()
    #: The utterance just before (another speaker's) asks who or which (a bare name after it
    #: answers the question instead of calling that person).
    question_before: bool = False
    #: The transcript is a recognizer's (no punctuation so far): its marks, if any, were
    #: put back by the engine, so a "you" statement may have been a question.
    recognizer: bool = False
    #: The speaker of the turn just before, however short it was (a repair request asks them).
    just_before: str | None = None
    #: People in the room (the speaker included); 0 when unknown.
    people: int = 0
    #: The people present other than the speaker, when the room knows them ("" unknown).
    listeners: tuple[str, ...] = ()


_Term = tuple[tuple[str, ...], str, bool]


class NameTerms:
    """The lower-case word sequences each participant of a roster is called by, indexed by
    their first word; updated one participant at a time (a live roster grows as people
    speak), so an utterance only looks up its own words."""

    def __init__(
        self, participants: Iterable[Participant] = (), everyday: Collection[str] | None = None
    ) -> None:
        #: first word -> ((words, participant, is_common_word), ...)
        self.by_first: dict[str, tuple[_Term, ...]] = {}
        self._words: dict[str, list[tuple[tuple[str, ...], bool]]] = {}
        if everyday is None:
            model = load_address_model()
            everyday = model.everyday if model is not None else frozenset()
        #: One-word names by sound, for a recognizer's near-miss spellings.
        self.sounds = SoundIndex(everyday)
        self.add(participants)

    @classmethod
    def of(cls, participants: Iterable[Participant]) -> NameTerms:
        return cls(participants)

    def add(self, participants: Iterable[Participant]) -> None:
        for p in participants:
            if p.id in self._words:
                continue
            terms = participant_words(p)
            self._words[p.id] = terms
            for words, common in terms:
                self.by_first[words[0]] = (*self.by_first.get(words[0], ()), (words, p.id, common))
                if len(words) == 1 and not common:
                    self.sounds.add(words[0], p.id)

    def remove(self, pid: str) -> None:
        self.sounds.remove(pid)
        for words, _ in self._words.pop(pid, []):
            kept = tuple(t for t in self.by_first.get(words[0], ()) if t[1] != pid)
            if kept:
                self.by_first[words[0]] = kept
            else:
                self.by_first.pop(words[0], None)

    def copy(self) -> NameTerms:
        """A copy that later ``add``/``remove`` calls on either do not share (values are
        tuples and lists replaced, never changed in place)."""
        new = NameTerms(everyday=self.sounds.everyday)
        new.by_first = dict(self.by_first)
        new._words = dict(self._words)
        new.sounds = self.sounds.copy()
        return new


def participant_words(p: Participant) -> list[tuple[tuple[str, ...], bool]]:
    """``(words, is_common_word)`` for each way ``p`` is called (names, roles; a one-word
    role such as "operator" counts as an ordinary word)."""
    names, roles = participant_terms(p)
    out: list[tuple[tuple[str, ...], bool]] = []
    for term in (*names, *roles):
        if len(term) <= 3 and term.isupper():
            continue  # a role code ("PM"): a recognizer writes "pm"
        words = tuple(_TOKEN.findall(term.lower()))
        if not words or (len(words) == 1 and len(words[0]) < 2):
            continue
        # "András" is also called as a recognizer writes it: "andras".
        for variant in dict.fromkeys((words, tuple(ascii_fold(w) for w in words))):
            out.append((variant, len(variant) == 1 and variant[0] in COMMON_WORD_NAMES))
    return list(dict.fromkeys(out))


#: Marks that set a word off from its neighbours in written text.
_SET_OFF_MARKS = frozenset(",.!?;:\u2026\u2014\u2013")
#: Words before a comma that make the name after it an apposition ("our CFO, Carolina"), and
#: titles ("Dr. Farber"): a name set off after them is described, not called.
_APPOSITION_HEADS = frozenset(
    {"ceo", "cfo", "coo", "cto", "president", "chairman", "chairwoman", "chair", "director",
     "manager", "officer", "analyst", "operator", "host", "friend", "wife", "husband",
     "brother", "sister", "son", "daughter", "mother", "father", "mom", "dad", "boss",
     "colleague", "partner", "doctor", "professor", "cousin", "uncle", "aunt", "girlfriend",
     "boyfriend", "fiance", "fiancee", "roommate", "assistant", "secretary", "lawyer", "named",
     "called", "mr", "mrs", "ms", "dr", "miss", "sir", "dear", "and", "or", "nor"}
)  # fmt: skip


def set_off(text: str, words: Sequence[str]) -> list[tuple[bool, bool, bool]] | None:
    """For each of ``words`` (:func:`words_of` of ``text``): is it preceded, and followed, by
    a mark of written punctuation (or the start, the end), and does a sentence start at it?
    ``None`` when ``text`` carries no punctuation (a recognizer's text) or its words do not
    line up with ``words``."""
    clean = _DIRECTION.sub(" ", text).replace("\u2019", "'")
    if not any(c in _SET_OFF_MARKS for c in clean):
        return None
    spans = [(m.start(), m.end()) for m in _TOKEN.finditer(clean)]
    if [clean[a:b].lower() for a, b in spans] != list(words):
        return None
    out = []
    for i, (a, b) in enumerate(spans):
        gap_before = clean[spans[i - 1][1] : a] if i else ""
        gap_after = clean[b : spans[i + 1][0]] if i + 1 < len(spans) else ""
        out.append(
            (
                i == 0 or any(c in _SET_OFF_MARKS for c in gap_before),
                i + 1 == len(spans) or any(c in _SET_OFF_MARKS for c in gap_after),
                i == 0 or any(c in ".!?\u2026" for c in gap_before),
            )
        )
    return out


def written(text: str) -> bool:
    """Does ``text`` carry punctuation inside it (not only a final mark, which the engine
    restores on a recognizer's text)?"""
    body = _DIRECTION.sub(" ", text).rstrip(" \t\"')]\u201d\u2019.?!\u2026")
    return any(c in _SET_OFF_MARKS for c in body)


def comma_vocative(
    marks: Sequence[tuple[bool, bool, bool]],
    words: Sequence[str],
    start: int,
    end: int,
    name_starts: set[int],
) -> bool:
    """Do written marks set the name at ``words[start:end]`` off as a vocative (commas or a
    sentence edge on both sides; not after an apposition head or a title, not in a list)?"""
    before = words[start - 1] if start else ""
    nxt = words[end] if end < len(words) else ""
    return (
        marks[start][0]
        and marks[end - 1][1]
        and before not in _APPOSITION_HEADS
        and nxt not in ("and", "or", "nor")
        and end not in name_starts  # "Joey, Chandler and Ross": a list of names
    )


def words_of(text: str) -> list[str]:
    """The recognizer rendering's words, stage directions dropped."""
    return _TOKEN.findall(recognizer_text(_DIRECTION.sub(" ", text)))


def asks_you(words: Sequence[str], text: str = "") -> bool:
    """Is this a question to "you", by its words ("can you...", "what do you think", "...
    don't you") or by a question mark in ``text`` with a "you" in it?"""
    if not words:
        return False
    if not any(w in _YOU for w in words):
        return False
    i = 0
    while i < len(words) - 1 and words[i] in (_OPENERS | _FILLERS | _GREETINGS) - _YOU:
        i += 1
    first = words[i]
    nxt = words[i + 1] if i + 1 < len(words) else ""
    if first in _AUX and nxt in _YOU:
        return True  # "can you", "did you", "don't you"
    if first in _WH and any(w in _YOU for w in words[i + 1 : i + 5]):
        return True  # "what do you think", "how did you", "what's your"
    if len(words) >= 2 and words[-1] in ("you", "ya") and words[-2] in _TAG_AUX:
        return True  # "... don't you"
    if any(
        a in _AUX and b in _YOU and c not in ("know", "see", "mean")
        for a, b, c in zip(words, words[1:], [*words[2:], ""], strict=False)
    ) and words[-1] not in ("know",):
        # "so can you check", "and would you" inside: an auxiliary put before "you"
        return True
    return "?" in text


def _is_subject(words: Sequence[str], end: int) -> bool:
    """Is the name ending before ``end`` the subject of what follows ("dave said")?"""
    if end >= len(words):
        return False
    nxt = words[end]
    after = words[end + 1] if end + 1 < len(words) else ""
    if nxt in _ADVERBS and after and after not in _YOU:
        return _is_subject(words, end + 1)  # "ross sure is", "joey kinda disabled it"
    if nxt in _NOT_THIRD_PERSON:
        # A third-person subject takes "does", "is", "has": "ross don't let her drink",
        # "zola are there more bookings", "dave have you seen it" put the question to the name.
        return False
    if nxt in _MODALS or nxt in _AUX:
        # "dave can you", "ross is he", "pheebs didn't you": a question put to the name;
        # "dave will be late", "ross did it": about the name.
        pronoun = after in _INVERTED_SUBJECTS or (
            nxt in ("is", "was", "isn't", "wasn't") and after in _DEMONSTRATIVES
        )
        return not pronoun
    if nxt in _SUBJECT_NEXT:
        return True
    if _past_verb(nxt):
        return True  # "dave fixed it", "dave taught"
    # "dave wants", "dave knows": a third-person verb (not "thanks", "yes", "this", "its", nor
    # a contraction: "ross he's playing", "chandler phoebe's hogging the game").
    return (
        nxt.endswith("s")
        and len(nxt) > 3
        and "'" not in nxt
        and not nxt.endswith("ss")
        and nxt not in {"thanks", "yes", "this", "its", "always", "perhaps", "towards", "guys"}
        and nxt not in _VOCATIVE_NEXT
    )


def _past_verb(word: str) -> bool:
    """A past-tense verb before a name makes the name its object ("kissed rachel")."""
    return (word.endswith("ed") and len(word) > 4) or word in _IRREGULAR_PAST


def _start_of_sentence(words: Sequence[str], start: int, vocatives: set[int]) -> bool:
    """Only openers, greetings, fillers or other vocatives stand before ``start``."""
    return all(
        w in _OPENERS or w in _GREETINGS or w in _FILLERS or j in vocatives
        for j, w in enumerate(words[:start])
    )


def _vocative_kind(words: Sequence[str], start: int, end: int, vocative_at: set[int]) -> str:
    """The kind of a vocative by where it stands."""
    if _start_of_sentence(words, start, vocative_at):
        return "after-greeting" if any(w in _GREETINGS for w in words[:start]) else "name-start"
    return "name-end" if end == len(words) else "name-middle"


def rule_reading(
    words: Sequence[str],
    start: int,
    end: int,
    common: bool,
    vocative_at: set[int],
) -> str | None:
    """The rulebook's reading of a name the exact rules leave open: a vocative kind, None
    (third person) or "skip" (an everyday word that is no name here)."""
    n = len(words)
    before = words[start - 1] if start else ""
    before2 = words[start - 2] if start > 1 else ""
    nxt = words[end] if end < n else ""
    if common and (
        words[start] in _MODALS
        or (before not in _OPENERS and nxt not in _GREETINGS and nxt not in _STRONG_NEXT)
    ):
        return "skip"  # an ordinary word ("will", "mark") is a name only beside a greeting
    if _is_subject(words, end):
        return None  # "dave said", "dave will be late", "does dave think": third person
    if _start_of_sentence(words, start, vocative_at) or (
        before == "know" and before2 == "you"  # "you know meyer there's ..."
    ):
        greeted = any(w in _GREETINGS for w in words[:start])
        return "after-greeting" if greeted else "name-start"
    if (before in ("and", "but") and nxt in _FIRST_SECOND) or (
        before in _CONJUNCTIONS and nxt in _YOU
    ):
        return "name-middle"  # "and elyse i'd point you to", "on that alan you made"
    if before in _OBJECT_BEFORE or before in _AUX or _past_verb(before):
        return None  # "told dave", "with dave", "does dave think": third person
    if end == n:
        return "name-end"
    # Neither object nor subject inside the words: a name between two clauses
    # ("have you lost your mind chandler this isn't about me").
    return "name-middle"


def address_verdict(
    text: str,
    speaker: str,
    names: NameTerms,
    prior: PriorTurn | None = None,
    resolve: Mapping[str, int] | None = None,
    model: AddressModel | Literal["shipped"] | None = "shipped",
    unsure: Collection[str] = (),
) -> AddressVerdict:
    """Who ``text`` (said by ``speaker``) addresses; see the module docstring.

    ``names`` is the roster's :class:`NameTerms`; ``resolve`` (participant -> index of their
    latest utterance) picks, for a name several people share, the one who spoke last.
    ``model`` judges the names the exact rules leave open (:mod:`.address_model`): the
    shipped one by default; ``None`` reads them by the rulebook alone (the earlier verdict,
    kept for comparison). ``unsure``: words (lower case) the speech recognizer was unsure of
    (:attr:`polylogue.conversation.Utterance.unsure`): one that sounds like a roster name is
    matched at the looser distance of :mod:`polylogue.turntaking.sounds`.
    """
    prior = prior or PriorTurn()
    if model == "shipped":
        model = load_address_model()
    words = words_of(text)
    hits = _name_hits(words, speaker, names, resolve, unsure)
    # Only an utterance that names someone needs its written marks (most name nobody).
    marks = set_off(text, words) if hits and written(text) else None
    name_starts = {s for s, _, _, _, _ in hits}
    name_at = {k for s, e, _, _, _ in hits for k in range(s, e)}
    addressed: dict[str, Address] = {}
    mentioned: dict[str, Address] = {}
    vocative_at: set[int] = set()
    thanked: set[str] = set()
    spans: dict[str, tuple[int, int]] = {}
    n = len(words)
    name_only = bool(hits) and all(
        j in name_at or w in _FILLERS or w in _OPENERS for j, w in enumerate(words)
    )
    for start, end, pid, common, by_sound in hits:
        said = " ".join(words[max(0, start - 2) : min(n, end + 2)])
        if by_sound and common:
            # An everyday word that sounds like a name: a vocative only where the model is
            # sure of one, never a mention ("the data" is no talk about Dayita).
            if model is None or not _sure_vocative(model, words, start, end, name_at, prior, pid):
                continue
            vocative_at.update(range(start, end))
            addressed.setdefault(pid, Address(pid, _vocative_kind(words, start, end, set()), said))
            spans.setdefault(pid, (start, end))
            continue
        before = words[start - 1] if start else ""
        before2 = words[start - 2] if start > 1 else ""
        kind: str | None = None
        third = "mention"
        nxt = words[end] if end < n else ""
        if words[end - 1].endswith("'s") or nxt == "s":
            third = "possessive"
        elif (before == "is" and before2 in ("this", "here's")) or (
            before == "meet" and before2 in ("", "to", "please", "everyone", "guys", "come")
        ):
            kind = "introduction"
        elif (
            before in _GREETINGS
            or (before == "you" and before2 == "thank")
            or (before in ("there", "back", "again") and before2 in _GREETINGS)
        ):
            kind = "after-greeting"  # "thanks dave", "hi there dave", "welcome back dave"
        elif name_only:
            if prior.question_before:
                third = "answer"
            else:
                kind = "alone"
        elif marks is not None and comma_vocative(marks, words, start, end, name_starts):
            # Written text sets a vocative off by commas ("Come on, Monica, things could be
            # worse", "Sergei, would like to apologise", "Work, Joe!"): what a recognizer
            # drops, a transcript that has it says plainly.
            if marks[start][2] or _start_of_sentence(words, start, vocative_at):
                kind = "name-start"
            else:
                kind = "name-end" if end == n else "name-middle"
        elif (before == "on" and before2 == "come") or (
            before == "up" and before2 in ("what's", "whats")
        ):
            kind = "after-greeting"  # "come on rachel", "what's up ross"
        else:
            # The open cases: the rulebook's reading, weighed by the model when there is one.
            kind = rule_reading(words, start, end, common, vocative_at)
            if model is not None:
                p = _vocative_probability(
                    model, words, start, end, name_at, prior, pid, common, by_sound, kind
                )
                if kind in (None, "skip"):
                    # The rulebook reads a mention: the model must be sure to overturn it,
                    # and a preposition's object is never a vocative ("it's up to dave").
                    if p >= model.override and before not in _PREPOSITIONS:
                        kind = _vocative_kind(words, start, end, vocative_at)
                elif p < model.threshold:
                    kind = "skip" if common else None
            if kind == "skip":
                continue  # an everyday word read as that word ("i will check") is no name
        if kind is not None:
            vocative_at.update(range(start, end))
            addressed.setdefault(pid, Address(pid, kind, said))
            spans.setdefault(pid, (start, end))
            if before in _THANKS or (before == "you" and before2 == "thank"):
                thanked.add(pid)
        else:
            mentioned.setdefault(pid, Address(pid, third, said))
    # "thanks anna dave any update": Anna is thanked, the turn goes to Dave. A thanks or a
    # farewell closes the thanked person's turn; when someone else is called right after it
    # (within a few words), only they are handed the floor. A name much later in a long turn
    # is no such hand-over.
    for pid in sorted(thanked):
        end = spans[pid][1]
        if any(
            other != pid
            and other not in thanked
            and 0 <= spans[other][0] - end <= 3
            and "and" not in words[end : spans[other][0]]  # "thanks ryan and doug": both
            for other in addressed
        ):
            mentioned.setdefault(pid, replace(addressed.pop(pid), kind="thanked"))
    for pid in addressed:
        mentioned.pop(pid, None)
    group = to_group(words)
    you_q = asks_you(words, text) and not group
    you_said = (
        prior.recognizer and not you_q and not group and not reads_out(words) and says_you(words)
    )
    off_roster = not addressed and calls_off_roster(words)
    if off_roster:
        pass  # "babe can you get the door": the "you" is theirs
    elif not addressed and prior.earlier:
        for pid in prior.earlier:
            if pid != speaker and pid not in mentioned:
                addressed[pid] = Address(pid, "earlier-in-turn", " ".join(words[:6]))
    elif (
        not addressed
        and you_q
        and asks_repair(words)
        and prior.just_before not in (None, speaker)
        and prior.just_before not in mentioned
    ):
        # "could you say it again" asks whoever just spoke, however short their words were
        asked = prior.just_before
        assert asked is not None
        addressed[asked] = Address(asked, "follow-up", " ".join(words[:8]))
    elif (
        not addressed
        and (you_q or you_said)
        and not reads_out(words)
        and prior.speaker is not None
        and prior.speaker != speaker
        and prior.speaker not in mentioned
        and (substantive(prior.text) or (you_q and asks_repair(words)))
    ):
        kind = "follow-up" if you_q else "you-after"
        addressed[prior.speaker] = Address(prior.speaker, kind, " ".join(words[:8]))
    elif (
        not addressed
        and len(prior.listeners) == 1
        and prior.listeners[0] != speaker
        and not group
        and not reads_out(words)
        and asks_by_words(text)
    ):
        # Two people: a question that calls nobody else is put to the other one.
        other = prior.listeners[0]
        addressed[other] = Address(other, "dyad-question", " ".join(words[:8]))
    return AddressVerdict(
        tuple(addressed.values()),
        tuple(mentioned.values()),
        you_q,
        off_roster=off_roster,
        to_you=not group and not reads_out(words) and says_you(words),
    )


def _vocative_probability(
    model: AddressModel,
    words: Sequence[str],
    start: int,
    end: int,
    name_at: set[int],
    prior: PriorTurn,
    pid: str,
    common: bool,
    by_sound: bool,
    rule: str | None,
) -> float:
    """The address model's P(vocative) for the name at ``start:end`` (``rule``: the
    rulebook's reading of it)."""
    candidate = Candidate(
        words=tuple(words),
        start=start,
        end=end,
        other_names=frozenset(name_at - set(range(start, end))),
        common=common,
        by_sound=by_sound,
        spoke_before=pid == prior.speaker,
        two_person=prior.people == 2,
        rule=rule or "mention",
    )
    return model.probability(candidate_features(candidate, WORD_CLASSES))


def _sure_vocative(
    model: AddressModel,
    words: Sequence[str],
    start: int,
    end: int,
    name_at: set[int],
    prior: PriorTurn,
    pid: str,
) -> bool:
    """Does the address model read an everyday word heard as a name at ``start:end`` as a
    vocative at or above its override (and no preposition before it)?"""
    if start and words[start - 1] in _PREPOSITIONS:
        return False
    rule = rule_reading(words, start, end, True, set())
    p = _vocative_probability(model, words, start, end, name_at, prior, pid, True, True, rule)
    return p >= model.override


#: Words that call a person by relation or endearment, not by name ("honey", "kids",
#: "grandma"): said first or last, they call someone the roster does not name.
ADDRESS_TERMS = frozenset(
    {"honey", "hon", "sweetie", "sweetheart", "sweety", "babe", "baby", "darling", "dear",
     "buddy", "bud", "dude", "pal", "mate", "bro", "sis", "mom", "mum", "mommy", "mummy",
     "mama", "dad", "daddy", "papa", "grandma", "granny", "nana", "grandpa", "grandad",
     "granddad", "kids", "kiddo", "son", "sweetpea", "love", "sir", "ma'am", "madam",
     "auntie", "aunty", "girls", "boys", "uncle",
     # the same in other languages, as a recognizer writes them
     "nani", "dadi", "dada", "ammi", "amma", "abbu", "appa", "abuela", "abuelo",
     "abuelita", "abuelito", "mami", "papi", "mamá", "papá", "oma", "opa", "nonna", "nonno",
     "yaya", "bibi", "babushka", "dedushka", "mamie", "papy", "tia", "tio", "tía", "tío"}
)  # fmt: skip
#: Prepositions: the name after one is its object, never a vocative.
_PREPOSITIONS = frozenset(
    {"to", "with", "about", "for", "from", "at", "by", "of", "on", "in", "into", "onto",
     "than", "like", "as", "without", "against", "behind", "between", "under", "over",
     "after", "before", "around", "near", "except", "via", "per", "toward", "towards",
     "through", "during", "within", "among", "beside", "besides", "upon", "unlike"}
)  # fmt: skip
#: Before a closing term of address, words that make it an object ("the kids", "for dad").
_DETERMINERS = frozenset(
    {"the", "a", "an", "my", "your", "our", "his", "her", "their", "its", "these", "those",
     "to", "for", "with", "about", "of", "from", "by", "and", "or", "than", "like"}
)  # fmt: skip
#: Words that introduce text read out or quoted ("it says your bill will rise"): a "you"
#: after them is the text's, not the speaker's.
_READING = (("it", "says"), ("it", "said"), ("says", "here"), ("it", "reads"), ("quote",))


def calls_off_roster(words: Sequence[str]) -> bool:
    """Do the words open (after openers) or close with a term of address ("honey", "kids")?"""
    i = 0
    while i < len(words) - 1 and (words[i] in _OPENERS or words[i] in _FILLERS):
        i += 1
    return bool(words) and (
        (words[i] in ADDRESS_TERMS and (i + 1 == len(words) or words[i + 1] not in _SUBJECT_NEXT))
        or (len(words) > 2 and words[-1] in ADDRESS_TERMS and words[-2] not in _DETERMINERS)
    )


def reads_out(words: Sequence[str]) -> bool:
    """Do the words read out or quote a text ("it says ...", "says here ...", a letter's
    "dear customer ...")?"""
    if len(words) > 2 and words[0] == "dear" and words[1] not in _AUX | _YOU | _WH:
        return True
    for k in range(len(words)):
        for pattern in _READING:
            if tuple(words[k : k + len(pattern)]) == pattern:
                return True
    return False


#: Verbs that open a request to a helper ("tell me", "check the logs", "remind me at six").
_REQUEST_VERBS = frozenset(
    {"tell", "show", "give", "send", "find", "check", "remind", "help", "book", "call", "play",
     "set", "add", "remove", "delete", "cancel", "open", "explain", "get", "make", "turn",
     "stop", "start", "pause", "resume", "write", "search", "order", "schedule", "email", "text",
     "message", "translate", "spell", "repeat", "list", "pick", "choose", "suggest",
     "recommend", "read", "summarise", "summarize", "note", "save", "move", "compare",
     "calculate", "convert", "define", "describe", "draft", "update", "look"}
)  # fmt: skip
#: Openings that put a need or a question of one's own to a helper ("i need a taxi",
#: "can i pay by card", "how do i reset it", "let me know").
_NEEDS = (
    ("i", "need"), ("i", "want"), ("i'd", "like"), ("i", "would", "like"), ("can", "i"),
    ("could", "i"), ("should", "i"), ("do", "i"), ("how", "do", "i"), ("let", "me", "know"),
    ("any", "idea"), ("any", "ideas"), ("is", "there"), ("are", "there"),
)  # fmt: skip


def directed_to_listener(text: str, listener_asked: bool = False) -> bool:
    """With only two people talking, do the words turn to the other one? A question (by its
    words or a mark), a request ("tell me...", "please..."), a need put to a helper ("i need
    a taxi", "how do i reset it"), a "you" said to them, or a reply to their own question
    (``listener_asked``). Thinking aloud ("it was in this drawer i swear"), narration, an
    exclamation, text read out ("it says ...") and a call to someone off the roster ("honey
    can you get the door") do not."""
    words = words_of(text)
    if not words or reads_out(words) or calls_off_roster(words):
        return False
    if listener_asked or asks_by_words(text) or says_you(words) or "please" in words:
        return True
    i = 0
    while i < len(words) - 1 and (words[i] in _FILLERS or words[i] in _OPENERS - {"look"}):
        i += 1
    if words[i] in _REQUEST_VERBS:
        return True
    head = tuple(words[i : i + 3])
    return any(head[: len(n)] == n for n in _NEEDS)


#: "you" that addresses nobody: fillers ("you know", "you see", "mind you") and thanks
#: ("thank you": an acknowledgement, not a turn handed over).
_IDLE_YOU = (("you", "know"), ("you", "see"), ("mind", "you"), ("thank", "you"), ("you", "guys"))


def says_you(words: Sequence[str]) -> bool:
    """A second-person word that is not a filler ("you know") or a thanks ("thank you")."""
    idle: set[int] = set()
    for i, (a, b) in enumerate(itertools.pairwise(words)):
        if (a, b) in _IDLE_YOU:
            idle.update((i, i + 1))
    return any(w in _YOU and i not in idle for i, w in enumerate(words))


#: Other-initiated repair ("could you say it again", "what did you say"): it asks the one
#: who just spoke, however short their words were ("Right? Um.").
_REPAIR = re.compile(
    r"\b(?:say (?:it|that|this) again|repeat (?:it|that|this|the)|what did you (?:just )?say"
    r"|come again|didn't (?:catch|hear|get) (?:it|that|you|what))\b"
)


def asks_repair(words: Sequence[str]) -> bool:
    """Do the words ask the previous speaker to repeat or say again?"""
    return bool(_REPAIR.search(" ".join(words)))


def substantive(text: str) -> bool:
    """More than a filler or an acknowledgement ("Oh wow.", "Mm-hmm.", "Yeah right.")."""
    return bool(text.strip()) and not is_filler_only(text) and not is_lexical_backchannel(text)


def asks_who(text: str) -> bool:
    """Does the text ask for a person ("who ...", "which one ...", "what's his name")?"""
    words = words_of(text)
    head = words[:8]
    return any(w in ("who", "who's", "whom", "whose", "which") for w in head) or (
        "name" in head and any(w in ("what's", "what") for w in head)
    )


def asks_by_words(text: str) -> bool:
    """A question by its first words (a wh-word or an auxiliary) or a question mark."""
    words = words_of(text)
    i = 0
    while i < len(words) - 1 and (words[i] in _FILLERS or words[i] in _OPENERS):
        i += 1
    return "?" in text or (bool(words) and (words[i] in _WH or words[i] in _AUX))


def _name_hits(
    words: Sequence[str],
    speaker: str,
    names: NameTerms,
    resolve: Mapping[str, int] | None,
    unsure: Collection[str] = (),
) -> list[tuple[int, int, str, bool, bool]]:
    """``(start, end, participant, common_word, by_sound)`` of each name in ``words``
    (longest first, speaker excluded; a shared name goes to whoever of its bearers spoke
    last; a word no name spells may match one by sound, :mod:`polylogue.turntaking.sounds`)."""
    hits: list[tuple[int, int, str, bool, bool]] = []
    i = 0
    while i < len(words):
        w = words[i]
        base = w[:-2] if w.endswith("'s") else w
        best: list[tuple[int, str, bool]] = []
        best_len = 0
        for key in (w, base) if base != w else (w,):
            for terms, pid, common in names.by_first.get(key, ()):
                k = len(terms)
                last = words[i + k - 1] if i + k - 1 < len(words) else None
                if last is None:
                    continue
                if k == 1 or (
                    tuple(words[i : i + k - 1]) == terms[:-1]
                    and (last == terms[-1] or last == terms[-1] + "'s")
                ):
                    if k > best_len:
                        best, best_len = [(k, pid, common)], k
                    elif k == best_len:
                        best.append((k, pid, common))
        by_sound = False
        if not best and w not in names.by_first:
            doubt = w in unsure or base in unsure
            heard = names.sounds.match(base, everyday=True, unsure=doubt)
            span = 1
            if heard is None and i + 1 < len(words) and words[i + 1] not in names.by_first:
                # A name the recognizer split in two words ("jula jana").
                both = (doubt + (words[i + 1] in unsure)) >= min(2, UNSURE_JOIN_NEEDS)
                heard, span = names.sounds.match_pair(w, words[i + 1], unsure=both), 2
            if heard is None and unsure and i + 2 < len(words):
                # ... or in three, where it was unsure of them ("arm up lou" for Ermutlu).
                three = words[i : i + 3]
                if sum(x in unsure for x in three) >= UNSURE_JOIN_NEEDS and not any(
                    x in names.by_first for x in three[1:]
                ):
                    heard = names.sounds.match_pair(w, three[1] + three[2], unsure=True)
                    span = 3
            if heard is not None:
                # An everyday word heard as a name ("grain" for Gráinne) counts as one only
                # where the address model reads a vocative (see address_verdict); one the
                # recognizer was unsure of is judged as a name.
                common = (
                    span == 1
                    and base in names.sounds.everyday
                    and not (doubt and UNSURE_EVERYDAY_AS_NAME)
                )
                best = [(span, pid, common) for pid in sorted(names.sounds.owners(heard[0]))]
                best_len, by_sound = span, True
        if best:
            owners = {pid for _, pid, _ in best} - {speaker}
            if owners:
                pid = (
                    max(owners, key=lambda p: (resolve or {}).get(p, -1))
                    if len(owners) > 1
                    else next(iter(owners))
                )
                common = all(c for _, p, c in best if p == pid)
                hits.append((i, i + best_len, pid, common, by_sound))
            i += best_len
        else:
            i += 1
    return hits
