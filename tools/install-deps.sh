#!/usr/bin/env bash
# Installs the Debian 12 packages Tandem needs to build and test, skipping what is present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git python3
  clang lld libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libpcre2-dev
  curl
)
if [[ "${1:-}" == "--tests" ]]; then
  # Cross-compilation and emulation for the aarch64 kernel tests; the Prometheus project's
  # parser of the /metrics text format.
  packages+=(g++-aarch64-linux-gnu qemu-user python3-prometheus-client)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node >= 20 and npm drive the llama.cpp oracle kit and the npm-based tests.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
