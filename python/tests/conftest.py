import importlib
import pathlib
import re
import subprocess
import sys
import time

import pytest

import shardjit


@pytest.fixture
def runtime(tmp_path):
    return shardjit.Runtime(cache_dir=str(tmp_path / "cache"))


BENCH_TOOLS = pathlib.Path(__file__).resolve().parents[2] / "tools" / "bench"


def bench_tool(name):
    """tools/bench/<name>.py as a module, imported with that folder on sys.path (the tools import
    one another by name)."""
    sys.path.insert(0, str(BENCH_TOOLS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH_TOOLS))


def has_gpu():
    """True when PyTorch is importable and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def cuda_device_count():
    """How many CUDA devices PyTorch sees; 0 without PyTorch."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def run_two_ranks(tmp_path, worker, args_of_rank, timeout_s, env=None):
    """Runs `worker` as ranks 0 and 1 side by side (python worker *args_of_rank(rank)), waits for
    both within timeout_s and asserts that both exit 0, with each rank's output in the message.
    Output goes to files, not pipes: a worker blocked on a full pipe that nobody reads (the ranks
    are waited for in turn) would leave its peer waiting in a collective."""
    procs, logs = [], []
    for rank in range(2):
        out_path, err_path = tmp_path / f"rank{rank}.out", tmp_path / f"rank{rank}.err"
        with open(out_path, "w") as out, open(err_path, "w") as err:
            procs.append(subprocess.Popen([sys.executable, worker, *args_of_rank(rank)], stdout=out, stderr=err,
                                          env=env))
        logs.append((out_path, err_path))
    deadline = time.monotonic() + timeout_s
    timed_out = False
    try:
        for proc in procs:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # Also on an error here: leave no worker holding a GPU.
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    report = "\n".join(f"--- rank {rank}: exit code {proc.returncode}\n"
                       f"stdout:\n{out_path.read_text()}\nstderr:\n{err_path.read_text()}"
                       for rank, (proc, (out_path, err_path)) in enumerate(zip(procs, logs)))
    assert not timed_out, f"the workers did not finish within {timeout_s} s (killed)\n{report}"
    assert [proc.returncode for proc in procs] == [0, 0], report


def tensor_params(method):
    """{parameter: True for an output, False for an input} of a bound method's tensor parameters,
    read from nanobind's signature line: inputs are typed ndarray[writable=False] (read-only arrays
    welcome), outputs ndarray[writable=True] (read-only ones refused by name)."""
    signature = method.__doc__.splitlines()[0]
    return {name: flag == "True" for name, flag in re.findall(r"(\w+): ndarray\[writable=(True|False)\]", signature)}
