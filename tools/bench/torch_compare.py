#!/usr/bin/env python3
"""shardjit.torch.linear_logp against what PyTorch trainers do today, in one process.

For each shape (N tokens, hidden H, vocabulary V, padding rows past valid_vocab; bf16 unless
--dtype or the sweep's points say otherwise) it times, interleaved round by round so
that clock and power drift hit every variant alike, with CUDA events (median of the rounds):

- gemm:          torch.matmul(hidden, weight.T), the cuBLAS GEMM of the same shape (the unit);
- shardjit fwd:  shardjit.torch.linear_logp forward (inference: torch.no_grad);
- shardjit fwd+bwd: forward and backward of logp, with entropy and its gradient off and on
                 (the loss uses logp and entropy: an entropy bonus);
- torch fwd / fwd+bwd: logits materialized, fp32 log_softmax of the bf16 logits, the target's
                 log-prob gathered (and the entropy from the same softmax when on).

Inputs rotate over enough copies to exceed the L2 cache; data is random (never zeros). Peak
extra memory is torch.cuda.max_memory_allocated() during a call minus the memory allocated
before it and minus the gradients it leaves (hidden's and weight's, which every variant makes),
plus the device memory the first call took outside torch's allocator (shardjit's workspace).
Also the host time one call adds over the C++ op (--host-overhead, on by default): the time per
call on the CPU of shardjit.torch.linear_logp and of LinearLogp.forward called directly with
preallocated outputs, in interleaved rounds of 500 calls each at a shape small enough that the GPU
keeps up (median of the rounds).
One JSON object per (shape, variant) goes to stdout and to --out (JSONL):

    python3 tools/bench/torch_compare.py                      # the standard shapes
    python3 tools/bench/torch_compare.py --shape 8192,4096,128256 --rounds 30 --out torch.jsonl
    # the sweep's points (their heads, row counts, dtypes and padding), as the sweep lists them:
    build/tools/bench/shardjit-bench linear-logp --sweep --dry-run --list full > points.jsonl
    python3 tools/bench/torch_compare.py --points points.jsonl --no-host-overhead --out torch.jsonl
"""

import argparse
import collections
import itertools
import json
import os
import statistics
import sys

import torch

import shardjit.torch as sjt

L2_BYTES = 60 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE_FILES = [os.path.join(HERE, "shapes.json")]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

# A point: N rows of hidden H against a head of V rows (valid_vocab > 0: the rows past it are
# padding, outside the softmax), in one dtype.
Shape = collections.namedtuple("Shape", "name n hidden vocab dtype valid_vocab", defaults=("bf16", 0))


def standard_shapes():
    for path in SHAPE_FILES:
        if os.path.exists(path):
            with open(path) as f:
                cases = json.load(f)["linear_logp"]["cases"]
            return [Shape(c["name"], c["n"], c["hidden"], c["vocab"]) for c in cases if c.get("tp", 1) == 1]
    raise SystemExit("torch_compare: no shapes.json found (looked at " + ", ".join(SHAPE_FILES) + "); pass --shape")


def nonnegative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count of 0 or more, got {text}")
    return value


def parse_shape(text):
    try:
        n, h, v = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shape: expected N,H,V (three integers), got {text!r}")
    if min(n, h, v) < 1:
        raise argparse.ArgumentTypeError(f"--shape: expected positive sizes, got {text!r}")
    return Shape(f"n{n}-h{h}-v{v}", n, h, v)


def parse_rows(text):
    try:
        rows = {int(x) for x in text.split(",")}
    except ValueError:
        raise argparse.ArgumentTypeError(f"--rows: expected row counts separated by commas (e.g. 256,333), got {text!r}")
    if min(rows) < 1:
        raise argparse.ArgumentTypeError(f"--rows: expected positive row counts, got {text!r}")
    return rows


def load_points(path, rows=None):
    """The shapes of a sweep's points (`shardjit-bench linear-logp --sweep --dry-run` rows, or
    its timed rows): one per head, N and dtype (a point's modes are timed together here); with
    `rows`, only the points of those row counts."""
    shapes = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                shape = Shape(f"{row['head']}-n{row['n']}", int(row["n"]), int(row["hidden"]), int(row["vocab"]),
                              row["dtype"], int(row.get("valid_vocab", 0)))
            except (ValueError, KeyError, TypeError) as error:
                raise SystemExit(f"torch_compare: {path}:{number}: expected a sweep point (head, n, hidden, vocab, "
                                 f"dtype), got {line.strip()[:80]!r} ({error})")
            if shape.dtype not in DTYPES:
                raise SystemExit(f"torch_compare: {path}:{number}: dtype {shape.dtype!r}: expected one of "
                                 f"{', '.join(DTYPES)}")
            if rows is None or shape.n in rows:
                shapes.setdefault((shape.name, shape.dtype), shape)
    if not shapes:
        # An empty list would time nothing and look like a finished run.
        of_rows = f" of {', '.join(str(n) for n in sorted(rows))} rows" if rows is not None else ""
        raise SystemExit(f"torch_compare: {path}: no sweep points{of_rows} (expected the JSON rows of "
                         f"shardjit-bench linear-logp --sweep --dry-run)")
    return list(shapes.values())


def make_inputs(n, h, v, copies, seed, dtype=torch.bfloat16, valid_vocab=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    sets = []
    for _ in range(copies):
        hidden = (torch.randn(n, h, generator=g, device="cuda") * 0.5).to(dtype)
        weight = (torch.randn(v, h, generator=g, device="cuda") * 0.02).to(dtype)
        targets = torch.randint(0, valid_vocab or v, (n,), generator=g, device="cuda")
        sets.append((hidden, weight, targets))
    return sets


def torch_logp(hidden, weight, targets, entropy, valid_vocab=0):
    logits = (hidden @ weight.T).float()
    if valid_vocab:
        logits = logits[:, :valid_vocab]  # the padding rows' logits are computed, then left out
    logprobs = torch.log_softmax(logits, dim=-1)
    logp = logprobs.gather(1, targets.view(-1, 1)).squeeze(1)
    if not entropy:
        return logp, None
    return logp, -(logprobs.exp() * logprobs).sum(dim=-1)


def shardjit_logp(hidden, weight, targets, entropy, valid_vocab=0):
    if entropy:
        return sjt.linear_logp(hidden, weight, targets, return_entropy=True, valid_vocab=valid_vocab or None)
    return sjt.linear_logp(hidden, weight, targets, valid_vocab=valid_vocab or None), None


def variants(entropy_cases, valid_vocab=0):
    """name -> fn(hidden, weight, targets): one call of what is timed."""
    def gemm(x, w, t):
        with torch.no_grad():
            return torch.matmul(x, w.T)

    out = {"gemm": gemm}

    def forward(impl, entropy):
        def run(x, w, t):
            with torch.no_grad():
                return impl(x, w, t, entropy, valid_vocab)
        return run

    def train(impl, entropy):
        def run(x, w, t):
            x.grad = w.grad = None
            logp, ent = impl(x, w, t, entropy, valid_vocab)
            loss = logp.sum() if ent is None else logp.sum() + 0.01 * ent.sum()
            loss.backward()
        return run

    for label, impl in (("shardjit", shardjit_logp), ("torch", torch_logp)):
        out[f"{label} fwd"] = forward(impl, False)
        for entropy in entropy_cases:
            tag = " +entropy" if entropy else ""
            if entropy:
                out[f"{label} fwd{tag}"] = forward(impl, True)
            out[f"{label} fwd+bwd{tag}"] = train(impl, entropy)
    return out


def time_call(fn, inputs, index):
    x, w, t = inputs[index % len(inputs)]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn(x, w, t)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3  # us


def peak_extra_bytes(fn, inputs):
    """Peak memory of one call beyond its inputs and the gradients it leaves (which every
    trainer holds anyway)."""
    x, w, t = inputs[0]
    torch.cuda.synchronize()
    free_before, reserved_before = torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()
    fn(x, w, t)  # warm: the op exists and its buffers are sized, as in a training loop
    torch.cuda.synchronize()
    # shardjit's ops keep their workspace in memory of their own, which torch's counters do not
    # see: what the device lost beyond torch's reserve growth.
    outside_torch = max(0, (free_before - torch.cuda.mem_get_info()[0])
                        - (torch.cuda.memory_reserved() - reserved_before))
    x.grad = w.grad = None
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn(x, w, t)
    torch.cuda.synchronize()
    gradients = sum(g.numel() * g.element_size() for g in (x.grad, w.grad) if g is not None)
    return torch.cuda.max_memory_allocated() - before - gradients + outside_torch


def bench_shape(shape, rounds, warmup, entropy_cases, skip_torch):
    name, n, h, v = shape.name, shape.n, shape.hidden, shape.vocab
    dtype = DTYPES[shape.dtype]
    per_set = (n * h + v * h) * torch.empty(0, dtype=dtype).element_size()
    copies = max(2, -(-2 * L2_BYTES // per_set))
    inputs = make_inputs(n, h, v, min(copies, 4), seed=n + h + v, dtype=dtype, valid_vocab=shape.valid_vocab)
    for x, w, _ in inputs:
        x.requires_grad_()
        w.requires_grad_()
    runs = {k: f for k, f in variants(entropy_cases, shape.valid_vocab).items()
            if not (skip_torch and k.startswith("torch"))}
    times = {k: [] for k in runs}
    memory = {}
    for k, fn in runs.items():
        try:
            memory[k] = peak_extra_bytes(fn, inputs)
            for i in range(warmup):
                time_call(fn, inputs, i)
        except torch.OutOfMemoryError:
            times.pop(k)
            memory[k] = None
            torch.cuda.empty_cache()
    for r in range(rounds):
        for k in times:  # interleaved: every variant once per round
            times[k].append(time_call(runs[k], inputs, r))
    gemm = statistics.median(times["gemm"])
    rows = []
    for k in runs:
        median = statistics.median(times[k]) if k in times else None
        torch_twin = k.replace("shardjit", "torch") if k.startswith("shardjit") else None
        twin = statistics.median(times[torch_twin]) if torch_twin in times else None
        rows.append({
            "shape": name, "n": n, "hidden": h, "vocab": v, "valid_vocab": shape.valid_vocab, "dtype": shape.dtype,
            "variant": k,
            "median_us": median, "over_gemm": None if median is None else median / gemm,
            "over_torch": None if median is None or twin is None else median / twin,
            "peak_extra_gib": None if memory[k] is None else memory[k] / 2**30,
            "rounds": rounds, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "status": "ok" if median is not None else "out of memory",
        })
    return rows


def host_us_per_call(fn, calls, warmup=50, with_drain=False):
    """Host time of one call of `fn` in microseconds: `calls` calls after `warmup`, the GPU
    drained before and after so that only the enqueueing is timed. With `with_drain`, also the
    time per call until the GPU has finished them: about the same as the host time where the GPU
    was the bound (the host then waits for room in the launch queue), which the caller reports."""
    import time

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    drained = time.perf_counter() - start
    host_us = elapsed / calls * 1e6
    return (host_us, drained / calls * 1e6) if with_drain else host_us


def host_overhead(calls=500, rounds=9, n=16, h=64, v=1024):
    """Host time per call, µs: "host_us_op_at" (the op's forward with device addresses and
    preallocated outputs: the C++ op behind one binding call), "host_us_op_forward" (the same
    through DLPack tensors), "host_us_python_call" (shardjit.torch.linear_logp, no gradient),
    "host_us_python_training_call" (its forward with a weight that needs a gradient),
    "host_us_added" (the Python call over the op at addresses), and "host_us_training_step" and
    "host_us_torch_training_step" (a training step of logp: forward, sum, backward, gradients of
    hidden and weight; shardjit's and PyTorch's with materialized logits: at decode sizes the GPU
    waits on this host time between the forward and the backward). Each is the median over `rounds`
    rounds of `calls` calls, the calls interleaved round by round so that the host's drift
    (clocks, other processes) hits every one alike. "gpu_us_*": the same calls' time until the GPU
    finished them (about the host's where the GPU was the bound)."""
    import shardjit
    from shardjit import _op_cache

    hidden, weight, targets = make_inputs(n, h, v, 1, seed=7)[0]
    trained = weight.clone().requires_grad_()
    step_hidden = hidden.clone().requires_grad_()
    op = shardjit.LinearLogp(_op_cache.runtime(), hidden=h, vocab_local=v, dtype="bf16")
    logp = torch.empty(n, device="cuda")
    lse = torch.empty(n, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    addresses = (hidden.data_ptr(), weight.data_ptr(), targets.data_ptr(), logp.data_ptr(), lse.data_ptr())

    def train_step(impl):
        step_hidden.grad = trained.grad = None
        impl(step_hidden, trained, targets, False)[0].sum().backward()

    calls_by_name = {
        "op_at": lambda: op._forward_at(n, *addresses, 0, 0, stream),
        "op_forward": lambda: op.forward(hidden, weight, targets, logp, lse=lse, stream=stream),
        "python_call": lambda: sjt.linear_logp(hidden, weight, targets),
        "python_training_call": lambda: sjt.linear_logp(hidden, trained, targets),
        "training_step": lambda: train_step(shardjit_logp),
        "torch_training_step": lambda: train_step(torch_logp),
    }
    samples = {name: ([], []) for name in calls_by_name}
    for _ in range(rounds):
        for name, fn in calls_by_name.items():
            grad = torch.enable_grad() if "training" in name else torch.no_grad()
            with grad:
                host_us, gpu_us = host_us_per_call(fn, calls, with_drain=True)
            samples[name][0].append(host_us)
            samples[name][1].append(gpu_us)
    result = {}
    for name, (host, gpu) in samples.items():
        result["host_us_" + name] = statistics.median(host)
        result["gpu_us_" + name] = statistics.median(gpu)
    op.close()
    result["host_us_added"] = result["host_us_python_call"] - result["host_us_op_at"]
    result.update({"variant": "host overhead", "n": n, "hidden": h, "vocab": v, "calls": calls, "rounds": rounds,
                   "device": torch.cuda.get_device_name(), "torch": torch.__version__})
    return result


def write_rows(rows_of_shapes, path=None, show=None):
    """Each shape's rows as JSON lines to stdout and, where `path` is given, appended to that file
    (`show(row)` first, where given); after each shape the op cache and CUDA's cached memory are
    let go, so that one shape's buffers do not crowd the next. Returns every row written."""
    out = open(path, "a") if path else None
    written = []
    try:
        for rows in rows_of_shapes:
            written += rows
            for row in rows:
                if show:
                    show(row)
                line = json.dumps(row)
                print(line, flush=True)
                if out:
                    out.write(line + "\n")
                    out.flush()
            sjt.clear_op_cache()
            torch.cuda.empty_cache()
    finally:
        if out:
            out.close()
    return written


def summary_lines(rows, worst=10):
    """Per shardjit variant, against PyTorch's same variant: how many shapes were compared, the
    median and largest of shardjit's time over PyTorch's, and the shapes where shardjit is not
    faster (worst first, at most `worst` of them), with both times over the GEMM's and both extra
    memories. Shapes where PyTorch ran out of memory are counted apart."""
    lines = []
    by_variant = collections.defaultdict(list)
    for row in rows:
        if row.get("variant", "").startswith("shardjit"):
            by_variant[row["variant"]].append(row)
    # (The host-overhead row names no shape.)
    twins = {(row["shape"], row["dtype"], row["variant"]): row for row in rows if "shape" in row}
    for variant, own in by_variant.items():
        compared = [row for row in own if row["over_torch"] is not None]
        unmatched = len(own) - len(compared)
        if not compared:
            continue
        ratios = [row["over_torch"] for row in compared]
        slower = sorted((row for row in compared if row["over_torch"] >= 1.0), key=lambda row: -row["over_torch"])
        shapes = "1 shape" if len(compared) == 1 else f"{len(compared)} shapes"
        lines.append(f"{variant} over PyTorch's: {shapes}, median {statistics.median(ratios):.3f}, "
                     f"max {max(ratios):.3f}; not faster at {len(slower)}"
                     + (f"; {unmatched} without a PyTorch time (out of memory)" if unmatched else ""))
        for row in slower[:worst]:
            twin = twins.get((row["shape"], row["dtype"], variant.replace("shardjit", "torch")), {})
            lines.append(f"  {row['over_torch']:.3f}  {row['shape']} {row['dtype']} (N {row['n']}, H {row['hidden']}, "
                         f"V {row['vocab']}): {row['over_gemm']:.2f} x GEMM against {twin.get('over_gemm', 0):.2f}, "
                         f"extra {row['peak_extra_gib']:.2f} against {twin.get('peak_extra_gib') or 0:.2f} GiB")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", type=parse_shape, default=[],
                        help="N,H,V (repeatable); without it or --points, the standard shapes of shapes.json")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16", help="the dtype of --shape and the "
                        "standard shapes")
    parser.add_argument("--points", help="the points of a sweep: the JSON rows of shardjit-bench linear-logp --sweep "
                        "(--dry-run lists them), each head, N and dtype once")
    parser.add_argument("--rows", type=parse_rows, help="with --points: only the points of these row counts "
                        "(comma-separated, e.g. 256,333)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--entropy", choices=["off", "on", "both"], default="both")
    parser.add_argument("--skip-torch", action="store_true", help="leave out the materialized-logits baseline")
    parser.add_argument("--out", help="also append the JSON lines to this file")
    parser.add_argument("--worst", type=nonnegative_int, default=10, help="shapes listed per variant where shardjit is "
                        "not faster than PyTorch (the summary on stderr)")
    parser.add_argument("--no-host-overhead", dest="host_overhead", action="store_false",
                        help="leave out the host-time measurement")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("torch_compare: needs a CUDA device")
    entropy_cases = {"off": [False], "on": [True], "both": [False, True]}[args.entropy]
    shapes = [shape._replace(dtype=args.dtype) for shape in (args.shape or ([] if args.points else standard_shapes()))]
    if args.rows is not None and not args.points:
        parser.error("--rows selects among --points; give the points too")
    if args.points:
        shapes += load_points(args.points, args.rows)
    rows_of_shapes = (bench_shape(shape, args.rounds, args.warmup, entropy_cases, args.skip_torch) for shape in shapes)
    if args.host_overhead:
        rows_of_shapes = itertools.chain([[host_overhead()]], rows_of_shapes)
    rows = write_rows(rows_of_shapes, args.out)
    # The summary goes to stderr: stdout stays JSON lines.
    for line in summary_lines(rows, args.worst):
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
