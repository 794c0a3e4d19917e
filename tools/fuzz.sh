#!/usr/bin/env bash
# Runs every libFuzzer target in build-fuzz/ for N seconds each (default 60) from seed corpora
# (small valid GGUF files, the tokenizer corpus, the real chat templates, grammars, JSON
# schemas, model replies with tool calls); fails on any crash, leak or sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
corpus=build-fuzz/corpus
mkdir -p "$corpus/gguf" "$corpus/text" "$corpus/template" "$corpus/grammar" "$corpus/schema" \
  "$corpus/reply"
if [[ -x build/tandem && -z "$(ls -A "$corpus/gguf")" ]]; then
  for arch in qwen3moe qwen3 llama; do
    build/tandem synth --arch "$arch" --layers 1 --embd 32 --heads 2 --kv-heads 1 --head-dim 16 \
      --experts 2 --experts-used 1 --expert-ffn 32 --ffn 32 --vocab 260 --out "$corpus/gguf/$arch.gguf" 2>/dev/null
  done
  # The parts of a split model (split keys; metadata in the first part only).
  build/tandem synth --layers 1 --embd 32 --heads 2 --kv-heads 1 --head-dim 16 --experts 2 --experts-used 1 \
    --expert-ffn 32 --vocab 260 --split 2 --out "$corpus/gguf/split.gguf" 2>/dev/null
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
if [[ -z "$(ls -A "$corpus/grammar")" ]]; then
  printf 'root ::= greeting " " [A-Z] [a-z]{1,3} ("!" | "?")?\ngreeting ::= "hello" | "hi"\n' > "$corpus/grammar/g1"
  printf 'root ::= "[" (item ("," item)*)? "]"\nitem ::= root | [0-9]+ | [^"\\\\\\x00-\\x1F]* # c\n' > "$corpus/grammar/g2"
  printf 'root ::= .{2,5} "\\u00e9" [^a-z]? ((("x"))) "y"*' > "$corpus/grammar/g3"
fi
if [[ -z "$(ls -A "$corpus/schema")" ]]; then
  printf '{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"enum":[1,"x",null]},"c":{"type":"array","items":{"type":"integer"},"minItems":1}},"required":["a"]}' > "$corpus/schema/s1"
  printf '{"$defs":{"n":{"type":"object","properties":{"v":{"anyOf":[{"type":"integer"},{"$ref":"#/$defs/n"}]}}}},"$ref":"#/$defs/n"}' > "$corpus/schema/s2"
  printf '{"type":["string","null"],"format":"date-time"}' > "$corpus/schema/s3"
fi
if [[ -z "$(ls -A "$corpus/reply")" ]]; then
  printf '\x05Sure.\n<tool_call>\n{"name": "f", "arguments": {"a": [1, {"b": "}"}]}}\n</tool_call>\n<tool_call>oops</tool_call>' > "$corpus/reply/r1"
  printf '\x02  {"name": "f", "parameters": {"x": "y"}}; {"type": "function", "name": "g", "parameters": {}}' > "$corpus/reply/r2"
fi
# One target per core at a time, each for the full time; a target's summary printed when it ends.
run() {
  local target=$1 dir=$2 out status
  out=$("build-fuzz/$target" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
        -timeout=20 -print_final_stats=1 -artifact_prefix=build-fuzz/ "$dir" 2>&1) && status=0 || status=$?
  # (a failure's report whole: libFuzzer ends with the crash, the sanitizer's report before it)
  printf 'fuzz: %s for %s s\n%s\n' "$target" "$seconds" "$(tail -n $((status ? 80 : 4)) <<<"$out")"
  return "$status"
}
export -f run
export seconds
printf '%s\n' "gguf_reader_fuzz $corpus/gguf" "tokenizer_fuzz $corpus/text" \
  "chat_template_fuzz $corpus/template" "grammar_fuzz $corpus/grammar" \
  "json_schema_fuzz $corpus/schema" "tool_call_fuzz $corpus/reply" |
  xargs -P "$(nproc)" -L 1 bash -c 'run "$@"' _
