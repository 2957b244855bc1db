"""cpu tier (needs torch; skipped by name without it): every public entry point of shardjit.torch
refuses bad arguments with an error that names the argument, before touching a GPU; the custom
ops are registered with fake implementations of the right shapes; the op cache key changes with
everything that changes a LinearLogp."""

import math

import pytest

torch = pytest.importorskip("torch", reason="shardjit.torch's argument tests need PyTorch")

import shardjit  # noqa: E402
import shardjit.torch as sjt  # noqa: E402
from shardjit.torch import _linear_logp_ops  # noqa: E402

N, H, V = 6, 16, 40


def tensors(dtype=torch.bfloat16):
    hidden = torch.randn(N, H).to(dtype)
    weight = torch.randn(V, H).to(dtype)
    targets = torch.randint(0, V, (N,))
    return hidden, weight, targets


def refused(error, match, *args, **kwargs):
    with pytest.raises(error, match=match):
        sjt.linear_logp(*args, **kwargs)


def test_tensor_arguments_are_named():
    hidden, weight, targets = tensors()
    refused(TypeError, "hidden: expected a torch.Tensor", hidden.tolist(), weight, targets)
    refused(TypeError, "weight: expected a torch.Tensor", hidden, None, targets)
    refused(TypeError, "targets: expected a torch.Tensor", hidden, weight, [1, 2])
    refused(TypeError, "bias: expected a torch.Tensor", hidden, weight, targets, bias=[0.0] * V)
    refused(TypeError, "hidden: expected bfloat16, float16 or float32, got torch.float64", hidden.double(),
            weight.double(), targets)
    refused(shardjit.InvalidArgumentError, r"hidden: expected \[..., H\]", hidden[0], weight, targets[0])
    refused(shardjit.InvalidArgumentError, r"weight: expected \[V_local, 16\]", hidden, weight[:, :8], targets)
    refused(TypeError, "weight: expected torch.bfloat16", hidden, weight.half(), targets)
    refused(TypeError, "targets: expected int32 or int64, got torch.float32", hidden, weight, targets.float())
    refused(shardjit.InvalidArgumentError, r"targets: expected shape \(6,\)", hidden, weight, targets[:5])
    refused(shardjit.InvalidArgumentError, r"bias: expected \[40\]", hidden, weight, targets,
            bias=torch.zeros(V + 1))
    refused(TypeError, "bias: expected bfloat16, float16 or float32", hidden, weight, targets,
            bias=torch.zeros(V, dtype=torch.float64))
    refused(shardjit.InvalidArgumentError, "weight: expected a tensor on cpu", hidden, weight.to("meta"), targets)
    refused(shardjit.InvalidArgumentError, "hidden: expected a CUDA tensor, got one on cpu", hidden, weight, targets)


def test_three_dimensional_targets_must_match_the_leading_dimensions():
    hidden, weight, _ = tensors()
    hidden3 = hidden.view(2, 3, H)
    refused(shardjit.InvalidArgumentError, r"targets: expected shape \(2, 3\)", hidden3, weight,
            torch.zeros(6, dtype=torch.int64))
    # The right shape passes every check but the device one.
    refused(shardjit.InvalidArgumentError, "hidden: expected a CUDA tensor", hidden3, weight,
            torch.zeros(2, 3, dtype=torch.int64))


def test_only_calls_that_pass_every_check_are_remembered():
    """A call like a checked one skips the checks (its signature: types, dtypes, devices, shapes
    but the rows, options). CPU tensors never pass the last check, so they are never remembered;
    and every property a check reads changes the signature."""
    from shardjit.torch import _functional
    hidden, weight, targets = tensors()
    before = dict(_functional._checked_calls)
    for _ in range(2):
        refused(shardjit.InvalidArgumentError, "hidden: expected a CUDA tensor", hidden, weight, targets)
    assert _functional._checked_calls == before

    spec = (0, 0, -100, 1.0, False, "", 0, -1)
    signature = _functional._call_signature
    base = signature(hidden, weight, targets, None, spec)
    others = [signature(hidden, torch.nn.Parameter(weight), targets, None, spec),
              signature(hidden, weight.half(), targets, None, spec),
              signature(hidden, weight[:-1], targets, None, spec),
              signature(hidden.view(2, 3, H), weight, targets.view(2, 3), None, spec),
              signature(hidden, weight, targets.int(), None, spec),
              signature(hidden, weight, targets, torch.zeros(V), spec),
              signature(hidden, weight, targets, None, spec[:4] + (True,) + spec[5:])]
    assert base is not None and all(other != base for other in others)
    assert len(set(others)) == len(others)
    assert signature(hidden[:4], weight, targets[:4], None, spec) == base  # the rows are not part of it
    assert signature(hidden.tolist(), weight, targets, None, spec) is None
    assert signature(hidden[0, 0], weight, targets, None, spec) is None  # 0-d: no last dimension


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(temperature=0.0), shardjit.InvalidArgumentError, "temperature: expected a positive finite number"),
    (dict(temperature=-1), shardjit.InvalidArgumentError, "temperature"),
    (dict(temperature=math.inf), shardjit.InvalidArgumentError, "temperature"),
    (dict(temperature=math.nan), shardjit.InvalidArgumentError, "temperature"),
    (dict(temperature=True), TypeError, "temperature: expected a positive number, got bool"),
    (dict(temperature="1"), TypeError, "temperature"),
    (dict(ignore_index=1.5), TypeError, "ignore_index: expected an int, got float"),
    (dict(ignore_index=False), TypeError, "ignore_index"),
    (dict(valid_vocab=0), shardjit.InvalidArgumentError, "valid_vocab: expected a positive vocabulary size"),
    (dict(valid_vocab=2.0), TypeError, "valid_vocab: expected an int or None"),
    (dict(vocab_start=-1), shardjit.InvalidArgumentError, "vocab_start: expected a non-negative"),
    (dict(vocab_start=8), shardjit.InvalidArgumentError, "vocab_start: a vocabulary shard needs the process_group"),
    (dict(return_entropy=1), TypeError, "return_entropy: expected True or False, got int"),
    (dict(return_lse=None), TypeError, "return_lse"),
    (dict(reduce_grad_hidden="yes"), TypeError, "reduce_grad_hidden"),
    (dict(process_group="tp"), TypeError, "process_group: expected a torch.distributed.ProcessGroup"),
    (dict(max_rows=-1), shardjit.InvalidArgumentError, "max_rows: expected a non-negative int or None, got -1"),
    (dict(max_rows=2.5), TypeError, "max_rows: expected an int or None, got float"),
    (dict(keep_logits_bytes=-2), shardjit.InvalidArgumentError, "keep_logits_bytes: expected a non-negative int"),
    (dict(keep_logits_bytes="1G"), TypeError, "keep_logits_bytes: expected an int or None, got str"),
    (dict(not_an_option=1), TypeError, "not_an_option"),
])
def test_options_are_named(kwargs, error, match):
    hidden, weight, targets = tensors()
    refused(error, match, hidden, weight, targets, **kwargs)


def test_loss_reduction_is_checked():
    hidden, weight, targets = tensors()
    with pytest.raises(shardjit.InvalidArgumentError, match="reduction: expected 'none', 'mean' or 'sum'"):
        sjt.linear_cross_entropy(hidden, weight, targets, reduction="avg")
    with pytest.raises(shardjit.InvalidArgumentError, match="LinearCrossEntropyLoss: reduction"):
        sjt.LinearCrossEntropyLoss(reduction="batchmean")
    loss = sjt.LinearCrossEntropyLoss(reduction="sum", ignore_index=3)
    with pytest.raises(TypeError, match="hidden: expected a torch.Tensor"):
        loss(None, weight, targets)
    assert "reduction='sum'" in repr(loss)


def test_op_cache_settings_are_checked():
    with pytest.raises(ValueError, match="op cache capacity"):
        sjt.set_op_cache_size(0)
    with pytest.raises(TypeError, match="set_runtime: runtime"):
        sjt.set_runtime(None)


def test_help_shows_the_keywords():
    import inspect

    names = list(inspect.signature(sjt.linear_logp).parameters)
    assert names[:3] == ["hidden", "weight", "targets"]
    assert {"bias", "temperature", "return_entropy", "process_group", "reduce_grad_hidden", "max_rows",
            "keep_logits_bytes"} <= set(names)
    assert "Op-level form" in sjt.linear_logp.__doc__


@pytest.fixture(scope="module")
def group():
    import torch.distributed as dist

    if not dist.is_available():
        pytest.skip("this torch has no torch.distributed")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


def test_reduce_scatter_arguments_are_named(group):
    x = torch.randn(4, H, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="reduce_scatter: process_group: expected a torch.distributed.ProcessGroup"):
        sjt.reduce_scatter(x, process_group=None)
    with pytest.raises(TypeError, match="reduce_scatter: input: expected a torch.Tensor"):
        sjt.reduce_scatter([1.0], process_group=group)
    with pytest.raises(shardjit.InvalidArgumentError, match="reduce_scatter: input: expected 2 dimensions"):
        sjt.reduce_scatter(x[0], process_group=group)
    with pytest.raises(TypeError, match="reduce_scatter: input: expected bfloat16"):
        sjt.reduce_scatter(x.double(), process_group=group)
    with pytest.raises(shardjit.InvalidArgumentError, match="reduce_scatter: rows_per_rank: expected 1"):
        sjt.reduce_scatter(x, process_group=group, rows_per_rank=[3])
    with pytest.raises(shardjit.InvalidArgumentError, match="reduce_scatter: path: expected 'auto'"):
        sjt.reduce_scatter(x, process_group=group, path="nvlink")
    with pytest.raises(shardjit.InvalidArgumentError, match="reduce_scatter: input: expected a CUDA tensor"):
        sjt.reduce_scatter(x, process_group=group)


def test_moe_combine_arguments_are_named(group):
    rows = torch.randn(4, H, dtype=torch.bfloat16)
    positions = torch.zeros(3, 1, dtype=torch.int32)
    gates = torch.ones(3, 1)
    with pytest.raises(TypeError, match="moe_combine: process_group"):
        sjt.moe_combine(rows, positions, process_group=object(), capacity=4)
    with pytest.raises(TypeError, match="moe_combine: positions: expected int32"):
        sjt.moe_combine(rows, positions.long(), process_group=group, capacity=4)
    with pytest.raises(TypeError, match="moe_combine: gates: expected float32"):
        sjt.moe_combine(rows, positions, process_group=group, capacity=4, gates=gates.half())
    with pytest.raises(shardjit.InvalidArgumentError, match="moe_combine: capacity: expected an int >= 4"):
        sjt.moe_combine(rows, positions, process_group=group, capacity=3)
    with pytest.raises(shardjit.InvalidArgumentError, match="moe_combine: rows: expected 2 dimensions"):
        sjt.moe_combine(rows[0], positions, process_group=group, capacity=4)
    with pytest.raises(shardjit.InvalidArgumentError, match="moe_combine: path"):
        sjt.moe_combine(rows, positions, process_group=group, capacity=4, path="fast")
    with pytest.raises(shardjit.InvalidArgumentError, match="moe_combine: rows: expected a CUDA tensor"):
        sjt.moe_combine(rows, positions, process_group=group, capacity=4, gates=gates)


def test_clear_op_cache_closes_and_forgets_the_groups_communicators(monkeypatch):
    # torch.distributed reuses group names after destroy_process_group: a group made later
    # under an old name must get a communicator of its own, not the closed group's.
    from shardjit.torch import _groups

    class FakeCommunicator:
        def __init__(self):
            self.closed = False

        def close(self):
            self.closed = True

    built = []

    def build(group, device):
        built.append(FakeCommunicator())
        return built[-1]

    monkeypatch.setattr(_groups, "group_of", lambda name: name)
    monkeypatch.setattr(_groups, "_build_communicator", build)
    monkeypatch.setattr(_groups, "_gather_layout", lambda group, device, local, start: (0, local))
    first = _groups.communicator("0", 0)
    assert _groups.communicator("0", 0) is first, "built once per group and device"
    assert _groups.vocab_layout("0", 0, 100, -1) == (0, 100)
    sjt.clear_op_cache()
    assert first.closed
    assert not _groups._communicators and not _groups._layouts
    second = _groups.communicator("0", 0)
    assert second is not first and not second.closed
    sjt.clear_op_cache()


def test_op_level_classes_take_torch_dtypes():
    # The configuration is checked before any GPU work, so a machine without one gets as far
    # as the dtype: a torch dtype is accepted where a name is, anything else is refused by name.
    rt = shardjit.Runtime(jit=False)
    with pytest.raises(TypeError, match="dtype: expected a dtype name such as 'bf16' or a torch dtype, got int"):
        shardjit.LinearLogp(rt, hidden=64, vocab_local=100, dtype=3)
    with pytest.raises(ValueError, match="dtype: unknown dtype 'torch.float64'"):
        shardjit.LinearLogp(rt, hidden=64, vocab_local=100, dtype=torch.float64)
    with pytest.raises(ValueError, match="target_dtype: unknown dtype 'torch.int8'"):
        shardjit.LinearLogp(rt, hidden=64, vocab_local=100, target_dtype=torch.int8)
    try:
        shardjit.LinearLogp(rt, hidden=64, vocab_local=100, dtype=torch.bfloat16, target_dtype=torch.int32,
                            bias_dtype=torch.float32)
    except (TypeError, ValueError) as error:  # a GPU-less machine fails later, at the device
        assert "dtype" not in str(error), error
    except shardjit.ShardjitError:
        pass


def test_op_level_form_checks_its_arguments():
    hidden, weight, targets = tensors()
    with pytest.raises(TypeError, match="op_linear_logp: op: expected a shardjit.LinearLogp, got str"):
        sjt.op_linear_logp("op", hidden, weight, targets)
    # linear_logp dispatches on its first argument: anything but an op is the functional form.
    with pytest.raises(TypeError, match="linear_logp: hidden: expected a torch.Tensor"):
        sjt.linear_logp("op", weight, targets)
