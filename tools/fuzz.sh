#!/usr/bin/env bash
# Runs every libFuzzer target in build-fuzz/ for N seconds each (default 60) from seed corpora
# (small valid GGUF files, the tokenizer corpus, the real chat templates); fails on any crash,
# leak or sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
corpus=build-fuzz/corpus
mkdir -p "$corpus/gguf" "$corpus/text" "$corpus/template"
if [[ -x build/tandem && -z "$(ls -A "$corpus/gguf")" ]]; then
  for arch in qwen3moe qwen3 llama; do
    build/tandem synth --arch "$arch" --layers 1 --embd 32 --heads 2 --kv-heads 1 --head-dim 16 \
      --experts 2 --experts-used 1 --expert-ffn 32 --ffn 32 --vocab 260 --out "$corpus/gguf/$arch.gguf" 2>/dev/null
  done
fi
if [[ -z "$(ls -A "$corpus/text")" ]]; then
  printf 'Hello, world! 12345\n\t  <|im_start|>user\nhé 日本 🙂' > "$corpus/text/seed1"
  printf 'the the  there\r\n' > "$corpus/text/seed2"
fi
if [[ -z "$(ls -A "$corpus/template")" ]]; then
  n=0
  for f in tests/text/data/chat/templates/*; do
    [[ -f "$f" ]] && cp "$f" "$corpus/template/t$((n++))"
  done
fi
run() {
  local target=$1 dir=$2
  echo "fuzz: $target for $seconds s"
  "build-fuzz/$target" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=20 \
    -print_final_stats=1 "$dir" 2>&1 | tail -4
  return "${PIPESTATUS[0]}"
}
run gguf_reader_fuzz "$corpus/gguf"
run tokenizer_fuzz "$corpus/text"
run chat_template_fuzz "$corpus/template"
