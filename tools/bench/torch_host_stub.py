#!/usr/bin/env python3
"""The Python layer's own host time per call of shardjit.torch.linear_logp, in microseconds, on
any machine (no GPU needed): CPU tensors of torch_compare.py's host-overhead shape (N 16, H 64,
V 1024, bf16) and a stand-in op whose calls return at once, so that only what the layer adds to
the C++ op is timed (checks, op cache, output allocation, stream lookup, autograd). The median of
`--rounds` rounds of `--calls` calls, after a warm-up. Prints one JSON object:

  "stand-in op call"    the stand-in's _forward_at with addresses, as the layer calls it
  "no_grad"             linear_logp under torch.no_grad()
  "training forward"    linear_logp with a weight that needs a gradient (the autograd Function)
  "training step"       that forward, .sum() and .backward() (the weight's gradient cleared
                        first): autograd's engine and the layer's backward around the stand-in
  "backward"            training step minus training forward: the host's share of a backward
  "added"               no_grad minus the stand-in's call: the layer's share of a call

On a GPU machine torch_host_profile.py times the same pieces around the real op. Here the
stream lookup returns 0 (no CUDA) and the allocations are the CPU allocator's, so the figures
run below the GPU machine's; use them to compare two trees on one machine, alternating processes:

    PYTHONPATH=build/python:python python3 tools/bench/torch_host_stub.py
"""

import argparse
import json
import statistics
import time

import torch

import shardjit.torch as sjt
from shardjit import _op_cache
from shardjit.torch import _enqueue, _functional, _linear_logp_ops

N, H, V = 16, 64, 1024
# linear_logp()'s spec for its default keywords (_functional builds it; the field order is
# _linear_logp_ops.SPEC_FIELDS).
DEFAULT_SPEC = (0, 0, -100, 1.0, False, "", 0, -1)


class StandInOp:
    """Takes the op's calls and does nothing."""

    def _forward_at(self, *arguments):
        pass

    def _backward_at(self, *arguments):
        pass

    def close(self):
        pass


def install_stand_in(hidden, weight, targets):
    """Makes linear_logp() take these tensors' calls as checked and their ops as built: the checks'
    remembered signature (which a CPU tensor could not earn, since the checks want CUDA), the op
    cache's entries for both keys, the stream lookup."""
    _enqueue._raw_current_stream = lambda device: 0
    keys = tuple(_linear_logp_ops.op_key(hidden, weight, targets, None, DEFAULT_SPEC, want_backward)
                 for want_backward in (False, True))
    _functional._checked_calls[_functional._call_signature(hidden, weight, targets, None, DEFAULT_SPEC)] = keys
    for key in keys:
        entry = _op_cache.CachedOp(StandInOp())
        entry.last_stream_handle = 0  # the stream of its "last call": no event to order behind
        _op_cache.ops()._entries[key] = entry


def us_per_call(fn, calls, rounds):
    for _ in range(min(calls, 200)):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    torch.manual_seed(0)
    hidden = torch.randn(N, H).to(torch.bfloat16)
    weight = (torch.randn(V, H) * 0.02).to(torch.bfloat16)
    targets = torch.randint(0, V, (N,))
    install_stand_in(hidden, weight, targets)
    trained = weight.clone().requires_grad_()  # the same op keys: a gradient is not part of them
    stand_in = StandInOp()
    logp = torch.empty(N)
    addresses = (hidden.data_ptr(), weight.data_ptr(), targets.data_ptr(), logp.data_ptr(), 0, 0, 0)
    result = {"stand-in op call": us_per_call(lambda: stand_in._forward_at(N, *addresses, 0), args.calls, args.rounds)}
    with torch.no_grad():
        result["no_grad"] = us_per_call(lambda: sjt.linear_logp(hidden, weight, targets), args.calls, args.rounds)
    result["training forward"] = us_per_call(lambda: sjt.linear_logp(hidden, trained, targets), args.calls,
                                             args.rounds)

    def training_step():
        trained.grad = None  # an accumulated bf16 gradient would time the CPU's additions
        sjt.linear_logp(hidden, trained, targets).sum().backward()

    result["training step"] = us_per_call(training_step, args.calls, args.rounds)
    result["backward"] = result["training step"] - result["training forward"]
    result["added"] = result["no_grad"] - result["stand-in op call"]
    print(json.dumps({name: round(us, 2) for name, us in result.items()}))


if __name__ == "__main__":
    main()
