#!/usr/bin/env bash
# Set up polylogue (CPU only, offline at run time) and run the main job on the shipped default
# model: where should Dave have spoken in the example stand-up meeting?
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh core
.venv/bin/polylogue decide examples/standup.jsonl --as dave --domain meeting "$@"
