"""A rule-written, label-conditioned rationale teacher from the shipped model's cue explanations.

The paper distils its reasoning targets from a large LLM. These machines cannot run one, and
SmolLM2-135M does not follow the teacher format. This teacher is the honest substitute: it
is **not** a language model and it does not reason. For each point it reads the cues the shipped
default model reports (``polylogue.engine.engine.describe_cues``: "addressed by name", "question
put to the previous speaker (the target)", ...) and writes one templated sentence that justifies
the *given* label from them, e.g. "Dave was addressed by name and was asked a question right
after he spoke, so it is his turn to speak."

It plugs into ``polylogue distill --teacher cues``. It receives the label the same way an LLM
teacher does: through the label-conditioned answer block of its prompt (see
:func:`polylogue.training.lora.distill.teacher_prompt`), so the distillation pipeline (judging,
resume, manifests) is unchanged. The manifest names the teacher ``cues`` with
``"kind": "cue-template"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from polylogue.models.base import Prediction
from polylogue.models.default_model import DefaultPredictor, load_default_predictor
from polylogue.prompts.builder import PromptOptions
from polylogue.training.lora.teacher_prompts import teacher_template
from polylogue.turntaking.types import Decision, DecisionInput

TEACHER_SPEC = "cues"
#: Bumped when the sentence templates or the cue phrases they read change (enters the
#: teacher identity, so the distillation folder refuses to mix sentences written by two
#: versions). 2: a question to someone else names nobody ("question put to someone else").
TEMPLATE_VERSION = 2

#: Cue phrases (``CUE_PHRASES`` values) in sentence form: "{T} was ...".
_FOR_SPEAK = {
    "addressed by name": "was addressed by name",
    "named in the third person": "was mentioned by name",
    "named": "was named",
    "question put to the previous speaker (the target)": "was asked a question right after "
    "speaking",
    "'you' right after the target spoke": "was spoken to as 'you' right after speaking",
    "open question, nobody named": "heard an open question to the room",
    "target held the floor just before": "held the floor just before",
    "addressed by name one utterance earlier": "was addressed by name one utterance earlier",
    "addressed to the group": "heard a remark to the whole group",
}
#: Cues that argue for staying silent: "{S}'s utterance ...".
_FOR_SILENT = {
    "someone else addressed by name": "is addressed to someone else by name",
    "question put to someone else (the previous speaker)": "is a question to someone else",
    "someone else addressed one utterance earlier": "continues a turn addressed to someone else",
    "utterance trails off or is very short": "trails off or is very short",
    "ends on a continuer (and/so/um)": "ends on a continuer",
    "short acknowledgement": "is only a short acknowledgement",
}


def _join(parts: Sequence[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _name(inp: DecisionInput, speaker_id: str) -> str:
    for p in inp.present:
        if p.id == speaker_id and p.name:
            return p.name
    if inp.target.id == speaker_id and inp.target.name:
        return inp.target.name
    return speaker_id


def rationale(inp: DecisionInput, label: Decision, cues: Mapping[str, Any]) -> str:
    """One sentence justifying ``label`` at this pause from the default model's cues."""
    target = _name(inp, inp.target.id)
    speaker = _name(inp, inp.current.speaker)
    active = list(cues.get("active", []))
    speak_cues = [_FOR_SPEAK[c] for c in active if c in _FOR_SPEAK]
    silent_cues = [_FOR_SILENT[c] for c in active if c in _FOR_SILENT]
    since = int(cues.get("utterances_since_target_spoke", 0))
    follows = float(cues.get("p_target_after_speaker", 0.0))
    if label is Decision.SPEAK:
        if speak_cues:
            return f"{target} {_join(speak_cues[:2])}, so it is {target}'s turn to speak."
        if follows >= 0.3:
            return (
                f"{target} often replies to {speaker} in this conversation and {speaker}'s "
                "utterance has come to an end, so it is a good moment to take the turn."
            )
        return (
            f"{speaker} has finished a complete point and nobody else is being addressed, "
            f"so {target} can take the floor now."
        )
    if silent_cues:
        why = _join(silent_cues[:2])
        return f"{speaker}'s utterance {why}, so {target} should let {speaker} go on."
    if speak_cues:
        return (
            f"Although {target} {speak_cues[0]}, {speaker}'s turn does not hand {target} the "
            "floor, so another participant is more likely to go on."
        )
    n = int(cues.get("people_present", 0))
    spoke = (
        f"{target} last spoke {since} utterances ago"
        if since > 0
        else f"{target} has been quiet so far"
    )
    return (
        f"Nothing in {speaker}'s utterance is directed at {target}, {spoke} and "
        f"{max(n - 1, 1)} others are present, so {target} should stay silent."
    )


@dataclass
class CueTeacher:
    """A distillation teacher writing :func:`rationale` sentences (no language model)."""

    #: Set by the distillation loop per label; its answer block tells the label.
    prompt: PromptOptions = field(default_factory=PromptOptions)
    batch_size: int = 256
    _model: DefaultPredictor = field(default_factory=load_default_predictor, repr=False)

    @property
    def name(self) -> str:
        return TEACHER_SPEC

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "cue-template",
            "template_version": TEMPLATE_VERSION,
            "cue_model": self._model.describe(),
            "note": "rule-written label-conditioned sentences from the default model's cues; "
            "not an LLM teacher",
        }

    def _label(self) -> Decision:
        answer = self.prompt.answer_template
        for label in (Decision.SPEAK, Decision.SILENT):
            if answer == str(teacher_template(label)):
                return label
        raise ValueError("the cue teacher only runs inside polylogue distill (labelled prompts)")

    def predict(self, inputs: Sequence[DecisionInput]) -> list[Prediction]:
        label = self._label()
        cued = self._model.predict(inputs)
        out = []
        for inp, pred in zip(inputs, cued, strict=True):
            sentence = rationale(inp, label, pred.cues)
            text = f"Reasoning: {sentence}\nDecision: {label.value}"
            out.append(Prediction(inp.point_id, label, None, sentence, text, 0.0))
        return out


def load_cue_teacher(prompt: PromptOptions | None = None, **unknown: Any) -> CueTeacher:
    """The ``cues`` teacher; backend options (cache_path, ...) do not apply and are ignored."""
    return CueTeacher(prompt=prompt or PromptOptions())
