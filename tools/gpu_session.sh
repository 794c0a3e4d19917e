#!/usr/bin/env bash
# One device call's worth of GPU work, on the GPU machine after `source PACK/env.sh`
# (tools/gpu_pack.sh): llama.cpp's CUDA llama-bench builds in the background (about 4.5 minutes
# on 16 cores) while tools/gpu_test.sh runs every GPU test (about 2), then tools/gpu_bench.sh runs
# WHAT against it (BASE=another/tandem adds that build's run of each case first). Usage there:
#   tools/gpu_session.sh LLAMA_DIR [WHAT...]
# LLAMA_DIR: the folder `../shared/oracle/llama_cuda.sh pack DIR` wrote here and the call carried.
# A call runs at most 10 minutes: name a few of gpu_bench.sh's cases (e.g. `cpu fused`), not all.
set -uo pipefail
llama_dir="${1:?usage: tools/gpu_session.sh LLAMA_DIR [WHAT...]}"
shift
log="${TMPDIR:-/tmp}/llama_cuda_build.log"
bash "$llama_dir/llama_cuda.sh" build "$llama_dir" >"$log" 2>&1 &
builder=$!
tools/gpu_test.sh "${OUT:-/tmp}/test_cuda.xml"
tests=$?
if ! wait "$builder"; then
  tail -20 "$log"
  echo "gpu_session: the llama.cpp build failed (log: $log); tests exited $tests" >&2
  exit 1
fi
tools/gpu_bench.sh "$(tail -1 "$log")/llama-bench" "$@"
bench=$?
echo "gpu_session: tests exited $tests, benchmarks $bench"
exit $((tests != 0 || bench != 0))
