"""cpu tier: the cross-GPU API's argument checks, which run before NCCL or a GPU is touched, and
the parts of its surface that need no built object (the objects' behaviour is in the GPU tiers:
test_collectives_gpu.py, test_collectives_two_gpus.py)."""

import pytest

import shardjit
from conftest import tensor_params


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


def test_the_ops_write_only_their_output():
    # output goes through the conversion that refuses a read-only array (test_linear_logp_args.py
    # shows it refusing one); the inputs through the one that takes it.
    assert tensor_params(shardjit.ReduceScatter.run) == {"input": False, "output": True}
    assert tensor_params(shardjit.MoeCombine.run) == {"rows": False, "positions": False, "output": True,
                                                      "gates": False}


@pytest.mark.parametrize("cls", [shardjit.Communicator, shardjit.ReduceScatter, shardjit.MoeCombine,
                                 shardjit.LinearLogp])
def test_the_objects_that_may_wait_on_peers_can_be_closed(cls):
    # close() and `with`: destruction at a point the caller picks, with the GIL released.
    for method in ("close", "__enter__", "__exit__"):
        assert callable(getattr(cls, method)), method
    assert isinstance(cls.closed, property)


def test_the_communicator_has_set_timeout_and_abort():
    assert "set_timeout(self, seconds: float) -> None" in shardjit.Communicator.set_timeout.__doc__
    assert callable(shardjit.Communicator.abort)
    assert isinstance(shardjit.Communicator.aborted, property)
