"""The learned text tier: a small transformer that reads the last turns, fused with the trees.

The fast tier (``polylogue.engine.model``) sees words only through hand-made cues and two
hashed-word logistic models. The text tier adds a fine-tuned MiniLM (truncated to its lower
layers, int8 ONNX) that reads *target-relative* text of the last few turns: the target's own
turns are marked ``[TARGET]``, every other turn carries its speaker's name, newest turn first.
Its logit is fused with the trees' calibrated P(take floor) by a logistic fitted on
validation (late fusion: the trees are not retrained).

This module holds what training and inference must share exactly (the rendering of a
decision's text) and the inference side, which needs ``onnxruntime`` and ``tokenizers`` (the
``text`` extra); they are imported only when a text model is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.conversation import Participant, Utterance
from polylogue.errors import PolylogueInputError

#: Marks the target's own turns (a token added to the tokenizer's vocabulary).
TARGET_TOKEN = "[TARGET]"
#: How many speaker turns (consecutive utterances of one speaker merged) the model reads.
MAX_TURNS = 4
#: Words kept from the end of the current turn and of each earlier turn.
CURRENT_WORDS = 32
EARLIER_WORDS = 12
#: Names of other people present listed in the header (the rest are left out).
MAX_OTHERS = 4
#: Word pieces per input (header + turns), the rest is cut.
MAX_TOKENS = 64


@dataclass(frozen=True, slots=True)
class Turn:
    """One speaker turn: consecutive utterances of one speaker, last words only."""

    speaker: str
    words: tuple[str, ...]


def recent_turns(utterances: Sequence[Utterance], max_turns: int = MAX_TURNS) -> list[Turn]:
    """The last ``max_turns`` speaker turns (oldest first), reading back from the end."""
    turns: list[Turn] = []
    speaker: str | None = None
    words: list[str] = []
    for u in reversed(utterances):
        if u.speaker != speaker:
            if speaker is not None:
                turns.append(Turn(speaker, tuple(words)))
                if len(turns) == max_turns:
                    break
            speaker, words = u.speaker, []
        # Reading backwards: keep only as many words as any turn can show.
        if len(words) < CURRENT_WORDS:
            words[:0] = u.text.split()[-(CURRENT_WORDS - len(words)) :]
    else:
        if speaker is not None:
            turns.append(Turn(speaker, tuple(words)))
    return turns[::-1]


def speaker_label(p: Participant | None, pid: str) -> str:
    """How a speaker is written in the model's input: name, else short alias, else id."""
    if p is not None:
        if p.name:
            return p.name
        if p.aliases:
            return p.aliases[0]
    return pid


def render(
    turns: Sequence[Turn], target: Participant, people: Mapping[str, Participant]
) -> tuple[str, str]:
    """The (header, turns) text pair the text model reads for one target at one pause.

    Header: who the target is and who else is present. Turns: newest first (so cutting the
    end of the input drops the oldest words), the target's own marked ``[TARGET]``.
    """
    others = [speaker_label(p, pid) for pid, p in people.items() if pid != target.id][:MAX_OTHERS]
    header = f"{TARGET_TOKEN} {speaker_label(target, target.id)} ; others {' , '.join(others)}"
    parts = []
    for i, t in enumerate(reversed(turns)):
        who = people.get(t.speaker)
        label = TARGET_TOKEN if t.speaker == target.id else speaker_label(who, t.speaker)
        words = t.words[-(CURRENT_WORDS if i == 0 else EARLIER_WORDS) :]
        parts.append(f"{label} : {' '.join(words)}")
    return header, " | ".join(parts)


def render_point(
    context: Sequence[Utterance], target: Participant, present: Iterable[Participant]
) -> tuple[str, str]:
    """``render`` for a benchmark decision point (context up to the pause)."""
    people = {p.id: p for p in present}
    people.setdefault(target.id, target)
    return render(recent_turns(context), target, people)


# ----------------------------------------------------------------------------- inference

#: The folder shipped with the package for the text tier (absent when it is not shipped).
DEFAULT_TEXT_DIR = Path(__file__).resolve().parent / "text_weights"
TEXT_FORMAT = "polylogue.turntaking.text/1"


class TextTierUnavailable(PolylogueInputError):
    """The text tier was asked for but its extra (onnxruntime, tokenizers) or files are missing."""


def _require_extra() -> tuple[Any, Any]:
    try:
        import onnxruntime
        import tokenizers
    except ImportError as e:  # the optional extra is not installed
        raise TextTierUnavailable(
            f"--tier text needs the optional 'text' extra ({e.name} is not installed): "
            "pip install 'polylogue[text]'"
        ) from e
    return onnxruntime, tokenizers


@dataclass
class TextScorer:
    """The int8 ONNX text model and its tokenizer: (header, turns) pairs -> logits."""

    session: Any
    tokenizer: Any
    max_tokens: int = MAX_TOKENS

    @classmethod
    def load(cls, folder: str | Path, threads: int = 1) -> TextScorer:
        ort, tokenizers = _require_extra()
        folder = Path(folder)
        for name in ("text_model.onnx", "tokenizer.json"):
            if not (folder / name).is_file():
                raise TextTierUnavailable(f"{folder}: not a text model folder (missing {name})")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        session = ort.InferenceSession(
            str(folder / "text_model.onnx"), opts, providers=["CPUExecutionProvider"]
        )
        tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(MAX_TOKENS, strategy="only_second")
        return cls(session, tok)

    def logits(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One logit of P(take the floor) per (header, turns) pair, one forward pass."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        encs = self.tokenizer.encode_batch(list(pairs))
        width = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for i, e in enumerate(encs):
            n = len(e.ids)
            ids[i, :n] = e.ids
            mask[i, :n] = 1
            types[i, :n] = e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return np.asarray(self.session.run(["logit"], feeds)[0], dtype=np.float32)


def logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(q / (1 - q))


@dataclass(frozen=True)
class Fusion:
    """P(take floor) = sigmoid(w_trees * logit(p_trees) + w_text * text_logit + bias)."""

    w_trees: float
    w_text: float
    bias: float

    def __call__(self, p_trees: np.ndarray, text_logit: np.ndarray) -> np.ndarray:
        z = self.w_trees * logit(p_trees) + self.w_text * text_logit + self.bias
        return 1.0 / (1.0 + np.exp(-z))
