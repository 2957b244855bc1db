"""cpu tier (needs torch; skipped by name without it): the custom ops shardjit.torch registers
(shardjit::linear_logp, shardjit::linear_logp_backward, shardjit::reduce_scatter,
shardjit::moe_combine) and their fake implementations, which torch.compile traces with; and the
op cache's key of a LinearLogp, which must change with everything that changes the op."""

import pytest

torch = pytest.importorskip("torch", reason="shardjit.torch's custom-op tests need PyTorch")

import shardjit.torch as sjt  # noqa: E402  (registers the ops)
from shardjit.torch import _functional, _linear_logp_ops  # noqa: E402

N, H, V = 5, 32, 24


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def test_ops_are_registered():
    for name in ("linear_logp", "linear_logp_backward", "reduce_scatter", "moe_combine"):
        assert hasattr(torch.ops.shardjit, name), name


@pytest.mark.parametrize("want_entropy", [False, True])
def test_forward_fake_shapes(want_entropy):
    hidden, weight, targets = meta(N, H), meta(V, H), meta(N, dtype=torch.int64)
    logp, lse, entropy = torch.ops.shardjit.linear_logp(hidden, weight, targets, None, 0, 0, -100, 1.0,
                                                        want_entropy, "", 0, -1, True, True, True)
    assert logp.shape == (N,) and lse.shape == (N,) and logp.dtype == torch.float32
    assert entropy.shape == ((N,) if want_entropy else (0,))


@pytest.mark.parametrize("wants", [(True, True, True), (True, False, False), (False, True, True)])
def test_backward_fake_shapes(wants):
    hidden, weight, targets, bias = meta(N, H), meta(V, H), meta(N, dtype=torch.int64), meta(V, dtype=torch.float32)
    lse = meta(N, dtype=torch.float32)
    grad_hidden, grad_weight, grad_bias = torch.ops.shardjit.linear_logp_backward(
        hidden, weight, targets, bias, lse, None, lse, None, None, 0, 0, -100, 1.0, False, "", 0, -1, *wants, True)
    assert grad_hidden.shape == ((N, H) if wants[0] else (0,))
    assert grad_weight.shape == ((V, H) if wants[1] else (0,)) and grad_weight.dtype == torch.bfloat16
    assert grad_bias.shape == ((V,) if wants[2] else (0,))
    if wants[2]:
        assert grad_bias.dtype == torch.float32  # the bias's dtype, not hidden's


def test_collective_fake_shapes():
    out = torch.ops.shardjit.reduce_scatter(meta(10, H), "g", [3, 7], 1, "auto")
    assert out.shape == (7, H)
    out = torch.ops.shardjit.moe_combine(meta(6, H), meta(9, 2, dtype=torch.int32), None, "g", 8, "auto")
    assert out.shape == (9, H)


BASE = dict(vocab_start=0, valid_vocab=0, ignore_index=-100, temperature=1.0, want_entropy=False, group_name="",
            max_rows=0, keep_logits_bytes=-1)


def key(hidden_dtype=torch.bfloat16, h=H, v=V, bias_dtype=None, target_dtype=torch.int64, want_backward=False,
        **spec):
    fields = dict(BASE, **spec)
    hidden, weight = torch.empty(N, h, dtype=hidden_dtype), torch.empty(v, h, dtype=hidden_dtype)
    targets = torch.empty(N, dtype=target_dtype)
    bias = None if bias_dtype is None else torch.empty(v, dtype=bias_dtype)
    ordered = tuple(fields[name] for name in _linear_logp_ops.SPEC_FIELDS)
    return _linear_logp_ops.op_key(hidden, weight, targets, bias, ordered, want_backward)


def test_key_is_stable_and_ignores_the_row_count():
    assert key() == key()
    hidden = torch.empty(N + 7, H, dtype=torch.bfloat16)
    weight, targets = torch.empty(V, H, dtype=torch.bfloat16), torch.empty(N + 7, dtype=torch.int64)
    spec = tuple(BASE[name] for name in _linear_logp_ops.SPEC_FIELDS)
    assert _linear_logp_ops.op_key(hidden, weight, targets, None, spec, False) == key()


@pytest.mark.parametrize("change", [
    dict(hidden_dtype=torch.float16), dict(hidden_dtype=torch.float32), dict(h=H + 8), dict(v=V + 1),
    dict(bias_dtype=torch.float32), dict(bias_dtype=torch.bfloat16), dict(target_dtype=torch.int32),
    dict(want_backward=True), dict(vocab_start=24), dict(vocab_start=-1), dict(valid_vocab=20),
    dict(ignore_index=0), dict(temperature=0.7), dict(want_entropy=True), dict(group_name="tp"),
    dict(max_rows=4096), dict(keep_logits_bytes=0), dict(keep_logits_bytes=1 << 30),
])
def test_key_changes_with_what_changes_the_op(change):
    assert key(**change) != key()



def test_dynamo_traces_a_loss_in_one_graph():
    # Fake CUDA tensors: dynamo traces the wrapper and the custom op's fake implementation
    # without a GPU; fullgraph=True raises on any graph break.
    from torch._subclasses.fake_tensor import FakeTensorMode

    def loss_fn(hidden, weight, targets, old_logp, advantages):
        logp, entropy, lse = sjt.linear_logp(hidden, weight, targets, return_entropy=True, return_lse=True)
        ratio = torch.exp(logp - old_logp)
        return -(torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages)).mean() \
            - 0.01 * entropy.mean() + 0.001 * lse.mean()

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        hidden = torch.empty(2, 8, H, dtype=torch.bfloat16, device="cuda", requires_grad=True)
        weight = torch.empty(V, H, dtype=torch.bfloat16, device="cuda", requires_grad=True)
        targets = torch.empty(2, 8, dtype=torch.int64, device="cuda")
        old_logp, advantages = torch.empty(2, 8, device="cuda"), torch.empty(2, 8, device="cuda")
        loss = torch.compile(loss_fn, backend=backend, fullgraph=True)(hidden, weight, targets, old_logp, advantages)
    assert loss.shape == ()
    assert len(graphs) == 1
    assert "torch.ops.shardjit.linear_logp.default" in graphs[0].code


def test_dynamo_traces_autocast_in_the_same_graph(monkeypatch):
    # Under autocast the wrapper casts fp32 inputs to its dtype before the custom op, in the graph
    # (CPU tensors and CPU autocast: CUDA's needs a GPU; the CUDA test is left out).
    from torch._subclasses.fake_tensor import FakeTensorMode
    monkeypatch.setattr(_functional, "_check_on_cuda", lambda hidden: None)

    def loss_fn(hidden, weight, targets):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return sjt.linear_logp(hidden, weight, targets).mean()

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    with FakeTensorMode(allow_non_fake_inputs=True):
        hidden = torch.empty(2, 8, H, requires_grad=True)
        weight = torch.empty(V, H, requires_grad=True)
        loss = torch.compile(loss_fn, backend=backend, fullgraph=True)(hidden, weight,
                                                                        torch.empty(2, 8, dtype=torch.int64))
    assert loss.shape == () and loss.dtype == torch.float32
    assert len(graphs) == 1
    code = graphs[0].code
    assert "torch.ops.shardjit.linear_logp.default" in code and "torch.bfloat16" in code, code


def test_aot_autograd_traces_the_backward_through_the_custom_op():
    # torch.compile's autograd (AOTAutograd) traces the forward and the registered formula into
    # two graphs on meta tensors: the backward graph calls the backward op with the forward's
    # spec and the gradients asked for (hidden and weight, no bias, grad_hidden summed).
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def loss_fn(hidden, weight, targets, advantages):
        logp, lse, entropy = _linear_logp_ops.linear_logp_forward(hidden, weight, targets, None, 0, 0, -100, 0.5,
                                                                  True, "", 0, -1, True, True, True)
        return -(logp * advantages).mean() - 0.01 * entropy.mean() + 0.001 * lse.mean()

    graphs = {}

    def compiler(name):
        def compile_graph(gm, example_inputs):
            graphs[name] = gm.code
            return make_boxed_func(gm.forward)
        return compile_graph

    hidden, weight = meta(N, H).requires_grad_(), meta(V, H).requires_grad_()
    backend = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"))
    loss = torch.compile(loss_fn, backend=backend, fullgraph=True)(hidden, weight, meta(N, dtype=torch.int64),
                                                                    meta(N, dtype=torch.float32))
    loss.backward()
    assert hidden.grad.shape == (N, H) and weight.grad.shape == (V, H)
    assert "torch.ops.shardjit.linear_logp.default" in graphs["forward"]
    calls = [line for line in graphs["backward"].splitlines() if "shardjit.linear_logp_backward" in line]
    assert len(calls) == 1
    assert "0, 0, -100, 0.5, True, '', 0, -1, True, True, False, True)" in calls[0]


@pytest.mark.parametrize("want_entropy, return_lse, with_bias", [(False, False, False), (True, True, True),
                                                                  (True, False, True), (False, True, False)])
def test_autograd_formula_gives_gradients_of_the_inputs_shapes(want_entropy, return_lse, with_bias):
    # Meta tensors run the fake implementations through the registered autograd formula.
    hidden = meta(N, H).requires_grad_()
    weight = meta(V, H).requires_grad_()
    bias = meta(V, dtype=torch.float32).requires_grad_() if with_bias else None
    targets = meta(N, dtype=torch.int64)
    logp, lse, entropy = _linear_logp_ops.linear_logp_forward(hidden, weight, targets, bias, 0, 0, -100, 1.0,
                                                              want_entropy, "", 0, -1, True, return_lse, True)
    loss = logp.sum() + lse.sum() + (entropy.sum() if want_entropy else 0)
    loss.backward()
    assert hidden.grad.shape == (N, H) and hidden.grad.dtype == torch.bfloat16
    assert weight.grad.shape == (V, H) and weight.grad.dtype == torch.bfloat16
    if with_bias:
        assert bias.grad.shape == (V,) and bias.grad.dtype == torch.float32


def test_no_gradient_asked_of_the_backward_gives_none():
    hidden = meta(N, H)
    weight = meta(V, H).requires_grad_()
    logp, _, _ = _linear_logp_ops.linear_logp_forward(hidden, weight, meta(N, dtype=torch.int64), None, 0, 0, -100,
                                                      1.0, False, "", 0, -1, True, False, True)
    logp.sum().backward()
    assert hidden.grad is None and weight.grad.shape == (V, H)


def test_eager_function_uses_the_same_formula(monkeypatch):
    # Outside torch.compile linear_logp runs EagerLinearLogp: the same bodies without the
    # dispatcher and without the checks (linear_logp made them, and the op key it passes). With
    # the bodies swapped for the fake implementations, meta tensors go through its setup and
    # backward as through the custom op's, both on the op of the key linear_logp passed.
    recorded = []

    def forward_body(key, hidden, weight, targets, bias, want_lse, want_entropy):
        recorded.append(("forward", key, want_lse))
        n = hidden.shape[0]
        return (hidden.new_empty(n, dtype=torch.float32), hidden.new_empty(n, dtype=torch.float32),
                hidden.new_empty(n, dtype=torch.float32) if want_entropy else None)

    def backward_body(key, hidden, weight, targets, bias, lse, entropy, grad_logp, grad_lse, grad_entropy, *wants):
        recorded.append((key, grad_logp is not None, grad_lse is not None, grad_entropy is not None, wants))
        return torch.empty_like(hidden), torch.empty_like(weight), hidden.new_empty(0)

    monkeypatch.setattr(_linear_logp_ops, "_forward", forward_body)
    monkeypatch.setattr(_linear_logp_ops, "_backward", backward_body)
    hidden, weight = meta(N, H).requires_grad_(), meta(V, H).requires_grad_()
    spec = (0, 0, -100, 1.0, True, "", 0, -1)  # want_entropy
    logp, lse, entropy = _linear_logp_ops.EagerLinearLogp.apply(("key", spec, False, False), hidden, weight,
                                                                meta(N, dtype=torch.int64), None)
    (logp.sum() + entropy.sum()).backward()
    assert hidden.grad.shape == (N, H) and weight.grad.shape == (V, H)
    # lse is made (the backward reads it) but was not returned: no gradient for it; entropy was:
    # its gradient goes down; the flags (want_grad_hidden, want_grad_weight, want_grad_bias,
    # reduce_grad_hidden) as asked.
    assert recorded == [("forward", "key", True), ("key", True, False, True, (True, True, False, False))]

    # Without entropy in the spec the Function returns logp and lse alone (logp's gradient, unused
    # here, comes as None, which the op takes as zero: no tensor of zeros is made for it).
    recorded.clear()
    spec = (0, 0, -100, 1.0, False, "", 0, -1)
    outputs = _linear_logp_ops.EagerLinearLogp.apply(("key", spec, True, True), hidden, weight,
                                                     meta(N, dtype=torch.int64), None)
    assert len(outputs) == 2
    outputs[1].sum().backward()
    assert recorded == [("forward", "key", True), ("key", False, True, False, (True, True, False, True))]
