"""LinearLogp as torch.library custom ops: shardjit::linear_logp (forward) and
shardjit::linear_logp_backward, with fake implementations (shapes only, for torch.compile and
meta tensors) and the autograd formula that links them.

The ops take 2-D hidden [N, H], weight [V_local, H], 1-D targets [N] and bias [V_local], and
plain values for the rest, so that torch.compile traces them; the op object is looked up in the
op cache inside, by everything that changes it. Outputs the caller did not ask for come back as
empty tensors (a custom op returns tensors only).
"""

from typing import Optional, Tuple

import torch

from .. import _op_cache, _shardjit
from . import _enqueue, _groups

_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
_TARGET_DTYPE_NAMES = {torch.int32: "int32", torch.int64: "int64"}

# What the forward op takes besides the tensors, in order; the backward op takes the same. The last
# two size the op when it is built: max_rows (0: none), keep_logits_bytes (-1: the op's default).
SPEC_FIELDS = ("vocab_start", "valid_vocab", "ignore_index", "temperature", "want_entropy", "group_name", "max_rows",
               "keep_logits_bytes")
_WANT_ENTROPY = SPEC_FIELDS.index("want_entropy")


def op_key(hidden, weight, targets, bias, spec, want_backward):
    """The op cache's key of a LinearLogp: every value that changes the op it builds."""
    vocab_start, valid_vocab, ignore_index, temperature, want_entropy, group_name, max_rows, keep_logits_bytes = spec
    return (
        "linear_logp",
        hidden.device.index,
        _DTYPE_NAMES[hidden.dtype],
        int(hidden.shape[1]),
        int(weight.shape[0]),
        None if bias is None else _DTYPE_NAMES[bias.dtype],
        _TARGET_DTYPE_NAMES[targets.dtype],
        int(vocab_start),
        int(valid_vocab),
        int(ignore_index),
        float(temperature),
        bool(want_entropy),
        bool(want_backward),
        group_name,
        int(max_rows),
        int(keep_logits_bytes),
    )


def _build(key):
    (_, device, dtype, hidden, vocab_local, bias_dtype, target_dtype, vocab_start, valid_vocab, ignore_index,
     temperature, want_entropy, want_backward, group_name, max_rows, keep_logits_bytes) = key
    config = dict(hidden=hidden, vocab_local=vocab_local, dtype=dtype, bias_dtype=bias_dtype,
                  target_dtype=target_dtype, valid_vocab=valid_vocab, ignore_index=ignore_index,
                  temperature=temperature, want_entropy=want_entropy, want_backward=want_backward,
                  device=device, max_rows=max_rows)
    if keep_logits_bytes >= 0:
        config["keep_logits_bytes"] = keep_logits_bytes
    if not group_name:
        return _shardjit.LinearLogp(_op_cache.runtime(), **config)
    start, vocab_global = _groups.vocab_layout(group_name, device, vocab_local, vocab_start)
    comm = _groups.communicator(group_name, device)
    return _shardjit.LinearLogp(_op_cache.runtime(), comm, vocab_start=start, vocab_global=vocab_global, **config)


def _address(tensor):
    return 0 if tensor is None else tensor.data_ptr()


_FLOAT_DTYPES = tuple(_DTYPE_NAMES)
_TARGET_DTYPES = tuple(_TARGET_DTYPE_NAMES)
_FP32 = (torch.float32,)


def _expect(op_name, name, tensor, shape, dtypes, device):
    """Refuses what an address would misread: the ops hand shardjit addresses of contiguous
    tensors, not views it could check. linear_logp() has made its arguments so; this guards
    direct calls of the custom ops (torch.ops.shardjit.*)."""
    if (tensor.shape == shape and tensor.dtype in dtypes and tensor.get_device() == device
            and tensor.is_contiguous()):
        return
    wanted = " or ".join(str(dtype).replace("torch.", "") for dtype in dtypes)
    raise _shardjit.InvalidArgumentError(
        f"{op_name}: {name}: expected a contiguous {wanted} tensor of shape {tuple(shape)} on cuda:{device}, got "
        f"{str(tensor.dtype).replace('torch.', '')} {tuple(tensor.shape)} on {tensor.device}"
        f"{'' if tensor.is_contiguous() else ', not contiguous'}")


def _expect_inputs(op_name, hidden, weight, targets, bias):
    """The inputs of both ops: hidden [N, H], weight [V_local, H], targets [N], bias [V_local]."""
    if hidden.dim() != 2:
        raise _shardjit.InvalidArgumentError(f"{op_name}: hidden: expected [N, H], got shape {tuple(hidden.shape)}")
    if not hidden.is_cuda:
        raise _shardjit.InvalidArgumentError(f"{op_name}: hidden: expected a CUDA tensor, got one on {hidden.device}")
    n, h = hidden.shape
    device = hidden.get_device()
    _expect(op_name, "hidden", hidden, (n, h), _FLOAT_DTYPES, device)
    _expect(op_name, "weight", weight, weight.shape[:1] + (h,), (hidden.dtype,), device)
    _expect(op_name, "targets", targets, (n,), _TARGET_DTYPES, device)
    if bias is not None:
        _expect(op_name, "bias", bias, (weight.shape[0],), _FLOAT_DTYPES, device)
    return n


def _forward(key, hidden, weight, targets, bias, want_lse, want_entropy):
    """Enqueues the forward of the op of `key` (op_key) on the current stream into new fp32 [N] outputs:
    (logp, lse, entropy), lse None unless want_lse, entropy None unless want_entropy (which the
    op's key says). The tensors go as addresses (their dtypes and shapes are the op's key, and
    contiguous)."""
    n = hidden.shape[0]
    logp = hidden.new_empty(n, dtype=torch.float32)
    lse = hidden.new_empty(n, dtype=torch.float32) if want_lse else None
    entropy = hidden.new_empty(n, dtype=torch.float32) if want_entropy else None

    # The addresses inline rather than through _address: every eager call passes here.
    with _op_cache.ops().locked(key, lambda: _build(key)) as entry:
        entry.op._forward_at(n, hidden.data_ptr(), weight.data_ptr(), targets.data_ptr(), logp.data_ptr(),
                             0 if lse is None else lse.data_ptr(), 0 if entropy is None else entropy.data_ptr(),
                             0 if bias is None else bias.data_ptr(), _enqueue.ordered_stream(entry, hidden.get_device()))
    return logp, lse, entropy


def forward_impl(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                 bias: Optional[torch.Tensor], vocab_start: int, valid_vocab: int, ignore_index: int,
                 temperature: float, want_entropy: bool, group_name: str, max_rows: int, keep_logits_bytes: int,
                 want_backward: bool, return_lse: bool,
                 reduce_grad_hidden: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logp, lse, entropy), fp32 [N]; entropy is empty unless want_entropy. return_lse and
    reduce_grad_hidden are for the backward (whether lse has a gradient, whether grad_hidden is
    summed over the group)."""
    _expect_inputs("shardjit::linear_logp", hidden, weight, targets, bias)
    spec = (vocab_start, valid_vocab, ignore_index, temperature, want_entropy, group_name, max_rows, keep_logits_bytes)
    return _op_outputs(op_key(hidden, weight, targets, bias, spec, want_backward), hidden, weight, targets, bias,
                       want_entropy)


def _op_outputs(key, hidden, weight, targets, bias, want_entropy):
    """The forward op's outputs, enqueued on the op of `key`: lse always (the backward reads it),
    entropy empty unless want_entropy (a custom op returns tensors only)."""
    logp, lse, entropy = _forward(key, hidden, weight, targets, bias, True, want_entropy)
    return logp, lse, entropy if entropy is not None else hidden.new_empty(0, dtype=torch.float32)


def forward_no_grad(key, hidden, weight, targets, bias, want_lse, want_entropy):
    """The forward of linear_logp() calls with nothing to differentiate, whose arguments
    linear_logp() has checked and whose op key (`op_key`, want_backward False) it has made: only
    the outputs asked for are made, the others come back as None."""
    return _forward(key, hidden, weight, targets, bias, want_lse, want_entropy)


linear_logp_forward = torch.library.custom_op("shardjit::linear_logp", forward_impl, mutates_args=(),
                                              device_types="cuda")


@linear_logp_forward.register_fake
def _(hidden, weight, targets, bias, vocab_start, valid_vocab, ignore_index, temperature, want_entropy, group_name,
      max_rows, keep_logits_bytes, want_backward, return_lse, reduce_grad_hidden):
    n = hidden.shape[0]
    entropy_rows = n if want_entropy else 0
    return (hidden.new_empty(n, dtype=torch.float32), hidden.new_empty(n, dtype=torch.float32),
            hidden.new_empty(entropy_rows, dtype=torch.float32))


def backward_impl(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                  bias: Optional[torch.Tensor], lse: torch.Tensor, entropy: Optional[torch.Tensor],
                  grad_logp: Optional[torch.Tensor], grad_lse: Optional[torch.Tensor],
                  grad_entropy: Optional[torch.Tensor], vocab_start: int, valid_vocab: int,
                  ignore_index: int, temperature: float, want_entropy: bool, group_name: str, max_rows: int,
                  keep_logits_bytes: int, want_grad_hidden: bool, want_grad_weight: bool, want_grad_bias: bool,
                  reduce_grad_hidden: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(grad_hidden, grad_weight, grad_bias) in the dtypes of hidden, weight and bias; each one
    not wanted is empty."""
    op_name = "shardjit::linear_logp_backward"
    n = _expect_inputs(op_name, hidden, weight, targets, bias)
    device = hidden.get_device()
    for name, vector in (("lse", lse), ("entropy", entropy), ("grad_logp", grad_logp), ("grad_lse", grad_lse),
                         ("grad_entropy", grad_entropy)):
        if vector is not None:
            _expect(op_name, name, vector, (n,), _FP32, device)
    spec = (vocab_start, valid_vocab, ignore_index, temperature, want_entropy, group_name, max_rows, keep_logits_bytes)
    return _backward(op_key(hidden, weight, targets, bias, spec, True), hidden, weight, targets, bias, lse,
                     entropy, grad_logp, grad_lse, grad_entropy, want_grad_hidden, want_grad_weight, want_grad_bias,
                     reduce_grad_hidden)


def _backward(key, hidden, weight, targets, bias, lse, entropy, grad_logp, grad_lse, grad_entropy,
              want_grad_hidden, want_grad_weight, want_grad_bias, reduce_grad_hidden):
    """Enqueues the backward of the op of `key` (op_key) into new gradients: (grad_hidden,
    grad_weight, grad_bias), each one not wanted empty."""
    grad_hidden = torch.empty_like(hidden) if want_grad_hidden else hidden.new_empty(0)
    grad_weight = torch.empty_like(weight) if want_grad_weight else weight.new_empty(0)
    grad_bias = torch.empty_like(bias) if want_grad_bias and bias is not None else hidden.new_empty(0)

    with _op_cache.ops().locked(key, lambda: _build(key)) as entry:
        entry.op._backward_at(hidden.shape[0], hidden.data_ptr(), weight.data_ptr(), targets.data_ptr(), _address(bias),
                              lse.data_ptr(), _address(entropy if grad_entropy is not None else None),
                              _address(grad_logp), _address(grad_lse), _address(grad_entropy),
                              grad_hidden.data_ptr() if want_grad_hidden else 0,
                              grad_weight.data_ptr() if want_grad_weight else 0,
                              grad_bias.data_ptr() if want_grad_bias and bias is not None else 0,
                              reduce_grad_hidden, _enqueue.ordered_stream(entry, hidden.get_device()))
    return grad_hidden, grad_weight, grad_bias


linear_logp_backward = torch.library.custom_op("shardjit::linear_logp_backward", backward_impl, mutates_args=(),
                                               device_types="cuda")


@linear_logp_backward.register_fake
def _(hidden, weight, targets, bias, lse, entropy, grad_logp, grad_lse, grad_entropy, vocab_start, valid_vocab,
      ignore_index, temperature, want_entropy, group_name, max_rows, keep_logits_bytes, want_grad_hidden,
      want_grad_weight, want_grad_bias, reduce_grad_hidden):
    grad_hidden = torch.empty_like(hidden) if want_grad_hidden else hidden.new_empty(0)
    grad_weight = torch.empty_like(weight) if want_grad_weight else weight.new_empty(0)
    grad_bias = torch.empty_like(bias) if want_grad_bias and bias is not None else hidden.new_empty(0)
    return grad_hidden, grad_weight, grad_bias


def _keep_for_backward(ctx, hidden, weight, targets, bias, lse, entropy, spec, return_lse, reduce_grad_hidden):
    """What the backward needs of a forward: its tensors (entropy None unless it has a gradient to
    give), its spec, whether lse was returned, whether grad_hidden is summed over the group."""
    ctx.save_for_backward(hidden, weight, targets, bias, lse, entropy)
    ctx.spec = spec
    ctx.return_lse = return_lse
    ctx.reduce_grad_hidden = reduce_grad_hidden


def _setup_context(ctx, inputs, output):
    hidden, weight, targets, bias = inputs[:4]
    spec = inputs[4:4 + len(SPEC_FIELDS)]
    _want_backward, return_lse, reduce_grad_hidden = inputs[4 + len(SPEC_FIELDS):]
    _, lse, entropy = output
    want_entropy = spec[_WANT_ENTROPY]
    _keep_for_backward(ctx, hidden, weight, targets, bias, lse, entropy if want_entropy else None, spec, return_lse,
                       reduce_grad_hidden)


def _float_grad(grad):
    return None if grad is None else grad.float().contiguous()


def _gradients(ctx, wants, grad_logp, grad_lse, grad_entropy, backward_op):
    """The autograd formula: (grad_hidden, grad_weight, grad_bias) of the forward that
    _keep_for_backward saved, each None where `wants` (of hidden, weight, bias) says no, from
    `backward_op(ctx, the backward op's tensors and its three wants)` (the custom op when traced,
    its body eagerly)."""
    hidden, weight, targets, bias, lse, entropy = ctx.saved_tensors
    want_hidden, want_weight, want_bias = wants
    want_bias = bool(want_bias and bias is not None)
    if not (want_hidden or want_weight or want_bias):
        return None, None, None
    # lse and entropy the caller did not ask for have no gradient; an unused returned output's
    # gradient comes as None on the eager path (which the op takes as zero) and as zeros through
    # the custom op (whose autograd materializes them).
    grad_hidden, grad_weight, grad_bias = backward_op(
        ctx, hidden, weight, targets, bias, lse, entropy, _float_grad(grad_logp),
        _float_grad(grad_lse) if ctx.return_lse else None, _float_grad(grad_entropy) if entropy is not None else None,
        bool(want_hidden), bool(want_weight), want_bias)
    return grad_hidden if want_hidden else None, grad_weight if want_weight else None, grad_bias if want_bias else None


# The forward op's arguments after the four tensors: the spec, want_backward, return_lse and
# reduce_grad_hidden, none of which has a gradient.
_NO_GRADS_AFTER_TENSORS = (None,) * (len(SPEC_FIELDS) + 3)


def _custom_backward_op(ctx, hidden, weight, targets, bias, lse, entropy, grad_logp, grad_lse, grad_entropy, *wants):
    """The backward custom op, for the custom forward op's autograd formula (traced by torch.compile)."""
    return linear_logp_backward(hidden, weight, targets, bias, lse, entropy, grad_logp, grad_lse, grad_entropy,
                                *ctx.spec, *wants, ctx.reduce_grad_hidden)


def _custom_op_backward(ctx, grad_logp, grad_lse, grad_entropy):
    want_hidden, want_weight, _, want_bias = ctx.needs_input_grad[:4]
    grad_hidden, grad_weight, grad_bias = _gradients(ctx, (want_hidden, want_weight, want_bias), grad_logp, grad_lse,
                                                     grad_entropy, _custom_backward_op)
    return (grad_hidden, grad_weight, None, grad_bias) + _NO_GRADS_AFTER_TENSORS


linear_logp_forward.register_autograd(_custom_op_backward, setup_context=_setup_context)


class EagerLinearLogp(torch.autograd.Function):
    """The same forward, formula and backward outside torch.compile, without the dispatcher's
    round trips through the custom ops (tens of microseconds of host time per call).

    apply(call, hidden, weight, targets, bias) -> (logp, lse), or (logp, lse, entropy) where the
    spec wants entropy. `call` is the tuple (key, spec, return_lse, reduce_grad_hidden): the op
    key that linear_logp() made when it checked the call (`op_key`), the spec, whether lse is
    returned, whether grad_hidden is summed over the group. Autograd's own host time grows with
    every argument and output of a Function (benchmarks.md, "Through PyTorch"), hence the plain
    values in one argument (a plain tuple: a named one takes longer to make than the rest of the
    call's Python) and no entropy output that nothing asked for. The forward takes the context
    first, with no separate setup_context: autograd then passes the arguments as they are instead
    of binding them to the forward's signature."""

    @staticmethod
    def forward(ctx, call, hidden, weight, targets, bias):
        key, spec, return_lse, reduce_grad_hidden = call
        want_entropy = spec[_WANT_ENTROPY]
        # An output the loss does not use gets None, not a tensor of zeros: the op takes a missing
        # upstream gradient as zero, and materializing one costs an allocation and a kernel launch
        # of host time between the forward and the backward, where a small call's GPU waits on it.
        ctx.set_materialize_grads(False)
        logp, lse, entropy = _forward(key, hidden, weight, targets, bias, True, want_entropy)
        _keep_for_backward(ctx, hidden, weight, targets, bias, lse, entropy, spec, return_lse, reduce_grad_hidden)
        ctx.key = key
        return (logp, lse, entropy) if want_entropy else (logp, lse)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_logp, grad_lse, grad_entropy=None):
        wants = ctx.needs_input_grad
        grad_hidden, grad_weight, grad_bias = _gradients(ctx, (wants[1], wants[2], wants[4]), grad_logp, grad_lse,
                                                         grad_entropy, _eager_backward_op)
        return None, grad_hidden, grad_weight, None, grad_bias


def _eager_backward_op(ctx, hidden, weight, targets, bias, lse, entropy, grad_logp, grad_lse, grad_entropy, *wants):
    """backward_impl without its checks, for EagerLinearLogp: the tensors are the forward's own and
    autograd's gradients of its outputs (of their shapes and dtypes), and the op is the one of
    the forward's key (which has the backward: a gradient is asked only of an op built for it)."""
    key = ctx.key
    return _backward(key, hidden, weight, targets, bias, lse, entropy,
                     grad_logp, grad_lse, grad_entropy, *wants, ctx.reduce_grad_hidden)


def dtype_name(dtype):
    """The shardjit name of a torch dtype of hidden/weight, or None where shardjit has none."""
    return _DTYPE_NAMES.get(dtype)


def target_dtype_name(dtype):
    """The shardjit name of a torch dtype of targets, or None where shardjit has none."""
    return _TARGET_DTYPE_NAMES.get(dtype)
