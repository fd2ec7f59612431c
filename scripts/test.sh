#!/usr/bin/env bash
# Builds cumemtrace and runs every test that this machine can run (GPU tests skip without a GPU).
# Installs the Debian packages it needs first. Usage: scripts/test.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
scripts/setup.sh "$build_dir"
cmake --build "$build_dir"
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
