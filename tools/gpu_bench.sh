#!/usr/bin/env bash
# The GPU benchmarks of the README and src/cuda/README.md, on the GPU machine: `tandem bench model`
# against llama.cpp's CUDA llama-bench on the same files, in the same run. Usage there, after
# `source PACK/env.sh` (tools/gpu_pack.sh):
#   tools/gpu_bench.sh LLAMA_BENCH [WHAT...]
# LLAMA_BENCH: llama-bench of ../shared/oracle/llama_cuda.sh's build (its libraries beside it).
# WHAT (default: all of them): fused (every expert in VRAM, -ngl 99), gpumem8 (`--gpu-mem 8`
# against -ncmoe 28 --no-mmap), cpu (every routed expert on the CPU executor against -ncmoe 48
# --no-mmap), cpu-layers (`--moe-cpu-layers 24` against -ncmoe 24 --no-mmap), prompt4096 (fused
# and cpu on one 4096-token batch, against llama.cpp's -ub 4096), archs (12-layer
# models of gpt-oss-20b's, a Gemma-4-26B-A4B-like, a DeepSeek-V2-Lite-like and Qwen3.6-35B-A3B's
# shapes, fused), archs-hybrid (the same models
# with about half their bytes of VRAM, `auto` then hybrid, against llama.cpp with half the layers'
# experts on the CPU: -ncmoe 6 --no-mmap). The models are random
# (`tandem synth --fast-random`), written to TMPDIR (default /tmp) and removed after use.
# With BASE=another/tandem (e.g. the build of the commit before), each case runs that build first
# without llama.cpp: an A/B of two builds in the same run.
set -euo pipefail
llama="${1:?usage: tools/gpu_bench.sh LLAMA_BENCH [fused] [gpumem8] [cpu] [cpu-layers] [prompt4096] [archs] [archs-hybrid]}"
shift
what="${*:-fused gpumem8 cpu cpu-layers prompt4096 archs archs-hybrid}"
dir="${TMPDIR:-/tmp}"
llama_lib="$(dirname "$llama")"
export LD_LIBRARY_PATH="$llama_lib:${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64"
has() { [[ " $what " == *" $1 "* ]]; }
# The base build's run of a case: its arguments without --llama-args and its value.
base() {
  [[ -n "${BASE:-}" ]] || return 0
  local args=() skip=0
  for a in "$@"; do
    if ((skip)); then skip=0; elif [[ $a == --llama-args ]]; then skip=1; else args+=("$a"); fi
  done
  echo "base build: $BASE"
  "$BASE" bench model --device cuda "${args[@]}"
}
bench() {
  base --prompt 512 --gen 64 "$@"
  tandem bench model --device cuda --prompt 512 --gen 64 --llama-bench "$llama" "$@"
}
bench4096() {
  base --prompt 4096 -b 4096 --ctx 4608 --gen 16 "$@"
  tandem bench model --device cuda --prompt 4096 -b 4096 --ctx 4608 --gen 16 --llama-bench "$llama" "$@"
}

# The Qwen3-30B-A3B shape of issue 37: 48 layers, 128 experts (8 used), Q4_K with a Q6_K head,
# 16.1 GiB.
qwen3=(--arch qwen3moe --layers 48 --embd 2048 --heads 32 --kv-heads 4 --head-dim 128 --experts 128
       --experts-used 8 --expert-ffn 768 --vocab 151936 --wtype q4_K --out-type q6_K)
if has fused || has gpumem8 || has cpu || has cpu-layers || has prompt4096; then
  tandem synth "${qwen3[@]}" --fast-random -o "$dir/qwen3moe-48.gguf"
  if has fused; then bench -m "$dir/qwen3moe-48.gguf" --moe-strategy fused --runs 3; fi
  if has gpumem8; then
    bench -m "$dir/qwen3moe-48.gguf" --gpu-mem 8 --runs 3 --llama-args '-ncmoe 28 -mmp 0'
  fi
  if has cpu; then
    bench -m "$dir/qwen3moe-48.gguf" --moe-strategy cpu --runs 3 --llama-args '-ncmoe 48 -mmp 0'
  fi
  if has cpu-layers; then
    bench -m "$dir/qwen3moe-48.gguf" --moe-cpu-layers 24 --runs 3 --llama-args '-ncmoe 24 -mmp 0'
  fi
  if has prompt4096; then
    bench4096 -m "$dir/qwen3moe-48.gguf" --moe-strategy fused --runs 3 --llama-args '-ub 4096 -b 4096'
    bench4096 -m "$dir/qwen3moe-48.gguf" --moe-strategy cpu --runs 3 \
      --llama-args '-ncmoe 48 -mmp 0 -ub 4096 -b 4096'
  fi
  rm -f "$dir/qwen3moe-48.gguf"
fi

if has archs || has archs-hybrid; then
  declare -A arch
  arch[gpt-oss]="--arch gpt-oss --embd 2880 --heads 64 --kv-heads 8 --head-dim 64 --experts 32
    --experts-used 4 --expert-ffn 2880 --vocab 201088 --sliding-window 128 --swa-period 2
    --yarn-factor 32 --yarn-orig-ctx 4096 --wtype q8_0 --exp-type mxfp4 --out-type q8_0"
  arch[gemma4]="--arch gemma4 --embd 2816 --heads 16 --kv-heads 2 --kv-heads-swa 8 --head-dim 512
    --head-dim-swa 256 --experts 128 --experts-used 8 --expert-ffn 704 --ffn 2112 --vocab 262144
    --sliding-window 1024 --swa-period 6 --softcap 30 --wtype q4_0 --out-type q6_K"
  arch[deepseek2]="--arch deepseek2 --embd 2048 --heads 16 --head-dim 64 --qk-nope 128
    --v-head-mla 128 --q-lora-rank 1536 --kv-lora-rank 512 --experts 64 --experts-used 6
    --expert-ffn 1536 --ffn 11008 --shared-experts 2 --dense-lead 1 --vocab 102400 --wtype q4_K
    --attn-type q8_0 --out-type q6_K"
  arch[qwen35moe]="--arch qwen35moe --embd 2048 --heads 16 --kv-heads 2 --head-dim 256
    --experts 256 --experts-used 8 --expert-ffn 512 --shexp-ffn 512 --ssm-state 128
    --ssm-k-heads 16 --ssm-v-heads 32 --conv-kernel 4 --full-attn-interval 4 --vocab 248320
    --wtype q4_K --out-type q6_K"
  for a in gpt-oss gemma4 deepseek2 qwen35moe; do
    # shellcheck disable=SC2086
    tandem synth ${arch[$a]} --layers 12 --fast-random -o "$dir/$a-12.gguf"
    if has archs; then bench -m "$dir/$a-12.gguf" --moe-strategy fused --runs 3; fi
    if has archs-hybrid; then
      # Half the file's size in whole GiB, rounded up: the dense part and about half the experts.
      half=$(( ($(stat -c %s "$dir/$a-12.gguf") + (1 << 30) * 2 - 1) / ((1 << 30) * 2) ))
      bench -m "$dir/$a-12.gguf" --gpu-mem "$half" --runs 3 --llama-args '-ncmoe 6 -mmp 0'
    fi
    rm -f "$dir/$a-12.gguf"
  done
fi
