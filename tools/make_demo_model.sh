#!/usr/bin/env bash
# Retrains the shipped demo model: installs the training dependencies (Debian's bible-kjv for the
# corpus, python3-torch with OpenBLAS), trains tools/train_demo_model.py on one CPU thread (about
# 20 minutes on a 2-core EPYC), quantizes the f32 result with `tandem quantize` (q8_0 attention,
# embeddings and output, q4_K experts) and writes models/kjv-moe.gguf and models/kjv-heldout.txt.
# WORK=dir keeps the f32 model, the log and the summary (default build/demo-model).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(bible-kjv bible-kjv-text python3-torch python3-numpy libopenblas0-pthread)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
tools/install-deps.sh
cmake --preset release -DTANDEM_CUDA=OFF >/dev/null
cmake --build build --target tandem -- -j"$(nproc)"

work="${WORK:-build/demo-model}"
mkdir -p "$work" models
# Debian's torch is built for Debian's python, not for one a version manager puts first on PATH.
nice -n 10 /usr/bin/python3 tools/train_demo_model.py --out "$work/kjv-moe-f32.gguf" \
  --heldout models/kjv-heldout.txt --summary "$work/summary.json" "$@" | tee "$work/train.log"
build/tandem quantize "$work/kjv-moe-f32.gguf" models/kjv-moe.gguf --quiet
build/tandem perplexity -m models/kjv-moe.gguf -f models/kjv-heldout.txt
