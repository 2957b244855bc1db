"""shardjit for PyTorch: log-probabilities, entropy and lse of target tokens under an LM head,
with their gradients, in one call, tensor parallel over a torch.distributed group; the
cross-GPU collectives on torch tensors. Importing it imports torch (the rest of shardjit does
not).

    import shardjit.torch as sjt
    logp = sjt.linear_logp(hidden, lm_head.weight, targets)             # fp32, hidden's leading dims
    logp, entropy = sjt.linear_logp(hidden, w, targets, return_entropy=True)
    loss = sjt.linear_cross_entropy(hidden, w, targets)                  # mean over non-ignored tokens

Ops are built per device and specialization on first use and cached (:func:`set_op_cache_size`,
:func:`clear_op_cache`), sharing one :class:`shardjit.Runtime` (:func:`set_runtime` to choose
it). The op-level form ``linear_logp(op, hidden, weight, targets, bias=None)`` -> (logp, lse),
with a :class:`shardjit.LinearLogp` the caller built, stays for servers that manage their ops
(also as :func:`op_linear_logp`). See docs/python.md.
"""

from typing import Any

import torch

from .. import _op_cache, _shardjit
from .._op_cache import set_op_cache_size, set_runtime
from . import _groups
from ._collective_ops import moe_combine, reduce_scatter
from ._functional import linear_logp as _functional_linear_logp
from ._op_level import LinearLogpFunction, op_linear_logp
from .loss import LinearCrossEntropyLoss, linear_cross_entropy


def linear_logp(hidden: Any, *args: Any, **kwargs: Any) -> Any:
    # The tensor test first: torch.compile folds it, and never looks at the extension's class.
    is_op = not isinstance(hidden, torch.Tensor) and isinstance(hidden, _shardjit.LinearLogp)
    dispatch = op_linear_logp if is_op else _functional_linear_logp
    return dispatch(hidden, *args, **kwargs)


linear_logp.__doc__ = _functional_linear_logp.__doc__ + """
    Op-level form: when the first argument is a :class:`shardjit.LinearLogp`, the call is
    ``op_linear_logp(op, hidden, weight, targets, bias=None)`` -> (logp, lse) on that op.
    """
linear_logp.__wrapped__ = _functional_linear_logp  # help() and inspect.signature show the functional form

def clear_op_cache() -> None:
    """Closes every cached op, then the process groups' communicators (collective for tensor
    parallelism: every rank calls it, before ``dist.destroy_process_group()``)."""
    _op_cache.clear_op_cache()
    _groups.close_communicators()


__all__ = [
    "linear_logp",
    "linear_cross_entropy",
    "LinearCrossEntropyLoss",
    "reduce_scatter",
    "moe_combine",
    "op_linear_logp",
    "LinearLogpFunction",
    "set_runtime",
    "set_op_cache_size",
    "clear_op_cache",
]
