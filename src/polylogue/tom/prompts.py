"""MeetingToM prompt variants: one frozen, hashable :class:`ToMPromptOptions` per variant.

The structure follows the official evaluation prompts (a base template per task, with a
reasoning addendum for the task-aligned CoT and Emotional CoT variants); the texts in
``templates/`` are our own wording. Every ablation of the paper is an option here, and the
option set (not a free-form name) is what a run records and hashes:

* ``reasoning``: ``none`` (official tag ``noprompt``), ``task_cot`` (``cot``), ``eot``
  (``eot``; the paper's "ECoT"), ``naive_cot`` (a generic step-by-step instruction);
* ``modality``: ``both`` (video + utterances), ``video``, ``utterance`` (Table 2);
* ``remove_discourse_markers`` (Table 5);
* ``priors``: any of ``dialogue_act``, ``phase``, ``role`` from AMI annotations (Table 4);
* ``you_questions``: ``separate`` (default) asks YOU Q1 and Q2 in two prompts, so the addressee
  question is never shown Q2's text, which names the Q1 gold answer in 203 of 300 items;
  ``joint`` is the official prompt with both questions together (it LEAKS Q1: copying Q2's
  subject scores 67.67% on Task 2.1 with no transcript or video); ``q1_only`` asks Q1 alone.

Placement choice (unspecified upstream): the reasoning addendum comes after the questions and
before the output-format line, so the format is the last instruction before the transcript.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Literal

from polylogue.errors import PolylogueInputError
from polylogue.tom.media import FrameSampling, PromptMedia, corner_layout_text, mosaic_layout_text
from polylogue.tom.records import LABELS, ToMItem, ToMTask
from polylogue.tom.transcript import TranscriptOptions, TranscriptWindow, render_transcript

Reasoning = Literal["none", "task_cot", "eot", "naive_cot"]
Modality = Literal["both", "video", "utterance"]
YouQuestions = Literal["separate", "joint", "q1_only"]
PRIOR_KINDS: tuple[str, ...] = ("dialogue_act", "phase", "role")

#: Official prediction-file tags (the evaluator parses cot/eot/noprompt from file names).
REASONING_TAGS: dict[str, str] = {
    "none": "noprompt",
    "task_cot": "cot",
    "eot": "eot",
    "naive_cot": "naivecot",
}

#: Legend for the AMI dialogue-act tags the transcript shows under the ``dialogue_act`` prior.
DA_LEGEND = (
    "inf=inform, el.inf=elicit inform, sug=suggest, el.sug=elicit offer or suggestion, "
    "off=offer, ass=assess, el.ass=elicit assessment, und=comment about understanding, "
    "el.und=elicit comment about understanding, bck=backchannel, stl=stall, fra=fragment, "
    "be.pos=be positive, be.neg=be negative, oth=other"
)


class PromptError(PolylogueInputError):
    """An option combination that cannot be built (e.g. video modality without media)."""


@dataclass(frozen=True, slots=True)
class ToMPromptOptions:
    reasoning: Reasoning = "none"
    modality: Modality = "both"
    remove_discourse_markers: bool = False
    priors: tuple[str, ...] = ()
    you_questions: YouQuestions = "separate"
    timestamps: bool = True
    frame_fps: float | None = 0.5
    frame_count: int | None = None
    max_frames: int = 32

    def __post_init__(self) -> None:
        if self.reasoning not in REASONING_TAGS:
            raise PromptError(f"unknown reasoning {self.reasoning!r}")
        if self.you_questions not in ("separate", "joint", "q1_only"):
            raise PromptError(f"unknown you_questions {self.you_questions!r}")
        if self.modality not in ("both", "video", "utterance"):
            raise PromptError(f"unknown modality {self.modality!r}")
        bad = [p for p in self.priors if p not in PRIOR_KINDS]
        if bad:
            raise PromptError(f"unknown prior(s) {bad}; known: {PRIOR_KINDS}")
        if "dialogue_act" in self.priors and self.modality == "video":
            raise PromptError("the dialogue_act prior annotates the transcript: needs utterances")
        object.__setattr__(self, "priors", tuple(sorted(set(self.priors))))

    @property
    def uses_video(self) -> bool:
        return self.modality in ("both", "video")

    @property
    def uses_transcript(self) -> bool:
        return self.modality in ("both", "utterance")

    @property
    def official_tag(self) -> str:
        return REASONING_TAGS[self.reasoning]

    @property
    def name(self) -> str:
        """Readable variant name, e.g. ``cot+utter+nodm+prior-role+q1only``."""
        parts = [self.official_tag]
        if self.modality != "both":
            parts.append({"video": "video", "utterance": "utter"}[self.modality])
        if self.remove_discourse_markers:
            parts.append("nodm")
        parts += [f"prior-{p}" for p in self.priors]
        if self.you_questions == "q1_only":
            parts.append("q1only")
        elif self.you_questions == "joint":
            parts.append("joint")
        if not self.timestamps:
            parts.append("notime")
        return "+".join(parts)

    @property
    def frame_sampling(self) -> FrameSampling:
        return FrameSampling(fps=self.frame_fps, count=self.frame_count, max_frames=self.max_frames)

    def transcript_options(self) -> TranscriptOptions:
        return TranscriptOptions(
            timestamps=self.timestamps,
            remove_discourse_markers=self.remove_discourse_markers,
            dialogue_acts="dialogue_act" in self.priors,
            roles="role" in self.priors,
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["priors"] = list(self.priors)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToMPromptOptions:
        return cls(**{**d, "priors": tuple(d.get("priors") or ())})

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:12]


#: Named variants of the paper's tables; combine with ``+`` (see :func:`parse_variant`).
VARIANT_TOKENS: dict[str, dict[str, Any]] = {
    "noprompt": {"reasoning": "none"},
    "cot": {"reasoning": "task_cot"},
    "eot": {"reasoning": "eot"},
    "naivecot": {"reasoning": "naive_cot"},
    "both": {"modality": "both"},
    "video": {"modality": "video"},
    "utter": {"modality": "utterance"},
    "nodm": {"remove_discourse_markers": True},
    "q1only": {"you_questions": "q1_only"},
    # The official YOU prompt: Q1 and Q2 together, so Q2's text leaks the Q1 answer.
    "joint": {"you_questions": "joint"},
    "notime": {"timestamps": False},
}


def parse_variant(name: str) -> ToMPromptOptions:
    """``cot+utter+prior-role`` -> :class:`ToMPromptOptions`; the inverse of its ``name``."""
    fields: dict[str, Any] = {}
    priors: list[str] = []
    for token in filter(None, (t.strip() for t in name.split("+"))):
        if token.startswith("prior-"):
            priors.append(token.removeprefix("prior-"))
        elif token in VARIANT_TOKENS:
            fields.update(VARIANT_TOKENS[token])
        else:
            raise PromptError(
                f"unknown variant token {token!r}; known: {', '.join(VARIANT_TOKENS)}, prior-<kind>"
            )
    return ToMPromptOptions(**fields, priors=tuple(priors))


# ----------------------------------------------------------------------------- rendered prompts


@dataclass(frozen=True, slots=True)
class ImagePart:
    """One image shown to the model, with the caption placed before it."""

    caption: str
    path: Path


@dataclass(frozen=True, slots=True)
class ToMPrompt:
    record_id: str
    system: str
    user: str
    #: Questions the model is asked (YOU ``q1_only`` asks Q1 alone).
    questions: tuple[str, ...]
    images: tuple[ImagePart, ...] = ()
    videos: dict[str, Path] = field(default_factory=dict)
    #: YOU ``separate``: one prompt per question (Q1 alone, then Q2 alone), each sent as its own
    #: request; this prompt's own text is then the Q1 part's (see :mod:`polylogue.tom.parts`).
    parts: tuple[ToMPrompt, ...] = ()

    def text_messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]

    def digest(self) -> str:
        h = hashlib.sha256()
        h.update(self.system.encode())
        h.update(self.user.encode())
        for im in self.images:
            h.update(im.caption.encode())
            h.update(im.path.read_bytes() if im.path.is_file() else str(im.path).encode())
        for part in self.parts:
            h.update(part.digest().encode())
        return h.hexdigest()[:16]


@cache
def template(name: str) -> str:
    return resources.files("polylogue.tom").joinpath("templates", f"{name}.txt").read_text("utf-8")


def _options(task: ToMTask, q: str) -> str:
    return ", ".join(LABELS[(task, q)])


_INPUTS: dict[tuple[ToMTask, str], str] = {
    (ToMTask.STATE, "video"): "a 5-second close-up video of ONE meeting participant, the target.",
    (ToMTask.STATE, "utterance"): "the transcript of a 5-second window of a four-person meeting "
    "(participants A, B, C, D). It may be empty if nobody spoke.",
    (
        ToMTask.STATE,
        "both",
    ): "a 5-second close-up video of ONE meeting participant, the target, and "
    "the transcript of the same window (it may be empty if nobody spoke).",
    (
        ToMTask.YOU,
        "video",
    ): "two videos of the same window of a four-person meeting (participants A, "
    "B, C, D): Video 1 is a wide corner view of the room, for Q1; Video 2 is a 2x2 grid of "
    "close-ups, one per participant, for Q2.",
    (ToMTask.YOU, "utterance"): "the transcript of a window of a four-person meeting (participants "
    "A, B, C, D).",
    (
        ToMTask.YOU,
        "both",
    ): "two videos of the same window of a four-person meeting (participants A, "
    "B, C, D) and its transcript: Video 1 is a wide corner view of the room, for Q1; Video 2 is a "
    "2x2 grid of close-ups, one per participant, for Q2.",
    (ToMTask.CONSENSUS, "video"): "one video of a window of a four-person meeting (participants A, "
    "B, C, D): a 2x2 grid of close-ups, one per participant.",
    (ToMTask.CONSENSUS, "utterance"): "the transcript of a window of a four-person meeting "
    "(participants A, B, C, D).",
    (ToMTask.CONSENSUS, "both"): "one video of a window of a four-person meeting (participants A, "
    "B, C, D), a 2x2 grid of close-ups, one per participant, and the transcript of the same "
    "window.",
}
_Q1_ONLY_INPUTS = {
    "video": "a video of a window of a four-person meeting (participants A, B, C, D): a wide "
    "corner view of the room.",
    "both": "a video of a window of a four-person meeting (participants A, B, C, D), a wide corner "
    "view of the room, and its transcript.",
}
_Q2_ONLY_INPUTS = {
    "video": "a video of a window of a four-person meeting (participants A, B, C, D): a 2x2 grid "
    "of close-ups, one per participant.",
    "both": "a video of a window of a four-person meeting (participants A, B, C, D), a 2x2 grid "
    "of close-ups, one per participant, and its transcript.",
}
_FOCUS = {
    (ToMTask.STATE, "video"): " Rely on what the target visibly does.",
    (ToMTask.STATE, "both"): " Rely mainly on what the target visibly does; use the transcript as "
    "support.",
}
_EOT_FOCUS = {
    ToMTask.STATE: ("the target participant's behaviour", ""),
    ToMTask.YOU: (
        "the speaker's statement",
        " For Q1, name a single person only when the cues single one out.",
    ),
    ToMTask.CONSENSUS: (
        "the group's agreement",
        " For Q2, name a participant only when one person clearly stands out.",
    ),
}


def _reasoning_block(task: ToMTask, options: ToMPromptOptions, you_mode: str) -> str:
    if options.reasoning == "none":
        return ""
    if options.reasoning == "naive_cot":
        text = template("naive_cot")
    elif options.reasoning == "eot":
        focus, extra = _EOT_FOCUS[task]
        text = Template(template("eot")).substitute(eot_focus=focus, eot_extra=extra)
    elif task is ToMTask.YOU:
        text = {
            "joint": template("you_cot") + template("you_cot_q2"),
            "q1": template("you_cot"),
            "q2": template("you_cot_q2only"),
        }[you_mode]
    else:
        text = template(f"{task.value}_cot")
    return "\n" + text.rstrip() + "\n"


def _priors_block(item: ToMItem, options: ToMPromptOptions, window: TranscriptWindow | None) -> str:
    if not options.priors:
        return ""
    if window is None:
        raise PromptError(f"{item.id}: priors come from AMI annotations; pass a transcript window")
    lines = ["\nContext from the meeting annotations:"]
    if "role" in options.priors:
        roles = ", ".join(f"{k} = {v}" for k, v in sorted(window.roles.items()))
        lines.append(f"- Participant roles: {roles or 'unknown'}.")
    if "phase" in options.priors:
        if window.phase:
            lines.append(f"- Meeting: {window.phase} of a product-design project.")
        topics = "; ".join(window.topics) or "not annotated"
        lines.append(f"- Topic segment(s) at this point: {topics}.")
    if "dialogue_act" in options.priors:
        lines.append(f"- Transcript lines carry dialogue-act tags in brackets ({DA_LEGEND}).")
    return "\n".join(lines) + "\n"


def _layout_block(item: ToMItem, options: ToMPromptOptions, you_mode: str) -> str:
    if item.task is ToMTask.STATE:
        return ""
    recon = item.reconstruction
    parts = []
    if item.task is ToMTask.YOU and options.uses_video and you_mode != "q2":
        parts.append(
            ("Video 1 (corner view)" if you_mode == "joint" else "Video")
            + ": "
            + corner_layout_text(recon)
        )
    if (item.task is ToMTask.CONSENSUS or you_mode != "q1") and options.uses_video:
        label = (
            "Video 2 (close-up grid)"
            if item.task is ToMTask.YOU and you_mode == "joint"
            else "Video (important)"
        )
        parts.append(f"{label}: {mosaic_layout_text(recon)}")
    return "".join(f"\n{p}\n" for p in parts)


def build_prompt(
    item: ToMItem,
    options: ToMPromptOptions,
    window: TranscriptWindow | None = None,
    media: PromptMedia | None = None,
) -> ToMPrompt:
    """Fill the task template for one item.

    ``window`` is required when the variant shows utterances or AMI priors; ``media`` when it
    shows video (its sampled frames become image parts, captioned with their clip time).
    A YOU item under ``you_questions="separate"`` (the default) gets one part per question:
    the returned prompt asks Q1 and Q2, its text is the Q1 part's, and ``parts`` holds both.
    """
    if item.task is not ToMTask.YOU:
        return _build(item, options, window, media, "joint")
    if options.you_questions == "joint":
        return _build(item, options, window, media, "joint")
    q1 = _build(item, options, window, media, "q1")
    if options.you_questions == "q1_only":
        return q1
    q2 = _build(item, options, window, media, "q2")
    return replace(q1, questions=("Q1", "Q2"), parts=(q1, q2))


def _build(
    item: ToMItem,
    options: ToMPromptOptions,
    window: TranscriptWindow | None,
    media: PromptMedia | None,
    you_mode: str,
) -> ToMPrompt:
    """One prompt; ``you_mode`` is ``joint`` (both YOU questions), ``q1`` or ``q2`` (one)."""
    task = item.task
    if options.uses_transcript and window is None:
        raise PromptError(f"{item.id}: variant {options.name} needs a transcript window")
    if options.uses_video and media is None:
        raise PromptError(f"{item.id}: variant {options.name} needs media (AMI video)")
    transcript = ""
    if options.uses_transcript and window is not None:
        header = (
            "Transcript (times in seconds from the start of the window)"
            if options.timestamps
            else "Transcript"
        )
        transcript = f"\n{header}:\n" + render_transcript(window, options.transcript_options())
    single = {"q1": _Q1_ONLY_INPUTS, "q2": _Q2_ONLY_INPUTS}.get(you_mode, {})
    inputs = (
        single[options.modality]
        if task is ToMTask.YOU and options.modality in single
        else _INPUTS[(task, options.modality)]
    )
    values = {
        "inputs": inputs,
        "focus": _FOCUS.get((task, options.modality), ""),
        "priors": _priors_block(item, options, window),
        "reasoning": _reasoning_block(task, options, you_mode),
        "layout": _layout_block(item, options, you_mode),
        "transcript": transcript,
    }
    questions: tuple[str, ...]
    if task is ToMTask.STATE:
        values |= {
            "target": item.target or "unknown",
            "question": item.questions["Q1"].text,
            "options": _options(task, "Q1"),
        }
        name, questions = "state", ("Q1",)
    elif task is ToMTask.YOU and you_mode == "q1":
        values |= {"q1": item.questions["Q1"].text, "q1_options": _options(task, "Q1")}
        name, questions = "you_q1", ("Q1",)
    elif task is ToMTask.YOU and you_mode == "q2":
        values |= {"q2": item.questions["Q2"].text, "q2_options": _options(task, "Q2")}
        name, questions = "you_q2", ("Q2",)
    else:
        values |= {"q1": item.questions["Q1"].text, "q1_options": _options(task, "Q1")}
        values |= {"q2": item.questions["Q2"].text, "q2_options": _options(task, "Q2")}
        name, questions = task.value, ("Q1", "Q2")
    user = Template(template(name)).substitute(values).strip() + "\n"
    images: list[ImagePart] = []
    videos: dict[str, Path] = {}
    if options.uses_video and media is not None:
        roles = _video_roles(task, you_mode)
        for role, caption in roles:
            if role in media.videos:
                videos[role] = media.videos[role]
            for fr in media.frames.get(role, []):
                images.append(ImagePart(f"{caption}, frame at {fr.time:.1f}s", fr.path))
        if not videos and not images:
            raise PromptError(f"{item.id}: media holds none of {[r for r, _ in roles]}")
    return ToMPrompt(
        record_id=item.id,
        system=template("system").strip(),
        user=user,
        questions=questions,
        images=tuple(images),
        videos=videos,
    )


def _video_roles(task: ToMTask, you_mode: str) -> list[tuple[str, str]]:
    if task is ToMTask.STATE:
        return [("clip", "Target close-up")]
    if task is ToMTask.YOU:
        if you_mode == "q1":
            return [("Q1_corner", "Video")]
        if you_mode == "q2":
            return [("Q2_mosaic", "Video")]
        return [("Q1_corner", "Video 1 (corner view)"), ("Q2_mosaic", "Video 2 (close-up grid)")]
    return [("mosaic", "Video (close-up grid)")]
