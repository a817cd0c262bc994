"""Examples of the two chat addressing tasks, from conversations with reply structure.

*Addressee recognition*: for a message whose addressee is annotated (IRC reply-to links,
Molweni discourse relations), who is it addressed to, among the participants seen so far?

*Next speaker*: after a message, who sends the next one (in channel order), among the
participants seen so far? *Responder* is the thread-aware variant: who sends the first later
message that replies to it (by the reply links)?

An example carries its conversation and index, so a predictor sees the messages up to and
including the current one (``conversation.utterances[: index + 1]``) and nothing later; the
gold answer and the candidates are kept apart from that context.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from polylogue.conversation import Conversation, Utterance


class Task(StrEnum):
    ADDRESSEE = "addressee"
    NEXT_SPEAKER = "next-speaker"
    RESPONDER = "responder"


TASKS: tuple[Task, ...] = (Task.ADDRESSEE, Task.NEXT_SPEAKER, Task.RESPONDER)


@dataclass(frozen=True, slots=True)
class AddressingExample:
    """One prediction to make: who, among ``candidates``, answers ``task`` at ``index``."""

    task: Task
    conversation: Conversation
    index: int
    #: Everybody who sent a message up to and including ``index`` (channel order of first
    #: message), minus the current speaker for the addressee task.
    candidates: tuple[str, ...]
    #: Correct answers (several when a message replies to several people).
    gold: frozenset[str]

    @property
    def example_id(self) -> str:
        return f"{self.conversation.id}:{self.index}:{self.task.value}"

    @property
    def context(self) -> tuple[Utterance, ...]:
        return self.conversation.utterances[: self.index + 1]

    @property
    def current(self) -> Utterance:
        return self.conversation.utterances[self.index]

    @property
    def gold_in_candidates(self) -> bool:
        return bool(self.gold & set(self.candidates))


def examples(conversations: Iterable[Conversation], task: Task) -> Iterator[AddressingExample]:
    """Every example of ``task`` in ``conversations`` (annotated messages only)."""
    for conv in conversations:
        yield from conversation_examples(conv, task)


def conversation_examples(conv: Conversation, task: Task) -> Iterator[AddressingExample]:
    utts = conv.utterances
    seen: dict[str, None] = {}
    responders = _first_responders(conv) if task is Task.RESPONDER else {}
    for i, u in enumerate(utts):
        seen.setdefault(u.speaker, None)
        if u.addressees is None or not u.text.strip():
            continue  # unannotated (IRC context lines) or empty
        if task is Task.ADDRESSEE:
            if not u.addressees:
                continue  # a new thread: addressed to nobody in particular
            candidates = tuple(p for p in seen if p != u.speaker)
            gold = frozenset(u.addressees)
        elif task is Task.NEXT_SPEAKER:
            if i + 1 >= len(utts):
                continue
            candidates = tuple(seen)
            gold = frozenset({utts[i + 1].speaker})
        else:
            if i not in responders:
                continue
            candidates = tuple(seen)
            gold = frozenset({responders[i]})
        yield AddressingExample(task, conv, i, candidates, gold)


def _first_responders(conv: Conversation) -> dict[int, str]:
    """Message index -> speaker of the first later message that replies to it."""
    reply_to = conv.metadata.get("reply_to")
    if not isinstance(reply_to, list) or len(reply_to) != len(conv.utterances):
        raise ValueError(
            f"conversation {conv.id} has no reply structure (metadata['reply_to']); "
            "the responder task needs the IRC or Molweni reader"
        )
    out: dict[int, str] = {}
    for child, parents in enumerate(reply_to):
        for p in parents:
            if p not in out and conv.utterances[child].speaker != conv.utterances[p].speaker:
                out[p] = conv.utterances[child].speaker
    return out


__all__ = ["TASKS", "AddressingExample", "Task", "conversation_examples", "examples"]
