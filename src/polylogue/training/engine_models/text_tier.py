"""The learned text tier: a small transformer that reads the last turns, fused with the trees.

The fast tier (``polylogue.engine.model``) sees words only through hand-made cues and two
hashed-word logistic models. The text tier adds a fine-tuned MiniLM (truncated to its lower
layers, int8 ONNX) that reads *target-relative* text of the last few turns: the target's own
turns are marked ``[TARGET]``, every other turn carries its speaker's name, newest turn first.
Its logit is fused with the trees' calibrated P(take floor) by a logistic fitted on
validation (late fusion: the trees are not retrained).

**Not shipped**: on validation the fused tier was no better than the trees alone (see
docs/model-card.md, "Learned text component"), so it lives with the training code, not in the
runtime (``polylogue.engine``), and the fast tier is the only engine. A folder written by
``python -m polylogue.training.engine_models.text_component package`` loads with
``TextTier.load(folder)`` or ``load_engine("text", text_dir=folder)``.

This module holds what training and inference must share exactly (the rendering of a
decision's text) and the inference side, which needs ``onnxruntime`` and ``tokenizers`` (the
``text`` extra); they are imported only when a text model is loaded.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.conversation import GROUP_ROLE, Participant, Utterance
from polylogue.engine.engine import EngineDecision, TurnTakingEngine
from polylogue.engine.features import SPOKEN, Spoken
from polylogue.engine.model import TurnTakingModel, load_model
from polylogue.errors import PolylogueInputError
from polylogue.jsonio import load_json_object

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


@dataclass
class TextTier:
    """The text model, its fusion with the trees, and the fused floor thresholds."""

    scorer: TextScorer
    fusion: Fusion
    threshold: float
    domain_thresholds: dict[str, float]
    metadata: dict[str, Any]

    @classmethod
    def load(cls, folder: str | Path, threads: int = 1) -> TextTier:
        """Load a text-tier folder (none is shipped); needs the ``text`` extra."""
        folder = Path(folder)
        meta_path = folder / "text_model.json"
        if not meta_path.is_file():
            raise TextTierUnavailable(
                f"{folder}: no text tier here (missing text_model.json); "
                "this polylogue build ships only the fast tier (the text tier gave no gain on "
                "validation; see docs/model-card.md)"
            )
        meta = load_json_object(meta_path, "a text-tier description object")
        if meta.get("format") != TEXT_FORMAT:
            raise TextTierUnavailable(
                f"{meta_path}: format {meta.get('format')!r}, want {TEXT_FORMAT!r}"
            )
        f = meta["fusion"]
        return cls(
            scorer=TextScorer.load(folder, threads=threads),
            fusion=Fusion(float(f["w_trees"]), float(f["w_text"]), float(f["bias"])),
            threshold=float(meta["threshold"]),
            domain_thresholds={str(k): float(v) for k, v in meta["domain_thresholds"].items()},
            metadata=meta,
        )


#: Utterances kept for the text window (enough for MAX_TURNS turns of short AMI units).
_KEEP_UTTERANCES = 64
#: The turn-taking tiers: ``fast`` (numpy trees, the default) and ``text`` (trees + MiniLM).
TIERS = ("fast", "text")


def live_pairs(
    recent: Sequence[Utterance],
    participants: Mapping[str, Participant],
    targets: Sequence[str],
    present: Sequence[str] | None = None,
) -> list[tuple[str, str]]:
    """The model inputs for ``targets`` in a live conversation (as ``render_point`` in training).

    ``present`` None: every registered participant who is a person is present.
    """
    ids = list(participants) if present is None else list(present)
    people = {
        pid: participants.get(pid) or Participant(id=pid)
        for pid in ids
        if pid not in participants or participants[pid].role != GROUP_ROLE
    }
    turns = recent_turns(recent)
    out = []
    for t in targets:
        who = people.get(t) or participants.get(t) or Participant(id=t)
        out.append(render(turns, who, {**people, t: who}))
    return out


class TextTurnTakingEngine(TurnTakingEngine):
    """The fast engine plus the text model: the trees' P(take floor) fused with a text logit.

    ``observe`` keeps the last utterances; the first decision at a pause scores every listener
    in one forward pass (batched) and caches it, so ``decide`` for the other listeners, or
    ``decide_all``, reads the cache.
    """

    def __init__(
        self,
        model: TurnTakingModel,
        text: TextTier,
        participants: Iterable[Participant] = (),
    ) -> None:
        super().__init__(model, participants)
        self.text = text
        self._recent: deque[Utterance] = deque(maxlen=_KEEP_UTTERANCES)
        self._logits: dict[tuple[str, tuple[str, ...] | None], float] = {}

    def reset(self, participants: Iterable[Participant] = ()) -> None:
        super().reset(participants)
        self._recent.clear()
        self._logits.clear()

    def observe(self, utterance: Utterance) -> float:
        start = time.perf_counter()
        super().observe(utterance)
        self._recent.append(utterance)
        self._logits.clear()
        return time.perf_counter() - start

    def text_logits(
        self, targets: Sequence[str], present: Sequence[str] | None = None
    ) -> dict[str, float]:
        """The text model's logit for each target at this pause (one batched forward pass)."""
        key = None if present is None else tuple(present)
        todo = [t for t in targets if (t, key) not in self._logits]
        if todo:
            pairs = live_pairs(list(self._recent), self.state.participants, todo, present)
            for t, z in zip(todo, self.text.scorer.logits(pairs).tolist(), strict=True):
                self._logits[(t, key)] = float(z)
        return {t: self._logits[(t, key)] for t in targets}

    def decide(
        self, target: str, present: Sequence[str] | Spoken | None = None, explain: bool = False
    ) -> EngineDecision:
        start = time.perf_counter()
        if present is SPOKEN:  # the text model reads names: those who spoke, and the target
            present = [*self.state.utt_count, target]
        fast = super().decide(target, present, explain)
        listeners = [p for p in self.listeners() if present is None or p in present]
        z = self.text_logits([*dict.fromkeys([target, *listeners])], present)[target]
        p = float(self.text.fusion(np.asarray([fast.p_speak]), np.asarray([z]))[0])
        back = min(fast.p_backchannel, 1.0 - p)
        cues = {**fast.cues, "text_logit": round(z, 2), "p_speak_trees": round(fast.p_speak, 3)}
        return replace(
            fast,
            p_speak=p,
            cues=cues,
            latency_s=time.perf_counter() - start,
            p_backchannel=back,
        )

    def decide_all(
        self, present: Sequence[str] | None = None, explain: bool = False
    ) -> list[EngineDecision]:
        """Decisions for every listener at this pause (one batched text forward pass)."""
        listeners = [p for p in self.listeners() if present is None or p in present]
        return [self.decide(t, present, explain) for t in listeners]


def load_engine(
    tier: str = "fast",
    participants: Iterable[Participant] = (),
    model_dir: str | Path | None = None,
    text_dir: str | Path | None = None,
    threads: int = 1,
) -> TurnTakingEngine:
    """An engine of the chosen tier; ``text`` loads the text model lazily (``text`` extra)."""
    if tier not in TIERS:
        raise PolylogueInputError(f"unknown tier {tier!r}; choose one of {', '.join(TIERS)}")
    model = load_model(model_dir)
    if tier == "fast":
        return TurnTakingEngine(model, participants)
    if text_dir is None:
        raise TextTierUnavailable(
            "no text tier is shipped: pass text_dir, a folder written by "
            "python -m polylogue.training.engine_models.text_component package"
        )
    return TextTurnTakingEngine(model, TextTier.load(text_dir, threads=threads), participants)
