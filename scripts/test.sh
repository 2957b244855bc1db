#!/usr/bin/env bash
# Builds with warnings as errors and runs every test tier: cpu everywhere; gpu and multigpu
# run where GPUs exist and skip themselves (with the reason) elsewhere. Arguments go to ctest
# (e.g. -L cpu, -R NAME). It shares build/ with scripts/run.sh, which leaves the tests switched
# off there, so the tests are switched on here explicitly; and a run that finds no test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset ci -DSHARDJIT_BUILD_TESTS=ON
cmake --build --preset ci
ctest --test-dir build --output-on-failure --no-tests=error -j "$(nproc)" "$@"
