"""The op-level form, for callers that build and keep their own LinearLogp (servers):

    op = shardjit.LinearLogp(runtime, hidden=H, vocab_local=V, dtype="bf16", want_backward=True)
    logp, lse = shardjit.torch.linear_logp(op, hidden, weight, targets)   # or op_linear_logp(op, ...)

Kernels run on ``torch.cuda.current_stream()``. Gradients flow to ``hidden``, ``weight`` and
``bias`` from both ``logp`` and ``lse``; ``targets`` get none. The gradients are not themselves
differentiable (a second backward through them raises). A tensor-parallel op's ``hidden``
gradient is already summed over the ranks. One op serves one call at a time: threads that share
an op must take turns (its workspace is shared by its calls); a call made while another thread is
inside one raises :class:`shardjit.InvalidArgumentError`.
"""

import torch

from .. import _shardjit


def _stream(device):
    return torch.cuda.current_stream(device).cuda_stream


class LinearLogpFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, hidden, weight, targets, bias=None):
        hidden = hidden.contiguous()
        weight = weight.contiguous()
        targets = targets.contiguous()
        bias = None if bias is None else bias.contiguous()
        n = hidden.shape[0]
        logp = torch.empty(n, dtype=torch.float32, device=hidden.device)
        lse = torch.empty(n, dtype=torch.float32, device=hidden.device)
        op.forward(hidden, weight, targets, logp, lse=lse, bias=bias, stream=_stream(hidden.device))
        ctx.op = op
        ctx.save_for_backward(hidden, weight, targets, lse, bias)
        return logp, lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_logp, grad_lse):
        hidden, weight, targets, lse, bias = ctx.saved_tensors
        op = ctx.op
        config = op.config
        if not config["want_backward"]:
            raise RuntimeError("shardjit.torch: build the LinearLogp with want_backward=True to train through it")
        grad_hidden = torch.empty_like(hidden)
        grad_weight = None
        grad_bias = None
        wide = config["grad_weight_fp32"]
        if ctx.needs_input_grad[2]:
            grad_weight = torch.empty(weight.shape, dtype=torch.float32 if wide else weight.dtype, device=weight.device)
        if bias is not None and ctx.needs_input_grad[4]:
            grad_bias = torch.empty(bias.shape, dtype=torch.float32 if wide else bias.dtype, device=bias.device)
        op.backward(
            hidden,
            weight,
            targets,
            lse,
            grad_hidden,
            grad_logp=None if grad_logp is None else grad_logp.float().contiguous(),
            grad_lse=None if grad_lse is None else grad_lse.float().contiguous(),
            grad_weight=grad_weight,
            grad_bias=grad_bias,
            bias=bias,
            stream=_stream(hidden.device),
        )
        if grad_weight is not None and wide:
            grad_weight = grad_weight.to(weight.dtype)
        if grad_bias is not None and wide:
            grad_bias = grad_bias.to(bias.dtype)
        return None, grad_hidden if ctx.needs_input_grad[1] else None, grad_weight, None, grad_bias


def op_linear_logp(op, hidden, weight, targets, bias=None):
    """(logp, lse), both fp32 [N], differentiable with respect to hidden, weight and bias."""
    if not isinstance(op, _shardjit.LinearLogp):
        raise TypeError(f"op_linear_logp: op: expected a shardjit.LinearLogp, got {type(op).__name__}")
    for what, tensor in (("hidden", hidden), ("weight", weight), ("targets", targets), ("bias", bias)):
        if not isinstance(tensor, torch.Tensor) and not (what == "bias" and tensor is None):
            raise TypeError(f"op_linear_logp: {what}: expected a torch.Tensor, got {type(tensor).__name__}")
    return LinearLogpFunction.apply(op, hidden, weight, targets, bias)
