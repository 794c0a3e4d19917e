#!/usr/bin/env bash
# The main job: installs what is missing, builds build/tandem, shows the small MoE model the
# project trained (models/kjv-moe.gguf, see models/README.md; MODEL=path.gguf to use yours) and
# generates text with it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
# The CUDA backend for this machine's GPU when there is one (and nvcc); otherwise the CPU build.
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  cuda=(-DTANDEM_CUDA=AUTO -DTANDEM_CUDA_ARCHS=native)
else
  cuda=(-DTANDEM_CUDA=OFF)
fi
cmake --preset release "${cuda[@]}" >/dev/null
cmake --build build --target tandem -- -j"$(nproc)"

model="${MODEL:-models/kjv-moe.gguf}"
# (sed reads to the end: with head, inspect could die of SIGPIPE and fail the script)
build/tandem inspect "$model" | sed -n 1,40p
echo
prompt="${PROMPT:-And God said unto Moses,}"
echo
printf '%s' "$prompt"  # run prints only what follows it
build/tandem run -m "$model" -p "$prompt" -n "${N_PREDICT:-96}" --temp "${TEMP:-0.7}" --top-k 40 \
  --seed "${SEED:-7}"
