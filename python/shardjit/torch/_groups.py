"""torch.distributed process groups -> shardjit Communicators, built once per group and device.

PyTorch does not hand out a process group's NCCL communicator in a form another NCCL build can
use (its ncclComm_t belongs to the NCCL library PyTorch links, which need not be the one shardjit
links), so each group gets a communicator of its own: group rank 0 makes a unique id and the
group broadcasts it (one small collective, once per group). Building it is collective: every
rank of the group makes its first shardjit call on the group at the same point.

The custom ops take a group by name (ProcessGroup.group_name), which torch.compile can trace.
"""

import threading

from .. import _op_cache, _shardjit

_lock = threading.Lock()
_communicators = {}
_layouts = {}


def group_of(name):
    """The ProcessGroup named `name` (a group the caller made with torch.distributed)."""
    from torch.distributed.distributed_c10d import _resolve_process_group

    return _resolve_process_group(name)


def communicator(name, device):
    """The shardjit.Communicator of group `name` on CUDA device `device` (built on first use)."""
    key = (name, device)
    with _lock:
        comm = _communicators.get(key)
        if comm is None:
            comm = _build_communicator(group_of(name), device)
            _communicators[key] = comm
        return comm


def _build_communicator(group, device):
    import torch
    import torch.distributed as dist

    rank = dist.get_rank(group)
    size = dist.get_world_size(group)
    unique_id = _shardjit.Communicator.new_unique_id() if rank == 0 else b""
    # Rank 0's id travels as uint8 tensors on the group's device (an NCCL group broadcasts CUDA
    # tensors only): its length first, then its bytes.
    length = torch.tensor([len(unique_id)], dtype=torch.int64, device=f"cuda:{device}")
    src = dist.get_global_rank(group, 0)
    dist.broadcast(length, src=src, group=group)
    payload = torch.zeros(int(length.item()), dtype=torch.uint8, device=f"cuda:{device}")
    if rank == 0:
        payload.copy_(torch.frombuffer(bytearray(unique_id), dtype=torch.uint8))
    dist.broadcast(payload, src=src, group=group)
    return _shardjit.Communicator(_op_cache.runtime(), device, rank, size, bytes(payload.cpu().tolist()))


def vocab_layout(name, device, vocab_local, vocab_start):
    """(vocab_start, vocab_global) of this rank's shard of `vocab_local` rows: the shards of the
    group's ranks, in rank order, tile the vocabulary. The shard sizes are all-gathered once per
    (group, shard size) (collective, like the op's build); vocab_start < 0 takes the prefix sum
    of the lower ranks' sizes, else the caller's start is kept (the op's build checks the
    layout on every rank)."""
    key = (name, device, vocab_local, vocab_start)
    with _lock:
        layout = _layouts.get(key)
        if layout is None:
            layout = _gather_layout(group_of(name), device, vocab_local, vocab_start)
            _layouts[key] = layout
        return layout


def _gather_layout(group, device, vocab_local, vocab_start):
    import torch
    import torch.distributed as dist

    size = dist.get_world_size(group)
    mine = torch.tensor([vocab_local], dtype=torch.int64, device=f"cuda:{device}")
    sizes = [torch.empty_like(mine) for _ in range(size)]
    dist.all_gather(sizes, mine, group=group)
    sizes = [int(s.item()) for s in sizes]
    if vocab_start < 0:
        vocab_start = sum(sizes[: dist.get_rank(group)])
    return vocab_start, sum(sizes)


def close_communicators():
    """Closes the groups' communicators and forgets them and the vocabulary layouts, so that a
    group made later under a name an earlier group had (torch.distributed reuses them after
    destroy_process_group) gets a communicator of its own. Every rank calls it, after the ops
    built on them are closed (clear_op_cache)."""
    with _lock:
        communicators = list(_communicators.values())
        _communicators.clear()
        _layouts.clear()
    for comm in communicators:
        comm.close()
