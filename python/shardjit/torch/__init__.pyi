"""shardjit for PyTorch: log-probabilities, entropy and lse of target tokens under an LM head with
their gradients in one call, tensor parallel over a torch.distributed group; the cross-GPU
collectives on torch tensors (see docs/python.md)."""

from typing import Optional, Sequence, Tuple, Union, overload

import torch
from torch.distributed import ProcessGroup

from .. import _shardjit
from ._op_level import LinearLogpFunction as LinearLogpFunction

@overload
def linear_logp(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    bias: Optional[torch.Tensor] = None,
    temperature: float = 1.0,
    ignore_index: int = -100,
    valid_vocab: Optional[int] = None,
    return_entropy: bool = False,
    return_lse: bool = False,
    process_group: Optional[ProcessGroup] = None,
    vocab_start: Optional[int] = None,
    reduce_grad_hidden: bool = True,
    max_rows: Optional[int] = None,
    keep_logits_bytes: Optional[int] = None,
) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
    """Log-probability of each target token under (hidden @ weight.T + bias) / temperature,
    fp32 of targets' shape; with return_entropy / return_lse the tuple (logp, entropy, lse) of
    the outputs asked for, in that order. Differentiable with respect to hidden, weight, bias.
    process_group: the tensor-parallel group (weight is this rank's rows); vocab_start: this
    rank's first id (None: shards in rank order); reduce_grad_hidden=False leaves hidden's
    gradient as this rank's partial sum. max_rows: the most rows a call will have (sizes the op at
    build; the peer-memory path of a group on one host); keep_logits_bytes: memory for logits kept
    for the backward (None: what holds the backward's buffers within 1 GiB, at least 256 MiB).
    Under torch.autocast the inputs run in its dtype, as in F.linear."""

@overload
def linear_logp(op: _shardjit.LinearLogp, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                bias: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """The op-level form on an op the caller built: (logp, lse), 2-D inputs."""

def op_linear_logp(op: _shardjit.LinearLogp, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                   bias: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(logp, lse), both fp32 [N], differentiable with respect to hidden, weight and bias, on `op`."""

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
    process_group: Optional[ProcessGroup] = None,
    vocab_start: Optional[int] = None,
    reduce_grad_hidden: bool = True,
    max_rows: Optional[int] = None,
    keep_logits_bytes: Optional[int] = None,
) -> torch.Tensor:
    """-logp reduced as torch.nn.functional.cross_entropy reduces it ('none', 'mean' over the
    tokens not ignored, 'sum')."""

class LinearCrossEntropyLoss(torch.nn.Module):
    """linear_cross_entropy as a module: loss(hidden, weight, targets, bias=None)."""

    reduction: str
    ignore_index: int
    temperature: float
    valid_vocab: Optional[int]
    process_group: Optional[ProcessGroup]
    vocab_start: Optional[int]
    reduce_grad_hidden: bool
    max_rows: Optional[int]
    keep_logits_bytes: Optional[int]

    def __init__(self, *, reduction: str = "mean", ignore_index: int = -100, temperature: float = 1.0,
                 valid_vocab: Optional[int] = None, process_group: Optional[ProcessGroup] = None,
                 vocab_start: Optional[int] = None, reduce_grad_hidden: bool = True,
                 max_rows: Optional[int] = None, keep_logits_bytes: Optional[int] = None) -> None: ...
    def forward(self, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                bias: Optional[torch.Tensor] = None) -> torch.Tensor: ...

def reduce_scatter(input: torch.Tensor, *, process_group: ProcessGroup,
                   rows_per_rank: Optional[Sequence[int]] = None, path: str = "auto") -> torch.Tensor:
    """The sum over the group of input [T, H]; this rank's block of rows_per_rank[rank] rows
    (None: T / world each)."""

def moe_combine(rows: torch.Tensor, positions: torch.Tensor, *, process_group: ProcessGroup, capacity: int,
                gates: Optional[torch.Tensor] = None, path: str = "auto") -> torch.Tensor:
    """Per token this rank owns, the sum over source ranks of gate x the row positions names."""

def set_runtime(value: _shardjit.Runtime) -> None:
    """The Runtime of the ops built from now on."""

def set_op_cache_size(capacity: int) -> None:
    """Keeps at most `capacity` ops (default 32), closing the least recently used beyond it."""

def clear_op_cache() -> None:
    """Closes every cached op, then the process groups' communicators (collective for tensor
    parallelism: every rank calls it, before dist.destroy_process_group())."""

__all__: list[str]
