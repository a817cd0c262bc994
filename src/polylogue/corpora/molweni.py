"""Molweni reader (discourse-parsing release): short multi-party Ubuntu IRC dialogues.

``folder`` is ``shared/data/molweni`` (or its ``DP`` folder). ``DP/{split}.json`` is a list of
``{"id", "edus": [{"text", "speaker"}], "relations": [{"x", "y", "type"}]}``; a relation
``x -> y`` says EDU ``y`` attaches to (replies to) EDU ``x``. Each dialogue becomes one
:class:`Conversation` (``id = "molweni-{split}-{id}"``, ``group`` = its *stretch*, below):

* one :class:`Utterance` per EDU, text detokenised (``llutz , you 're`` -> ``llutz, you're``),
  ``id = "{dialogue id}:{k}"``, no times (the release has none);
* ``addressees`` = the speakers of the EDUs it attaches to (speaker excluded): ``()`` when it
  attaches only to the speaker's own EDUs or to nothing, ``None`` for the first EDU (there
  is nothing before it to address);
* an EDU with an empty ``speaker`` (18 in dev) is spoken by the participant ``(unknown)``;
* ``dialogue_act`` = the relation type(s) of its incoming links (``QAP``, ``Comment``, ...,
  several joined by ``+``);
* ``metadata["reply_to"]``: per utterance the EDU indices it attaches to;
  ``metadata["split"]``: ``dev`` or ``test``; ``metadata["dialogue"]``: the dialogue id.

**Stretches.** The dialogues are overlapping windows of one IRC channel: 407 of the 500 dev
dialogues (400 of 500 test) share at least one message with another dialogue of their file.
Dialogues of one file that share a message (same speaker and same text) are joined,
transitively, into a stretch (dev: 199 stretches of 1-8 dialogues, test: 205), and every
dialogue's ``group`` is its stretch, named ``"{split}-stretch-{first dialogue id}"`` after
the stretch's first dialogue in file order. Splits and group-bootstrap intervals therefore
never separate overlapping windows. Stretches are computed per file: the authors' dev/test
split is kept as released, although 15 test dialogues share 63 messages with dev dialogues.
Dialogues of the ``test`` file carry ``metadata["benchmark_split"] = "test"``, so
``polylogue build`` keeps them in test and splits the other files' stretches into
train/validation (see :data:`polylogue.turntaking.dataset.FIXED_SPLIT_KEY`).

Participants are the speakers in order of first EDU (``roster_known=False``), with the
lower-case nick as alias (see :func:`polylogue.corpora.irc.nick_participant`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from polylogue.conversation import Conversation, ConversationFormatError, Utterance
from polylogue.corpora._detokenize import detokenize
from polylogue.corpora._text import load_json_file
from polylogue.corpora.irc import nick_participant

CORPUS = "molweni"
DOMAIN = "chat"
SPLITS: tuple[str, ...] = ("train", "dev", "test")
#: The official split file whose dialogues stay in the benchmark's test split.
TEST_SPLIT = "test"
_STRETCH = "-stretch-"
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
        doc = load_json_file(path)
    except OSError as exc:
        raise ConversationFormatError(path, "", f"cannot read file: {exc}") from exc
    if not isinstance(doc, list):
        raise ConversationFormatError(path, "", "expected a JSON list of dialogues")
    seen: set[str] = set()
    convs: list[Conversation] = []
    for k, item in enumerate(doc):
        conv = dialogue_conversation(item, path, k, split)
        if conv.id in seen:
            raise ConversationFormatError(path, f"dialogue {k}", f"duplicate id {conv.id!r}")
        seen.add(conv.id)
        convs.append(conv)
    fixed = {"benchmark_split": "test"} if split == TEST_SPLIT else {}
    for conv, group in zip(convs, stretch_groups(convs), strict=True):
        yield replace(conv, group=group, metadata={**conv.metadata, **fixed})


def stretch_groups(convs: list[Conversation]) -> list[str]:
    """Per dialogue, the name of its stretch: dialogues sharing a message (speaker and text),
    joined transitively, named ``"{split}-stretch-{first dialogue id}"`` after the first
    member in the given order (the dialogues of one split file)."""
    parent = list(range(len(convs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_with: dict[tuple[str, str], int] = {}
    for i, c in enumerate(convs):
        for u in c.utterances:
            j = first_with.setdefault((u.speaker, u.text), i)
            if root(j) != root(i):
                parent[root(i)] = root(j)
    name: dict[int, str] = {}
    for i, c in enumerate(convs):
        split = c.metadata.get("split") or "x"
        name.setdefault(root(i), f"{split}{_STRETCH}{c.metadata['dialogue']}")
    return [name[root(i)] for i in range(len(convs))]


def stretch_first_dialogue_group(group: str) -> str:
    """The dialogue-level group (``"dev-<id>"``) of a stretch's first dialogue, as groups were
    named before stretches (the chat model's validation hash is keyed on it)."""
    split, sep, did = group.partition(_STRETCH)
    if not sep:
        raise ValueError(f"not a Molweni stretch group: {group!r}")
    return f"{split}-{did}"


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
            "dialogue": str(did),
            "reply_to": [sorted(p) for p in parents],
        },
    )


def _dp_dir(folder: str | Path) -> Path:
    base = Path(folder)
    for cand in (base / "DP", base):
        if any(cand.glob("*.json")):
            return cand
    raise FileNotFoundError(f"{base} holds no Molweni DP files (expected DP/dev.json etc.)")


__all__ = [
    "dialogue_conversation",
    "molweni_splits",
    "read_molweni",
    "read_molweni_file",
    "stretch_first_dialogue_group",
    "stretch_groups",
]
