"""A multi-party room as an agent framework sees it, independent of the framework.

Both adapters (LiveKit, Pipecat) hear the same things — participants join and leave, STT
gives interim and final transcripts with or without a speaker, the agent starts and stops
speaking and its TTS reports the words — and must do the same with them. :class:`RoomTracker`
is that one place; the adapters only translate their framework's objects into its calls and
its decisions back into framework actions.

Defined behaviour for bad input (each logs a warning on the ``polylogue.adapters`` logger and
is recorded in ``RoomTracker.warnings``; none raises):

* a final transcript **without a speaker**: a ``Name: text`` prefix naming a known participant
  is taken as the speaker; else, with exactly one human present, it is theirs; else it is
  dropped (not observed, not answered);
* an **unknown participant id**: the participant joins now (a newcomer the roster lacked);
* a participant who **leaves mid-utterance**: the pending interim is discarded;
* a transcript that **arrives after its participant left**: observed (the room heard it) but
  never answered (``action`` None, reason ``"speaker has left"``).

The agent's own words are observed in the order they were spoken: a framework may report
"bot stopped speaking" before the last words of the TTS reach the tap (system frames overtake
data frames in Pipecat), so the words are held until the next human transcript or the next
time the agent starts, and observed then, before anything said after them.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from polylogue.conversation import (
    BIDI_CONTROLS,
    BadNameError,
    Participant,
    Utterance,
    clean_name,
)
from polylogue.engine.bargein import BargeInDecision, interjection_words, lexical_backchannel
from polylogue.engine.deployment import Deployment
from polylogue.engine.live import (
    Action,
    AgentState,
    Focus,
    LiveConversation,
    LiveDecision,
    NameBook,
)
from polylogue.engine.model import TurnTakingModel
from polylogue.engine.seats import (
    DEFAULT_BRAKE,
    DEFAULT_FLOOR_POLICY,
    AgentRoom,
    RoomDecision,
    SeatError,
    SeatSpec,
)
from polylogue.errors import PolylogueInputError

log = logging.getLogger("polylogue.adapters")

#: What the agent says for a BACKCHANNEL decision, in turn (spoken without the LLM).
BACKCHANNEL_PHRASES: tuple[str, ...] = ("Mm-hmm.", "Right.", "I see.", "Okay.")
#: How many observed utterances :attr:`RoomTracker.recent` keeps (for logs and checks).
RECENT = 1000
#: Seconds a decision may take before the agent stays silent instead.
DECISION_TIMEOUT_S = 1.0

#: Words that, on their own, acknowledge rather than interrupt (with the barge-in lexicon:
#: "thank you", "makes sense", "sounds good", "perfect, thanks").
ACKNOWLEDGEMENT_WORDS = frozenset(
    {
        "thank",
        "thanks",
        "you",
        "so",
        "much",
        "makes",
        "sense",
        "sounds",
        "perfect",
        "fair",
        "enough",
    }
)

_PREFIX = re.compile(r"^\s*([^:\n]{1,60}):\s+(.*)$", re.DOTALL)
T = TypeVar("T")


@dataclass(frozen=True)
class Heard:
    """One final transcript as the room heard it (speaker resolved, times in seconds)."""

    speaker: str
    name: str
    text: str
    start: float | None = None
    end: float | None = None

    @property
    def tagged(self) -> str:
        """The line the LLM's context gets: who said it, then what."""
        return f"{self.name}: {self.text}"


@dataclass
class _AgentTurn:
    started: float | None = None
    stopped: float | None = None
    words: list[str] = field(default_factory=list)
    speaking: bool = False


class RoomTracker:
    """Participants, transcripts and the agent's speech of one room, fed to one
    :class:`LiveConversation` (built by :func:`polylogue.adapters.start_live`)."""

    def __init__(
        self,
        live: LiveConversation,
        phrases: Sequence[str] = BACKCHANNEL_PHRASES,
    ) -> None:
        self.live = live
        self.phrases = tuple(phrases) or BACKCHANNEL_PHRASES
        #: the role to go back to when the observer switch is turned off
        self._role_before_observer: str | None = None
        self.warnings: list[str] = []
        #: the latest utterances observed, the agent's included, in the order observed
        self.recent: deque[Heard] = deque(maxlen=RECENT)
        self.left: set[str] = set()
        #: framework labels already reported as cleaned (one warning each)
        self._cleaned: set[str] = set()
        self._agent = _AgentTurn()
        self._phrase = 0
        self._pool: ThreadPoolExecutor | None = None

    # ----------------------------------------------------------------- role

    @property
    def role(self) -> str | None:
        return self.live.deployment.role

    def set_role(self, role: str | None) -> None:
        """Switch the role at run time (the deployment layer's presets)."""
        self.live.set_role(role)

    @property
    def observer(self) -> bool:
        """Listen and log every decision, never speak (the ``observer`` role)."""
        return not self.live.deployment.speaks

    @observer.setter
    def observer(self, on: bool) -> None:
        if on == self.observer:
            return
        if on:
            self._role_before_observer = self.role
            self.set_role("observer")
        else:
            self.set_role(self._role_before_observer)

    # ----------------------------------------------------------------- people

    @property
    def agent_id(self) -> str:
        return self.live.agent.pid

    def name_of(self, pid: str) -> str:
        p = self.live.engine.participants.get(pid)
        return p.display_name if p is not None else pid

    def is_known(self, label: str) -> bool:
        return bool(self.live.names.matches(label))

    def _clean(self, label: str | None, what: str) -> str | None:
        """An identity or name from the framework as stored (:func:`clean_identity`); a
        changed one is warned about once, an empty one is None."""
        if label is None:
            return None
        cleaned = clean_identity(label)
        if cleaned != label.strip() and label not in self._cleaned:
            self._cleaned.add(label)
            self._warn(f"{what} {label!a} holds control, bidi or invisible characters: "
                       f"read as {cleaned!a}")  # fmt: skip
        return cleaned or None

    def join(self, identity: str, name: str | None = None) -> None:
        """A participant is now in the room (``identity``: the framework's id)."""
        cleaned = self._clean(identity, "identity")
        if cleaned is None:
            self._warn(f"join: identity {identity!a} is blank once cleaned; ignored")
            return
        identity = cleaned
        name = self._clean(name, "name")
        label = name if name and name.strip() else None
        self.left.discard(identity)
        if self.is_known(identity):
            person = self.live.engine.participants[self._pid(identity)]
        else:
            words = (label or "").split()
            alias = (words[0],) if len(words) > 1 else ()
            person = Participant(id=identity, name=label, aliases=alias)
        self.live.join([person])
        if self.agent_id not in self.live.present:  # the agent is in its own room
            self.live.join([self.live.engine.participants[self.agent_id]])

    def leave(self, identity: str) -> None:
        identity = self._clean(identity, "identity") or identity
        if not self.is_known(identity):
            self._warn(f"leave: {identity!r} is not a participant; ignored")
            return
        pid = self._pid(identity)
        if self.live.interim.pop(pid, None):
            self._warn(
                f"{self.name_of(pid)!r} left mid-utterance; the partial transcript is dropped"
            )
        self.left.add(pid)
        self.live.leave(pid)

    def _admit(self, speaker: str) -> None:
        """A speaker nobody announced: with a roster, they join now (warned); without one,
        people are learnt as they talk."""
        if self.is_known(speaker):
            return
        if self.live.roster_known:
            self._warn(f"unknown participant {speaker!r}: joins the room now")
            self.join(speaker)

    def _pid(self, label: str) -> str:
        return self.live.speaker_id(label)

    def _warn(self, msg: str) -> None:
        log.warning(msg)
        self.warnings.append(msg)

    def split_prefix(self, text: str) -> tuple[str, str] | None:
        """``(speaker, text)`` when ``text`` starts with ``Name:`` for a known participant."""
        m = _PREFIX.match(text)
        if m and self.is_known(m.group(1).strip()):
            return m.group(1).strip(), m.group(2)
        return None

    def resolve(self, speaker: str | None, text: str) -> tuple[str, str] | None:
        """The participant a final transcript belongs to (see the module notes), or None."""
        speaker = self._clean(speaker, "speaker")
        if speaker is not None and speaker.strip():
            self._admit(speaker)
            return self._pid(speaker), text
        tagged = self.split_prefix(text)
        if tagged is not None:
            return self._pid(tagged[0]), tagged[1]
        humans = [p for p in self.live.present if p != self.agent_id]
        if self.live.roster_known and len(humans) == 1:
            return humans[0], text
        self._warn(
            f"transcript without a speaker dropped ({len(humans)} people present): {text[:60]!r}"
        )
        return None

    # ----------------------------------------------------------------- transcripts

    def interim(
        self, speaker: str | None, text: str, time: float | None = None
    ) -> BargeInDecision | None:
        """A partial transcript: never observed; while the agent speaks, yield or continue."""
        speaker = self._clean(speaker, "speaker")
        if speaker is None or not speaker.strip():
            return None  # a partial without a speaker changes nothing
        self._admit(speaker)
        pid = self._pid(speaker)
        if pid in self.left:
            return None
        try:
            return self._guard(self.live.interim_utterance(pid, text, time), text)
        except Exception as e:  # the lexical rule decides when the model cannot
            self._warn(f"barge-in model failed ({e}); lexical rule used")
            return self.lexical_barge_in(text)

    @staticmethod
    def _guard(barge: BargeInDecision | None, text: str) -> BargeInDecision | None:
        """An acknowledgement never interrupts, whatever the model says."""
        if barge is None or not barge.yield_floor or not is_acknowledgement(text):
            return barge
        return BargeInDecision(False, barge.p_yield, "acknowledgement")

    def barge_in(self, text: str) -> BargeInDecision:
        """Yield or continue if ``text`` were heard now (no state changes)."""
        model = self.live.barge_in_model
        a = self._agent
        clock = self.live.clock
        speaking_s = None if a.started is None or clock is None else clock - a.started
        try:
            if model is None:
                raise RuntimeError("no barge-in model")
            barge = self._guard(model.decide(text, speaking_s), text)
            assert barge is not None
            return barge
        except Exception as e:
            self._warn(f"barge-in model failed ({e}); lexical rule used")
            return self.lexical_barge_in(text)

    @staticmethod
    def lexical_barge_in(text: str) -> BargeInDecision:
        """The fallback: continue on acknowledgement words only, yield on anything else."""
        back = is_acknowledgement(text)
        return BargeInDecision(
            not back,
            0.0 if back else 1.0,
            "backchannel (lexical)" if back else "interruption (lexical)",
        )

    def final(
        self,
        speaker: str | None,
        text: str,
        start: float | None = None,
        end: float | None = None,
        unsure: Sequence[str] = (),
    ) -> tuple[Heard, LiveDecision] | None:
        """A final transcript: observed, then decided on (None: dropped, see module notes).
        ``unsure``: words the recognizer wrote with a low confidence
        (:attr:`~polylogue.conversation.Utterance.unsure`)."""
        if not text.strip():
            return None
        who = self.resolve(speaker, text)
        if who is None:
            return None
        pid, words = who
        self.flush_agent()
        heard = Heard(pid, self.name_of(pid), words, start, end)
        d = self.live.utterance(Utterance(pid, words, start, end, unsure=tuple(unsure)))
        if d.barge_in is not None:
            d = replace(d, barge_in=self._guard(d.barge_in, words))
        if pid in self.left and pid != self.agent_id:
            self._warn(f"transcript from {heard.name!r} after they left: heard, not answered")
            d = replace(d, action=None, reason="speaker has left")
        self.recent.append(heard)
        return heard, d

    async def final_within(
        self,
        speaker: str | None,
        text: str,
        start: float | None = None,
        end: float | None = None,
        timeout_s: float = DECISION_TIMEOUT_S,
        unsure: Sequence[str] = (),
    ) -> tuple[Heard, LiveDecision] | None:
        """:meth:`final` off the event loop; past ``timeout_s`` the agent stays silent.

        The utterance is still observed (a single worker thread keeps the order), only the
        answer is given up: the returned decision is SILENT with reason "decision timed out".
        """
        try:
            return await self._within(
                timeout_s, lambda: self.final(speaker, text, start, end, unsure)
            )
        except TimeoutError:
            self._warn(f"no decision within {timeout_s:g} s: staying silent")
            name = speaker or "?"
            state = self.live.agent.state
            d = LiveDecision(self.live.index, name, Action.SILENT, "decision timed out", state)
            return Heard(name, name, text, start, end), d

    async def _within(self, timeout_s: float, fn: Callable[[], T]) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="polylogue")
        fut = asyncio.get_running_loop().run_in_executor(self._pool, fn)
        return await asyncio.wait_for(asyncio.shield(fut), timeout_s)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    # ----------------------------------------------------------------- the agent's speech

    def agent_started(self, time: float | None = None) -> None:
        self.flush_agent()
        self._agent = _AgentTurn(started=time, speaking=True)
        self.live.agent_speech(True, time=time)

    def agent_stopped(self, time: float | None = None) -> None:
        if not self._agent.speaking:
            return
        self._agent.speaking = False
        self._agent.stopped = time
        self.live.agent_speech(False, time=time)
        if self._agent.words:
            self.flush_agent()

    def agent_words(self, text: str) -> None:
        """Words the agent's TTS spoke (held until the agent's turn is observed)."""
        if text.strip():
            self._agent.words.append(text.strip())

    def agent_said(self, text: str, start: float | None = None, end: float | None = None) -> None:
        """A whole agent utterance at once (a transcript replay, a chat-context message)."""
        self.agent_started(start)
        self.agent_words(text)
        self.agent_stopped(end)

    def flush_agent(self) -> None:
        """Observe the agent's words heard so far once its turn has ended."""
        a = self._agent
        if a.speaking or not a.words:
            return
        text = " ".join(a.words)
        a.words = []
        self.live.utterance(Utterance(self.agent_id, text, a.started, a.stopped))
        self.recent.append(
            Heard(self.agent_id, self.name_of(self.agent_id), text, a.started, a.stopped)
        )

    @property
    def agent_speaking(self) -> bool:
        return self.live.agent.state is AgentState.SPEAKING

    # ----------------------------------------------------------------- actions

    def backchannel_phrase(self) -> str:
        phrase = self.phrases[self._phrase % len(self.phrases)]
        self._phrase += 1
        return phrase


def clean_identity(label: str) -> str:
    """A framework's participant identity or display name as polylogue stores it.

    Control characters (a newline could forge a log or output line) become spaces, bidi
    controls (they reorder what prints after them) and lone surrogates are removed, then
    :func:`~polylogue.conversation.clean_name` (NFKC, invisible characters removed). A live
    room cannot refuse a participant, so the identity is cleaned, with a warning.
    """
    import unicodedata

    out = []
    for c in label:
        cat = unicodedata.category(c)
        if c in BIDI_CONTROLS or cat == "Cs":
            continue
        out.append(" " if cat == "Cc" else c)
    try:
        return clean_name("".join(out))
    except BadNameError:  # only invisible characters: kept apart from other such names
        return label.encode("ascii", "backslashreplace").decode("ascii")


def is_acknowledgement(text: str) -> bool:
    """Only acknowledgement words: never a reason for the agent to stop talking."""
    words = interjection_words(text)
    return bool(words) and all(
        w in ACKNOWLEDGEMENT_WORDS or lexical_backchannel([w]) for w in words
    )


def decision_row(
    index: int, speaker: str, text: str, d: LiveDecision | None, why: str = "target is speaking"
) -> dict[str, Any]:
    """One JSON line of an adapter's replay, in ``polylogue decide --json``'s field names
    (``why``: the reason when there is no decision at all)."""
    action = None if d is None or d.action is None else d.action.value
    row: dict[str, Any] = {"index": index, "speaker": speaker, "text": text, "decision": action}
    # What the agent would have done (an observer's decision is SILENT, its suggestion is not).
    row["suggested"] = None if d is None or d.suggested is None else d.suggested.value
    row["p_speak"] = (
        None if d is None or d.action is None or d.p_speak is None else round(d.p_speak, 4)
    )
    row["reason"] = why if d is None else d.reason
    row["reason_code"] = None if d is None or d.reason_code is None else d.reason_code.value
    return row


class RoomRole:
    """The run-time controls both front ends expose over their :class:`RoomTracker`: the role,
    the observer switch, the audience and the focus (each as in ``serve``'s events)."""

    room: RoomTracker

    @property
    def observer(self) -> bool:
        """Listening only (the ``observer`` role): every decision logged, none acted on."""
        return self.room.observer

    @observer.setter
    def observer(self, on: bool) -> None:
        self.room.observer = on

    def set_role(self, role: str | None) -> None:
        """Switch the role while the session runs (``observer``, ``assistant``, ...): exactly
        as if the session had been created with it (``None``: the session's own point)."""
        self.room.set_role(role)

    @property
    def audience(self) -> str:
        """``group`` or ``adaptive`` (see :data:`polylogue.engine.live.AUDIENCES`)."""
        return self.room.live.audience

    def set_audience(self, audience: str) -> None:
        """``adaptive``: a one-to-one assistant while one other person is in the room, the
        role's group rules once two or more are; ``group``: the role's rules always."""
        self.room.live.set_audience(audience)

    @property
    def focus(self) -> Focus:
        return self.room.live.focus

    def set_focus(self, ignored: Iterable[str] = (), only: Iterable[str] = ()) -> Focus:
        """Participants (identities or names) whose speech is context only, or the only ones
        answered; empty lists clear it. An unknown participant is an error, nothing changed."""
        return self.room.live.set_focus(ignored, only)


def participants_of(people: Iterable[Participant | str]) -> list[Participant]:
    """A roster from participants or bare identities."""
    return [p if isinstance(p, Participant) else Participant(id=p) for p in people]


class ReplayAgentError(PolylogueInputError):
    """The participant a replay decides for is not in the transcript."""


def check_replay_agent(people: Iterable[Participant], name: str, source: str) -> None:
    """A replay's ``--as`` must name a participant of the transcript, as for ``decide``."""
    book = NameBook()
    people = list(people)
    for p in people:
        book.add(p)
    if not book.matches(name):
        names = ", ".join(p.display_name for p in people)
        raise ReplayAgentError(f"--as: {name!r} is not a participant of {source} ({names})")


@dataclass(frozen=True)
class ReplayInput:
    """A transcript read for a replay as ``polylogue decide`` reads it: the utterances, who is
    known from the start (a declared roster, or the names ``--alias`` gives) and the options
    the session is built with."""

    utterances: list[Utterance]
    participants: tuple[Participant, ...]
    options: dict[str, Any]


def add_replay_options(parser: argparse.ArgumentParser) -> None:
    """``decide``'s ``--domain``, ``--role`` and ``--alias`` for a replay example's parser
    (what :func:`replay_input` takes)."""
    parser.add_argument("--domain", help="meeting, tv, earnings or chat (as `polylogue decide`)")
    parser.add_argument("--role", help="observer, assistant or facilitator")
    parser.add_argument(
        "--alias",
        action="append",
        default=[],
        metavar="NAME=ALIAS[,ALIAS...]",
        help="what people call the speaker labelled NAME (repeatable)",
    )


def replay_input(
    path: str,
    agent: str,
    *,
    domain: str | None = None,
    role: str | None = None,
    aliases: Sequence[str] = (),
) -> ReplayInput:
    """Read ``path`` for a replay deciding for ``agent``, with ``decide``'s ``--domain``,
    ``--role`` and ``--alias NAME=ALIAS,...``; a bad value is a
    :class:`~polylogue.errors.PolylogueInputError` naming the option."""
    from polylogue.corpora.transcripts import (
        parse_alias,
        read_transcript,
        transcript_domain,
        with_aliases,
    )
    from polylogue.engine.deployment import Deployment, DeploymentError
    from polylogue.engine.live import participant_for_label

    specs = [parse_alias(a) for a in aliases]
    try:
        deployment = Deployment.resolve(domain=domain, role=role)
    except DeploymentError as exc:  # name the flag, as `decide` does
        raise PolylogueInputError(f"--{exc.option}: {str(exc).split(': ', 1)[1]}") from None
    conv = read_transcript(path, domain=domain)
    # The transcript header's domain unless --domain was given, as `polylogue decide`.
    deployment = deployment.with_declared_domain(*transcript_domain(conv))
    people = with_aliases(conv.participants, specs, path)
    check_replay_agent(people, agent, str(path))
    known = (
        people
        if conv.roster_known
        else with_aliases([participant_for_label(a.name) for a in specs], specs, "--alias")
    )
    # Aliased names without a roster are known, not present (as `decide`): the room is
    # learnt as people speak.
    options = {"deployment": deployment, "roster_known": conv.roster_known}
    return ReplayInput(list(conv.utterances), tuple(known), options)


# ----------------------------------------------------------------------------- one floor


@dataclass
class _Line:
    """One line of the room while the seats' decisions on it come in."""

    heard: Heard
    done: asyncio.Future[RoomDecision]
    decisions: dict[str, LiveDecision] = field(default_factory=dict)


#: How many arbitrated lines :class:`SharedFloor` remembers for a seat that reports late.
SETTLED = 64


class SharedFloor:
    """Several live agents of one real room (one gate or session per agent, each with its
    own conversation) sharing one :class:`~polylogue.engine.seats.AgentRoom` and one floor.

    Each agent's front end hands in its own decision on every final transcript
    (:meth:`decide`) and waits there until every other seat has decided on the same line
    (the same speaker's same line: each seat counts a speaker's lines as it hears them);
    then the line is arbitrated once and every seat gets its share: at most one SPEAK.
    A seat's own speech needs no decision from it: the line is arbitrated when the others
    have decided. Past ``timeout_s`` the line is arbitrated on the decisions that came in (a
    seat that never reported gets no floor). Seat names are the speaker labels the other
    seats' speech recognizers give their agents' voices (a transport identity equal to the
    seat id, name or an alias).
    """

    def __init__(
        self,
        people: Iterable[Participant] = (),
        *,
        model: TurnTakingModel | None = None,
        policy: str = DEFAULT_FLOOR_POLICY,
        brake: int = DEFAULT_BRAKE,
        timeout_s: float = DECISION_TIMEOUT_S,
    ) -> None:
        self.room = AgentRoom(model or Deployment.resolve().model, list(people), policy, brake)
        self.timeout_s = timeout_s
        #: every arbitrated line, in order
        self.decisions: list[RoomDecision] = []
        self._count: dict[str, dict[str, int]] = {}
        self._pending: dict[tuple[str, int], _Line] = {}
        self._settled: dict[tuple[str, int], _Line] = {}

    @property
    def people(self) -> list[Participant]:
        return self.room.people

    def deployment(self, spec: SeatSpec) -> Deployment:
        """The seat's own deployment (its role and operating point on the room's model)."""
        return self.room._deployment(spec)

    def join(self, spec: SeatSpec, live: LiveConversation) -> str:
        """A seat whose conversation ``live`` a gate or session feeds (the seat's focus set on
        it); the same checks as :meth:`AgentRoom.add_seat` (a :class:`SeatError`)."""
        try:
            if spec.ignored or spec.only:
                live.set_focus(spec.ignored, spec.only)
        except PolylogueInputError as e:
            raise SeatError(f"seat {spec.id!r}: {e}") from None
        self.room.attach(spec, live)
        self._count[spec.id] = {}
        return spec.id

    def _expected(self, speaker: str) -> set[str]:
        own = self.room._seat_of(speaker)
        return {sid for sid in self.room.seats if sid != own}

    async def decide(self, seat: str, heard: Heard, d: LiveDecision) -> LiveDecision:
        """``seat``'s decision on ``heard`` made the floor's: the arbitrated action, with the
        arbitration's reason when it changed the seat's own action."""
        counts = self._count[seat]
        n = counts.get(heard.speaker, 0)
        counts[heard.speaker] = n + 1
        key = (heard.speaker, n)
        line = self._settled.get(key) or self._pending.get(key)
        if line is None:
            line = _Line(heard, asyncio.get_running_loop().create_future())
            self._pending[key] = line
        if not line.done.done():
            line.decisions[seat] = d
            if set(line.decisions) >= self._expected(heard.speaker):
                self._settle(key)
            else:
                try:
                    await asyncio.wait_for(asyncio.shield(line.done), self.timeout_s)
                except TimeoutError:
                    if not line.done.done():
                        missing = sorted(self._expected(heard.speaker) - set(line.decisions))
                        log.warning(
                            "floor: no decision from %s within %g s; arbitrated without",
                            ", ".join(missing),
                            self.timeout_s,
                        )
                        self._settle(key)
        rd = line.done.result()
        action = rd.arbitration.actions.get(seat)
        if seat not in line.decisions:  # reported after the line was arbitrated
            return replace(
                d,
                action=None if d.action is None else Action.SILENT,
                reason="floor: arbitrated without this seat",
            )
        if action is d.action:
            return d
        return replace(
            d, action=action, reason=f"{d.reason}; floor: {rd.arbitration.reasons[seat]}"
        )

    def _settle(self, key: tuple[str, int]) -> None:
        line = self._pending.pop(key)
        h = line.heard
        decisions: dict[str, LiveDecision | None] = dict(line.decisions)
        rd = self.room.heard(Utterance(h.speaker, h.text, h.start, h.end), decisions)
        self.decisions.append(rd)
        line.done.set_result(rd)
        self._settled[key] = line
        while len(self._settled) > SETTLED:
            self._settled.pop(next(iter(self._settled)))
