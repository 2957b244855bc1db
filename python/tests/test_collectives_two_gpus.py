"""gpu tier: the cross-GPU API on two GPUs, a communicator of two ranks, one process per GPU as in
training: ReduceScatter with uneven blocks (bf16 and fp32; the path 'auto' picks, and NCCL), the MoE
combine (fp32 with gates, bf16 without; both paths) and the tensor-parallel LinearLogp with the
vocabulary split in two (forward with both combines, all-gathered and read from the peer, and
backward with its all-reduced grad_hidden), each rank against a float64 PyTorch reference, and the
destruction of a peer-path op (close() and the last reference) waiting for the peer with the GIL
released. The ranks are two_rank_worker.py, launched here. Also: an op refuses a tensor on the other
GPU. Skipped unless PyTorch sees two CUDA devices."""

import os

import pytest
from conftest import cuda_device_count, run_two_ranks

import shardjit

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "two_rank_worker.py")
# Both workers together, first-time kernel compiles included. A worker whose peer died ends on
# its own within the communicator's timeout (two_rank_worker.COMM_TIMEOUT_S), well before this.
TIMEOUT_S = 420


pytestmark = pytest.mark.skipif(cuda_device_count() < 2, reason="needs PyTorch and two CUDA devices")


def test_two_ranks_match_the_float64_references(tmp_path):
    # One group id for both ranks, made here as a launcher would (it needs NCCL, not a GPU).
    unique_id = shardjit.Communicator.new_unique_id()
    # Both ranks share one kernel cache: concurrent writers are safe, and the second rank may
    # load what the first compiled.
    cache_dir = str(tmp_path / "cache")
    # The default environment: the workers inherit PYTHONPATH, so they import this shardjit.
    run_two_ranks(tmp_path, WORKER, lambda rank: [str(rank), unique_id.hex(), cache_dir], TIMEOUT_S)


def test_a_tensor_on_another_gpu_is_refused(runtime):
    # The op runs on GPU 1; its kernels must not be handed GPU 0's memory.
    import torch
    op = shardjit.LinearLogp(runtime, hidden=64, vocab_local=300, dtype="fp32", device=1)
    x = torch.randn(4, 64, device="cuda:0")
    w = torch.randn(300, 64, device="cuda:1")
    t = torch.zeros(4, dtype=torch.int64, device="cuda:1")
    logp = torch.empty(4, device="cuda:1")
    with pytest.raises(ValueError, match=r"hidden: expected a tensor on CUDA device 1 \(the op's\), got one on CUDA device 0"):
        op.forward(x, w, t, logp)
