#!/usr/bin/env python3
"""Where one call's GPU time goes: its kernels, and the GPU's idle time between them.

For each shape (N,H,V) and each variant of torch_compare.py (gemm, shardjit fwd / fwd+bwd, torch
fwd / fwd+bwd, with the entropy off or on) it runs one call under torch.profiler, --calls times
after a warm-up, each call alone (the GPU drained before and after). Per call: the kernels' time
by kernel name, the span from the first kernel's start to the last one's end, the busy time (the
union of the kernels' intervals) and the idle time inside the span (span - busy); the medians over
the calls are reported. The event-timed call (as torch_compare.py times it: from a CUDA event
recorded before the call to one after, which includes the host's time before the first launch)
is reported beside them, and, of the last call, the longest idle gaps between kernels (with the
kernels on either side) and, with --host, the host's longest operations and driver/runtime calls.

    PYTHONPATH=build/python:python:tools/bench python3 tools/bench/kernel_breakdown.py \\
        --shape 7,4096,128256 --variant "shardjit fwd+bwd" --variant "torch fwd+bwd" --out b.jsonl
"""

import argparse
import collections
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import torch_compare


def intervals_on(prof, device_type):
    """(name, start_us, end_us) of every event of the profiler on `device_type` (CUDA: the GPU's
    kernels and memory operations; CPU: the host's operations and API calls), by start."""
    out = []
    for event in prof.events():
        if event.device_type != device_type:
            continue
        out.append((event.name, event.time_range.start, event.time_range.end))
    return sorted(out, key=lambda item: item[1])


def longest_gaps(intervals, count=4):
    """The `count` longest stretches with no kernel running, as (us, kernel before, kernel after)."""
    gaps, reach, last = [], None, None
    for name, start, end in intervals:
        if reach is not None and start > reach:
            gaps.append((start - reach, last, name))
        if reach is None or end > reach:
            reach, last = end, name
    return sorted(gaps, reverse=True)[:count]


def busy_time(intervals):
    """The time at least one of `intervals` (by start) runs: their union's length."""
    busy, reach = 0.0, None
    for _, start, end in intervals:
        if reach is None or start >= reach:
            busy += end - start
            reach = end
        elif end > reach:
            busy += end - reach
            reach = end
    return busy


def profile_call(fn, inputs, index, host):
    x, w, t = inputs[index % len(inputs)]
    torch.cuda.synchronize()
    activities = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if host else [])
    with profile(activities=activities) as prof:
        fn(x, w, t)
        torch.cuda.synchronize()
    intervals = intervals_on(prof, torch.autograd.DeviceType.CUDA)
    if not intervals:
        raise RuntimeError("kernel_breakdown: the profiler saw no kernel")
    per_name = collections.defaultdict(lambda: [0.0, 0])
    for name, start, end in intervals:
        per_name[name][0] += end - start
        per_name[name][1] += 1
    span = max(end for _, _, end in intervals) - intervals[0][1]
    busy = busy_time(intervals)
    sample = {"span": span, "busy": busy, "idle": span - busy, "per_name": dict(per_name),
              "gaps": [{"us": us, "after": before[:80], "before": after[:80]} for us, before, after in longest_gaps(intervals)]}
    if host:
        origin = intervals[0][1]
        events = intervals_on(prof, torch.autograd.DeviceType.CPU)
        sample["host"] = [{"name": name[:80], "start_us": start - origin, "us": end - start}
                          for name, start, end in events if end - start >= 5 and "synchronize" not in name]
    return sample


def breakdown(shape, variant_names, calls, warmup, entropy_cases, host):
    dtype = torch_compare.DTYPES[shape.dtype]
    inputs = torch_compare.make_inputs(shape.n, shape.hidden, shape.vocab, 2, seed=shape.n + shape.hidden,
                                       dtype=dtype, valid_vocab=shape.valid_vocab)
    for x, w, _ in inputs:
        x.requires_grad_()
        w.requires_grad_()
    runs = torch_compare.variants(entropy_cases, shape.valid_vocab)
    rows = []
    for name in variant_names:
        fn = runs[name]
        for i in range(warmup):
            torch_compare.time_call(fn, inputs, i)
        event_us = statistics.median(torch_compare.time_call(fn, inputs, i) for i in range(calls))
        samples = [profile_call(fn, inputs, i, host) for i in range(calls)]
        names = sorted({k for s in samples for k in s["per_name"]},
                       key=lambda k: -statistics.median(s["per_name"].get(k, (0, 0))[0] for s in samples))
        kernels = [{"name": k,
                    "us": statistics.median(s["per_name"].get(k, (0, 0))[0] for s in samples),
                    "launches": max(s["per_name"].get(k, (0, 0))[1] for s in samples)} for k in names]
        rows.append({
            "shape": shape.name, "n": shape.n, "hidden": shape.hidden, "vocab": shape.vocab, "dtype": shape.dtype,
            "variant": name, "event_us": event_us,
            "span_us": statistics.median(s["span"] for s in samples),
            "busy_us": statistics.median(s["busy"] for s in samples),
            "idle_us": statistics.median(s["idle"] for s in samples),
            "kernels": kernels, "last_call_gaps": samples[-1]["gaps"], "last_call_host": samples[-1].get("host"),
            "calls": calls, "device": torch.cuda.get_device_name(),
        })
    return rows


def print_row(row, file):
    print(f"{row['shape']} {row['variant']}: event {row['event_us']:.1f} us, span {row['span_us']:.1f}, "
          f"busy {row['busy_us']:.1f}, idle {row['idle_us']:.1f}", file=file)
    for k in row["kernels"]:
        print(f"  {k['us']:10.1f} us  x{k['launches']:<4d} {k['name'][:110]}", file=file)
    for gap in row["last_call_gaps"]:
        print(f"  idle {gap['us']:8.1f} us after {gap['after'][:60]} / before {gap['before'][:60]}", file=file)
    for event in row["last_call_host"] or []:
        print(f"  host {event['start_us']:9.1f} +{event['us']:8.1f} us {event['name']}", file=file)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", type=torch_compare.parse_shape, required=True,
                        help="N,H,V (repeatable)")
    parser.add_argument("--dtype", choices=sorted(torch_compare.DTYPES), default="bf16")
    parser.add_argument("--variant", action="append", default=[],
                        help="a torch_compare.py variant (repeatable; default: gemm and shardjit fwd+bwd)")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--host", action="store_true", help="also profile the host: its operations and API calls "
                        "of 5 us or more, from the first kernel's start")
    parser.add_argument("--out", help="also append the JSON lines to this file")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("kernel_breakdown: needs a CUDA device")
    variant_names = args.variant or ["gemm", "shardjit fwd+bwd"]
    entropy_cases = sorted({"+entropy" in name for name in variant_names})
    known = torch_compare.variants(entropy_cases or [False])
    unknown = [name for name in variant_names if name not in known]
    if unknown:
        raise SystemExit(f"kernel_breakdown: unknown variant(s) {unknown}; expected some of {sorted(known)}")
    rows_of_shapes = (breakdown(shape._replace(dtype=args.dtype), variant_names, args.calls, args.warmup,
                                entropy_cases or [False], args.host) for shape in args.shape)
    torch_compare.write_rows(rows_of_shapes, args.out, show=lambda row: print_row(row, sys.stderr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
