"""shardjit.torch.linear_logp: log-probabilities (and entropy, lse) of target tokens under an LM
head, on torch tensors, differentiable, in one call."""

import math
import numbers
from typing import Optional, Tuple, Union

import torch

from .. import _shardjit
from . import _linear_logp_ops

_NAME = "linear_logp"


def _type_error(what, expected, value):
    return TypeError(f"{_NAME}: {what}: expected {expected}, got {type(value).__name__}")


def _value_error(what, message):
    return _shardjit.InvalidArgumentError(f"{_NAME}: {what}: {message}")


def _check_tensors(hidden, weight, targets, bias):
    if not isinstance(hidden, torch.Tensor):
        raise _type_error("hidden", "a torch.Tensor [..., H]", hidden)
    if not isinstance(weight, torch.Tensor):
        raise _type_error("weight", "a torch.Tensor [V_local, H]", weight)
    if not isinstance(targets, torch.Tensor):
        raise _type_error("targets", "a torch.Tensor of token ids", targets)
    if bias is not None and not isinstance(bias, torch.Tensor):
        raise _type_error("bias", "a torch.Tensor [V_local] or None", bias)
    if _linear_logp_ops.dtype_name(hidden.dtype) is None:
        raise TypeError(f"{_NAME}: hidden: expected bfloat16, float16 or float32, got {hidden.dtype}")
    if hidden.dim() < 2:
        raise _value_error("hidden", f"expected [..., H] with at least 2 dimensions, got shape {tuple(hidden.shape)}")
    if weight.dim() != 2 or weight.shape[1] != hidden.shape[-1]:
        raise _value_error("weight", f"expected [V_local, {hidden.shape[-1]}] (H of hidden), "
                                     f"got shape {tuple(weight.shape)}")
    if weight.dtype != hidden.dtype:
        raise TypeError(f"{_NAME}: weight: expected {hidden.dtype} (the dtype of hidden), got {weight.dtype}")
    if _linear_logp_ops.target_dtype_name(targets.dtype) is None:
        raise TypeError(f"{_NAME}: targets: expected int32 or int64, got {targets.dtype}")
    if targets.shape != hidden.shape[:-1]:
        raise _value_error("targets", f"expected shape {tuple(hidden.shape[:-1])} (hidden's leading dimensions), "
                                      f"got {tuple(targets.shape)}")
    if bias is not None:
        if bias.dim() != 1 or bias.shape[0] != weight.shape[0]:
            raise _value_error("bias", f"expected [{weight.shape[0]}] (V_local), got shape {tuple(bias.shape)}")
        if _linear_logp_ops.dtype_name(bias.dtype) is None:
            raise TypeError(f"{_NAME}: bias: expected bfloat16, float16 or float32, got {bias.dtype}")
    # get_device() is the CUDA index, cheaper than comparing torch.device objects; -1 off CUDA.
    device = hidden.get_device()
    for what, tensor in (("weight", weight), ("targets", targets), ("bias", bias)):
        if tensor is not None and (tensor.get_device() != device or (device < 0 and tensor.device != hidden.device)):
            raise _value_error(what, f"expected a tensor on {hidden.device} (hidden's device), got {tensor.device}")


# The checks of plain values test the exact type first: an ABC's isinstance (numbers.Integral)
# costs a few hundred nanoseconds, several times a call.
def _check_int(what, value, allow_none=False):
    if type(value) is int or (value is None and allow_none):
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _type_error(what, "an int" + (" or None" if allow_none else ""), value)


def _check_options(temperature, ignore_index, valid_vocab, return_entropy, return_lse, process_group, vocab_start,
                   reduce_grad_hidden, max_rows, keep_logits_bytes):
    # Every call runs these: the usual values (exact types, None) pass with one test each.
    if type(temperature) is not float and (isinstance(temperature, bool)
                                           or not isinstance(temperature, numbers.Real)):
        raise _type_error("temperature", "a positive number", temperature)
    if not (0 < temperature < math.inf):
        raise _value_error("temperature", f"expected a positive finite number, got {temperature}")
    if type(ignore_index) is not int:
        _check_int("ignore_index", ignore_index)
    if valid_vocab is not None:
        _check_int("valid_vocab", valid_vocab, allow_none=True)
        if valid_vocab < 1:
            raise _value_error("valid_vocab", f"expected a positive vocabulary size or None, got {valid_vocab}")
    if vocab_start is not None:
        _check_int("vocab_start", vocab_start, allow_none=True)
        if vocab_start < 0:
            raise _value_error("vocab_start", f"expected a non-negative token id or None, got {vocab_start}")
        if process_group is None and vocab_start != 0:
            raise _value_error("vocab_start", "a vocabulary shard needs the process_group that holds the others")
    for what, size in (("max_rows", max_rows), ("keep_logits_bytes", keep_logits_bytes)):
        if size is not None:
            _check_int(what, size, allow_none=True)
            if size < 0:
                raise _value_error(what, f"expected a non-negative int or None, got {size}")
    if not ((return_entropy is True or return_entropy is False) and (return_lse is True or return_lse is False)
            and (reduce_grad_hidden is True or reduce_grad_hidden is False)):
        for what, flag in (("return_entropy", return_entropy), ("return_lse", return_lse),
                           ("reduce_grad_hidden", reduce_grad_hidden)):
            if flag is not True and flag is not False:
                raise _type_error(what, "True or False", flag)
    if process_group is not None and not (torch.distributed.is_available()
                                          and isinstance(process_group, torch.distributed.ProcessGroup)):
        raise _type_error("process_group", "a torch.distributed.ProcessGroup or None", process_group)


# Calls already checked, by everything that the tensor checks and the op key read except the rows
# (N, and the leading dimensions of a 3-D call): their op keys without and with the backward. A
# call like an earlier one skips the checks and the key, about a third of its Python
# (benchmarks.md, "Through PyTorch"). Emptied when it reaches _CHECKED_CALLS_MAX entries.
_checked_calls = {}
_CHECKED_CALLS_MAX = 256


def _call_signature(hidden, weight, targets, bias, spec):
    """What the checks and the op key read of a call but its rows; None where an argument lacks
    what is read (the checks then say what is wrong). The types are part of it, so that no other
    kind of object passes for a checked tensor."""
    try:
        return (type(hidden), type(weight), type(targets), hidden.dtype, weight.dtype, targets.dtype,
                hidden.get_device(), weight.get_device(), targets.get_device(), hidden.dim(), targets.dim(),
                hidden.shape[-1], weight.shape,
                None if bias is None else (type(bias), bias.dtype, bias.get_device(), bias.shape), spec)
    except (AttributeError, IndexError, TypeError):
        return None


def _check_on_cuda(hidden):
    """The tensors are on CUDA (_check_tensors has put them on hidden's device). Checked last and
    on its own, so that the checks before it, and with a stand-in op the whole call, can be
    exercised on CPU tensors."""
    if not hidden.is_cuda:
        raise _value_error("hidden", f"expected a CUDA tensor, got one on {hidden.device}")


def _check_call(hidden, weight, targets, bias, spec, remember):
    """The checks of a call's tensors; its op keys (without and with the backward), remembered
    under its signature if `remember` (None if not: a traced call's custom op keys its op)."""
    _check_tensors(hidden, weight, targets, bias)
    _check_on_cuda(hidden)
    if not remember:
        return None
    flat_hidden, flat_targets = hidden.reshape(-1, hidden.shape[-1]), targets.reshape(-1)
    keys = tuple(_linear_logp_ops.op_key(flat_hidden, weight, flat_targets, bias, spec, want_backward)
                 for want_backward in (False, True))
    if len(_checked_calls) >= _CHECKED_CALLS_MAX:
        _checked_calls.clear()
    _checked_calls[_call_signature(hidden, weight, targets, bias, spec)] = keys
    return keys


# Bound once: two attribute lookups less a call (torch.compile traces it as torch.compiler.is_compiling).
_is_compiling = torch.compiler.is_compiling


# Whether autocast is on for any device: one call, where each device's own test costs more, on
# every call's path. (A torch without it asks CUDA's and the CPU's.)
_any_autocast = getattr(torch._C, "_is_any_autocast_enabled", None) or (
    lambda: torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("cpu"))


def _autocast_inputs(hidden, weight, bias):
    """hidden, weight and bias as autocast wants them where it is on for hidden's device (as for
    torch.nn.functional.linear: its dtype, bfloat16 or float16, for every floating input of
    another dtype), else as they are. The casts are autograd ops: fp32 leaves get fp32 gradients."""
    device_type = "cuda" if hidden.is_cuda else hidden.device.type
    if not torch.is_autocast_enabled(device_type):
        return hidden, weight, bias
    dtype = torch.get_autocast_dtype(device_type)

    def cast(tensor):  # what is not a floating tensor is left for the checks to name
        if not isinstance(tensor, torch.Tensor) or tensor.dtype == dtype or not tensor.is_floating_point():
            return tensor
        return tensor.to(dtype)

    return cast(hidden), cast(weight), cast(bias)


def _forward_ad_active():
    """Whether a forward-mode AD level is open (torch.autograd.forward_ad.dual_level)."""
    return getattr(torch.autograd.forward_ad, "_current_level", -1) >= 0


def linear_logp(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    bias: Optional[torch.Tensor] = None,
    temperature: float = 1.0,
    ignore_index: int = -100,
    valid_vocab: Optional[int] = None,
    return_entropy: bool = False,
    return_lse: bool = False,
    process_group: Optional["torch.distributed.ProcessGroup"] = None,
    vocab_start: Optional[int] = None,
    reduce_grad_hidden: bool = True,
    max_rows: Optional[int] = None,
    keep_logits_bytes: Optional[int] = None,
) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
    """Log-probability of each target token under the LM head ``z = (hidden @ weight.T + bias) /
    temperature``, without materializing the logits.

    hidden: [..., H] (bfloat16, float16 or float32, CUDA); weight: [V_local, H], hidden's dtype
    (under autocast, below, any floating dtype);
    targets: [...] (hidden's leading dimensions), int32 or int64 global token ids; bias: [V_local]
    or None. Rows whose target is ``ignore_index`` give logp 0 and no gradient through any output
    (their entropy and lse come back as values, as for any row). Token ids at or past
    ``valid_vocab`` are padding: they are excluded from the softmax (None: the whole vocabulary)
    and are not valid targets.

    Returns logp, fp32 [...]. With ``return_entropy`` and/or ``return_lse`` a tuple
    ``(logp, entropy, lse)`` of the outputs asked for, in that order. All are differentiable with
    respect to hidden, weight and bias (targets get no gradient).

    Tensor parallel: ``process_group`` is the group over which the vocabulary is sharded; each
    rank passes its rows of the LM head, in rank order (``vocab_start``: this rank's first token
    id; None for shards in rank order, whose sizes are gathered once). Every rank passes the same
    hidden and targets and gets the same outputs. ``reduce_grad_hidden=False`` leaves hidden's
    gradient as this rank's partial sum (for trainers that reduce it themselves).

    Sizing, fixed when the op is built (part of its specialization): ``max_rows``, the most rows
    a call will have (the leading dimensions' product), sizes the op's buffers at build, so that
    no call up to it grows one (needed before capturing a CUDA graph of calls of more rows than
    earlier calls had); with a ``process_group`` whose ranks share a host, calls of up to
    ``max_rows`` rows merge the ranks' partials over peer memory instead of an NCCL all-gather.
    ``keep_logits_bytes``: the memory in bytes the forward may use to keep logits for the
    backward (None: the op's default, what holds its backward's buffers within 1 GiB, at least
    256 MiB; more keeps more chunks and recomputes fewer).

    Under ``torch.autocast`` (on hidden's device) hidden, weight and bias run in the autocast
    dtype, as they would in ``torch.nn.functional.linear``: floating inputs of another dtype are
    cast to it (fp32 parameters get fp32 gradients through the cast); the outputs stay fp32.

    Ops are built on first use per device and specialization (dtypes, H, V_local, bias dtype,
    temperature, ignore_index, valid_vocab, entropy, training or not, group) and cached; kernels
    run on the current CUDA stream. Custom ops (shardjit::linear_logp, ...) make it traceable
    by torch.compile(fullgraph=True) (eager calls run the same code without the dispatcher),
    and it is capturable in a CUDA graph at a fixed shape (after a warm-up call of that shape
    outside the capture).
    """
    _check_options(temperature, ignore_index, valid_vocab, return_entropy, return_lse, process_group, vocab_start,
                   reduce_grad_hidden, max_rows, keep_logits_bytes)
    if _any_autocast() and isinstance(hidden, torch.Tensor):  # else the checks say what hidden should be
        hidden, weight, bias = _autocast_inputs(hidden, weight, bias)
    if process_group is None:
        group_name, start = "", 0
    else:
        group_name = process_group.group_name
        start = -1 if vocab_start is None else vocab_start
    spec = (start, valid_vocab or 0, ignore_index, float(temperature), return_entropy, group_name, max_rows or 0,
            -1 if keep_logits_bytes is None else keep_logits_bytes)
    # Traced calls check every time (the custom op keys its op itself); eager ones once per signature.
    # A signature holds everything the checks read but the rows: a call that has one passes them
    # if its targets have hidden's leading shape (for [N, H] hidden, whose targets then are [M],
    # if M = N).
    compiling = _is_compiling()
    keys = None if compiling else _checked_calls.get(_call_signature(hidden, weight, targets, bias, spec))
    if keys is None or (targets.shape[0] != hidden.shape[0] if hidden.dim() == 2 else
                        targets.shape != hidden.shape[:-1]):
        keys = _check_call(hidden, weight, targets, bias, spec, remember=not compiling)
    flat = hidden.dim() == 2
    # [N, H] and [N] go as they are (a reshape is a new tensor object: about a microsecond each).
    leading = None if flat else hidden.shape[:-1]
    flat_hidden = (hidden if flat else hidden.reshape(-1, hidden.shape[-1])).contiguous()
    flat_targets = (targets if flat else targets.reshape(-1)).contiguous()
    weight = weight.contiguous()
    bias = None if bias is None else bias.contiguous()
    want_backward = torch.is_grad_enabled() and (
        hidden.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad))
    # torch.compile traces the custom ops; eager calls skip the dispatcher (same code, same
    # formula), and calls with nothing to differentiate skip autograd's bookkeeping and the
    # outputs not asked for (benchmarks.md, "Through PyTorch", has the host time of each).
    if compiling:
        logp, lse, entropy = _linear_logp_ops.linear_logp_forward(flat_hidden, weight, flat_targets, bias, *spec,
                                                                  want_backward, return_lse, reduce_grad_hidden)
    elif want_backward or _forward_ad_active():  # the Function refuses dual tensors, loudly
        returned = _linear_logp_ops.EagerLinearLogp.apply((keys[want_backward], spec, return_lse, reduce_grad_hidden),
                                                          flat_hidden, weight, flat_targets, bias)
        logp, lse = returned[0], returned[1]
        entropy = returned[2] if return_entropy else None
    else:
        logp, lse, entropy = _linear_logp_ops.forward_no_grad(keys[0], flat_hidden, weight, flat_targets, bias,
                                                              return_lse, return_entropy)
    if not (return_entropy or return_lse):
        return logp if flat else logp.view(leading)
    outputs = [logp]
    if return_entropy:
        outputs.append(entropy)
    if return_lse:
        outputs.append(lse)
    return tuple(outputs) if flat else tuple(output.view(leading) for output in outputs)
