#!/usr/bin/env bash
# On a machine with GPUs: build, run the gpu test tier, the demo and the LinearLogp benchmarks;
# where there are two or more GPUs also the multigpu tier (one process per GPU, forked by the
# tests), the tensor-parallel and reduce-scatter benchmarks and a compute-sanitizer run of the
# peer kernels. Every log goes into one folder.
# Usage: scripts/gpu-suite.sh [LOG_DIR] [SHAPES_JSON] [PART]
#   SHAPES_JSON: the benchmark cases (default: tools/bench/shapes.json, the standard ones).
#   PART: all (default), single (the one-GPU part only) or multi (the multi-GPU part only).
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${1:-build/gpu-logs}
shapes=${2:-tools/bench/shapes.json}
part=${3:-all}
mkdir -p "$logs"
export SHARDJIT_CACHE_DIR=${SHARDJIT_CACHE_DIR:-$PWD/build/kernel-cache}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

{ nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  [ "$gpus" -ge 2 ] && nvidia-smi topo -m; date -u; } > "$logs/device.txt" 2>&1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > "$logs/configure.log" 2>&1 &&
  cmake --build build -j "$(nproc)" > "$logs/build.log" 2>&1 || { tail -40 "$logs/build.log"; exit 1; }

# Lines worth reading in a test log: accuracy reports, messages, the verdicts.
summary() { grep -E "^\s*[0-9]+: \[ (accuracy|message) +\]|tests passed|\(Failed\)|\*\*\*" "$1" | sed 's/^ *[0-9]*: //' | head -80; }

if [ "$part" != multi ]; then

# Eight tests at a time, as the JIT cold-path goal is measured (docs/benchmarks.md, "Kernel
# compile"): the wall time, and whether the kernel cache was empty before it.
cached=$(find "$SHARDJIT_CACHE_DIR/kernels" -type f 2>/dev/null | wc -l)
SECONDS=0
ctest --test-dir build -L '^gpu$' -j 8 --output-on-failure -V --timeout 300 > "$logs/gpu-tests.log" 2>&1
status=$?
echo "gpu tests: exit $status, $SECONDS s with -j 8; the kernel cache held $cached entries before"
summary "$logs/gpu-tests.log"
# On Hopper the LinearLogp kernels above ran the wgmma main loop; the portable one stays tested.
if nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | grep -q '^9\.0'; then
  SHARDJIT_HOPPER_PATH=0 ctest --test-dir build -L '^gpu$' -R 'LinearLogp|GraphCapture' --output-on-failure -V \
    --timeout 300 > "$logs/gpu-tests-portable.log" 2>&1
  echo "gpu tests, portable main loop (SHARDJIT_HOPPER_PATH=0): exit $?"; summary "$logs/gpu-tests-portable.log"
fi
ctest --test-dir build -R python_tests --output-on-failure -V > "$logs/python-tests.log" 2>&1
echo "python tests (torch on the GPU): exit $?"; grep -E "passed|failed|skipped" "$logs/python-tests.log" | tail -2
build/examples/shardjit-demo > "$logs/demo.log" 2>&1; echo "demo: exit $?"; tail -1 "$logs/demo.log"
build/tools/bench/shardjit-bench linear-logp --shapes "$shapes" > "$logs/bench-linear-logp.jsonl" 2> "$logs/bench.err"
echo "bench: exit $?"; cat "$logs/bench-linear-logp.jsonl"
build/tools/bench/shardjit-bench linear-logp --backward --shapes "$shapes" --case llama3-8b-16k \
  > "$logs/bench-linear-logp-bwd.jsonl" 2>> "$logs/bench.err"
echo "bench backward: exit $?"; cat "$logs/bench-linear-logp-bwd.jsonl"; tail -3 "$logs/bench.err"
build/tools/bench/shardjit-host-bench --benchmark_filter='ColdStart|HostTime|BareLaunch' \
  --benchmark_format=json > "$logs/host-bench.json" 2> "$logs/host-bench.err"
echo "host bench: exit $?"; python3 -c "import json,sys; [print(b['name'], round(b['real_time'], 2), b['time_unit'])
  for b in json.load(open(sys.argv[1]))['benchmarks']]" "$logs/host-bench.json"

fi

if [ "$part" != single ] && [ "$gpus" -ge 2 ]; then
  ctest --test-dir build -L '^multigpu$' --output-on-failure -V --timeout 300 > "$logs/multigpu-tests.log" 2>&1
  echo "multigpu tests: exit $?"; summary "$logs/multigpu-tests.log"
  build/tools/bench/shardjit-bench linear-logp-tp --shapes "$shapes" \
    > "$logs/bench-linear-logp-tp.jsonl" 2> "$logs/bench-tp.err"
  echo "tp bench: exit $?"; cat "$logs/bench-linear-logp-tp.jsonl"; tail -5 "$logs/bench-tp.err"
  build/tools/bench/shardjit-bench --iters 50 reduce-scatter --shapes "$shapes" \
    > "$logs/bench-reduce-scatter.jsonl" 2> "$logs/bench-rs.err"
  echo "reduce-scatter bench: exit $?"; cat "$logs/bench-reduce-scatter.jsonl"; tail -5 "$logs/bench-rs.err"
  # The peer kernels under compute-sanitizer (every forked rank process). API errors are not
  # reported: NCCL probes for kernel images it does not have, which the tool counts as errors.
  for tool in memcheck racecheck; do
    compute-sanitizer --tool "$tool" --target-processes all --report-api-errors no --error-exitcode 9 \
      build/tests/shardjit_multigpu_tests \
      --gtest_filter='ReduceScatter.UnevenAndEmpty*:ReduceScatter.Staged*:MoeCombine.TpPartials*' \
      > "$logs/sanitizer-$tool.log" 2>&1
    echo "compute-sanitizer $tool: exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$logs/sanitizer-$tool.log" | sort | uniq -c
  done
fi
