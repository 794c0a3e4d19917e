#!/usr/bin/env bash
# Cross-compiles the compute core (base, formats, gguf, kernels) and its tests for aarch64 with
# Debian's g++-aarch64-linux-gnu and runs them under qemu-aarch64.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-aarch64
cmake -S . -B "$dir" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$dir" --target test_base test_kernels -- -j"$(nproc)"
# Each binary's tests in one shard per core, side by side: qemu runs a process on one core, and
# test_kernels alone took 3 minutes that way.
shards=$(nproc)
for t in test_base test_kernels; do
  pids=()
  for ((i = 0; i < shards; ++i)); do
    TANDEM_UNDER_QEMU=1 GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
      qemu-aarch64 -L /usr/aarch64-linux-gnu "$dir/tests/$t" --gtest_brief=1 &
    pids+=($!)
  done
  failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  if ((failed)); then
    echo "test-aarch64.sh: $t failed under qemu" >&2
    exit 1
  fi
done
