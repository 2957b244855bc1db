"""gpu tier: shardjit.torch under torch.compile(fullgraph=True) (a GRPO-style loss: no graph
break, same results as eager), captured in a CUDA graph at a fixed shape and replayed on new
data, and called from two threads at once; each against a float64 reference or eager. Skipped
without PyTorch or a CUDA device."""

import threading

import pytest

from conftest import has_gpu

pytestmark = pytest.mark.skipif(not has_gpu(), reason="needs PyTorch and a CUDA device")

if has_gpu():
    import torch

    import shardjit.torch as sjt
    from torch_reference import assert_close, leaf64, reference

N, H, V = 96, 256, 2048
TOL = 2e-2  # bf16 gradients


def data(seed, n=N):
    g = torch.Generator(device="cpu").manual_seed(seed)
    hidden = (torch.randn(n, H, generator=g) * 0.5).to("cuda", torch.bfloat16)
    weight = (torch.randn(V, H, generator=g) * 0.2).to("cuda", torch.bfloat16)
    targets = torch.randint(0, V, (n,), generator=g).to("cuda")
    old_logp = (torch.randn(n, generator=g) * 0.1 - 7.0).to("cuda")
    advantages = torch.randn(n, generator=g).to("cuda")
    return hidden, weight, targets, old_logp, advantages


def grpo_loss(hidden, weight, targets, old_logp, advantages):
    logp, entropy = sjt.linear_logp(hidden, weight, targets, return_entropy=True)
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 0.8, 1.2)
    policy = -torch.minimum(ratio * advantages, clipped * advantages).mean()
    return policy - 0.01 * entropy.mean()


def grads(fn, hidden, weight, *rest):
    h, w = hidden.detach().clone().requires_grad_(), weight.detach().clone().requires_grad_()
    loss = fn(h, w, *rest)
    loss.backward()
    return loss.detach(), h.grad, w.grad


def test_compile_fullgraph_matches_eager():
    compiled = torch.compile(grpo_loss, fullgraph=True)
    for seed in (1, 2):  # a second call of the same shape reuses the compiled graph
        args = data(seed)
        eager = grads(grpo_loss, *args)
        traced = grads(compiled, *args)
        for name, a, b in zip(("loss", "grad_hidden", "grad_weight"), traced, eager):
            assert_close(a, b, 1e-3, name)
    explained = torch._dynamo.explain(grpo_loss)(*data(3))
    assert explained.graph_break_count == 0, explained.break_reasons


def test_cuda_graph_capture_and_replay():
    hidden, weight, targets, old_logp, advantages = data(4)
    hidden.requires_grad_()
    weight.requires_grad_()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: builds the ops and sizes their buffers for this shape
        for _ in range(2):
            grpo_loss(hidden, weight, targets, old_logp, advantages).backward()
            hidden.grad = weight.grad = None
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = grpo_loss(hidden, weight, targets, old_logp, advantages)
        static_loss.backward()
    for seed in (5, 6):
        fresh = data(seed)
        with torch.no_grad():
            for static, new in zip((hidden, weight, targets, old_logp, advantages), fresh):
                static.copy_(new)
        graph.replay()
        torch.cuda.synchronize()
        x, w = leaf64(fresh[0]), leaf64(fresh[1])
        ref = reference_grpo(x, w, *(t.cpu() for t in fresh[2:]))
        ref.backward()
        assert_close(static_loss, ref, 1e-3, "loss")
        assert_close(hidden.grad, x.grad, TOL, "grad_hidden")
        assert_close(weight.grad, w.grad, TOL, "grad_weight")


def reference_grpo(x, w, targets, old_logp, advantages):
    logp, entropy, _ = reference(x, w, targets)
    ratio = torch.exp(logp - old_logp.double())
    clipped = torch.clamp(ratio, 0.8, 1.2)
    adv = advantages.double()
    return -torch.minimum(ratio * adv, clipped * adv).mean() - 0.01 * entropy.mean()


def test_two_threads_at_once():
    errors, results = [], {}
    barrier = threading.Barrier(2)

    def work(seed):
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                barrier.wait()
                for it in range(4):
                    args = data(seed * 10 + it)
                    results[(seed, it)] = (args, grads(grpo_loss, *args))
            stream.synchronize()
        except Exception as error:  # reported below, with the thread it came from
            errors.append((seed, repr(error)))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in (7, 8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 8
    for (args, (loss, grad_hidden, grad_weight)) in results.values():
        x, w = leaf64(args[0]), leaf64(args[1])
        ref = reference_grpo(x, w, *(t.cpu() for t in args[2:]))
        ref.backward()
        assert_close(loss, ref, 1e-3, "loss")
        assert_close(grad_hidden, x.grad, TOL, "grad_hidden")
        assert_close(grad_weight, w.grad, TOL, "grad_weight")
