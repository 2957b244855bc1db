"""gpu tier: the cross-GPU API on one GPU, a communicator of one rank (the NCCL path): the
reduce-scatter of one rank is a copy, the MoE combine against a PyTorch reference, and the
tensor-parallel LinearLogp of one rank against the single-GPU op; the communicator's set_timeout
and abort; close() and `with` on every class; read-only outputs refused. Skipped without PyTorch
or a CUDA device. The C++ multigpu tier runs the same ops on two GPUs, and
test_collectives_two_gpus.py runs them from Python on two GPUs (and shows that closing waits for
the peer with the GIL released)."""

import pytest

import shardjit
from conftest import has_gpu

pytestmark = pytest.mark.skipif(not has_gpu(), reason="needs PyTorch and a CUDA device")


def new_comm(runtime):
    return shardjit.Communicator(runtime, 0, 0, 1, shardjit.Communicator.new_unique_id(), timeout_seconds=60)


@pytest.fixture
def comm(runtime):
    return new_comm(runtime)


def test_reduce_scatter_of_one_rank_is_a_copy(runtime, comm):
    import torch

    op = shardjit.ReduceScatter(runtime, comm, hidden=256, rows_per_rank=[33], dtype="bf16")
    assert op.path == "nccl"
    x = torch.randn(33, 256, device="cuda").to(torch.bfloat16)
    out = torch.full_like(x, float("nan"))
    stream = torch.cuda.current_stream().cuda_stream
    op.run(x, out, stream=stream)
    op.check(stream=stream)
    assert torch.equal(out, x)


def test_moe_combine_with_gates(runtime, comm):
    import torch

    capacity, hidden, tokens = 40, 128, 50
    op = shardjit.MoeCombine(runtime, comm, hidden=hidden, capacity=capacity, dtype="fp32", gates=True)
    g = torch.Generator(device="cpu").manual_seed(3)
    rows = torch.randn(30, hidden, generator=g).cuda()
    positions = torch.randint(0, 30, (tokens, 1), generator=g, dtype=torch.int32)
    positions[::4] = -1
    gates = torch.rand(tokens, 1, generator=g)
    out = torch.full((tokens, hidden), float("nan"), device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    op.run(rows, positions.cuda(), out, gates=gates.cuda(), stream=stream)
    assert op.check(stream=stream)["bad_positions"] == 0
    picked = rows.cpu()[positions.clamp(min=0).long().squeeze(1)] * gates
    picked[positions.squeeze(1) < 0] = 0
    torch.testing.assert_close(out.cpu(), picked, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="gates"):
        op.run(rows, positions.cuda(), out, stream=stream)


def test_tensor_parallel_op_of_one_rank_matches_the_single_gpu_op(runtime, comm):
    import torch

    n, h, v = 41, 64, 300
    g = torch.Generator(device="cpu").manual_seed(5)
    hidden = torch.randn(n, h, generator=g).to("cuda", torch.bfloat16)
    weight = (torch.randn(v, h, generator=g) * 0.5).to("cuda", torch.bfloat16)
    targets = torch.randint(0, v, (n,), generator=g).cuda()
    stream = torch.cuda.current_stream().cuda_stream
    results = []
    for op in (
        shardjit.LinearLogp(runtime, hidden=h, vocab_local=v, dtype="bf16"),
        shardjit.LinearLogp(runtime, comm, hidden=h, vocab_local=v, vocab_global=v, dtype="bf16"),
    ):
        logp = torch.empty(n, device="cuda")
        lse = torch.empty(n, device="cuda")
        op.forward(hidden, weight, targets, logp, lse=lse, stream=stream)
        op.check(stream=stream)
        results.append((logp, lse))
    # Not bit for bit: a single-GPU op on the Hopper loop runs a call of one row tile in its narrow
    # tiles (fwd.hpp, other_tile_pays), whose tile sums round apart from the wide tiles' that
    # tensor parallelism runs (the two-GPU tests compare a TP op with it at the same tolerance).
    torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(results[1][1], results[0][1], rtol=1e-5, atol=1e-5)


def test_set_timeout_checks_its_argument_as_the_constructor_does(comm):
    comm.set_timeout(0.5)
    comm.set_timeout(3600)
    expected = r"^seconds: expected a positive number of seconds, at most 31536000 \(a year\)$"
    for bad in (0.0, -1.0, float("nan"), 1e300):
        with pytest.raises(ValueError, match=expected):
            comm.set_timeout(bad)
    assert not comm.aborted


def test_abort_makes_the_ops_on_the_communicator_raise(runtime, comm):
    import torch

    op = shardjit.ReduceScatter(runtime, comm, hidden=256, rows_per_rank=[8], dtype="fp32")
    x = torch.randn(8, 256, device="cuda")
    out = torch.empty_like(x)
    op.run(x, out)
    op.check()
    assert comm.aborted is False
    comm.abort()
    assert comm.aborted is True
    comm.abort()  # nothing left to abort
    with pytest.raises(shardjit.ShardjitError, match="aborted by the caller") as caught:
        op.run(x, out)
    assert caught.value.code == "comm_error"


def test_close_is_idempotent_and_later_calls_raise(runtime, comm):
    import torch

    x = torch.randn(8, 256, device="cuda")
    out = torch.empty_like(x)
    cases = [
        ("ReduceScatter", shardjit.ReduceScatter(runtime, comm, hidden=256, rows_per_rank=[8], dtype="fp32"),
         lambda op: op.run(x, out), lambda op: op.path),
        ("MoeCombine", shardjit.MoeCombine(runtime, comm, hidden=256, capacity=8, dtype="fp32"),
         lambda op: op.check(), lambda op: op.path),
        ("LinearLogp", shardjit.LinearLogp(runtime, comm, hidden=64, vocab_local=300, vocab_global=300, dtype="bf16"),
         lambda op: op.check(), lambda op: op.config),
    ]
    for name, op, call, read in cases:
        assert op.closed is False
        call(op)
        read(op)
        op.close()
        assert op.closed is True
        op.close()
        for touch in (call, read):
            with pytest.raises(ValueError, match=f"^{name}: closed$"):
                touch(op)


def test_an_op_keeps_its_communicator_after_the_communicator_is_closed(runtime):
    import torch

    comm = new_comm(runtime)
    op = shardjit.ReduceScatter(runtime, comm, hidden=256, rows_per_rank=[8], dtype="fp32")
    comm.close()
    assert comm.closed is True
    for touch in (lambda: comm.rank, lambda: comm.aborted, lambda: comm.set_timeout(1.0), comm.abort,
                  lambda: shardjit.ReduceScatter(runtime, comm, hidden=256, rows_per_rank=[8])):
        with pytest.raises(ValueError, match="^Communicator: closed$"):
            touch()
    # The op still holds the NCCL communicator, and runs on it; closing the op, the last holder,
    # destroys it.
    x = torch.randn(8, 256, device="cuda")
    out = torch.full_like(x, float("nan"))
    op.run(x, out)
    op.check()
    assert torch.equal(out, x)
    op.close()


def test_with_closes_at_the_end_of_the_block(runtime):
    import torch

    comm = new_comm(runtime)
    with comm as entered:
        assert entered is comm
        with shardjit.ReduceScatter(runtime, comm, hidden=256, rows_per_rank=[8], dtype="fp32") as op:
            x = torch.randn(8, 256, device="cuda")
            out = torch.empty_like(x)
            op.run(x, out)
            op.check()
        assert op.closed and not comm.closed
        # An exception of the block goes on, and the op is closed all the same.
        with pytest.raises(RuntimeError, match="^raised in the block$"):
            with shardjit.MoeCombine(runtime, comm, hidden=256, capacity=8, dtype="fp32") as moe:
                raise RuntimeError("raised in the block")
        assert moe.closed
    assert comm.closed


def test_a_read_only_output_is_refused(runtime, comm):
    import torch
    np = pytest.importorskip("numpy")

    frozen = np.zeros((8, 256), dtype=np.float32)
    frozen.flags.writeable = False
    x = torch.zeros(8, 256, device="cuda")
    positions = torch.zeros(8, 1, dtype=torch.int32, device="cuda")
    rs = shardjit.ReduceScatter(runtime, comm, hidden=256, rows_per_rank=[8], dtype="fp32")
    moe = shardjit.MoeCombine(runtime, comm, hidden=256, capacity=8, dtype="fp32")
    with pytest.raises(ValueError, match="^output: expected a writable tensor, got a read-only one$"):
        rs.run(x, frozen)
    with pytest.raises(ValueError, match="^output: expected a writable tensor, got a read-only one$"):
        moe.run(x, positions, frozen)
