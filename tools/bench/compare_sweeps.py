#!/usr/bin/env python3
"""Two LinearLogp sweeps point by point (shardjit-bench linear-logp --sweep --out rows.jsonl).

    python3 tools/bench/compare_sweeps.py docs/sweep/before.jsonl after.jsonl --worst 8

A point is its head, TP degree, rows, hidden size, vocabulary (and valid vocabulary), dtype,
mode and entropy; a row's `ratio` is the op's time over the same-process cuBLAS GEMM's. For each
mode it prints the points both sweeps timed, the median, least and largest of the after / before
ratio of ratios, the points that moved most each way, and for each sweep how many points miss
the goals of the LinearLogp sweep (GOALS: the forward at most 1.05 x cuBLAS from 1024 rows and
1.10 x below, forward + backward at most 4.0 x from 1024 rows). Only the ratios are compared:
two sweeps from different machine starts differ by 1-2 % (benchmarks.md, "How to reproduce").

Where both rows of a forward point carry the plan the op ran (`fwd_plan`, with its cost model's
time) and the plans differ, the report also sets the measured move beside the one the forward's
cost model expected (fwd_plan_time), the points where the two disagree most first: the check of
the rule's costs against a sweep with them and one without (SHARDJIT_FWD_ROWS_AS_N=0, say).
"""

import argparse
import math
import statistics
import sys

from plot_sweep import load_rows

# (mode, the rows' range, the most the ratio may be): the sweep's goals.
GOALS = [
    ("fwd", "N >= 1024", lambda n: n >= 1024, 1.05),
    ("fwd", "N < 1024", lambda n: n < 1024, 1.10),
    ("fwd+bwd", "N >= 1024", lambda n: n >= 1024, 4.0),
]


def point_key(row):
    return (row.get("head", "?"), row.get("tp", 1), row["n"], row["hidden"], row["vocab"], row.get("valid_vocab", 0) or 0,
            row.get("dtype", "?"), row.get("mode", "?"), bool(row.get("entropy", False)))


def point_name(key):
    head, tp, n, hidden, vocab, valid, dtype, mode, entropy = key
    shard = f"{vocab}" + (f" ({valid} valid)" if valid else "")
    return f"{head} N {n} H {hidden} V {shard} {dtype} {mode}" + (" +entropy" if entropy else "") + (
        f" tp{tp}" if tp != 1 else "")


def load(path):
    """The timed points of a sweep file (rows with a ratio, as plot_sweep reads them), by point: the
    last row of a point wins, as --resume keeps it."""
    return {point_key(row): row for row in load_rows(path)}


def goal_misses(points):
    """(mode, range, limit, points over the limit, points in the range) for each goal."""
    out = []
    for mode, label, in_range, limit in GOALS:
        rows = [r for k, r in points.items() if k[7] == mode and in_range(k[2])]
        out.append((mode, label, limit, sum(1 for r in rows if r["ratio"] > limit), len(rows)))
    return out


def compare(before, after):
    """Per mode: the matched points' (key, before ratio, after ratio, after / before), by the move."""
    moves = {}
    for key in sorted(before.keys() & after.keys()):
        b, a = before[key]["ratio"], after[key]["ratio"]
        moves.setdefault(key[7], []).append((key, b, a, a / b))
    for rows in moves.values():
        rows.sort(key=lambda item: item[3])
    return moves


def plan_name(plan):
    """A forward plan in short: its tile (N: the rows as N, M: as M) and splits, "N168x256/5"."""
    return f"{'N' if plan.get('rows_as_n') else 'M'}{plan.get('tile_rows', '?')}x{plan['tile_cols']}/{plan['splits']}"


def model_moves(before, after):
    """Per mode: (key, measured after / before, the cost model's, before plan, after plan) of the
    matched points whose rows both carry a plan with a model time and whose plans differ, the
    largest disagreement (measured over model, either way) first."""
    out = {}
    for key in sorted(before.keys() & after.keys()):
        b, a = before[key].get("fwd_plan"), after[key].get("fwd_plan")
        if not b or not a or "model_time" not in b or "model_time" not in a or plan_name(a) == plan_name(b):
            continue
        measured = after[key]["ratio"] / before[key]["ratio"]
        out.setdefault(key[7], []).append((key, measured, a["model_time"] / b["model_time"], plan_name(b),
                                           plan_name(a)))
    for rows in out.values():
        rows.sort(key=lambda item: -abs(math.log(item[1] / item[2])))
    return out


def report(before, after, worst, out=None):
    out = out if out is not None else sys.stdout
    moves = compare(before, after)
    only = len(before.keys() ^ after.keys())
    print(f"{len(before.keys() & after.keys())} points in both sweeps, {only} in one only", file=out)
    for mode, rows in sorted(moves.items()):
        changes = [m for *_, m in rows]
        print(f"\n{mode}: {len(rows)} points, after / before median {statistics.median(changes):.3f}, "
              f"least {changes[0]:.3f}, largest {changes[-1]:.3f}", file=out)
        for title, picked in (("moved up most", rows[::-1][:worst]), ("moved down most", rows[:worst])):
            print(f"  {title}:", file=out)
            for key, b, a, m in picked:
                print(f"    {m:.3f}  {b:.3f} -> {a:.3f}  {point_name(key)}", file=out)
    for mode, rows in sorted(model_moves(before, after).items()):
        measured = statistics.median(m for _, m, *_ in rows)
        modeled = statistics.median(m for _, _, m, *_ in rows)
        print(f"\n{mode}: {len(rows)} points ran another plan, after / before median {measured:.3f}, "
              f"the cost model's {modeled:.3f}; the largest disagreements:", file=out)
        for key, m, model, plan_b, plan_a in rows[:worst]:
            print(f"    {m:.3f} (model {model:.3f})  {plan_b} -> {plan_a}  {point_name(key)}", file=out)
    print("\ngoals (points over the limit / points):", file=out)
    for (mode, label, limit, over_b, count_b), (_, _, _, over_a, count_a) in zip(goal_misses(before),
                                                                                goal_misses(after)):
        if count_b or count_a:
            print(f"  {mode} {label} over {limit}: before {over_b}/{count_b}, after {over_a}/{count_a}", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", help="the earlier sweep's JSONL rows")
    parser.add_argument("after", help="the later sweep's JSONL rows")
    parser.add_argument("--worst", type=int, default=5, help="points listed each way per mode")
    args = parser.parse_args(argv)
    if args.worst < 0:
        parser.error(f"--worst {args.worst}: expected 0 or more")
    before, after = load(args.before), load(args.after)
    if not before or not after:
        parser.error(f"no timed points in {args.before if not before else args.after}")
    report(before, after, args.worst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
