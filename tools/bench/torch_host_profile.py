#!/usr/bin/env python3
"""Host time per call of shardjit.torch.linear_logp and of its pieces, in microseconds: the
op-level LinearLogp.forward called directly, the custom-op body, the autograd Function, the
argument checks, the output allocations, the stream lookup, the op cache. A shape small enough
that the GPU keeps up (N 16, H 64, V 1024, bf16); 3000 calls after 100, timed with
perf_counter. Prints one JSON object.

    python3 tools/bench/torch_host_profile.py
"""
import json
import time
import torch
import shardjit
import shardjit.torch as sjt
from shardjit import _op_cache
from shardjit.torch import _functional as F, _linear_logp_ops as L

n, h, v = 16, 64, 1024
dev = "cuda"
hidden = torch.randn(n, h, device=dev, dtype=torch.bfloat16)
weight = torch.randn(v, h, device=dev, dtype=torch.bfloat16)
targets = torch.randint(0, v, (n,), device=dev)
op = shardjit.LinearLogp(_op_cache.runtime(), hidden=h, vocab_local=v, dtype="bf16")
logp = torch.empty(n, device=dev); lse = torch.empty(n, device=dev)
stream = torch.cuda.current_stream().cuda_stream
spec = (0, 0, -100, 1.0, False, "")
def t(fn, calls=3000):
    for _ in range(100): fn()
    torch.cuda.synchronize()
    s = time.perf_counter()
    for _ in range(calls): fn()
    r = (time.perf_counter() - s) / calls * 1e6
    torch.cuda.synchronize()
    return round(r, 2)
res = {}
with torch.no_grad():
    res["op.forward direct"] = t(lambda: op.forward(hidden, weight, targets, logp, lse=lse, stream=stream))
    res["op.forward direct, positional only"] = t(lambda: op.forward(hidden, weight, targets, logp))
    res["sjt.linear_logp no_grad"] = t(lambda: sjt.linear_logp(hidden, weight, targets))
    res["forward_impl"] = t(lambda: L.forward_impl(hidden, weight, targets, None, 0, 0, -100, 1.0, False, "", False, False, True))
    res["EagerLinearLogp.apply no_grad"] = t(lambda: L.EagerLinearLogp.apply(hidden, weight, targets, None, 0, 0, -100, 1.0, False, "", False, False, True))
    res["checks"] = t(lambda: (F._check_tensors(hidden, weight, targets, None), F._check_options(1.0, -100, None, False, False, None, None, True)))
    res["3 x new_empty"] = t(lambda: (hidden.new_empty(n, dtype=torch.float32), hidden.new_empty(n, dtype=torch.float32), hidden.new_empty(0, dtype=torch.float32)))
    res["current_stream"] = t(lambda: torch.cuda.current_stream(hidden.device))
    res["op_key"] = t(lambda: L.op_key(hidden, weight, targets, None, spec, False))
    res["cached_op"] = t(lambda: L._cached_op(hidden, weight, targets, None, spec, False))
    res["reshape+contiguous x3"] = t(lambda: (hidden.reshape(-1, h).contiguous(), weight.contiguous(), targets.reshape(-1).contiguous()))
    res["hidden.__dlpack__"] = t(lambda: hidden.__dlpack__())
    res["is_compiling"] = t(lambda: torch.compiler.is_compiling())
w2 = weight.clone().requires_grad_()
res["sjt.linear_logp training fwd"] = t(lambda: sjt.linear_logp(hidden, w2, targets), 1000)
print(json.dumps(res, indent=1))
