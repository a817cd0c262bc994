"""Molweni reader (discourse-parsing release): short multi-party Ubuntu IRC dialogues.

``folder`` is ``shared/data/molweni`` (or its ``DP`` folder). ``DP/{split}.json`` is a list of
``{"id", "edus": [{"text", "speaker"}], "relations": [{"x", "y", "type"}]}``; a relation
``x -> y`` says EDU ``y`` attaches to (replies to) EDU ``x``. Each dialogue becomes one
:class:`Conversation` (``id = "molweni-{split}-{id}"``, ``group`` = the dialogue id):

* one :class:`Utterance` per EDU, text detokenised (``llutz , you 're`` -> ``llutz, you're``),
  ``id = "{dialogue id}:{k}"``, no times (the release has none);
* ``addressees`` = the speakers of the EDUs it attaches to (speaker excluded): ``()`` when it
  attaches only to the speaker's own EDUs or to nothing, ``None`` for the first EDU (there
  is nothing before it to address);
* an EDU with an empty ``speaker`` (18 in dev) is spoken by the participant ``(unknown)``;
* ``dialogue_act`` = the relation type(s) of its incoming links (``QAP``, ``Comment``, ...,
  several joined by ``+``);
* ``metadata["reply_to"]``: per utterance the EDU indices it attaches to;
  ``metadata["split"]``: ``dev`` or ``test``.

Participants are the speakers in order of first EDU (``roster_known=False``), with the
lower-case nick as alias (see :func:`polylogue.corpora.irc.nick_participant`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from polylogue.conversation import Conversation, ConversationFormatError, Utterance
from polylogue.corpora._detokenize import detokenize
from polylogue.corpora.irc import nick_participant

CORPUS = "molweni"
DOMAIN = "chat"
SPLITS: tuple[str, ...] = ("train", "dev", "test")
#: Speaker id for EDUs whose speaker field is empty.
UNKNOWN_SPEAKER = "(unknown)"


def molweni_splits(folder: str | Path) -> list[str]:
    """Splits present in this copy (the shared copy has dev and test)."""
    base = _dp_dir(folder)
    return [s for s in SPLITS if (base / f"{s}.json").is_file()]


def read_molweni(
    folder: str | Path, splits: Iterable[str] | str | None = None
) -> Iterator[Conversation]:
    """Yield the dialogues of ``splits`` (default: every split present), in file order."""
    base = _dp_dir(folder)
    if isinstance(splits, str):
        splits = [splits]
    wanted = molweni_splits(folder) if splits is None else list(splits)
    for split in wanted:
        if split not in SPLITS:
            raise ValueError(f"unknown Molweni split {split!r}; known: {', '.join(SPLITS)}")
        path = base / f"{split}.json"
        if not path.is_file():
            raise FileNotFoundError(f"Molweni split {split!r} is not in this copy: {path}")
        yield from read_molweni_file(path, split)


def read_molweni_file(path: str | Path, split: str | None = None) -> Iterator[Conversation]:
    """Dialogues of one DP JSON file."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConversationFormatError(
            path, f"line {exc.lineno} column {exc.colno}", f"malformed JSON: {exc.msg}"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversationFormatError(path, "", f"cannot read file: {exc}") from exc
    if not isinstance(doc, list):
        raise ConversationFormatError(path, "", "expected a JSON list of dialogues")
    seen: set[str] = set()
    for k, item in enumerate(doc):
        conv = dialogue_conversation(item, path, k, split)
        if conv.id in seen:
            raise ConversationFormatError(path, f"dialogue {k}", f"duplicate id {conv.id!r}")
        seen.add(conv.id)
        yield conv


def dialogue_conversation(item: Any, path: str | Path, k: int, split: str | None) -> Conversation:
    """One Molweni dialogue object as a conversation (``k`` names it in errors)."""
    where = f"dialogue {k}"
    if not isinstance(item, dict):
        raise ConversationFormatError(path, where, "dialogue is not an object")
    did = item.get("id")
    if not isinstance(did, str | int) or str(did) == "":
        raise ConversationFormatError(path, where, "missing 'id'")
    where = f"dialogue {k} (id {did})"
    edus, relations = item.get("edus"), item.get("relations")
    if not isinstance(edus, list) or not edus:
        raise ConversationFormatError(path, where, "'edus' must be a non-empty list")
    if not isinstance(relations, list):
        raise ConversationFormatError(path, where, "'relations' must be a list")
    speakers: list[str] = []
    texts: list[str] = []
    for j, e in enumerate(edus):
        if not isinstance(e, dict):
            raise ConversationFormatError(path, f"{where} edus[{j}]", "EDU is not an object")
        spk, text = e.get("speaker"), e.get("text")
        if not isinstance(spk, str):
            raise ConversationFormatError(path, f"{where} edus[{j}]", "missing 'speaker'")
        if not isinstance(text, str):
            raise ConversationFormatError(path, f"{where} edus[{j}]", "missing 'text'")
        # 18 dev EDUs have an empty speaker (a nick lost in the release): one unknown person.
        speakers.append(spk.strip() or UNKNOWN_SPEAKER)
        texts.append(detokenize(text.split()))
    parents: list[list[int]] = [[] for _ in edus]
    types: list[list[str]] = [[] for _ in edus]
    for j, r in enumerate(relations):
        rw = f"{where} relations[{j}]"
        if not isinstance(r, dict):
            raise ConversationFormatError(path, rw, "relation is not an object")
        x, y = r.get("x"), r.get("y")
        if not isinstance(x, int) or not isinstance(y, int) or isinstance(x, bool):
            raise ConversationFormatError(path, rw, "'x' and 'y' must be EDU indices")
        if not (0 <= x < y < len(edus)):
            raise ConversationFormatError(
                path, rw, f"relation {x} -> {y} must point back to an earlier EDU (0..{y - 1})"
            )
        parents[y].append(x)
        types[y].append(str(r.get("type") or "?"))
    utterances = []
    for j, (spk, text) in enumerate(zip(speakers, texts, strict=True)):
        addressees: tuple[str, ...] | None = None
        if j > 0:
            addressees = tuple(dict.fromkeys(speakers[x] for x in parents[j] if speakers[x] != spk))
        utterances.append(
            Utterance(
                speaker=spk,
                text=text,
                addressees=addressees,
                dialogue_act="+".join(types[j]) or None,
                id=f"{did}:{j}",
            )
        )
    participants = tuple(
        replace(nick_participant(s), role="unknown")
        if s == UNKNOWN_SPEAKER
        else nick_participant(s)
        for s in dict.fromkeys(speakers)
    )
    return Conversation(
        id=f"molweni-{split or 'x'}-{did}",
        corpus=CORPUS,
        utterances=tuple(utterances),
        participants=participants,
        domain=DOMAIN,
        group=f"{split or 'x'}-{did}",
        roster_known=False,
        source=str(path),
        metadata={
            "unit": "edu",
            "split": split,
            "reply_to": [sorted(p) for p in parents],
        },
    )


def _dp_dir(folder: str | Path) -> Path:
    base = Path(folder)
    for cand in (base / "DP", base):
        if any(cand.glob("*.json")):
            return cand
    raise FileNotFoundError(f"{base} holds no Molweni DP files (expected DP/dev.json etc.)")


__all__ = ["dialogue_conversation", "molweni_splits", "read_molweni", "read_molweni_file"]
