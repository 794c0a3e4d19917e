#!/usr/bin/env bash
# The whole test suite: installs what is missing, sets up the llama.cpp oracle kit, builds and
# runs the tests (release build), again under ASan + UBSan, and a short fuzz run.
# FUZZ_SECONDS (default 60) sets the fuzz run; SKIP_SANITIZE=1 / SKIP_FUZZ=1 skip those stages.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)

stage() { printf '\n=== %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }

stage "dependencies"
tools/install-deps.sh --tests

stage "oracle kit"
kit="${TANDEM_ORACLE_KIT:-$root/../shared/oracle}"
if [[ ! -x "$kit/setup.sh" ]]; then
  echo "test.sh: the oracle kit is not at $kit (set TANDEM_ORACLE_KIT)" >&2
  exit 1
fi
eval "$("$kit/setup.sh" --with-tokenizers)"
export TANDEM_ORACLE_KIT="$kit" TANDEM_REQUIRE_ORACLE=1
if [[ -x tests/node/setup.sh ]]; then tests/node/setup.sh; fi

stage "release build"
cmake --preset release >/dev/null
cmake --build build -- -j"$jobs"
stage "release tests"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 900

if [[ "${SKIP_SANITIZE:-0}" != 1 ]]; then
  stage "ASan + UBSan build"
  cmake --preset sanitize >/dev/null
  cmake --build build-asan -- -j"$jobs"
  stage "ASan + UBSan tests"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 1800 -LE slow
fi

if [[ "${SKIP_FUZZ:-0}" != 1 ]]; then
  stage "fuzz (${FUZZ_SECONDS:-60} s per target)"
  cmake --preset fuzz >/dev/null
  cmake --build build-fuzz -- -j"$jobs"
  tools/fuzz.sh "${FUZZ_SECONDS:-60}"
fi
stage "all tests passed"
