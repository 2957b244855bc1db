"""The float64 PyTorch reference of shardjit.torch.linear_logp, shared by the gpu-tier tests and
the two-GPU worker: logits materialized, softmax over the valid vocabulary, autograd for the
gradients. Not a test module."""

import torch


def reference(hidden, weight, targets, bias=None, temperature=1.0, ignore_index=-100, valid_vocab=None):
    """(logp, entropy, lse) in float64 of the same shapes as shardjit's, differentiable. Rows whose
    target is ignore_index keep their entropy and lse but give no gradient through any output."""
    h = hidden.reshape(-1, hidden.shape[-1])
    z = h @ weight.T
    if bias is not None:
        z = z + bias
    z = z / temperature
    t = targets.reshape(-1)
    ignored = t == ignore_index
    z = torch.where(ignored.view(-1, 1), z.detach(), z)
    if valid_vocab is not None and valid_vocab < z.shape[1]:
        pad = torch.zeros(z.shape[1], dtype=torch.bool, device=z.device)
        pad[valid_vocab:] = True
        z = z.masked_fill(pad, float("-inf"))
    lse = torch.logsumexp(z, dim=1)
    picked = z.gather(1, t.clamp(min=0).view(-1, 1)).squeeze(1)
    logp = torch.where(ignored, torch.zeros_like(picked), picked - lse)
    p = torch.softmax(z, dim=1)
    entropy = lse - (p * torch.where(p > 0, z, torch.zeros_like(z))).sum(dim=1)
    leading = hidden.shape[:-1]
    return logp.view(leading), entropy.view(leading), lse.view(leading)


def leaf64(tensor):
    """A float64 copy of `tensor` on the CPU that collects a gradient."""
    return tensor.detach().to("cpu", torch.float64).requires_grad_()


def relative_error(out, ref):
    out, ref = out.detach().to("cpu", torch.float64), ref.detach().to("cpu", torch.float64)
    return float((out - ref).norm() / ref.norm().clamp(min=1e-30))


def assert_close(out, ref, tol, what):
    out64 = out.detach().to("cpu", torch.float64)
    ref64 = ref.detach().to("cpu", torch.float64)
    assert out64.shape == ref64.shape, f"{what}: shape {tuple(out64.shape)} != {tuple(ref64.shape)}"
    assert torch.isfinite(out64).all(), f"{what}: not finite"
    err = relative_error(out64, ref64)
    max_abs = float((out64 - ref64).abs().max()) if out64.numel() else 0.0
    assert err <= tol, f"{what}: relative error {err:.3e} > {tol:.1e} (max |diff| {max_abs:.3e})"
