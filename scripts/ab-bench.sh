#!/usr/bin/env bash
# On a GPU machine: the LinearLogp run time of this tree against another tree of the project (a
# base commit, e.g. unpacked from `git archive BASE | tar -x -C DIR`), each built in a folder of
# its own, then shardjit-bench run in alternating processes (base, this tree, base, ...) so that
# both see the same machine state. Each case is one shardjit-bench linear-logp argument string;
# every JSON row gets the tree, the round and the case's arguments (ab_case). Logs and rows go into one folder.
# A base of the form env:VAR=VALUE is this tree's own build run with VAR=VALUE: an experiment knob
# (README's environment table) against the default, one build.
# Usage: scripts/ab-bench.sh BASE_TREE|env:VAR=VALUE [LOG_DIR] [ROUNDS] [CASE...]
#   BASE_TREE: the other tree's sources; LOG_DIR: default build/ab-logs; ROUNDS: default 2;
#   CASES: default the standard forward cases, and forward + backward at llama3-8b-16k,
#   qwen3-8b-4k (an odd vocabulary) and three small or odd shapes.
set -uo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: scripts/ab-bench.sh BASE_TREE [LOG_DIR] [ROUNDS] [CASE...]}
logs=${2:-build/ab-logs}
rounds=${3:-2}
shift $(($# < 3 ? $# : 3))
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  cases=("" "--backward --case llama3-8b-16k" "--backward --case qwen3-8b-4k"
         "--backward --n 7 --hidden 4096 --vocab 128256" "--backward --n 333 --hidden 4096 --vocab 151936"
         "--backward --n 4097 --hidden 2304 --vocab 256000")
fi
builds=${AB_BUILD_DIR:-$HOME/ab-build}  # outside the tree: kept while the machine stays warm
declare -A tree_of=([tree]="$PWD")
declare -A build_of=([tree]="$builds/tree")
base_env=()
if [[ "$base" == env:*=* ]]; then
  base_env=("${base#env:}")
  tree_of[base]="$PWD"
  build_of[base]="$builds/tree"
else
  [ -f "$base/CMakeLists.txt" ] || { echo "ab-bench: $base holds no project tree" >&2; exit 2; }
  tree_of[base]="$(cd "$base" && pwd)"
  build_of[base]="$builds/base"
fi
mkdir -p "$logs"
: > "$logs/ab.jsonl"
for name in base tree; do
  [ "$name" = base ] && [ ${#base_env[@]} -gt 0 ] && continue  # the tree's build
  cmake -S "${tree_of[$name]}" -B "${build_of[$name]}" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    > "$logs/configure-$name.log" 2>&1 &&
    cmake --build "${build_of[$name]}" -j "$(nproc)" --target shardjit_bench > "$logs/build-$name.log" 2>&1 ||
    { echo "ab-bench: the $name build failed"; tail -30 "$logs/build-$name.log"; exit 1; }
done
# Each build compiles into a cache of its own (two trees' keys differ anyway), kept across rounds
# so that only the first round compiles.
for round in $(seq "$rounds"); do
  for name in base tree; do
    run_env=()
    [ "$name" = base ] && run_env=("${base_env[@]}")
    for case in "${cases[@]}"; do
      # shellcheck disable=SC2086  # a case is several arguments
      env "${run_env[@]}" SHARDJIT_CACHE_DIR="${build_of[$name]}-cache" "${build_of[$name]}/tools/bench/shardjit-bench" linear-logp \
        --shapes "${tree_of[tree]}/tools/bench/shapes.json" $case 2>> "$logs/bench-$name.err" |
        python3 -c 'import json, sys
for line in sys.stdin:
    row = json.loads(line)
    row.update(tree=sys.argv[1], round=int(sys.argv[2]), ab_case=sys.argv[3])
    print(json.dumps(row))' "$name" "$round" "${case:-standard forward}" | tee -a "$logs/ab.jsonl"
    done
  done
done
# One line a case and tree: the op's time (ms) and its ratio to cuBLAS, round by round.
python3 - "$logs/ab.jsonl" <<'EOF'
import collections, json, sys
rounds = collections.defaultdict(list)
for line in open(sys.argv[1]):
    row = json.loads(line)
    if "ratio" in row:
        rounds[(row["ab_case"], row["case"], row["tree"])].append(f"{row['fused_ms']:.3f} ms {row['ratio']:.3f}x")
for (ab_case, case, tree), values in sorted(rounds.items()):
    print(f"{ab_case:48s} {case:28s} {tree:5s} " + ", ".join(values))
if not rounds:
    sys.exit("ab-bench: no case was timed (the reasons are in bench-base.err and bench-tree.err)")
EOF
