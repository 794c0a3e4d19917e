#!/usr/bin/env bash
# The main job: installs what is missing, builds build/tandem, makes a small synthetic MoE
# model when none is given (MODEL=path.gguf to use yours), shows it and generates text.
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

model="${MODEL:-}"
if [[ -z "$model" ]]; then
  model=build/demo-qwen3moe.gguf
  if [[ ! -f "$model" ]]; then
    build/tandem synth --arch qwen3moe --layers 4 --embd 512 --heads 8 --kv-heads 4 --head-dim 64 \
      --experts 16 --experts-used 4 --expert-ffn 256 --vocab 1024 \
      --wtype q8_0 --exp-type q4_K --out "$model"
  fi
fi
# (sed reads to the end: with head, inspect could die of SIGPIPE and fail the script)
build/tandem inspect "$model" | sed -n 1,40p
echo
build/tandem run -m "$model" -p "${PROMPT:-Hello, world. The model says:}" -n "${N_PREDICT:-64}"
