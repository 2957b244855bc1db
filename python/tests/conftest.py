import re

import pytest

import shardjit


@pytest.fixture
def runtime(tmp_path):
    return shardjit.Runtime(cache_dir=str(tmp_path / "cache"))


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


def tensor_params(method):
    """{parameter: True for an output, False for an input} of a bound method's tensor parameters,
    read from nanobind's signature line: inputs are typed ndarray[writable=False] (read-only arrays
    welcome), outputs ndarray[writable=True] (read-only ones refused by name)."""
    signature = method.__doc__.splitlines()[0]
    return {name: flag == "True" for name, flag in re.findall(r"(\w+): ndarray\[writable=(True|False)\]", signature)}
