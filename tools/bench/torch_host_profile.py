#!/usr/bin/env python3
"""Host time per call of shardjit.torch.linear_logp and of its pieces, in microseconds: the
op-level LinearLogp.forward called directly, the custom-op body, the autograd Function, the
argument checks, the output allocations, the stream lookup, the op cache. The shape and timing of
torch_compare.py's --host-overhead (N 16, H 64, V 1024, bf16; the GPU keeps up), 3000 calls after
100. Prints one JSON object.

    python3 tools/bench/torch_host_profile.py
"""

import json

import torch

import shardjit
import shardjit.torch as sjt
from shardjit import _op_cache
from shardjit.torch import _enqueue, _functional, _linear_logp_ops

from torch_compare import host_us_per_call, make_inputs

N, H, V = 16, 64, 1024
# The custom op's arguments after the tensors: the spec (by its field names, so that a new field
# fails here instead of shifting the others), then want_backward, return_lse, reduce_grad_hidden.
SPEC_VALUES = dict(vocab_start=0, valid_vocab=0, ignore_index=-100, temperature=1.0, want_entropy=False, group_name="",
                   max_rows=0, keep_logits_bytes=-1)
SPEC = tuple(SPEC_VALUES[field] for field in _linear_logp_ops.SPEC_FIELDS)
OP_ARGS = SPEC + (False, False, True)
# linear_logp()'s keyword options with their defaults, in _functional._check_options's order.
OPTIONS = (1.0, -100, None, False, False, None, None, True, None, None)


def ordered_under_lock(entry, device):
    """What a call costs besides its op's: the entry's lock and the ordered stream."""
    with entry.lock:
        return _enqueue.ordered_stream(entry, device)


def main():
    hidden, weight, targets = make_inputs(N, H, V, 1, seed=7)[0]
    op = shardjit.LinearLogp(_op_cache.runtime(), hidden=H, vocab_local=V, dtype="bf16")
    logp, lse = torch.empty(N, device="cuda"), torch.empty(N, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    addresses = (hidden.data_ptr(), weight.data_ptr(), targets.data_ptr(), logp.data_ptr(), lse.data_ptr())
    device = hidden.get_device()
    entry = _linear_logp_ops._cached_op(hidden, weight, targets, None, SPEC, False)
    key = _linear_logp_ops.op_key(hidden, weight, targets, None, SPEC, False)
    pieces = {
        "op._forward_at direct": lambda: op._forward_at(N, *addresses, 0, 0, stream),
        "op.forward direct": lambda: op.forward(hidden, weight, targets, logp, lse=lse, stream=stream),
        "op.forward direct, positional only": lambda: op.forward(hidden, weight, targets, logp),
        "sjt.linear_logp no_grad": lambda: sjt.linear_logp(hidden, weight, targets),
        "forward_no_grad": lambda: _linear_logp_ops.forward_no_grad(key, hidden, weight, targets, None, False, False),
        "forward_impl": lambda: _linear_logp_ops.forward_impl(hidden, weight, targets, None, *OP_ARGS),
        "the stream ordered under the entry's lock": lambda: ordered_under_lock(entry, device),
        "_forward (logp made and enqueued)": lambda: _linear_logp_ops._forward(entry, hidden, weight, targets, None,
                                                                               False, False),
        "data_ptr x4": lambda: (hidden.data_ptr(), weight.data_ptr(), targets.data_ptr(), logp.data_ptr()),
        "new_empty": lambda: hidden.new_empty(N, dtype=torch.float32),
        "get_device + shape[0]": lambda: (hidden.get_device(), hidden.shape[0]),
        "input checks of the custom op": lambda: _linear_logp_ops._expect_inputs("op", hidden, weight, targets, None),
        "EagerLinearLogp.apply no_grad": lambda: _linear_logp_ops.EagerLinearLogp.apply((key, SPEC, False, True),
                                                                                        hidden, weight, targets, None),
        "checks": lambda: (_functional._check_tensors(hidden, weight, targets, None),
                           _functional._check_options(*OPTIONS)),
        "option checks": lambda: _functional._check_options(*OPTIONS),
        "call signature + lookup": lambda: _functional._checked_calls.get(
            _functional._call_signature(hidden, weight, targets, None, SPEC)),
        "3 x new_empty": lambda: [hidden.new_empty(rows, dtype=torch.float32) for rows in (N, N, 0)],
        "current_stream": lambda: torch.cuda.current_stream(hidden.device),
        "raw current stream": lambda: torch._C._cuda_getCurrentRawStream(device),
        "op_key": lambda: _linear_logp_ops.op_key(hidden, weight, targets, None, SPEC, False),
        "cached_op": lambda: _linear_logp_ops._cached_op(hidden, weight, targets, None, SPEC, False),
        "reshape+contiguous x3": lambda: (hidden.reshape(-1, H).contiguous(), weight.contiguous(),
                                          targets.reshape(-1).contiguous()),
        "hidden.__dlpack__": lambda: hidden.__dlpack__(),
        "is_compiling": lambda: torch.compiler.is_compiling(),
    }
    result = {}
    with torch.no_grad():
        for name, fn in pieces.items():
            result[name] = round(host_us_per_call(fn, 3000, warmup=100), 2)
    trained = weight.clone().requires_grad_()
    result["sjt.linear_logp training fwd"] = round(
        host_us_per_call(lambda: sjt.linear_logp(hidden, trained, targets), 1000, warmup=100), 2)
    op.close()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
