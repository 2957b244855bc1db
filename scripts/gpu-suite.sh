#!/usr/bin/env bash
# On a machine with a GPU: build, run the gpu test tier, the demo and the LinearLogp benchmarks,
# and write every log into one folder (first argument; default build/gpu-logs).
# Usage: scripts/gpu-suite.sh [LOG_DIR] [SHAPES_JSON]
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${1:-build/gpu-logs}
shapes=${2:-../shared/bench/shapes.json}
mkdir -p "$logs"
export SHARDJIT_CACHE_DIR=${SHARDJIT_CACHE_DIR:-$PWD/build/kernel-cache}

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; date -u; } \
  > "$logs/device.txt" 2>&1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > "$logs/configure.log" 2>&1 &&
  cmake --build build -j "$(nproc)" > "$logs/build.log" 2>&1 || { tail -40 "$logs/build.log"; exit 1; }

ctest --test-dir build -L gpu --output-on-failure -V > "$logs/gpu-tests.log" 2>&1
echo "gpu tests: exit $?"; grep -E "^\s*[0-9]+: \[ accuracy \]|tests passed|FAILED" "$logs/gpu-tests.log" | sed 's/^ *[0-9]*: //' | head -60
build/examples/shardjit-demo > "$logs/demo.log" 2>&1; echo "demo: exit $?"; tail -2 "$logs/demo.log"
build/tools/bench/shardjit-bench linear-logp --shapes "$shapes" > "$logs/bench-linear-logp.jsonl" 2> "$logs/bench.err"
echo "bench: exit $?"; cat "$logs/bench-linear-logp.jsonl"; tail -5 "$logs/bench.err"
build/tools/bench/shardjit-bench linear-logp --backward --shapes "$shapes" --case llama3-8b-16k \
  > "$logs/bench-linear-logp-bwd.jsonl" 2>> "$logs/bench.err"
echo "bench backward: exit $?"; cat "$logs/bench-linear-logp-bwd.jsonl"; tail -3 "$logs/bench.err"
