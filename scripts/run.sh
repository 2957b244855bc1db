#!/usr/bin/env bash
# The main job: build, prewarm the kernel cache for the bundled model configs, and where a GPU
# exists run the LinearLogp demo against a CPU reference.
# Usage: scripts/run.sh [--build-only]   (--build-only: stop after the build)
# The build skips the tests (SHARDJIT_BUILD_TESTS=OFF stays in build/'s cache; scripts/test.sh
# switches them on again).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "" | --build-only) ;;
  *) echo "usage: scripts/run.sh [--build-only]" >&2; exit 2 ;;
esac
scripts/install-deps.sh
cmake --preset release -DSHARDJIT_BUILD_TESTS=OFF
cmake --build --preset release
[ "${1:-}" = --build-only ] && exit 0

cli=build/tools/shardjit
if "$cli" info --json | grep -Eq '"devices": *\[ *\]'; then
  archs="sm_80,sm_90a"   # no GPU here: build for the common data-center targets
else
  archs=""               # the GPU's own arch
fi
"$cli" prewarm examples/configs/*.json --tp 1,2,4,8 --collectives ${archs:+--arch "$archs"} --jobs "$(nproc)"
"$cli" ls | tail -n 3

if [ -z "$archs" ]; then
  build/examples/shardjit-demo
fi
