"""One rank of test_torch_two_gpus.py: joins an NCCL process group of two ranks (torch.distributed,
env:// rendezvous) on CUDA device <rank> and checks shardjit.torch.linear_logp with the vocabulary
split over the group against the single-GPU call on the whole vocabulary (run on this rank), with
and without reduce_grad_hidden; then reduce_scatter and moe_combine over the group against
float64 sums. Run as

    MASTER_ADDR=127.0.0.1 MASTER_PORT=<port> python3 torch_tp_worker.py <rank> <cache_dir>

by the test, once per rank, at the same time. Exits 0 when every case passed; prints the failed
cases on stderr and exits 1 otherwise. Not a test module."""

import sys
import traceback

import torch
import torch.distributed as dist

import shardjit
import shardjit.torch as sjt

WORLD = 2
N, H, V = 77, 256, 3001  # an odd vocabulary: rank 0 holds 1501 rows, rank 1 1500


def close(out, ref, tol, what):
    out, ref = out.detach().double().cpu(), ref.detach().double().cpu()
    err = float((out - ref).norm() / ref.norm().clamp(min=1e-30))
    if not err <= tol:
        raise AssertionError(f"{what}: relative error {err:.3e} > {tol:.1e}")


def shared_data(dtype):
    g = torch.Generator(device="cpu").manual_seed(1234)
    hidden = (torch.randn(N, H, generator=g) * 0.5).to(dtype)
    weight = (torch.randn(V, H, generator=g) * 0.2).to(dtype)
    bias = torch.randn(V, generator=g) * 0.3
    targets = torch.randint(0, V, (N,), generator=g)
    targets[::9] = -100
    ups = torch.randn(3, N, generator=g)
    return hidden, weight, bias, targets, ups


def run(rank, hidden, weight, bias, targets, ups, group, reduce_grad_hidden, shard):
    x = hidden.cuda().requires_grad_()
    w = weight.cuda()
    b = bias.cuda()
    if shard is not None:
        w, b = w[shard].contiguous(), b[shard].contiguous()
    w.requires_grad_()
    b.requires_grad_()
    logp, entropy, lse = sjt.linear_logp(x, w, targets.cuda(), bias=b, temperature=0.9, return_entropy=True,
                                         return_lse=True, process_group=group,
                                         reduce_grad_hidden=reduce_grad_hidden)
    up = ups.cuda()
    (logp * up[0] + entropy * up[1] + lse * up[2]).sum().backward()
    return logp, entropy, lse, x.grad, w.grad, b.grad


def check_linear_logp(rank, group, dtype, reduce_grad_hidden, tol):
    hidden, weight, bias, targets, ups = shared_data(dtype)
    split = (V + 1) // 2
    shard = slice(0, split) if rank == 0 else slice(split, V)
    tp = run(rank, hidden, weight, bias, targets, ups, group, reduce_grad_hidden, shard)
    full = run(rank, hidden, weight, bias, targets, ups, None, True, None)
    for name, a, b in zip(("logp", "entropy", "lse"), tp[:3], full[:3]):
        close(a, b, 1e-5, name)
    grad_hidden = tp[3].float()
    if not reduce_grad_hidden:
        dist.all_reduce(grad_hidden, group=group)  # the trainer's own reduction of the partials
    close(grad_hidden, full[3], tol, "grad_hidden")
    close(tp[4], full[4][shard], tol, "grad_weight (this rank's rows)")
    close(tp[5], full[5][shard], tol, "grad_bias (this rank's rows)")
    if not reduce_grad_hidden:
        # A partial alone must differ from the sum: else the test could not tell the two apart.
        assert float((tp[3].float() - full[3].float()).norm()) > 1e-3 * float(full[3].float().norm())


def check_collectives(rank, group):
    g = torch.Generator(device="cpu").manual_seed(99)
    inputs = [torch.randn(12, 64, generator=g) for _ in range(WORLD)]
    rows = [5, 7]
    out = sjt.reduce_scatter(inputs[rank].cuda(), process_group=group, rows_per_rank=rows)
    total = sum(i.double() for i in inputs)
    start = sum(rows[:rank])
    close(out, total[start:start + rows[rank]], 1e-6, "reduce_scatter")

    buffers = [torch.randn(6, 64, generator=g) for _ in range(WORLD)]
    positions = torch.randint(-1, 6, (9, WORLD), generator=g, dtype=torch.int32)
    gates = torch.rand(9, WORLD, generator=g)
    out = sjt.moe_combine(buffers[rank].cuda(), positions.cuda(), process_group=group, capacity=6,
                          gates=gates.cuda())
    ref = torch.zeros(9, 64, dtype=torch.float64)
    for token in range(9):
        for src in range(WORLD):
            p = int(positions[token, src])
            if p >= 0:
                ref[token] += gates[token, src].double() * buffers[src][p].double()
    close(out, ref, 1e-6, "moe_combine")


def main():
    rank, cache_dir = int(sys.argv[1]), sys.argv[2]
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=WORLD, device_id=torch.device("cuda", rank))
    sjt.set_runtime(shardjit.Runtime(cache_dir=cache_dir))
    group = dist.new_group([0, 1])
    failures = []
    cases = [("linear_logp fp32 reduced", lambda: check_linear_logp(rank, group, torch.float32, True, 1e-5)),
             ("linear_logp fp32 partial", lambda: check_linear_logp(rank, group, torch.float32, False, 1e-5)),
             ("linear_logp bf16 reduced", lambda: check_linear_logp(rank, group, torch.bfloat16, True, 2e-2)),
             ("linear_logp bf16 partial", lambda: check_linear_logp(rank, group, torch.bfloat16, False, 2e-2)),
             ("collectives", lambda: check_collectives(rank, group))]
    for name, case in cases:
        try:
            case()
            print(f"rank {rank}: {name}: ok", flush=True)
        except Exception:
            failures.append(name)
            print(f"rank {rank}: {name} FAILED\n{traceback.format_exc()}", file=sys.stderr, flush=True)
    torch.cuda.synchronize()
    sjt.clear_op_cache()  # collective ops are destroyed together, before the group goes
    dist.destroy_process_group()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
