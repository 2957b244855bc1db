#!/usr/bin/env bash
# Builds with warnings as errors and runs every test tier: cpu everywhere; gpu and multigpu
# run where GPUs exist and skip themselves (with the reason) elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset ci
cmake --build --preset ci
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
