#!/usr/bin/env python3
"""The combine step of an expert-parallel MoE layer through shardjit.torch.moe_combine, and a
reduce-scatter through shardjit.torch.reduce_scatter, over torchrun's process group. Checks both
against torch.distributed (all_gather + a local sum, reduce_scatter_tensor).

    torchrun --nproc-per-node 2 examples/python/moe_combine.py
    python3 examples/python/moe_combine.py     # one process: a group of one rank
"""

import os

import torch
import torch.distributed as dist

import shardjit.torch as sjt

HIDDEN, CAPACITY, TOKENS = 4096, 1024, 512


def main():
    if "RANK" not in os.environ:  # not under torchrun: a one-rank group of this process
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=os.environ.get("MASTER_PORT", "29511"))
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.group.WORLD
    g = torch.Generator(device="cpu").manual_seed(100 + rank)

    # This rank's expert outputs, and for each token it owns which row of which rank to add.
    rows = torch.randn(CAPACITY, HIDDEN, generator=g).to("cuda", torch.bfloat16)
    positions = torch.randint(-1, CAPACITY, (TOKENS, world), generator=g, dtype=torch.int32).cuda()
    gates = torch.rand(TOKENS, world, generator=g).cuda()
    out = sjt.moe_combine(rows, positions, process_group=group, capacity=CAPACITY, gates=gates)

    everyone = [torch.empty_like(rows) for _ in range(world)]
    dist.all_gather(everyone, rows)
    ref = torch.zeros(TOKENS, HIDDEN, device="cuda")
    for src in range(world):
        present = positions[:, src] >= 0
        picked = everyone[src][positions[:, src].clamp(min=0).long()].float()
        ref += torch.where(present[:, None], gates[:, src : src + 1] * picked, torch.zeros_like(picked))
    combine_err = (out.float() - ref).abs().max().item()

    x = torch.randn(world * TOKENS, HIDDEN, generator=g).to("cuda", torch.bfloat16)
    mine = sjt.reduce_scatter(x, process_group=group)
    theirs = torch.empty_like(mine)
    dist.reduce_scatter_tensor(theirs, x)
    rs_err = (mine.float() - theirs.float()).abs().max().item()
    print(f"rank {rank}: moe_combine max |diff| {combine_err:.3e}, reduce_scatter max |diff| {rs_err:.3e}")

    sjt.clear_op_cache()  # destroying the ops is collective: every rank, before the group goes
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
