#!/usr/bin/env python3
"""One GRPO/PPO-style policy step through shardjit.torch.linear_logp, on random weights with the
shape of a real model's LM head (llama3-8b: hidden 4096, vocabulary 128256; pass --small for a
quick run).

- old log-probs: the policy before the update, without gradients (the rollout's);
- new log-probs and entropy, differentiable, in one fused call (no N x V logits in memory);
- clipped ratio loss with an entropy bonus, then backward into the hidden states and LM head.

Single GPU:              python3 examples/python/grpo_step.py
Tensor parallel (2 GPUs): torchrun --nproc-per-node 2 examples/python/grpo_step.py
  (each rank holds half of the LM head's rows; the process group is torchrun's.)
"""

import argparse
import os

import torch
import torch.distributed as dist

import shardjit.torch as sjt


def setup():
    """(process_group or None, this rank's device). Under torchrun: an NCCL group of all ranks."""
    if "RANK" not in os.environ:
        return None, torch.device("cuda", 0)
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return dist.group.WORLD, torch.device("cuda", local)


def lm_head_shard(vocab, hidden, group, device, seed=0):
    """This rank's rows of a random LM head (every rank draws the same full head, keeps its rows)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    full = torch.randn(vocab, hidden, generator=g) * hidden ** -0.5
    if group is None:
        rows = slice(0, vocab)
    else:
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        per = -(-vocab // world)
        rows = slice(rank * per, min(vocab, (rank + 1) * per))
    return torch.nn.Parameter(full[rows].to(device, torch.bfloat16))


def grpo_loss(new_logp, old_logp, entropy, advantages, mask, clip=0.2, entropy_coef=0.01):
    ratio = torch.exp(new_logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - clip, 1 + clip) * advantages
    per_token = -torch.minimum(unclipped, clipped) - entropy_coef * entropy
    return (per_token * mask).sum() / mask.sum()


def main():
    parser = argparse.ArgumentParser(description="one GRPO step through shardjit.torch")
    parser.add_argument("--small", action="store_true", help="hidden 1024, vocabulary 32000, 2 x 512 tokens")
    args = parser.parse_args()
    hidden_size, vocab = (1024, 32000) if args.small else (4096, 128256)
    batch, seq = (2, 512) if args.small else (4, 2048)
    group, device = setup()
    weight = lm_head_shard(vocab, hidden_size, group, device)

    # The same rollout on every rank (as the trainer's data loader would give it).
    g = torch.Generator(device="cpu").manual_seed(1)
    hidden = (torch.randn(batch, seq, hidden_size, generator=g)).to(device, torch.bfloat16).requires_grad_()
    tokens = torch.randint(0, vocab, (batch, seq), generator=g).to(device)
    tokens[:, : seq // 8] = -100  # the prompt: no loss there
    advantages = torch.randn(batch, 1, generator=g).to(device).expand(batch, seq)
    mask = (tokens != -100).float()

    with torch.no_grad():  # the behaviour policy's log-probs (inference: no backward kernels)
        old_logp = sjt.linear_logp(hidden, weight, tokens, process_group=group)

    new_logp, entropy = sjt.linear_logp(hidden, weight, tokens, return_entropy=True, process_group=group)
    loss = grpo_loss(new_logp, old_logp, entropy, advantages, mask)
    loss.backward()

    rank = 0 if group is None else dist.get_rank(group)
    print(f"rank {rank}: loss {loss.item():.5f}  mean entropy {entropy[mask > 0].mean().item():.3f}  "
          f"|grad hidden| {hidden.grad.float().norm().item():.4f}  |grad head shard| "
          f"{weight.grad.float().norm().item():.4f}  max new-old |logp| "
          f"{(new_logp - old_logp).abs().max().item():.2e}")
    if group is not None:
        sjt.clear_op_cache()  # collective ops go together, before the group
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
