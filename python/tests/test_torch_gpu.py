"""gpu tier: forward and the autograd.Function's backward against a float64 PyTorch reference;
read-only outputs refused; close() and `with`; a second thread's call refused while one runs.
Skipped without PyTorch or a CUDA device."""

import os

import pytest

import shardjit
from conftest import has_gpu

pytestmark = pytest.mark.skipif(not has_gpu(), reason="needs PyTorch and a CUDA device")


def reference(hidden, weight, targets, bias, temperature):
    z = hidden.double() @ weight.double().T
    if bias is not None:
        z = z + bias.double()
    z = z / temperature
    lse = torch_mod().logsumexp(z, dim=1)
    logp = z.gather(1, targets.view(-1, 1)).squeeze(1) - lse
    return logp, lse


def torch_mod():
    import torch

    return torch


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_forward_and_backward(runtime, dtype):
    torch = torch_mod()
    import shardjit.torch as sjt

    tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cpu").manual_seed(0)
    n, h, v = 37, 64, 300
    hidden = (torch.randn(n, h, generator=g) * 0.5).to("cuda", tdtype).requires_grad_()
    weight = (torch.randn(v, h, generator=g) * 0.5).to("cuda", tdtype).requires_grad_()
    targets = torch.randint(0, v, (n,), generator=g).to("cuda")
    op = shardjit.LinearLogp(runtime, hidden=h, vocab_local=v, dtype=dtype, want_backward=True,
                             grad_weight_fp32=True)
    hopper = torch.cuda.get_device_capability() == (9, 0) and \
        os.environ.get("SHARDJIT_HOPPER_PATH", "1").lower() not in ("0", "false", "off", "no")
    assert op.main_loop == ("fp32 fma" if dtype == "fp32" else "wgmma" if hopper else "mma.sync")

    logp, lse = sjt.linear_logp(op, hidden, weight, targets)
    assert op.check(torch.cuda.current_stream().cuda_stream)["bad_rows"] == 0

    x = hidden.detach().double().requires_grad_()
    w = weight.detach().double().requires_grad_()
    ref_logp, ref_lse = reference(x, w, targets, None, 1.0)
    tol = 1e-4 if dtype == "fp32" else 2e-2
    torch.testing.assert_close(logp.double(), ref_logp, atol=tol, rtol=tol)
    torch.testing.assert_close(lse.double(), ref_lse, atol=tol, rtol=tol)

    up_logp = torch.randn(n, generator=g).to("cuda")
    up_lse = torch.randn(n, generator=g).to("cuda")
    (logp * up_logp + lse * up_lse).sum().backward()
    (ref_logp * up_logp.double() + ref_lse * up_lse.double()).sum().backward()
    gtol = 1e-3 if dtype == "fp32" else 5e-2
    torch.testing.assert_close(hidden.grad.double(), x.grad, atol=gtol, rtol=gtol)
    torch.testing.assert_close(weight.grad.double(), w.grad, atol=gtol, rtol=gtol)


def test_keep_logits_budget(runtime):
    """Chunks of 2 H columns (six), five of them kept from the forward with a keep budget: the
    gradients still match the float64 reference, and a negative budget is refused by name."""
    torch = torch_mod()
    import shardjit.torch as sjt

    g = torch.Generator(device="cpu").manual_seed(1)
    n, h, v = 37, 256, 3000
    hidden = (torch.randn(n, h, generator=g) * 0.5).to("cuda", torch.bfloat16).requires_grad_()
    weight = (torch.randn(v, h, generator=g) * 0.125).to("cuda", torch.bfloat16).requires_grad_()
    targets = torch.randint(0, v, (n,), generator=g).to("cuda")
    with pytest.raises(ValueError, match="keep_logits_bytes"):
        shardjit.LinearLogp(runtime, hidden=h, vocab_local=v, dtype="bf16", want_backward=True, keep_logits_bytes=-2)
    op = shardjit.LinearLogp(runtime, hidden=h, vocab_local=v, dtype="bf16", want_backward=True,
                             grad_weight_fp32=True, backward_workspace_bytes=n * 2 * 512, keep_logits_bytes=1 << 20)
    assert op.config["keep_logits_bytes"] == 1 << 20

    logp, lse = sjt.linear_logp(op, hidden, weight, targets)
    x = hidden.detach().double().requires_grad_()
    w = weight.detach().double().requires_grad_()
    ref_logp, ref_lse = reference(x, w, targets, None, 1.0)
    torch.testing.assert_close(logp.double(), ref_logp, atol=2e-2, rtol=2e-2)
    up_logp = torch.randn(n, generator=g).to("cuda")
    up_lse = torch.randn(n, generator=g).to("cuda")
    (logp * up_logp + lse * up_lse).sum().backward()
    (ref_logp * up_logp.double() + ref_lse * up_lse.double()).sum().backward()
    torch.testing.assert_close(hidden.grad.double(), x.grad, atol=5e-2, rtol=5e-2)
    torch.testing.assert_close(weight.grad.double(), w.grad, atol=5e-2, rtol=5e-2)


def test_bias_and_temperature_with_a_strided_bias(runtime):
    # The function makes its tensors contiguous for the op: a bias that is every other element of
    # a buffer gets the same results, and its gradient, as a packed one.
    torch = torch_mod()
    import shardjit.torch as sjt

    g = torch.Generator(device="cpu").manual_seed(1)
    n, h, v, temperature = 29, 64, 300, 0.7
    hidden = (torch.randn(n, h, generator=g) * 0.5).cuda().requires_grad_()
    weight = (torch.randn(v, h, generator=g) * 0.5).cuda().requires_grad_()
    bias_store = torch.randn(2 * v, generator=g).cuda().requires_grad_()
    bias = bias_store[::2]
    assert not bias.is_contiguous()
    targets = torch.randint(0, v, (n,), generator=g).cuda()
    op = shardjit.LinearLogp(runtime, hidden=h, vocab_local=v, dtype="fp32", bias_dtype="fp32",
                             temperature=temperature, want_backward=True)

    logp, lse = sjt.linear_logp(op, hidden, weight, targets, bias)
    x = hidden.detach().double().requires_grad_()
    w = weight.detach().double().requires_grad_()
    b = bias.detach().double().requires_grad_()
    ref_logp, ref_lse = reference(x, w, targets, b, temperature)
    torch.testing.assert_close(logp.double(), ref_logp, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-4, rtol=1e-4)

    up_logp = torch.randn(n, generator=g).cuda()
    (logp * up_logp).sum().backward()
    (ref_logp * up_logp.double()).sum().backward()
    torch.testing.assert_close(hidden.grad.double(), x.grad, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(weight.grad.double(), w.grad, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(bias_store.grad[::2].double(), b.grad, atol=1e-3, rtol=1e-3)
    assert torch.count_nonzero(bias_store.grad[1::2]) == 0


def test_read_only_outputs_are_refused(runtime):
    torch = torch_mod()
    np = pytest.importorskip("numpy")

    def frozen(*shape):
        array = np.zeros(shape, dtype=np.float32)
        array.flags.writeable = False
        return array

    n, h, v = 4, 64, 300
    op = shardjit.LinearLogp(runtime, hidden=h, vocab_local=v, dtype="fp32", bias_dtype="fp32", want_backward=True)
    x = torch.randn(n, h, device="cuda")
    w = torch.randn(v, h, device="cuda")
    t = torch.zeros(n, dtype=torch.int64, device="cuda")
    b = torch.zeros(v, device="cuda")
    logp = torch.empty(n, device="cuda")
    lse = torch.empty(n, device="cuda")

    def refused(name):
        return pytest.raises(ValueError, match=f"^{name}: expected a writable tensor, got a read-only one$")

    with refused("logp"):
        op.forward(x, w, t, frozen(n), bias=b)
    with refused("lse"):
        op.forward(x, w, t, logp, lse=frozen(n), bias=b)
    with refused("entropy"):
        op.forward(x, w, t, logp, entropy=frozen(n), bias=b)
    op.forward(x, w, t, logp, lse=lse, bias=b)
    with refused("grad_hidden"):
        op.backward(x, w, t, lse, frozen(n, h), grad_logp=torch.ones(n, device="cuda"), bias=b)
    with refused("grad_weight"):
        op.backward(x, w, t, lse, torch.empty_like(x), grad_weight=frozen(v, h), bias=b)
    with refused("grad_bias"):
        op.backward(x, w, t, lse, torch.empty_like(x), grad_bias=frozen(v), bias=b)
    op.check()


def test_close_and_with(runtime):
    torch = torch_mod()
    import shardjit.torch as sjt

    n, h, v = 5, 64, 300
    x = torch.randn(n, h, device="cuda")
    w = torch.randn(v, h, device="cuda")
    t = torch.randint(0, v, (n,), device="cuda")
    op = shardjit.LinearLogp(runtime, hidden=h, vocab_local=v, dtype="fp32")
    with op as entered:
        assert entered is op
        logp, _ = sjt.linear_logp(op, x, w, t)
        assert torch.isfinite(logp).all()
    assert op.closed
    op.close()
    with pytest.raises(ValueError, match="^LinearLogp: closed$"):
        sjt.linear_logp(op, x, w, t)
    with pytest.raises(ValueError, match="^LinearLogp: closed$"):
        op.main_loop


def test_a_second_thread_is_refused_while_a_call_runs(runtime):
    """One op takes one call at a time: while a thread is inside op.check() (waiting for a stream
    that a spinning kernel keeps busy), a forward from another thread raises InvalidArgumentError
    instead of racing on the op's buffers; once the call ends, the op runs again."""
    import threading
    import time

    torch = torch_mod()
    n, h, v = 5, 64, 300
    x = torch.randn(n, h, device="cuda")
    w = torch.randn(v, h, device="cuda")
    t = torch.randint(0, v, (n,), device="cuda")
    logp = torch.empty(n, device="cuda")
    op = shardjit.LinearLogp(runtime, hidden=h, vocab_local=v, dtype="fp32")
    op.forward(x, w, t, logp)  # sizes the workspace: no call below allocates
    torch.cuda.synchronize()

    busy = torch.cuda.Stream()
    with torch.cuda.stream(busy):
        torch.cuda._sleep(4_000_000_000)  # a few seconds of spinning at the GPU's clock
    def wait_inside_the_op():
        while True:  # this thread may itself find the main thread's forward inside the op: retry
            try:
                op.check(busy.cuda_stream)
                return
            except shardjit.InvalidArgumentError:
                time.sleep(0.001)

    inside = threading.Thread(target=wait_inside_the_op)
    inside.start()
    refusal = None
    give_up = time.monotonic() + 20
    while refusal is None and inside.is_alive() and time.monotonic() < give_up:
        try:
            op.forward(x, w, t, logp)  # runs until the other thread is inside check()
            time.sleep(0.005)
        except shardjit.InvalidArgumentError as error:
            refusal = str(error)
    inside.join()
    assert refusal is not None and "another thread is inside a call of this op" in refusal, refusal
    op.forward(x, w, t, logp)
    assert op.check()["bad_rows"] == 0
