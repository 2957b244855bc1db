"""multigpu tier: shardjit.torch over an NCCL process group of two ranks (one process per GPU, as
torchrun starts them): the vocabulary-parallel linear_logp equals the single-GPU call, with and
without reduce_grad_hidden, and reduce_scatter / moe_combine match float64 sums. The ranks are
torch_tp_worker.py, launched here. Skipped unless PyTorch sees two CUDA devices."""

import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import cuda_device_count

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_tp_worker.py")
TIMEOUT_S = 420


pytestmark = pytest.mark.skipif(cuda_device_count() < 2, reason="needs PyTorch and two CUDA devices")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tensor_parallel_equals_single_gpu(tmp_path):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    procs, logs = [], []
    for rank in range(2):
        out_path, err_path = tmp_path / f"rank{rank}.out", tmp_path / f"rank{rank}.err"
        with open(out_path, "w") as out, open(err_path, "w") as err:
            procs.append(subprocess.Popen([sys.executable, WORKER, str(rank), str(tmp_path / "cache")],
                                          stdout=out, stderr=err, env=env))
        logs.append((out_path, err_path))
    deadline = time.monotonic() + TIMEOUT_S
    timed_out = False
    try:
        for proc in procs:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    report = "\n".join(f"--- rank {r}: exit code {p.returncode}\nstdout:\n{o.read_text()}\nstderr:\n{e.read_text()}"
                       for r, (p, (o, e)) in enumerate(zip(procs, logs)))
    assert not timed_out, f"the workers did not finish within {TIMEOUT_S} s (killed)\n{report}"
    assert [p.returncode for p in procs] == [0, 0], report
