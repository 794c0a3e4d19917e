#!/usr/bin/env bash
# Cross-compiles the compute core (base, formats, gguf, kernels) and its tests for aarch64 with
# Debian's g++-aarch64-linux-gnu and runs them under qemu-aarch64.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-aarch64
cmake -S . -B "$dir" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$dir" --target test_base test_kernels -- -j"$(nproc)"
for t in test_base test_kernels; do
  qemu-aarch64 -L /usr/aarch64-linux-gnu "$dir/tests/$t" --gtest_brief=1
done
