"""Chat feature block: who addresses whom by nick, and who still owes a reply.

Read only by models trained with the ``chat`` feature block (:data:`CHAT_BLOCK`; the
chat-domain model, ``--domain chat``); the default model's 65 features
(:mod:`polylogue.engine.features`) are untouched. The block is appended after them in the
feature row (:mod:`polylogue.engine.blocks`).

In a channel several threads interleave, so whether a listener sends the next message depends
less on the message that just ended than on the *reply structure visible so far*: messages
that start with the listener's nick (``bob:``, ``bob,``, ``@bob``, ``Bob`` or a unique prefix
``bo:``, any case), how many of them arrived since the listener last wrote, whether the
listener's own last message addressed the current author, how often the two exchanged nicks
lately, how active the listener is, and channel bots answering ``!commands``. Everything here
is causal: nicks in the words of messages up to the pause, never reply annotations.
"""

from __future__ import annotations

import bisect
import copy
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from polylogue.conversation import Participant, RosterDicts, Utterance
from polylogue.engine.blocks import FeatureBlock, Present, Scorer

CHAT_FEATURE_NAMES: tuple[str, ...] = (
    "chat_addr_target",
    "chat_addr_target_marked",
    "chat_addr_other",
    "chat_mention_target",
    "chat_n_mentioned",
    "chat_ref_target_prev",
    "chat_since_target_ref",
    "chat_pending",
    "chat_pending_from_speaker",
    "chat_target_addressed_speaker",
    "chat_target_last_addr_none",
    "chat_target_last_question",
    "chat_target_addressee_spoke_since",
    "chat_links_speaker_target",
    "chat_target_links",
    "chat_target_msgs_recent",
    "chat_target_msgs_5min",
    "chat_channel_msgs_5min",
    "chat_target_is_bot",
    "chat_command",
    "chat_speaker_is_bot",
    "chat_speaker_addressee_is_target",
    "chat_target_addressee_is_speaker",
    "chat_since_link_speaker_target",
    "chat_target_first_speaker",
    "chat_seconds_since_target_ref",
)
N_CHAT_FEATURES = len(CHAT_FEATURE_NAMES)
_IDX = {n: i for i, n in enumerate(CHAT_FEATURE_NAMES)}

#: Nicks of known channel bots (``role="bot"`` marks others).
BOT_NICKS = frozenset(
    {"ubotu", "ubottu", "ubot2", "ubot3", "ubot4", "ubot5", "floodbot1", "floodbot2", "floodbot3"}
)
# Characters around a nick in running text that are not part of it, and the address marks.
_EDGE = ".,:;!?()\"'<>@~*"
_MARKS = (":", ",", ">")
# Decoration IRC users add to a nick (``bob_``, ``bob|away``, ``^bob^``): stripped for a
# second, looser key.
_DECOR = "_-|^`"
_WINDOW = 50
_SECONDS = 300.0
_CAP = 100


def nick_keys(p: Participant) -> set[str]:
    """Lower-case keys a participant can be named by (id, name, aliases, undecorated forms)."""
    out: set[str] = set()
    for k in (p.id, p.name, *p.aliases):
        if k and len(k.strip()) >= 2:
            low = k.strip().lower()
            out.add(low)
            bare = low.strip(_DECOR)
            if len(bare) >= 2:
                out.add(bare)
    return out


@dataclass(slots=True)
class _Msg:
    index: int
    speaker: str
    addressed: str | None
    marked: bool
    mentioned: frozenset[str]
    question: bool
    command: bool
    time: float | None


@dataclass
class ChatState:
    """Streaming nick-address state of a channel (see the module docstring)."""

    participants: dict[str, Participant] = field(default_factory=dict)
    #: the participants' dicts of the last snapshot (rebuilt when the roster changes)
    _roster_dicts: RosterDicts = field(default_factory=RosterDicts, repr=False, compare=False)
    n: int = 0
    _keys: dict[str, set[str]] = field(default_factory=dict)
    _sorted_keys: list[str] = field(default_factory=list)
    window: deque[_Msg] = field(default_factory=lambda: deque(maxlen=2))
    last_msg: dict[str, _Msg] = field(default_factory=dict)
    last_ref: dict[str, int] = field(default_factory=dict)
    pending: Counter[str] = field(default_factory=Counter)
    pending_from: dict[str, set[str]] = field(default_factory=dict)
    #: Messages (speaker, nicks they named) of the last ``_WINDOW`` messages, with counts.
    recent: deque[tuple[str, frozenset[str]]] = field(default_factory=deque)
    recent_msgs: Counter[str] = field(default_factory=Counter)
    links: Counter[tuple[str, str]] = field(default_factory=Counter)
    link_count: Counter[str] = field(default_factory=Counter)
    timed: deque[tuple[float, str]] = field(default_factory=deque)
    timed_msgs: Counter[str] = field(default_factory=Counter)
    #: Whom each participant addressed by nick most recently (kept across unaddressed lines:
    #: ``bob: try X`` then ``and then Y`` is still for bob).
    last_addressee: dict[str, str] = field(default_factory=dict)
    first_speaker: str | None = None
    last_ref_time: dict[str, float] = field(default_factory=dict)

    def fork(self) -> ChatState:
        """A copy that observing more messages does not share with this one (a live probe)."""
        return copy.deepcopy(self)

    # ------------------------------------------------------------------ nicks

    def register(self, people: Iterable[Participant]) -> None:
        for p in people:
            if p.id in self.participants:
                continue
            self.participants[p.id] = p
            for k in nick_keys(p):
                owners = self._keys.setdefault(k, set())
                if not owners:
                    bisect.insort(self._sorted_keys, k)
                owners.add(p.id)

    def _lookup(self, token: str) -> str | None:
        key = token.strip(_EDGE).lower()
        if len(key) < 2:
            return None
        for k in (key, key.strip(_DECOR)):
            owners = self._keys.get(k)
            if owners is not None and len(owners) == 1:
                return next(iter(owners))
        return None

    def _prefix(self, token: str) -> str | None:
        """A unique participant whose nick starts with ``token`` (>= 3 characters)."""
        key = token.strip(_EDGE).lower()
        if len(key) < 3:
            return None
        i = bisect.bisect_left(self._sorted_keys, key)
        owners: set[str] = set()
        while i < len(self._sorted_keys) and self._sorted_keys[i].startswith(key):
            owners |= self._keys[self._sorted_keys[i]]
            if len(owners) > 1:
                return None
            i += 1
        return next(iter(owners)) if owners else None

    def address_of(self, text: str, speaker: str) -> tuple[str | None, bool, frozenset[str]]:
        """(addressed participant, addressed with a mark ``:``/``,``/``@``, everyone named)."""
        tokens = text.split()
        named: dict[str, None] = {}
        for tok in tokens:
            pid = self._lookup(tok)
            if pid is not None and pid != speaker:
                named.setdefault(pid, None)
        addressed: str | None = None
        marked = False
        if tokens:
            first = tokens[0]
            marked = first.startswith("@") or first.rstrip(".!?").endswith(_MARKS)
            addressed = self._lookup(first)
            if addressed is None and marked:
                addressed = self._prefix(first)
            if addressed == speaker:
                addressed = None
            if addressed is not None:
                named.setdefault(addressed, None)
        return addressed, marked and addressed is not None, frozenset(named)

    def is_bot(self, pid: str) -> bool:
        p = self.participants.get(pid)
        return (p is not None and p.role == "bot") or pid.lower() in BOT_NICKS

    # ------------------------------------------------------------------ streaming update

    def observe(self, u: Utterance) -> None:
        if u.speaker not in self.participants:
            self.register([Participant(id=u.speaker, name=u.speaker)])
        addressed, marked, named = self.address_of(u.text, u.speaker)
        text = u.text.strip()
        msg = _Msg(
            self.n,
            u.speaker,
            addressed,
            marked,
            named,
            text.endswith("?") or "? " in text,
            text.startswith("!"),
            u.end if u.end is not None else u.start,
        )
        for pid in named:
            self.pending[pid] += 1
            self.pending_from.setdefault(pid, set()).add(u.speaker)
            self.last_ref[pid] = self.n
            if msg.time is not None:
                self.last_ref_time[pid] = msg.time
        if addressed is not None:
            self.last_addressee[u.speaker] = addressed
        if self.first_speaker is None:
            self.first_speaker = u.speaker
        self.pending[u.speaker] = 0
        self.pending_from.pop(u.speaker, None)
        self.last_msg[u.speaker] = msg
        self.window.append(msg)
        self._slide(u.speaker, named, +1)
        self.recent.append((u.speaker, named))
        if len(self.recent) > _WINDOW:
            old_speaker, old_named = self.recent.popleft()
            self._slide(old_speaker, old_named, -1)
        if msg.time is not None:
            self.timed.append((msg.time, u.speaker))
            self.timed_msgs[u.speaker] += 1
            while self.timed and self.timed[0][0] < msg.time - _SECONDS:
                _, gone = self.timed.popleft()
                self.timed_msgs[gone] -= 1
        self.n += 1

    def _slide(self, speaker: str, named: frozenset[str], step: int) -> None:
        self.recent_msgs[speaker] += step
        for pid in named:
            self.links[(speaker, pid)] += step
            self.link_count[speaker] += step
            self.link_count[pid] += step

    # ------------------------------------------------------------------ decision features

    def features(self, target: str) -> np.ndarray:
        """The chat block for "should ``target`` send the next message?"."""
        if not self.window:
            raise ValueError("no message observed yet: there is no pause to decide at")
        x = np.zeros(N_CHAT_FEATURES, dtype=np.float32)
        cur = self.window[-1]
        prev = self.window[0] if len(self.window) > 1 else None
        speaker = cur.speaker

        def put(name: str, value: float | bool) -> None:
            x[_IDX[name]] = float(value)

        put("chat_addr_target", cur.addressed == target)
        put("chat_addr_target_marked", cur.addressed == target and cur.marked)
        put("chat_addr_other", cur.addressed is not None and cur.addressed != target)
        put("chat_mention_target", target in cur.mentioned)
        put("chat_n_mentioned", min(len(cur.mentioned), 10))
        put("chat_ref_target_prev", prev is not None and target in prev.mentioned)
        ref = self.last_ref.get(target)
        put("chat_since_target_ref", _CAP if ref is None else min(self.n - 1 - ref, _CAP))
        put("chat_pending", min(self.pending[target], 10))
        put("chat_pending_from_speaker", speaker in self.pending_from.get(target, ()))
        mine = self.last_msg.get(target)
        if mine is not None:
            put("chat_target_addressed_speaker", speaker in mine.mentioned)
            put("chat_target_last_addr_none", mine.addressed is None)
            put("chat_target_last_question", mine.question)
            partner = self.last_msg.get(mine.addressed) if mine.addressed else None
            answered = partner is not None and partner.index > mine.index
            put("chat_target_addressee_spoke_since", answered)
        put(
            "chat_links_speaker_target",
            min(self.links[(speaker, target)] + self.links[(target, speaker)], 20),
        )
        put("chat_target_links", min(self.link_count[target], 20))
        put("chat_target_msgs_recent", self.recent_msgs[target])
        if cur.time is not None:
            put("chat_target_msgs_5min", min(self.timed_msgs[target], 50))
            put("chat_channel_msgs_5min", min(len(self.timed), 200))
        else:
            x[_IDX["chat_target_msgs_5min"]] = np.nan
            x[_IDX["chat_channel_msgs_5min"]] = np.nan
        put("chat_target_is_bot", self.is_bot(target))
        put("chat_command", cur.command)
        put("chat_speaker_is_bot", self.is_bot(speaker))
        put("chat_speaker_addressee_is_target", self.last_addressee.get(speaker) == target)
        put("chat_target_addressee_is_speaker", self.last_addressee.get(target) == speaker)
        put("chat_since_link_speaker_target", self._since_link(speaker, target))
        put("chat_target_first_speaker", self.first_speaker == target)
        ref_t = self.last_ref_time.get(target)
        if cur.time is None:
            x[_IDX["chat_seconds_since_target_ref"]] = np.nan
        else:
            since = 3600.0 if ref_t is None else min(max(cur.time - ref_t, 0.0), 3600.0)
            put("chat_seconds_since_target_ref", since)
        return x

    def _since_link(self, a: str, b: str) -> int:
        """Messages since ``a`` and ``b`` last named each other (``_WINDOW``: not lately)."""
        for back, (speaker, named) in enumerate(reversed(self.recent)):
            if (speaker == a and b in named) or (speaker == b and a in named):
                return back
        return _WINDOW


def new_chat_state(participants: Iterable[Participant] = ()) -> ChatState:
    state = ChatState()
    state.register(participants)
    return state


# ---------------------------------------------------------------------- snapshots (persistence)


def _msg_to_list(m: _Msg) -> list[object]:
    return [
        m.index,
        m.speaker,
        m.addressed,
        m.marked,
        sorted(m.mentioned),
        m.question,
        m.command,
        m.time,
    ]


def _msg_from_list(row: list[Any]) -> _Msg:
    index, speaker, addressed, marked, mentioned, question, command, t = row
    return _Msg(
        int(index),
        str(speaker),
        addressed,
        bool(marked),
        frozenset(mentioned),
        bool(question),
        bool(command),
        None if t is None else float(t),
    )


def chat_state_to_dict(state: ChatState) -> dict[str, object]:
    """A JSON-able snapshot of a :class:`ChatState` (bounded like the state; a copy, as
    :func:`~polylogue.engine.features.state_to_dict`)."""
    return {
        "participants": state._roster_dicts(state.participants),
        "n": state.n,
        "window": [_msg_to_list(m) for m in state.window],
        "last_msg": [_msg_to_list(m) for m in state.last_msg.values()],
        "last_ref": dict(state.last_ref),
        "pending": dict(state.pending),
        "pending_from": {k: sorted(v) for k, v in state.pending_from.items()},
        "recent": [[s, sorted(named)] for s, named in state.recent],
        "timed": [[t, s] for t, s in state.timed],
        "last_addressee": dict(state.last_addressee),
        "first_speaker": state.first_speaker,
        "last_ref_time": dict(state.last_ref_time),
    }


def chat_state_from_dict(d: dict[str, object]) -> ChatState:
    """Rebuild a :class:`ChatState` from :func:`chat_state_to_dict`."""
    g = cast(dict[str, Any], d)
    state = new_chat_state(Participant.from_dict(p) for p in g["participants"])
    state.n = int(g["n"])
    state.window.extend(_msg_from_list(r) for r in g["window"])
    for r in g["last_msg"]:
        m = _msg_from_list(r)
        state.last_msg[m.speaker] = m
    state.last_ref.update({str(k): int(v) for k, v in g["last_ref"].items()})
    state.pending.update(g["pending"])
    state.pending_from.update({k: set(v) for k, v in g["pending_from"].items()})
    for speaker, named in g["recent"]:
        names = frozenset(named)
        state.recent.append((speaker, names))
        state._slide(speaker, names, +1)
    for t, speaker in g["timed"]:
        state.timed.append((float(t), speaker))
        state.timed_msgs[speaker] += 1
    state.last_addressee.update(g["last_addressee"])
    state.first_speaker = g["first_speaker"]
    state.last_ref_time.update({str(k): float(v) for k, v in g["last_ref_time"].items()})
    return state


# ---------------------------------------------------------------------- the chat block


def _new_state(_yield: Scorer, _relation: Scorer, people: Iterable[Participant]) -> ChatState:
    return new_chat_state(people)  # nicks only: the word models are the base block's


def _row(
    state: ChatState, target: str, _present: Present, _keys: list[tuple[int, ...]] | None
) -> np.ndarray:
    return state.features(target)


def _from_dict(d: dict[str, object], _yield: Scorer, _relation: Scorer) -> ChatState:
    return chat_state_from_dict(d)


def nick_addressed(x: np.ndarray) -> bool:
    """The message starts with the target's nick (any case, a unique prefix): the chat row."""
    return bool(x[_IDX["chat_addr_target"]] == 1.0)


#: Read only by models trained with it (the chat-domain model).
CHAT_BLOCK: FeatureBlock[ChatState] = FeatureBlock(
    name="chat",
    names=CHAT_FEATURE_NAMES,
    new_state=_new_state,
    row=_row,
    snapshot_key="chat_state",
    to_dict=chat_state_to_dict,
    from_dict=_from_dict,
    addressed=nick_addressed,
)
