"""gpu tier: shardjit.torch.linear_logp (and the loss built on it) against a float64 PyTorch
reference on fresh random data: forward and backward for every combination of returned outputs
and of the outputs the loss uses (fp32 and bf16); bias, temperature, padded vocabulary and 3-D
inputs in fp16 too; ignore_index, the op sizing keywords, gradients for some inputs only, autocast.
Skipped without PyTorch or a CUDA device."""

import itertools

import pytest

from conftest import has_gpu

pytestmark = pytest.mark.skipif(not has_gpu(), reason="needs PyTorch and a CUDA device")

if has_gpu():
    import torch

    import shardjit
    import shardjit.torch as sjt
    from torch_reference import assert_close, leaf64, reference

    DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# Relative (norm) error bounds: fp32 runs exact fp32 math; bf16 and fp16 round the gradients (and
# dZ), fp16 with three more bits.
TOL = {"fp32": 1e-5, "bf16": 2e-2, "fp16": 1e-2}
N, H, V = 67, 128, 1000


def make(dtype, n=N, h=H, v=V, seed=0, bias_dtype=None, ignore=0, leading=None, valid_vocab=None):
    g = torch.Generator(device="cpu").manual_seed(seed)
    hidden = torch.randn(n, h, generator=g) * 0.5
    weight = torch.randn(v, h, generator=g) * 0.2
    targets = torch.randint(0, valid_vocab or v, (n,), generator=g)  # padding ids are not targets
    if ignore:
        targets[torch.randperm(n, generator=g)[:ignore]] = -100
    bias = None if bias_dtype is None else torch.randn(v, generator=g) * 0.3
    if leading is not None:
        hidden, targets = hidden.view(*leading, h), targets.view(*leading)
    cuda = dict(device="cuda")
    out = [hidden.to(dtype=DTYPES[dtype], **cuda).requires_grad_(), weight.to(dtype=DTYPES[dtype], **cuda)
           .requires_grad_(), targets.to(**cuda)]
    out.append(None if bias is None else bias.to(dtype=bias_dtype, **cuda).requires_grad_())
    return out


def returned_and_used():
    """(return_entropy, return_lse, used): every set of returned outputs with every non-empty
    subset of them that the loss uses."""
    for return_entropy, return_lse in itertools.product([False, True], repeat=2):
        names = ["logp"] + ["entropy"] * return_entropy + ["lse"] * return_lse
        for k in range(1, len(names) + 1):
            for used in itertools.combinations(names, k):
                yield return_entropy, return_lse, used


def run_case(dtype, return_entropy, return_lse, used, bias_dtype=None, temperature=1.0, ignore=0,
             valid_vocab=None, leading=None, seed=0, **sizing):
    hidden, weight, targets, bias = make(dtype, seed=seed, bias_dtype=bias_dtype, ignore=ignore, leading=leading,
                                         valid_vocab=valid_vocab)
    out = sjt.linear_logp(hidden, weight, targets, bias=bias, temperature=temperature, valid_vocab=valid_vocab,
                          return_entropy=return_entropy, return_lse=return_lse, **sizing)
    outs = out if isinstance(out, tuple) else (out,)
    names = ["logp"] + ["entropy"] * return_entropy + ["lse"] * return_lse
    assert len(outs) == len(names)
    got = dict(zip(names, outs))

    x, w, b = leaf64(hidden), leaf64(weight), None if bias is None else leaf64(bias)
    ref = dict(zip(["logp", "entropy", "lse"],
                   reference(x, w, targets.cpu(), b, temperature, valid_vocab=valid_vocab)))
    for name, value in got.items():
        assert value.dtype == torch.float32 and value.shape == hidden.shape[:-1], name
        assert_close(value, ref[name], 1e-5 if dtype == "fp32" else 5e-3, name)

    g = torch.Generator(device="cpu").manual_seed(seed + 1)
    ups = {name: torch.randn(hidden.shape[:-1], generator=g, dtype=torch.float64) for name in used}
    sum(got[name] * ups[name].to("cuda", torch.float32) for name in used).sum().backward()
    sum(ref[name] * ups[name] for name in used).sum().backward()
    assert_close(hidden.grad, x.grad, TOL[dtype], "grad_hidden")
    assert_close(weight.grad, w.grad, TOL[dtype], "grad_weight")
    if bias is not None:
        assert bias.grad.dtype == bias.dtype
        assert_close(bias.grad, b.grad, TOL[dtype], "grad_bias")


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("return_entropy, return_lse, used", list(returned_and_used()))
def test_every_output_and_gradient_combination(dtype, return_entropy, return_lse, used):
    run_case(dtype, return_entropy, return_lse, used, seed=len(used) + 3 * return_entropy + 5 * return_lse)


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_bias_and_temperature(dtype):
    run_case(dtype, True, True, ("logp", "entropy", "lse"), bias_dtype=torch.float32, temperature=0.7, seed=11)
    run_case(dtype, True, False, ("logp", "entropy"), bias_dtype=DTYPES[dtype], temperature=1.3, seed=12)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_ignored_rows_give_zero_logp_and_no_logp_gradient(dtype):
    run_case(dtype, True, False, ("logp", "entropy"), ignore=9, seed=13)
    hidden, weight, targets, _ = make(dtype, ignore=N, seed=14)
    logp = sjt.linear_logp(hidden, weight, targets)
    assert torch.equal(logp, torch.zeros_like(logp))
    logp.sum().backward()
    assert hidden.grad.abs().max() == 0 and weight.grad.abs().max() == 0


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_padded_vocabulary(dtype):
    run_case(dtype, True, True, ("logp", "entropy", "lse"), valid_vocab=V - 37, seed=15)


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_three_dimensional_inputs(dtype):
    run_case(dtype, True, True, ("logp", "entropy", "lse"), leading=(1, N), seed=16)
    hidden, weight, targets, _ = make(dtype, n=3 * 29, leading=(3, 29), seed=17)
    logp, entropy = sjt.linear_logp(hidden, weight, targets, return_entropy=True)
    assert logp.shape == (3, 29) and entropy.shape == (3, 29)
    flat = sjt.linear_logp(hidden.reshape(-1, H), weight, targets.reshape(-1))
    assert torch.equal(logp.reshape(-1), flat)


@pytest.mark.parametrize("sizing", [dict(max_rows=N + 5), dict(keep_logits_bytes=0), dict(keep_logits_bytes=1 << 30),
                                    dict(max_rows=2 * N, keep_logits_bytes=N * 256 * 2)])
def test_op_sizing_keywords(sizing):
    # Buffers sized at build, nothing kept (every chunk recomputed), everything kept, a budget of
    # one 256-column chunk: the same results within the dtype's bounds.
    run_case("bf16", True, True, ("logp", "entropy", "lse"), bias_dtype=torch.float32, temperature=0.9, **sizing)


def test_gradient_for_some_inputs_only():
    hidden, weight, targets, _ = make("bf16", seed=18)
    hidden.requires_grad_(False)
    logp = sjt.linear_logp(hidden, weight, targets)
    logp.sum().backward()
    assert hidden.grad is None and weight.grad is not None
    x, w = leaf64(hidden), leaf64(weight)
    reference(x, w, targets.cpu())[0].sum().backward()
    assert_close(weight.grad, w.grad, TOL["bf16"], "grad_weight")


@pytest.mark.parametrize("dtype_name", ["bf16", "fp16"])
def test_autocast_runs_the_16_bit_op_on_fp32_parameters(dtype_name):
    # fp32 hidden, weight and bias under autocast: the same outputs as the op on the casts, and
    # fp32 gradients equal to the 16-bit gradients cast up (what F.linear under autocast gives).
    dtype = DTYPES[dtype_name]
    hidden, weight, targets, bias = make("fp32", seed=22, bias_dtype=torch.float32)
    with torch.autocast("cuda", dtype=dtype):
        logp, entropy = sjt.linear_logp(hidden, weight, targets, bias=bias, return_entropy=True)
    assert logp.dtype == entropy.dtype == torch.float32
    (logp + 0.1 * entropy).sum().backward()
    casts = [tensor.detach().to(dtype).requires_grad_() for tensor in (hidden, weight, bias)]
    want_logp, want_entropy = sjt.linear_logp(casts[0], casts[1], targets, bias=casts[2], return_entropy=True)
    torch.testing.assert_close(logp, want_logp, atol=0, rtol=0)
    torch.testing.assert_close(entropy, want_entropy, atol=0, rtol=0)
    (want_logp + 0.1 * want_entropy).sum().backward()
    for leaf, cast in zip((hidden, weight, bias), casts):
        assert leaf.grad.dtype == torch.float32
        torch.testing.assert_close(leaf.grad, cast.grad.float(), atol=0, rtol=0)


def test_no_grad_builds_an_inference_op_and_matches():
    hidden, weight, targets, _ = make("bf16", seed=19)
    with torch.no_grad():
        plain = sjt.linear_logp(hidden, weight, targets)
    trained = sjt.linear_logp(hidden, weight, targets)
    assert not plain.requires_grad and trained.requires_grad
    torch.testing.assert_close(plain, trained.detach(), atol=1e-4, rtol=0)  # other kernels, other rounding


@pytest.mark.parametrize("return_entropy, return_lse", [(False, True), (True, False), (True, True)])
def test_no_grad_outputs_match_the_reference(return_entropy, return_lse):
    hidden, weight, targets, bias = make("bf16", n=3 * 22, seed=21, bias_dtype=torch.float32, leading=(3, 22))
    hidden, targets = hidden[:, :21], targets[:, :21]  # 3 x 21 rows, not contiguous: the call makes them so
    with torch.no_grad():
        out = sjt.linear_logp(hidden, weight, targets, bias=bias, temperature=0.7, return_entropy=return_entropy,
                              return_lse=return_lse)
    names = ["logp"] + ["entropy"] * return_entropy + ["lse"] * return_lse
    ref = dict(zip(["logp", "entropy", "lse"],
                   reference(leaf64(hidden), leaf64(weight), targets.cpu(), leaf64(bias), 0.7)))
    for name, value in zip(names, out):
        assert value.shape == (3, 21) and not value.requires_grad, name
        assert_close(value, ref[name].detach(), 5e-3, name)


def test_a_call_like_a_checked_one_is_still_checked_where_it_differs():
    """Eager calls check a signature once (everything but the rows); what differs from it still
    gets its error, and another N of the same signature still computes."""
    from shardjit.torch import _functional
    hidden, weight, targets, _ = make("bf16", seed=23)
    with torch.no_grad():
        sjt.linear_logp(hidden, weight, targets)
        assert _functional._checked_calls, "an eager CUDA call is remembered"
        with pytest.raises(shardjit.InvalidArgumentError, match=r"targets: expected shape \(67,\)"):
            sjt.linear_logp(hidden, weight, targets[:-1])
        sjt.linear_logp(hidden[:66].view(3, 22, H), weight, targets[:66].view(3, 22))  # its signature is checked
        with pytest.raises(shardjit.InvalidArgumentError, match=r"targets: expected shape \(3, 22\)"):
            sjt.linear_logp(hidden[:66].view(3, 22, H), weight, targets[:66].view(6, 11))
        with pytest.raises(TypeError, match="weight: expected torch.bfloat16"):
            sjt.linear_logp(hidden, weight.half(), targets)
        with pytest.raises(shardjit.InvalidArgumentError, match=r"bias: expected \[1000\]"):
            sjt.linear_logp(hidden, weight, targets, bias=torch.zeros(V + 1, device="cuda"))
        rows = slice(5, 34)  # 29 rows: another N, the same signature
        got = sjt.linear_logp(hidden[rows], weight, targets[rows])
    ref = reference(leaf64(hidden[rows]), leaf64(weight), targets[rows].cpu(), None, 1.0)[0]
    assert_close(got, ref.detach(), 5e-3, "logp")


def custom_op_inputs():
    hidden, weight, targets, _ = make("bf16", seed=22)
    return [t.detach() for t in (hidden, weight, targets)]


@pytest.mark.parametrize("bad", ["hidden not contiguous", "weight of another H", "targets too short",
                                 "weight of another dtype"])
def test_custom_op_refuses_what_it_cannot_address(bad):
    hidden, weight, targets = custom_op_inputs()
    if bad == "hidden not contiguous":
        hidden = torch.cat([hidden, hidden], dim=1)[:, :H]
    elif bad == "weight of another H":
        weight = weight[:, :H - 8].contiguous()
    elif bad == "targets too short":
        targets = targets[:-1]
    else:
        weight = weight.half()
    name = bad.split()[0]
    with pytest.raises(shardjit.InvalidArgumentError, match=f"shardjit::linear_logp: {name}: expected"):
        torch.ops.shardjit.linear_logp(hidden, weight, targets, None, 0, 0, -100, 1.0, False, "", 0, -1, False, False,
                                       True)


def test_custom_backward_op_refuses_an_upstream_gradient_of_another_length():
    hidden, weight, targets = custom_op_inputs()
    _, lse, _ = torch.ops.shardjit.linear_logp(hidden, weight, targets, None, 0, 0, -100, 1.0, False, "", 0, -1,
                                               True, False, True)
    with pytest.raises(shardjit.InvalidArgumentError, match="shardjit::linear_logp_backward: grad_logp: expected"):
        torch.ops.shardjit.linear_logp_backward(hidden, weight, targets, None, lse, None, lse[:-1].contiguous(),
                                                None, None, 0, 0, -100, 1.0, False, "", 0, -1, True, True, False,
                                                True)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_loss(reduction):
    hidden, weight, targets, _ = make("fp32", ignore=5, seed=20)
    loss = sjt.LinearCrossEntropyLoss(reduction=reduction)(hidden, weight, targets)
    logits = hidden.detach().double() @ weight.detach().double().T
    ref = torch.nn.functional.cross_entropy(logits, targets, reduction=reduction, ignore_index=-100)
    torch.testing.assert_close(loss.double(), ref, atol=1e-4, rtol=1e-5)
    (loss.sum() if reduction == "none" else loss).backward()
    assert torch.isfinite(hidden.grad).all()
