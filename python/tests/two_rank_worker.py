"""One rank of test_collectives_two_gpus.py: joins a communicator of two ranks on CUDA device <rank>
and checks ReduceScatter, MoeCombine and the tensor-parallel LinearLogp against float64 PyTorch
references computed on the CPU, then that destroying a peer-path op waits for the peer with the GIL
released. Run as

    python3 two_rank_worker.py <rank> <unique_id_hex> <cache_dir>

by the test, once per rank, at the same time. Not a test module itself (pytest does not collect it).
Prints one line per passed case; exits 0 when every case passed, 1 (with each failed case named on
stderr) when a comparison failed; any other error is an uncaught exception (traceback, exit 1)."""

import sys
import threading
import time
import traceback

import torch

import shardjit

WORLD = 2
# Bounds every host-side wait on the peer. Building an op is collective, so a first-time kernel
# compile on one rank keeps the other waiting in the build exchange; generous for that, but well
# under the test's own timeout, so that a dead peer ends this worker with an error, not a kill.
COMM_TIMEOUT_S = 180

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def generator(seed):
    return torch.Generator(device="cpu").manual_seed(seed)


class Rank:
    """What every case needs: the rank, its device and stream, the runtime and communicator."""

    def __init__(self, rank, unique_id, cache_dir):
        self.rank = rank
        self.device = f"cuda:{rank}"
        torch.cuda.set_device(rank)
        # The ops run on PyTorch's current stream, so they are ordered with the copies that
        # fill their inputs and the ones that read their outputs back.
        self.stream = torch.cuda.current_stream(rank).cuda_stream
        self.runtime = shardjit.Runtime(cache_dir=cache_dir)
        self.comm = shardjit.Communicator(self.runtime, rank, rank, WORLD, unique_id,
                                          timeout_seconds=COMM_TIMEOUT_S)
        self.failed = []

    def report(self, name, compare):
        """Runs compare() (the assertions of one case, on CPU results) and prints the outcome. A
        failed comparison is recorded rather than raised: every collective of the case has already
        run, so this rank stays in step with its peer for the remaining cases."""
        try:
            compare()
        except AssertionError:
            print(f"rank {self.rank}: {name} FAILED", file=sys.stderr, flush=True)
            traceback.print_exc()
            self.failed.append(name)
        else:
            print(f"rank {self.rank}: {name} ok", flush=True)


# ReduceScatter ----------------------------------------------------------------------------------

RS_HIDDEN = 256
RS_ROWS = [33, 20]  # uneven blocks, neither a multiple of 8


def rs_input(source, dtype):
    """Rank `source`'s input [sum(RS_ROWS), H], rounded to the dtype (on the CPU): every rank can
    make every rank's input, which the reference needs."""
    g = generator(1000 + 10 * source + list(DTYPES).index(dtype))
    return torch.randn(sum(RS_ROWS), RS_HIDDEN, generator=g).to(DTYPES[dtype])


def run_reduce_scatter(ctx, dtype, path):
    """The collective half of a case; the op is destroyed on return, at the same point on both
    ranks (destruction is collective)."""
    op = shardjit.ReduceScatter(ctx.runtime, ctx.comm, hidden=RS_HIDDEN, rows_per_rank=RS_ROWS, dtype=dtype,
                                path=path)
    x = rs_input(ctx.rank, dtype).to(ctx.device)
    # NaN, so that a row the op never writes cannot pass for a result.
    out = torch.full((RS_ROWS[ctx.rank], RS_HIDDEN), float("nan"), dtype=DTYPES[dtype], device=ctx.device)
    op.run(x, out, stream=ctx.stream)
    op.check(stream=ctx.stream)
    return op.path, out.cpu()


def reduce_scatter_cases(ctx):
    start = sum(RS_ROWS[:ctx.rank])
    block = slice(start, start + RS_ROWS[ctx.rank])
    for dtype in ("bf16", "fp32"):
        # The sum, in float64, of the inputs as the ranks hold them (already rounded to the dtype).
        ref = sum(rs_input(s, dtype)[block].double() for s in range(WORLD))
        # fp32: the sum of two terms in fp32 is within an ulp. bf16: the NCCL path sums in bf16
        # and the peer path rounds its fp32 sum to bf16, both within bf16's 2^-8 of the sum.
        tol = 1e-5 if dtype == "fp32" else 1e-2
        for path in ("auto", "nccl"):
            chosen, out = run_reduce_scatter(ctx, dtype, path)

            def compare():
                if path == "nccl":
                    assert chosen == "nccl", f"path='nccl' ran {chosen!r}"
                assert chosen in ("peer", "nccl"), chosen
                torch.testing.assert_close(out.double(), ref, rtol=tol, atol=tol)

            ctx.report(f"reduce_scatter {dtype} {path} (path {chosen})", compare)


# MoeCombine -------------------------------------------------------------------------------------

MOE_HIDDEN = 128
MOE_CAPACITY = 40
MOE_ROWS = 30    # rows each rank passes (R <= capacity), the same on both ranks
MOE_TOKENS = 50  # tokens each rank owns


def moe_rows(source, dtype):
    """Rank `source`'s expert-output rows [R, H] in the dtype: every rank makes every rank's rows."""
    g = generator(2000 + 10 * source + list(DTYPES).index(dtype))
    return torch.randn(MOE_ROWS, MOE_HIDDEN, generator=g).to(DTYPES[dtype])


def moe_routing(owner):
    """Positions int32 [tokens, world] and gates fp32 [tokens, world] of the tokens rank `owner` owns."""
    g = generator(3000 + owner)
    positions = torch.randint(0, MOE_ROWS, (MOE_TOKENS, WORLD), generator=g, dtype=torch.int32)
    positions[torch.rand(MOE_TOKENS, WORLD, generator=g) < 0.25] = -1  # about a quarter not routed
    positions[0, :] = -1  # a token routed nowhere: its output must be zeros
    positions[1, :] = torch.tensor([MOE_ROWS - 1, 0], dtype=torch.int32)  # both sources, the edge rows
    gates = torch.rand(MOE_TOKENS, WORLD, generator=g) * 0.9 + 0.1  # no zero gates
    return positions, gates


def moe_reference(rank, dtype, with_gates):
    positions, gates = moe_routing(rank)
    ref = torch.zeros(MOE_TOKENS, MOE_HIDDEN, dtype=torch.float64)
    for s in range(WORLD):
        routed = positions[:, s] >= 0
        picked = moe_rows(s, dtype).double()[positions[routed, s].long()]
        if with_gates:
            picked = picked * gates[routed, s].double().unsqueeze(1)
        ref[routed] += picked
    return ref


def run_moe_combine(ctx, dtype, with_gates, path):
    op = shardjit.MoeCombine(ctx.runtime, ctx.comm, hidden=MOE_HIDDEN, capacity=MOE_CAPACITY, dtype=dtype,
                             gates=with_gates, path=path)
    rows = moe_rows(ctx.rank, dtype).to(ctx.device)
    positions, gates = moe_routing(ctx.rank)
    out = torch.full((MOE_TOKENS, MOE_HIDDEN), float("nan"), dtype=DTYPES[dtype], device=ctx.device)
    op.run(rows, positions.to(ctx.device), out, gates=gates.to(ctx.device) if with_gates else None,
           stream=ctx.stream)
    bad = op.check(stream=ctx.stream)["bad_positions"]
    return op.path, bad, out.cpu()


def moe_combine_cases(ctx):
    # fp32 with gates: fp32 accumulation of at most two terms. bf16 without: the output is rounded
    # to bf16 (2^-8 relative).
    for dtype, with_gates, tol in (("fp32", True, 1e-5), ("bf16", False, 2e-2)):
        ref = moe_reference(ctx.rank, dtype, with_gates)
        for path in ("auto", "nccl"):
            chosen, bad, out = run_moe_combine(ctx, dtype, with_gates, path)

            def compare():
                if path == "nccl":
                    assert chosen == "nccl", f"path='nccl' ran {chosen!r}"
                assert bad == 0, f"check() reported {bad} bad positions"
                torch.testing.assert_close(out.double(), ref, rtol=tol, atol=tol)

            gates_name = "gates" if with_gates else "no gates"
            ctx.report(f"moe_combine {dtype} {gates_name} {path} (path {chosen})", compare)


# Tensor-parallel LinearLogp ---------------------------------------------------------------------

TP_N, TP_H, TP_V = 41, 64, 600
TP_VL = TP_V // WORLD


def tp_problem():
    """hidden [N, H] and the global weight [V, H] in bf16, targets int64 [N], grad_logp fp32 [N]: the
    same on both ranks (the TP op needs the same hidden and targets on every rank)."""
    g = generator(4000)
    hidden = torch.randn(TP_N, TP_H, generator=g).to(torch.bfloat16)
    weight = (torch.randn(TP_V, TP_H, generator=g) * 0.5).to(torch.bfloat16)
    targets = torch.randint(0, TP_V, (TP_N,), generator=g)
    # At least one target in each rank's shard, so both ranks' picked logits are used.
    targets[0] = targets[0] % TP_VL
    targets[1] = TP_VL + targets[1] % TP_VL
    grad_logp = torch.randn(TP_N, generator=g)
    return hidden, weight, targets, grad_logp


def tp_reference(hidden, weight, targets, grad_logp):
    """float64, from the bf16-rounded inputs: logp, lse, grad_hidden, grad_weight (the whole vocabulary)."""
    x, w = hidden.double(), weight.double()
    z = x @ w.T
    lse = torch.logsumexp(z, dim=1)
    logp = z.gather(1, targets.view(-1, 1)).squeeze(1) - lse
    onehot = torch.nn.functional.one_hot(targets, TP_V).double()
    dz = grad_logp.double().unsqueeze(1) * (onehot - torch.softmax(z, dim=1))
    return logp, lse, dz @ w, dz.T @ x


def run_linear_logp(ctx, hidden, weight, targets, grad_logp, max_rows):
    start = ctx.rank * TP_VL
    # max_rows set: the forward's combine reads the peer's partials over NVLink (where the GPUs
    # have it); unset: it all-gathers them through NCCL.
    extra = {} if max_rows is None else {"max_rows": max_rows}
    # No device given: a tensor-parallel op runs on its communicator's GPU (rank 1's is GPU 1).
    op = shardjit.LinearLogp(ctx.runtime, ctx.comm, hidden=TP_H, vocab_start=start, vocab_local=TP_VL,
                             vocab_global=TP_V, dtype="bf16", want_backward=True, **extra)
    assert op.config["device"] == ctx.rank, op.config
    d = ctx.device
    x, t, g = hidden.to(d), targets.to(d), grad_logp.to(d)
    w = weight[start:start + TP_VL].contiguous().to(d)
    nan = float("nan")
    logp = torch.full((TP_N,), nan, device=d)
    lse = torch.full((TP_N,), nan, device=d)
    grad_hidden = torch.full((TP_N, TP_H), nan, dtype=torch.bfloat16, device=d)
    grad_weight = torch.full((TP_VL, TP_H), nan, dtype=torch.bfloat16, device=d)
    op.forward(x, w, t, logp, lse=lse, stream=ctx.stream)
    bad_forward = op.check(stream=ctx.stream)["bad_rows"]
    op.backward(x, w, t, lse, grad_hidden, grad_logp=g, grad_weight=grad_weight, stream=ctx.stream)
    bad_backward = op.check(stream=ctx.stream)["bad_rows"]
    return bad_forward, bad_backward, logp.cpu(), lse.cpu(), grad_hidden.cpu(), grad_weight.cpu()


def linear_logp_cases(ctx):
    hidden, weight, targets, grad_logp = tp_problem()
    ref_logp, ref_lse, ref_grad_hidden, ref_grad_weight = tp_reference(hidden, weight, targets, grad_logp)
    start = ctx.rank * TP_VL
    for max_rows, combine in ((None, "all-gather"), (TP_N, "peer partials")):
        outputs = run_linear_logp(ctx, hidden, weight, targets, grad_logp, max_rows)
        linear_logp_compare(ctx, combine, start, outputs, ref_logp, ref_lse, ref_grad_hidden, ref_grad_weight)


def linear_logp_compare(ctx, combine, start, outputs, ref_logp, ref_lse, ref_grad_hidden, ref_grad_weight):
    bad_forward, bad_backward, logp, lse, grad_hidden, grad_weight = outputs

    def compare_forward():
        assert bad_forward == 0, f"check() after forward reported {bad_forward} bad rows"
        # bf16 inputs, fp32 accumulation.
        torch.testing.assert_close(logp.double(), ref_logp, rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(lse.double(), ref_lse, rtol=2e-2, atol=2e-2)

    def compare_backward():
        assert bad_backward == 0, f"check() after backward reported {bad_backward} bad rows"
        # The logit gradient dZ is kept in bf16 between the kernels and both gradients are rounded
        # to bf16. grad_hidden is all-reduced: the whole gradient, on every rank.
        torch.testing.assert_close(grad_hidden.double(), ref_grad_hidden, rtol=5e-2, atol=5e-2)
        torch.testing.assert_close(grad_weight.double(), ref_grad_weight[start:start + TP_VL], rtol=5e-2,
                                   atol=5e-2)

    ctx.report(f"linear_logp tp bf16 forward ({combine})", compare_forward)
    ctx.report(f"linear_logp tp bf16 backward ({combine})", compare_backward)


# Destroying an op on the peer path -------------------------------------------------------------

# How long rank 1 waits before it destroys the op, keeping rank 0 waiting in its destruction.
PEER_DELAY_S = 2.0


def ticks_during(fn):
    """Runs fn() and returns (seconds it took, ticks another thread made meanwhile): a thread can
    tick only while fn lets go of the GIL."""
    stop, ticking = threading.Event(), threading.Event()
    ticks = [0]

    def tick():
        ticking.set()
        while not stop.wait(0.005):
            ticks[0] += 1

    ticker = threading.Thread(target=tick)
    ticker.start()
    ticking.wait()
    before, start = ticks[0], time.monotonic()
    try:
        fn()
    finally:
        elapsed, during = time.monotonic() - start, ticks[0] - before
        stop.set()
        ticker.join()
    return elapsed, during


def destroy_cases(ctx):
    """close(), and the destruction when the last reference goes, wait for the peer (destruction
    is collective on the peer path) with the GIL released: rank 1 destroys the op PEER_DELAY_S
    late, and a thread of rank 0 keeps running while rank 0 waits for it."""
    for how in ("close", "last reference"):
        held = [shardjit.ReduceScatter(ctx.runtime, ctx.comm, hidden=RS_HIDDEN, rows_per_rank=RS_ROWS, dtype="fp32")]
        path = held[0].path
        # Only a list holds the op, so that clearing it drops the last reference.
        destroy = held[0].close if how == "close" else held.clear
        if ctx.rank == 1:
            time.sleep(PEER_DELAY_S)
            destroy()
            continue
        elapsed, ticks = ticks_during(destroy)
        if path != "peer":
            # The NCCL path has no buffers to release, so its destruction does not wait.
            print(f"rank 0: destroy by {how} skipped: the op ran {path!r}", flush=True)
            continue

        def compare():
            assert elapsed >= PEER_DELAY_S / 2, f"the destruction took {elapsed:.3f} s: it did not wait for the peer"
            assert ticks >= 10, f"another thread ticked {ticks} times in {elapsed:.3f} s: the GIL was held"

        ctx.report(f"destroy by {how} waits without the GIL ({elapsed:.2f} s, {ticks} ticks)", compare)


def main(argv):
    if len(argv) != 4:
        print(f"usage: {argv[0]} <rank> <unique_id_hex> <cache_dir>", file=sys.stderr)
        return 2
    rank, unique_id, cache_dir = int(argv[1]), bytes.fromhex(argv[2]), argv[3]
    ctx = Rank(rank, unique_id, cache_dir)
    # The same cases in the same order on both ranks: building, running and destroying an op are
    # collective.
    reduce_scatter_cases(ctx)
    moe_combine_cases(ctx)
    linear_logp_cases(ctx)
    destroy_cases(ctx)
    torch.cuda.synchronize(rank)
    if ctx.failed:
        print(f"rank {rank}: {len(ctx.failed)} case(s) failed: {', '.join(ctx.failed)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
