#!/usr/bin/env bash
# Runs every libFuzzer target in build-fuzz/ for N seconds (default 60) from a seed corpus of
# small valid files; fails on any crash, leak or sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
corpus=build-fuzz/corpus/gguf
mkdir -p "$corpus"
if [[ -x build/tandem && -z "$(ls -A "$corpus")" ]]; then
  for arch in qwen3moe qwen3 llama; do
    build/tandem synth --arch "$arch" --layers 1 --embd 32 --heads 2 --kv-heads 1 --head-dim 16 \
      --experts 2 --experts-used 1 --expert-ffn 32 --ffn 32 --vocab 260 --out "$corpus/$arch.gguf" 2>/dev/null
  done
fi
build-fuzz/gguf_reader_fuzz -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
  -print_final_stats=1 "$corpus"
