#!/usr/bin/env bash
# The whole test suite: installs what is missing, sets up the llama.cpp oracle kit, builds and
# runs the tests (release build), again under ASan + UBSan, and a short fuzz run.
# FUZZ_SECONDS (default 20) sets the fuzz run; SKIP_SANITIZE=1, SKIP_AARCH64=1 and SKIP_FUZZ=1
# skip those stages.
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
eval "$("$kit/setup.sh" --all-tokenizers)"
export TANDEM_ORACLE_KIT="$kit" TANDEM_REQUIRE_ORACLE=1
if [[ -x tests/node/setup.sh ]]; then tests/node/setup.sh; fi

stage "release build"
# The CUDA backend is compiled where nvcc is found, for one architecture (Ampere's sm_86) to keep
# the build short; its GPU tests skip without a GPU (tools/gpu_pack.sh runs them on one).
cmake --preset release -DTANDEM_CUDA=AUTO -DTANDEM_CUDA_ARCHS=86 >/dev/null
cmake --build build -- -j"$jobs"
stage "release tests"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 900

# Under the sanitizers, skip what only repeats the release run's numerics at 5x the cost: the
# llama.cpp whole-model comparisons, the every-type executor sweep, the oracle's kernel and
# quantizer comparisons and the demo model's perplexity (the same code paths run under ASan in
# the smaller tests). CI has 45 minutes for the whole script.
asan_skip='DemoModel.MatchesLlamaCpp|DemoModel.TokenizesAsLlamaCpp|DemoModel.HeldOutPerplexity|LlamaConformance|LlamaGreedy|ArchConformance|ArchGreedy|EveryTypeInEveryRole|TokenizerConformance|PreTokenizerFamilies|KernWritesExactlyTheKnownTypes|ComparableToGgmlQuantizers'
if [[ "${SKIP_SANITIZE:-0}" != 1 ]]; then
  stage "ASan + UBSan build"
  # Only the kernel variants this CPU runs (scored above 0 by the release build): the release
  # run reports the others as skipped.
  runnable=$(build/tandem inspect --system |
             awk '/^kernel variants/ { on = 1; next } on && /^  / && $1 != "reference" && $2 > 0 { print $1 }' |
             paste -sd';')
  cmake --preset sanitize -DTANDEM_KERNEL_VARIANTS="${runnable:-all}" >/dev/null
  cmake --build build-asan -- -j"$jobs"
  stage "ASan + UBSan tests"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 1800 -E "$asan_skip"
fi

if [[ "${SKIP_AARCH64:-0}" != 1 ]]; then
  stage "aarch64 kernels under qemu"
  tools/test-aarch64.sh
fi

if [[ "${SKIP_FUZZ:-0}" != 1 ]]; then
  stage "fuzz (${FUZZ_SECONDS:-20} s per target)"
  cmake --preset fuzz >/dev/null
  cmake --build build-fuzz --target gguf_reader_fuzz tokenizer_fuzz chat_template_fuzz \
    grammar_fuzz json_schema_fuzz tool_call_fuzz -- -j"$jobs"
  tools/fuzz.sh "${FUZZ_SECONDS:-20}"
fi
stage "all tests passed"
