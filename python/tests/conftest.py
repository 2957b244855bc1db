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
