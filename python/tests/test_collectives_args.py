"""cpu tier: the cross-GPU API's argument checks, which run before NCCL or a GPU is touched."""

import pytest

import shardjit


def test_communicator_checks_the_id_and_the_timeout(runtime):
    with pytest.raises(ValueError, match="unique_id"):
        shardjit.Communicator(runtime, 0, 0, 1, b"too short")
    with pytest.raises(ValueError, match="timeout_seconds"):
        shardjit.Communicator(runtime, 0, 0, 1, bytes(128), timeout_seconds=-1.0)
    with pytest.raises(ValueError, match="timeout_seconds"):
        shardjit.Communicator(runtime, 0, 0, 1, bytes(128), timeout_seconds=float("nan"))
    with pytest.raises(ValueError, match="at most 31536000"):
        shardjit.Communicator(runtime, 0, 0, 1, bytes(128), timeout_seconds=1e300)


def test_the_ops_take_a_communicator(runtime):
    # A wrong type is a TypeError from the bindings, not a crash.
    with pytest.raises(TypeError):
        shardjit.ReduceScatter(runtime, "not a communicator", hidden=64, rows_per_rank=[1])
    with pytest.raises(TypeError):
        shardjit.MoeCombine(runtime, None, hidden=64, capacity=8)
