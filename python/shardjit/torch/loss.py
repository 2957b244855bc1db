"""Cross-entropy of target tokens under an LM head, fused with the head (no logits in memory):
the loss of a fused-linear-cross-entropy library, as a function and as an nn.Module."""

from typing import Optional

import torch

from .. import _shardjit
from ._functional import linear_logp

_REDUCTIONS = ("none", "mean", "sum")


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    bias: Optional[torch.Tensor] = None,
    reduction: str = "mean",
    ignore_index: int = -100,
    temperature: float = 1.0,
    valid_vocab: Optional[int] = None,
    process_group: Optional["torch.distributed.ProcessGroup"] = None,
    vocab_start: Optional[int] = None,
    reduce_grad_hidden: bool = True,
    max_rows: Optional[int] = None,
    keep_logits_bytes: Optional[int] = None,
) -> torch.Tensor:
    """``-log p(target)`` of each token under ``(hidden @ weight.T + bias) / temperature``, as
    torch.nn.functional.cross_entropy(logits, targets) would give it, reduced:

    - ``"none"``: fp32 [...] (hidden's leading dimensions), 0 where the target is ignore_index;
    - ``"sum"``: the sum over tokens;
    - ``"mean"``: the sum over the tokens whose target is not ignore_index, divided by their
      count (NaN when every target is ignored, as in PyTorch).

    The other arguments are those of :func:`shardjit.torch.linear_logp`.
    """
    if reduction not in _REDUCTIONS:
        raise _shardjit.InvalidArgumentError(
            f"linear_cross_entropy: reduction: expected 'none', 'mean' or 'sum', got {reduction!r}")
    logp = linear_logp(hidden, weight, targets, bias=bias, temperature=temperature, ignore_index=ignore_index,
                       valid_vocab=valid_vocab, process_group=process_group, vocab_start=vocab_start,
                       reduce_grad_hidden=reduce_grad_hidden, max_rows=max_rows, keep_logits_bytes=keep_logits_bytes)
    loss = -logp
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    counted = (targets != ignore_index).sum()
    return loss.sum() / counted


class LinearCrossEntropyLoss(torch.nn.Module):
    """:func:`linear_cross_entropy` as a module: ``loss(hidden, weight, targets, bias=None)``.

    The options (reduction and the keywords of :func:`linear_cross_entropy`) are fixed when the
    module is made.
    """

    def __init__(self, *, reduction: str = "mean", ignore_index: int = -100, temperature: float = 1.0,
                 valid_vocab: Optional[int] = None,
                 process_group: Optional["torch.distributed.ProcessGroup"] = None,
                 vocab_start: Optional[int] = None, reduce_grad_hidden: bool = True,
                 max_rows: Optional[int] = None, keep_logits_bytes: Optional[int] = None) -> None:
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise _shardjit.InvalidArgumentError(
                f"LinearCrossEntropyLoss: reduction: expected 'none', 'mean' or 'sum', got {reduction!r}")
        self.reduction = reduction
        self.ignore_index = ignore_index
        self.temperature = temperature
        self.valid_vocab = valid_vocab
        self.process_group = process_group
        self.vocab_start = vocab_start
        self.reduce_grad_hidden = reduce_grad_hidden
        self.max_rows = max_rows
        self.keep_logits_bytes = keep_logits_bytes

    def forward(self, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        return linear_cross_entropy(hidden, weight, targets, bias=bias, reduction=self.reduction,
                                    ignore_index=self.ignore_index, temperature=self.temperature,
                                    valid_vocab=self.valid_vocab, process_group=self.process_group,
                                    vocab_start=self.vocab_start, reduce_grad_hidden=self.reduce_grad_hidden,
                                    max_rows=self.max_rows, keep_logits_bytes=self.keep_logits_bytes)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, ignore_index={self.ignore_index}, temperature={self.temperature}"
