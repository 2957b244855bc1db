"""ReduceScatter and MoeCombine over a torch.distributed process group: custom ops
(shardjit::reduce_scatter, shardjit::moe_combine) with fake implementations, and the functional
calls. The ops are cached per group, device, shape and options; building one is collective, so
every rank of the group makes the same calls in the same order. Not differentiable."""

from typing import List, Optional, Sequence

import torch

from .. import _op_cache, _shardjit
from . import _enqueue, _groups
from ._linear_logp_ops import dtype_name

_PATHS = ("auto", "peer", "nccl")


@torch.library.custom_op("shardjit::reduce_scatter", mutates_args=(), device_types="cuda")
def reduce_scatter_op(input: torch.Tensor, group_name: str, rows_per_rank: List[int], rank: int,
                      path: str) -> torch.Tensor:
    """Rank `rank` of the group gets the sum over the ranks of its rows_per_rank[rank] rows."""
    device = input.device.index
    key = ("reduce_scatter", device, group_name, int(input.shape[1]), tuple(rows_per_rank),
           dtype_name(input.dtype), path)

    def build():
        return _shardjit.ReduceScatter(_op_cache.runtime(), _groups.communicator(group_name, device),
                                       hidden=int(input.shape[1]), rows_per_rank=list(rows_per_rank),
                                       dtype=dtype_name(input.dtype), path=path)

    output = input.new_empty(rows_per_rank[rank], input.shape[1])
    with _op_cache.ops().locked(key, build) as entry:
        entry.op.run(input, output, _enqueue.ordered_stream(entry, device))
    return output


@reduce_scatter_op.register_fake
def _(input, group_name, rows_per_rank, rank, path):
    return input.new_empty(rows_per_rank[rank], input.shape[1])


@torch.library.custom_op("shardjit::moe_combine", mutates_args=(), device_types="cuda")
def moe_combine_op(rows: torch.Tensor, positions: torch.Tensor, gates: Optional[torch.Tensor], group_name: str,
                   capacity: int, path: str) -> torch.Tensor:
    """Each token's output row: the sum over source ranks of gate x the row its position names."""
    device = rows.device.index
    key = ("moe_combine", device, group_name, int(rows.shape[1]), int(capacity), dtype_name(rows.dtype),
           gates is not None, path)

    def build():
        return _shardjit.MoeCombine(_op_cache.runtime(), _groups.communicator(group_name, device),
                                    hidden=int(rows.shape[1]), capacity=int(capacity), dtype=dtype_name(rows.dtype),
                                    gates=gates is not None, path=path)

    output = rows.new_empty(positions.shape[0], rows.shape[1])
    with _op_cache.ops().locked(key, build) as entry:
        entry.op.run(rows, positions, output, gates=gates, stream=_enqueue.ordered_stream(entry, device))
    return output


@moe_combine_op.register_fake
def _(rows, positions, gates, group_name, capacity, path):
    return rows.new_empty(positions.shape[0], rows.shape[1])


def _error(name, what, message):
    return _shardjit.InvalidArgumentError(f"{name}: {what}: {message}")


def _check_group(name, process_group):
    if not (torch.distributed.is_available() and isinstance(process_group, torch.distributed.ProcessGroup)):
        raise TypeError(f"{name}: process_group: expected a torch.distributed.ProcessGroup, "
                        f"got {type(process_group).__name__}")


def _check_matrix(name, what, tensor):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name}: {what}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dim() != 2:
        raise _error(name, what, f"expected 2 dimensions, got shape {tuple(tensor.shape)}")


def _check_cuda(name, **tensors):
    """Last of the checks, so that the others can be exercised on CPU tensors."""
    device = None
    for what, tensor in tensors.items():
        if tensor is None:
            continue
        if tensor.device.type != "cuda":
            raise _error(name, what, f"expected a CUDA tensor, got one on {tensor.device}")
        if device is not None and tensor.device != device:
            raise _error(name, what, f"expected a tensor on {device}, got one on {tensor.device}")
        device = tensor.device


def _check_path(name, path):
    if path not in _PATHS:
        raise _error(name, "path", f"expected 'auto', 'peer' or 'nccl', got {path!r}")


def reduce_scatter(input: torch.Tensor, *, process_group: "torch.distributed.ProcessGroup",
                   rows_per_rank: Optional[Sequence[int]] = None, path: str = "auto") -> torch.Tensor:
    """Sum over the ranks of `process_group` of input [T, H] (bfloat16, float16 or float32), of
    which this rank gets its rows: rank r the rows_per_rank[r] rows after those of the lower
    ranks (None: T / world size each, T a multiple of the world size). Returns
    [rows_per_rank[rank], H]. path: 'auto' (NVLink peer memory within a host, else NCCL), 'peer'
    or 'nccl'."""
    name = "reduce_scatter"
    _check_group(name, process_group)
    _check_matrix(name, "input", input)
    if dtype_name(input.dtype) is None:
        raise TypeError(f"{name}: input: expected bfloat16, float16 or float32, got {input.dtype}")
    _check_path(name, path)
    world = torch.distributed.get_world_size(process_group)
    if rows_per_rank is None:
        if input.shape[0] % world != 0:
            raise _error(name, "input", f"{input.shape[0]} rows do not split evenly over {world} ranks; "
                                        "pass rows_per_rank")
        rows_per_rank = [input.shape[0] // world] * world
    if (not isinstance(rows_per_rank, (list, tuple)) or len(rows_per_rank) != world
            or any(isinstance(r, bool) or not isinstance(r, int) or r < 0 for r in rows_per_rank)
            or sum(rows_per_rank) != input.shape[0]):
        raise _error(name, "rows_per_rank", f"expected {world} non-negative row counts summing to "
                                            f"{input.shape[0]} (input's rows), got {rows_per_rank!r}")
    _check_cuda(name, input=input)
    return reduce_scatter_op(input.contiguous(), process_group.group_name, list(rows_per_rank),
                             torch.distributed.get_rank(process_group), path)


def moe_combine(rows: torch.Tensor, positions: torch.Tensor, *, process_group: "torch.distributed.ProcessGroup",
                capacity: int, gates: Optional[torch.Tensor] = None, path: str = "auto") -> torch.Tensor:
    """The combine step of an expert-parallel MoE layer over `process_group`: this rank's expert
    outputs rows [R <= capacity, H]; positions int32 [tokens, world]: source rank s's row for
    each token this rank owns, -1 where none; gates fp32 [tokens, world] or None (weights 1).
    Returns [tokens, H]: per token the sum over sources, in rank order, of gate x row,
    accumulated in fp32. `capacity` (rows of every rank's buffer) is the same on every rank."""
    name = "moe_combine"
    _check_group(name, process_group)
    _check_matrix(name, "rows", rows)
    _check_matrix(name, "positions", positions)
    if dtype_name(rows.dtype) is None:
        raise TypeError(f"{name}: rows: expected bfloat16, float16 or float32, got {rows.dtype}")
    if positions.dtype != torch.int32:
        raise TypeError(f"{name}: positions: expected int32, got {positions.dtype}")
    if gates is not None:
        _check_matrix(name, "gates", gates)
        if gates.dtype != torch.float32:
            raise TypeError(f"{name}: gates: expected float32, got {gates.dtype}")
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < rows.shape[0]:
        raise _error(name, "capacity", f"expected an int >= {rows.shape[0]} (rows' row count), got {capacity!r}")
    _check_path(name, path)
    _check_cuda(name, rows=rows, positions=positions, gates=gates)
    return moe_combine_op(rows.contiguous(), positions.contiguous(),
                          None if gates is None else gates.contiguous(), process_group.group_name, capacity, path)
