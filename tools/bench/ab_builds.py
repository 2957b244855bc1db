#!/usr/bin/env python3
"""Alternating processes of two or more builds (or of one build under several environments) over
the same shardjit-bench cases: how a change is judged (benchmarks.md, "How to reproduce").

    python3 tools/bench/ab_builds.py \\
        --variant "base=../base/build/tools/bench/shardjit-bench" \\
        --variant "new=build/tools/bench/shardjit-bench" \\
        --variant "new-no-walk=build/tools/bench/shardjit-bench SHARDJIT_FWD_WALK=0" \\
        --case "linear-logp --n 333 --hidden 8192 --vocab 16032" \\
        --case "linear-logp --n 256 --hidden 4096 --vocab 128256 --backward" \\
        --rounds 3 --out ab.jsonl

A variant is LABEL=BINARY, then any NAME=VALUE settings of the environment its processes get. A
case is the benchmark's arguments. Each round runs every case under every variant, one process
each, in the variants' order in odd rounds and in the reverse order in even ones, so that no
variant always runs first. A process's last line that is a JSON object is its row; the row gets
`variant`, `case` (the arguments), `case_index` and `round`, and is appended to --out (a process
that fails gives a row with `status` "failed", its exit status and the end of its error output).
At the end, per case, each variant's median of --metric (fused_ms) over its rounds and its ratio
to the first variant's are printed, and where the rows carry the forward's plan (`fwd_plan`), the
plan and its model time's ratio to the first variant's: the cost model's expectation beside the
measured move.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
from dataclasses import dataclass, field

from compare_sweeps import plan_name


@dataclass
class Variant:
    label: str
    binary: str
    env: dict = field(default_factory=dict)


def parse_variant(text):
    """LABEL=BINARY [NAME=VALUE ...] -> Variant; raises ValueError naming what is expected."""
    words = shlex.split(text)
    if not words or "=" not in words[0]:
        raise ValueError(f"variant {text!r}: expected LABEL=BINARY, then NAME=VALUE settings")
    label, binary = words[0].split("=", 1)
    if not label or not binary:
        raise ValueError(f"variant {text!r}: expected a label and a binary in LABEL=BINARY")
    env = {}
    for word in words[1:]:
        name, sep, value = word.partition("=")
        if not sep or not name:
            raise ValueError(f"variant {text!r}: {word!r} is not a NAME=VALUE setting")
        env[name] = value
    return Variant(label, binary, env)


def round_order(variants, round_index):
    """The variants in the order round `round_index` (from 1) runs them: reversed in even rounds."""
    return list(variants) if round_index % 2 == 1 else list(reversed(variants))


def last_json_row(stdout):
    """The last line of `stdout` that parses as a JSON object, or None."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            return row
    return None


def run_one(variant, case, timeout_s):
    """One process of `variant` over `case`: its row, or a failed row."""
    env = dict(os.environ)
    env.update(variant.env)
    try:
        done = subprocess.run([variant.binary, *shlex.split(case)], env=env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"status": "failed", "error": str(error)}
    row = last_json_row(done.stdout) if done.returncode == 0 else None
    if row is None:
        return {"status": "failed", "rc": done.returncode, "stderr_tail": done.stderr[-2000:],
                "error": "no JSON row in its output" if done.returncode == 0 else "non-zero exit"}
    return row


def run_rounds(variants, cases, rounds, timeout_s=600, out=None, runner=run_one):
    """Every case under every variant, `rounds` times; the labelled rows, in the order they ran."""
    rows = []
    for round_index in range(1, rounds + 1):
        for case_index, case in enumerate(cases):
            for variant in round_order(variants, round_index):
                row = dict(runner(variant, case, timeout_s))
                row.update({"variant": variant.label, "case": case, "case_index": case_index, "round": round_index})
                rows.append(row)
                if out is not None:
                    out.write(json.dumps(row) + "\n")
                    out.flush()
    return rows


def summarize(rows, variants, cases, metric="fused_ms"):
    """Per case, per variant: (median of `metric` over its rows that have it or None, the rows
    counted, that median over the first variant's or None)."""
    summary = []
    for case_index, case in enumerate(cases):
        medians = {}
        for variant in variants:
            values = [r[metric] for r in rows
                      if r["case_index"] == case_index and r["variant"] == variant.label
                      and isinstance(r.get(metric), (int, float))]
            medians[variant.label] = (statistics.median(values) if values else None, len(values))
        first = medians[variants[0].label][0]
        entries = []
        for variant in variants:
            median, count = medians[variant.label]
            ratio = median / first if median is not None and first else None
            entries.append((variant.label, median, count, ratio))
        summary.append((case, entries))
    return summary


def forward_plans(rows, variants, cases):
    """Per case, per variant label: the `fwd_plan` of its last row that has one, or None."""
    plans = []
    for case_index, _ in enumerate(cases):
        found = {}
        for variant in variants:
            with_plan = [r["fwd_plan"] for r in rows if r["case_index"] == case_index
                         and r["variant"] == variant.label and isinstance(r.get("fwd_plan"), dict)]
            found[variant.label] = with_plan[-1] if with_plan else None
        plans.append(found)
    return plans


def print_summary(summary, metric, file=None, plans=None):
    file = file if file is not None else sys.stdout
    for case_index, (case, entries) in enumerate(summary):
        print(f"{case}", file=file)
        case_plans = plans[case_index] if plans else {}
        first = case_plans.get(entries[0][0]) if case_plans else None
        for label, median, count, ratio in entries:
            shown = "failed" if median is None else f"{median:.6g}"
            over = "" if ratio is None else f"  x{ratio:.4f}"
            plan = case_plans.get(label)
            if plan:
                over += f"  {plan_name(plan)}"
                if first and first.get("model_time") and "model_time" in plan:
                    over += f" model x{plan['model_time'] / first['model_time']:.4f}"
            print(f"  {label:<20} {metric} {shown} ({count} rounds){over}", file=file)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", action="append", required=True,
                        help="LABEL=BINARY [NAME=VALUE ...]; the first is the baseline of the ratios")
    parser.add_argument("--case", action="append", required=True, help="the benchmark's arguments")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--metric", default="fused_ms", help="the row's key the summary compares")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a process may take")
    parser.add_argument("--out", help="append the rows to this JSONL file")
    args = parser.parse_args(argv)
    try:
        variants = [parse_variant(text) for text in args.variant]
    except ValueError as error:
        parser.error(str(error))
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels):
        parser.error(f"variant labels must differ: {labels}")
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: expected at least 1")
    out = open(args.out, "a", encoding="utf-8") if args.out else None
    try:
        rows = run_rounds(variants, args.case, args.rounds, args.timeout, out)
    finally:
        if out is not None:
            out.close()
    print_summary(summarize(rows, variants, args.case, args.metric), args.metric,
                  plans=forward_plans(rows, variants, args.case))
    return 1 if any(r.get("status") == "failed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
