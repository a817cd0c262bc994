#!/usr/bin/env bash
# Set up everything and run the whole test suite (what CI runs), in parallel.
#   POLYLOGUE_TEST_WORKERS: pytest-xdist workers (default: the CPU count, at most 4); 0 runs
#   serially. Arguments pass on to pytest (a later -n wins).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
export OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
cpus=$(nproc 2>/dev/null || echo 2)
workers="${POLYLOGUE_TEST_WORKERS:-$((cpus < 4 ? cpus : 4))}"
# loadfile: a test file runs whole on one worker (its module fixtures are built once);
# no reorder: files start in conftest.py's order, the longest first.
.venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist loadfile \
  --no-loadscope-reorder "$@"
