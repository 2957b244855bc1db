"""gpu tier: the cross-GPU API on one GPU, a communicator of one rank (the NCCL path): the
reduce-scatter of one rank is a copy, the MoE combine against a PyTorch reference, and the
tensor-parallel LinearLogp of one rank against the single-GPU op. Skipped without PyTorch or a
CUDA device. The C++ multigpu tier runs the same ops on two GPUs, and test_collectives_two_gpus.py
runs them from Python on two GPUs."""

import pytest

import shardjit
from conftest import has_gpu

pytestmark = pytest.mark.skipif(not has_gpu(), reason="needs PyTorch and a CUDA device")


@pytest.fixture
def comm(runtime):
    return shardjit.Communicator(runtime, 0, 0, 1, shardjit.Communicator.new_unique_id(), timeout_seconds=60)


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
    assert torch.equal(results[0][0], results[1][0])
    assert torch.equal(results[0][1], results[1][1])
