"""multigpu tier: shardjit.torch over an NCCL process group of two ranks (one process per GPU, as
torchrun starts them): the vocabulary-parallel linear_logp equals the single-GPU call, with and
without reduce_grad_hidden, and reduce_scatter / moe_combine match float64 sums. The ranks are
torch_tp_worker.py, launched here. Skipped unless PyTorch sees two CUDA devices."""

import os
import socket

import pytest
from conftest import cuda_device_count, run_two_ranks

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_tp_worker.py")
TIMEOUT_S = 420


pytestmark = pytest.mark.skipif(cuda_device_count() < 2, reason="needs PyTorch and two CUDA devices")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tensor_parallel_equals_single_gpu(tmp_path):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    run_two_ranks(tmp_path, WORKER, lambda rank: [str(rank), str(tmp_path / "cache")], TIMEOUT_S, env)
