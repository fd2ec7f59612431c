#!/usr/bin/env bash
# Installs what cumemtrace needs to build and test on Debian/Ubuntu, when it is missing, and configures a build.
# Usage: scripts/setup.sh [build-dir] [extra cmake args...]   (sourced by test.sh and demo.sh)
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config libunwind-dev libabsl-dev libprotobuf-dev protobuf-compiler
          libdw-dev libelf-dev libgtest-dev libgmock-dev python3 python3-pytest zlib1g-dev libzstd-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Headless Chromium opens the HTML report in tests/browser (skipped without it). Optional: installed only where the
# distribution has the package (Debian's chromium; Ubuntu ships it as a snap, which CI cannot use).
for p in chromium; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" &&
     apt-cache show "$p" >/dev/null 2>&1 && ! apt-cache show "$p" 2>/dev/null | grep -q "^Pre-Depends:.*snapd"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The CUDA toolkit's headers are needed to build the preload (never its libraries). Without a toolkit, only the
# analyzer and its tests are built.
cuda_args=()
if [ ! -e /usr/local/cuda/include/cuda.h ] && ! command -v nvcc >/dev/null 2>&1; then
  echo "setup: no CUDA toolkit found; building the analyzer only (the preload needs the CUDA headers)"
  cuda_args=(-DCUMEMTRACE_BUILD_PRELOAD=OFF)
fi

build_dir=${1:-build}
shift || true
cmake -S "$(dirname "$0")/.." -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cuda_args[@]}" "$@" >/dev/null
