#!/usr/bin/env bash
# Packs what a GPU machine without network needs to run Tandem's GPU tests and benchmarks, built
# here: build/tandem, build/tests/test_cuda, the Debian shared libraries they use that a CUDA
# image lacks, and a minimal llama.cpp oracle kit (llama_logits, kern, the CPU libraries for
# x86-64 and Sapphire Rapids, the kit's scripts). Usage: tools/gpu_pack.sh DIR (e.g. .device/pack,
# an ignored folder that the device tool carries); on the GPU machine, `source DIR/env.sh` first,
# then tools/gpu_test.sh (the tests) and tools/gpu_bench.sh (the benchmarks).
# BUILD (default build) names the build folder, e.g. one configured for the GPU's architecture:
#   cmake --preset release -B build-h200 -DTANDEM_CUDA=ON -DTANDEM_CUDA_ARCHS=90a-real
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: tools/gpu_pack.sh DIR}"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/oracle/bin" "$out/oracle/lib" "$out/kit"
build="${BUILD:-build}"
cp "$build/tandem" "$build/tests/test_cuda" "$out/bin/"
for lib in $(ldd "$build/tandem" "$build/tests/test_cuda" | awk '/=> \/lib/ { print $3 }' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++*|libgcc_s*|libssl*|libcrypto*|libz.so*) ;;  # the image has these
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
eval "$(../shared/oracle/setup.sh)"
cp "$ORACLE_BIN/llama_logits" "$ORACLE_BIN/kern" "$out/oracle/bin/"
for f in libggml-base.so libggml.v0.4.0.so libllama.v0.4.0.so libggml-cpu-x64.so libggml-cpu-sapphirerapids.so; do
  cp "$ORACLE_LIBDIR/$f" "$out/oracle/lib/"
done
cp ../shared/oracle/*.py ../shared/oracle/*.sh "$out/kit/"
cat > "$out/env.sh" <<'ENV'
# Sourced on the GPU machine: the packed binaries, their libraries and the oracle kit.
pack="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="$pack/bin:$PATH"
export LD_LIBRARY_PATH="$pack/lib:$pack/oracle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ORACLE_BIN="$pack/oracle/bin" ORACLE_LIBDIR="$pack/oracle/lib" TANDEM_ORACLE_DIR="$pack/oracle"
export TANDEM_ORACLE_KIT="$pack/kit" TANDEM_REQUIRE_ORACLE=1 TANDEM_EXE="$pack/bin/tandem"
ENV
du -sh "$out"
