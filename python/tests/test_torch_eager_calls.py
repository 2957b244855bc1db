"""cpu tier (needs torch; skipped by name without it): shardjit.torch.linear_logp called end to end
on CPU tensors, its op a stand-in that records what it is asked and writes known values where the
kernels would. What the eager path makes of each combination of returned outputs, gradients and
shapes: which outputs the forward writes, what it returns, which upstream gradients (and values)
reach the backward, which gradients it asks for and where they land. The GPU tier checks the
numbers of the real kernels; this checks the Python around them on every submission."""

import ctypes

import pytest

torch = pytest.importorskip("torch", reason="shardjit.torch's eager tests need PyTorch")

from shardjit import _op_cache  # noqa: E402
import shardjit.torch as sjt  # noqa: E402
from shardjit.torch import _enqueue, _functional, _linear_logp_ops  # noqa: E402

N, H, V = 6, 8, 10
LOGP, LSE, ENTROPY = -0.5, 2.5, 1.25  # what the stand-in's forward writes
GRAD_HIDDEN, GRAD_WEIGHT, GRAD_BIAS = 1.0, 2.0, 3.0  # what its backward writes


def read(address, count):
    return None if address == 0 else list((ctypes.c_float * count).from_address(address))


_TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def fill(address, count, value, dtype=torch.float32):
    if address:
        values = torch.full((count,), value, dtype=dtype)
        ctypes.memmove(address, values.data_ptr(), count * values.element_size())


class RecordingOp:
    """Takes the op's calls at device addresses, as LinearLogp does; records them and writes known
    values into the outputs (fp32) and the gradients (in the dtypes of the op's key)."""

    def __init__(self, key, calls):
        self.key = key
        self.calls = calls
        self.dtype = _TORCH_DTYPES[key[2]]
        self.bias_dtype = None if key[5] is None else _TORCH_DTYPES[key[5]]

    def _forward_at(self, n, hidden, weight, targets, logp, lse, entropy, bias, stream):
        self.calls.append(dict(call="forward", n=n, lse=lse != 0, entropy=entropy != 0, bias=bias != 0))
        fill(logp, n, LOGP)
        fill(lse, n, LSE)
        fill(entropy, n, ENTROPY)

    def _backward_at(self, n, hidden, weight, targets, bias, lse, entropy, grad_logp, grad_lse, grad_entropy,
                     grad_hidden, grad_weight, grad_bias, reduce_grad_hidden, stream):
        self.calls.append(dict(call="backward", n=n, grad_logp=read(grad_logp, n), grad_lse=read(grad_lse, n),
                               grad_entropy=read(grad_entropy, n), entropy=entropy != 0, lse=lse != 0,
                               grads=(grad_hidden != 0, grad_weight != 0, grad_bias != 0), reduce=reduce_grad_hidden))
        fill(grad_hidden, n * H, GRAD_HIDDEN, self.dtype)
        fill(grad_weight, V * H, GRAD_WEIGHT, self.dtype)
        fill(grad_bias, V, GRAD_BIAS, self.bias_dtype)

    def close(self):
        pass


@pytest.fixture
def calls(monkeypatch):
    """The ops' recorded calls. The op cache is a fresh one whose ops are stand-ins; the checks take
    CPU tensors (the CUDA test, on its own, is left out), the stream is 0 and an op's first call
    orders itself behind no other stream (the event that would, needs CUDA)."""
    recorded = []
    monkeypatch.setattr(_op_cache, "_ops", _op_cache.OpCache())
    monkeypatch.setattr(_linear_logp_ops, "_build", lambda key: RecordingOp(key, recorded))
    monkeypatch.setattr(_functional, "_check_on_cuda", lambda hidden: None)
    monkeypatch.setattr(_functional, "_checked_calls", {})
    monkeypatch.setattr(_enqueue, "_raw_current_stream", lambda device: 0)
    monkeypatch.setattr(_enqueue, "_follow_last_stream",
                        lambda entry, device, handle: setattr(entry, "last_stream_handle", handle))
    return recorded


def inputs(*leading, hidden_grad=False, weight_grad=True, bias=False, bias_grad=False):
    torch.manual_seed(0)
    hidden = torch.randn(*leading, H).requires_grad_(hidden_grad)
    weight = torch.randn(V, H).requires_grad_(weight_grad)
    targets = torch.randint(0, V, leading)
    b = torch.randn(V).requires_grad_(bias_grad) if bias else None
    return hidden, weight, targets, b


def test_a_call_without_gradients_makes_only_the_outputs_asked_for(calls):
    hidden, weight, targets, _ = inputs(N)
    with torch.no_grad():
        logp, entropy = sjt.linear_logp(hidden, weight, targets, return_entropy=True)
    assert calls == [dict(call="forward", n=N, lse=False, entropy=True, bias=False)]
    assert torch.equal(logp, torch.full((N,), LOGP)) and torch.equal(entropy, torch.full((N,), ENTROPY))
    assert logp.grad_fn is None
    # Tensors that need no gradient, outside no_grad: the same path.
    calls.clear()
    logp = sjt.linear_logp(hidden, weight.detach(), targets)
    assert calls == [dict(call="forward", n=N, lse=False, entropy=False, bias=False)] and logp.grad_fn is None


@pytest.mark.parametrize("return_entropy", [False, True])
@pytest.mark.parametrize("return_lse", [False, True])
def test_the_gradients_of_the_returned_outputs_reach_the_backward(calls, return_entropy, return_lse):
    hidden, weight, targets, _ = inputs(N, hidden_grad=True)
    outputs = sjt.linear_logp(hidden, weight, targets, return_entropy=return_entropy, return_lse=return_lse)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    assert len(outputs) == 1 + return_entropy + return_lse
    # The forward always writes lse (the backward reads it); entropy where asked.
    assert calls == [dict(call="forward", n=N, lse=True, entropy=return_entropy, bias=False)]
    expected = [LOGP] + [ENTROPY] * return_entropy + [LSE] * return_lse
    assert [output[0].item() for output in outputs] == expected
    # d loss / d output k = k + 2 for every row (a weighted sum), so each gradient is told apart.
    sum(output.sum() * (k + 2) for k, output in enumerate(outputs)).backward()
    backward = calls[1]
    assert backward["grad_logp"] == [2.0] * N
    assert backward["grad_entropy"] == ([3.0] * N if return_entropy else None)
    assert backward["grad_lse"] == ([3.0 + return_entropy] * N if return_lse else None)
    assert backward["entropy"] == return_entropy and backward["lse"]
    assert backward["grads"] == (True, True, False) and backward["reduce"] is True
    assert torch.equal(hidden.grad, torch.full((N, H), GRAD_HIDDEN))
    assert torch.equal(weight.grad, torch.full((V, H), GRAD_WEIGHT))


def test_an_unused_returned_output_passes_no_gradient(calls):
    # The op takes a missing upstream gradient as zero; none is made (an allocation and a kernel
    # of host time between the forward and the backward).
    hidden, weight, targets, _ = inputs(N)
    logp, entropy = sjt.linear_logp(hidden, weight, targets, return_entropy=True)
    logp.sum().backward()
    backward = calls[1]
    assert backward["grad_logp"] == [1.0] * N and backward["grad_entropy"] is None
    assert not backward["entropy"], "without its gradient the entropy is not passed"
    assert backward["grad_lse"] is None
    assert backward["grads"] == (False, True, False), "hidden needs no gradient"


def test_bias_gradient_three_dimensional_inputs_and_a_partial_grad_hidden(calls):
    hidden, weight, targets, bias = inputs(2, 3, hidden_grad=True, weight_grad=False, bias=True, bias_grad=True)
    logp = sjt.linear_logp(hidden, weight, targets, bias=bias, reduce_grad_hidden=False)
    assert logp.shape == (2, 3)
    assert calls == [dict(call="forward", n=6, lse=True, entropy=False, bias=True)]
    logp.sum().backward()
    backward = calls[1]
    assert backward["grads"] == (True, False, True) and backward["reduce"] is False
    assert hidden.grad.shape == (2, 3, H) and torch.equal(hidden.grad, torch.full((2, 3, H), GRAD_HIDDEN))
    assert weight.grad is None and torch.equal(bias.grad, torch.full((V,), GRAD_BIAS))


def test_the_backward_is_not_differentiable_again(calls):
    # Where the upstream gradient is itself differentiable, a second backward through the op's
    # gradients raises rather than treat them as constants.
    hidden, weight, targets, _ = inputs(N, hidden_grad=True)
    scale = torch.ones(N, requires_grad=True)
    logp = sjt.linear_logp(hidden, weight, targets)
    (grad_hidden,) = torch.autograd.grad((logp * scale).sum(), hidden, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        grad_hidden.sum().backward()


def test_ops_with_and_without_the_backward_are_built_once_each(calls):
    hidden, weight, targets, _ = inputs(N)
    for _ in range(3):
        with torch.no_grad():
            sjt.linear_logp(hidden, weight, targets)
        sjt.linear_logp(hidden, weight, targets)
    keys = _op_cache.ops().keys()
    assert len(keys) == 2 and sorted(key[12] for key in keys) == [False, True]  # want_backward
    assert [call["call"] for call in calls] == ["forward"] * 6


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_runs_the_op_in_its_dtype_and_fp32_leaves_get_fp32_gradients(calls, dtype):
    hidden, weight, targets, bias = inputs(N, hidden_grad=True, bias=True, bias_grad=True)
    with torch.autocast("cpu", dtype=dtype):
        logp = sjt.linear_logp(hidden, weight, targets, bias=bias)
    assert logp.dtype == torch.float32
    (key,) = _op_cache.ops().keys()
    name = {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    assert key[2] == name and key[5] == name, "hidden, weight and bias in the autocast dtype"
    logp.sum().backward()  # outside autocast, as a training loop does
    assert calls[1]["grads"] == (True, True, True)
    for leaf, value in ((hidden, GRAD_HIDDEN), (weight, GRAD_WEIGHT), (bias, GRAD_BIAS)):
        assert leaf.grad.dtype == torch.float32 and torch.equal(leaf.grad, torch.full_like(leaf, value))


def test_autocast_casts_mixed_inputs_and_leaves_its_dtype_and_the_targets_alone(calls):
    hidden, weight, targets, _ = inputs(N)
    weight = weight.detach().to(torch.bfloat16).requires_grad_()  # bf16 weights, fp32 activations
    with torch.autocast("cpu", dtype=torch.bfloat16):
        sjt.linear_logp(hidden, weight, targets)
    (key,) = _op_cache.ops().keys()
    assert key[2] == "bf16" and key[6] == "int64"
    # Off, or outside it, the inputs stay as they are: fp32 with fp32 is an fp32 op.
    _op_cache.ops().clear()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        sjt.linear_logp(hidden, weight.detach().float(), targets)
    (key,) = _op_cache.ops().keys()
    assert key[2] == "fp32"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(TypeError, match="weight: expected a torch.Tensor"):
            sjt.linear_logp(hidden, [[1.0]], targets)
