"""cpu tier: LinearLogp config errors and the tensor checks (through _describe_tensor)."""

import pytest

import shardjit
from conftest import has_gpu, tensor_params


def test_hidden_not_a_multiple_of_8(runtime):
    with pytest.raises(ValueError, match="multiple of 8") as caught:
        shardjit.LinearLogp(runtime, hidden=60, vocab_local=300)
    assert isinstance(caught.value, shardjit.ShardjitError)
    assert caught.value.code == "invalid_argument"


def test_config_keyword_errors(runtime):
    with pytest.raises(TypeError, match="unknown keyword argument 'hiden'"):
        shardjit.LinearLogp(runtime, hiden=64, vocab_local=300)
    with pytest.raises(ValueError, match="dtype: unknown dtype 'fp8'"):
        shardjit.LinearLogp(runtime, hidden=64, vocab_local=300, dtype="fp8")
    with pytest.raises(ValueError, match="vocab_local"):
        shardjit.LinearLogp(runtime, hidden=64)
    with pytest.raises(TypeError, match="temperature: expected a number"):
        shardjit.LinearLogp(runtime, hidden=64, vocab_local=300, temperature="hot")
    with pytest.raises(TypeError, match="device: expected a number, got bool"):
        shardjit.LinearLogp(runtime, hidden=64, vocab_local=300, device=True)
    with pytest.raises(TypeError, match="want_backward: expected True or False, got int"):
        shardjit.LinearLogp(runtime, hidden=64, vocab_local=300, want_backward=1)
    with pytest.raises(ValueError, match="hidden: 1180591620717411303424 is out of range"):
        shardjit.LinearLogp(runtime, hidden=2**70, vocab_local=300)


def test_no_gpu_is_a_clear_error(runtime):
    if has_gpu():
        pytest.skip("a GPU is present")
    try:
        shardjit.LinearLogp(runtime, hidden=64, vocab_local=300)
    except shardjit.ShardjitError as error:
        assert error.code in ("no_device", "driver_error")
    else:
        pytest.skip("the op was built: a GPU is usable without PyTorch")


def test_tensor_views():
    np = pytest.importorskip("numpy")
    d = shardjit._shardjit._describe_tensor
    a = np.zeros((4, 16), dtype=np.float32)
    assert d(a, "hidden", "fp32", 2, None) == {"dtype": "fp32", "shape": (4, 16), "row_stride": 16}
    padded = np.zeros((4, 24), dtype=np.float32)[:, :16]
    assert d(padded, "hidden", "fp32", 2, None)["row_stride"] == 24
    assert d(np.zeros(5, dtype=np.int64), "targets", "int64", 1, None) == {"dtype": "int64", "shape": (5,)}

    with pytest.raises(TypeError, match="hidden: expected dtype fp16, got fp32"):
        d(a, "hidden", "fp16", 2, None)
    with pytest.raises(TypeError, match="an unsupported dtype"):
        d(np.zeros((2, 2), dtype=np.float64), "hidden", None, 2, None)
    with pytest.raises(ValueError, match="targets: expected a 1-d tensor, got 2-d"):
        d(a, "targets", "fp32", 1, None)
    with pytest.raises(ValueError, match="weight: expected rows of contiguous elements"):
        d(a.T, "weight", "fp32", 2, None)
    with pytest.raises(ValueError, match="logp: expected a contiguous vector"):
        d(np.zeros(10, dtype=np.float32)[::2], "logp", "fp32", 1, None)
    with pytest.raises(ValueError, match=r"hidden: expected a tensor on CUDA device 0 \(the op's\), got one on the CPU"):
        d(a, "hidden", "fp32", 2, 0)


def test_a_read_only_array_is_refused_as_an_output_and_taken_as_an_input():
    np = pytest.importorskip("numpy")
    as_input = shardjit._shardjit._describe_tensor
    as_output = shardjit._shardjit._describe_output
    frozen = np.zeros((4, 16), dtype=np.float32)
    frozen.flags.writeable = False
    # Through DLPack (NumPy >= 2.1 marks the capsule read-only) and the buffer protocol.
    frozen_buffer = memoryview(bytes(64)).cast("f")

    assert as_input(frozen, "hidden", "fp32", 2, None) == {"dtype": "fp32", "shape": (4, 16), "row_stride": 16}
    assert as_input(frozen_buffer, "bias", "fp32", 1, None) == {"dtype": "fp32", "shape": (16,)}
    with pytest.raises(ValueError, match=r"^grad_hidden: expected a writable tensor, got a read-only one$"):
        as_output(frozen, "grad_hidden", "fp32", 2, None)
    with pytest.raises(ValueError, match=r"^logp: expected a writable tensor, got a read-only one$"):
        as_output(frozen[0], "logp", "fp32", 1, None)
    with pytest.raises(ValueError, match=r"^entropy: expected a writable tensor, got a read-only one$"):
        as_output(frozen_buffer, "entropy", "fp32", 1, None)
    # Refused for that before anything else: here the dtype is wrong too.
    with pytest.raises(ValueError, match=r"^lse: expected a writable tensor"):
        as_output(frozen[0], "lse", "int64", 1, None)

    # A writable output gets the same view and the same other checks as an input.
    assert as_output(np.zeros((4, 16), dtype=np.float32), "grad_weight", "fp32", 2, None)["row_stride"] == 16
    with pytest.raises(TypeError, match="grad_weight: expected dtype fp32, got fp16"):
        as_output(np.zeros((4, 16), dtype=np.float16), "grad_weight", "fp32", 2, None)
    with pytest.raises(ValueError, match="logp: expected a contiguous vector"):
        as_output(np.zeros(10, dtype=np.float32)[::2], "logp", "fp32", 1, None)


def test_the_outputs_of_forward_and_backward_are_the_writable_arguments():
    # What the op writes goes through the output conversion (refuses read-only arrays), what it
    # reads through the input one; the signatures show which conversion each argument takes.
    assert tensor_params(shardjit.LinearLogp.forward) == {
        "hidden": False, "weight": False, "targets": False, "bias": False,
        "logp": True, "lse": True, "entropy": True,
    }
    assert tensor_params(shardjit.LinearLogp.backward) == {
        "hidden": False, "weight": False, "targets": False, "lse": False, "grad_logp": False, "grad_lse": False,
        "grad_entropy": False, "entropy": False, "bias": False,
        "grad_hidden": True, "grad_weight": True, "grad_bias": True,
    }


def test_tensor_on_another_gpu_is_refused():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    d = shardjit._shardjit._describe_tensor
    a = torch.zeros((4, 16), device="cuda:0")
    assert d(a, "hidden", "fp32", 2, 0)["shape"] == (4, 16)
    with pytest.raises(ValueError, match=r"hidden: expected a tensor on CUDA device 1 \(the op's\), got one on CUDA device 0"):
        d(a, "hidden", "fp32", 2, 1)


def test_forward_rejects_cpu_tensors(runtime):
    np = pytest.importorskip("numpy")
    if not has_gpu():
        pytest.skip("building an op needs a GPU")
    op = shardjit.LinearLogp(runtime, hidden=64, vocab_local=300, dtype="fp32")
    x = np.zeros((4, 64), dtype=np.float32)
    w = np.zeros((300, 64), dtype=np.float32)
    t = np.zeros(4, dtype=np.int64)
    out = np.zeros(4, dtype=np.float32)
    with pytest.raises(ValueError, match="hidden: expected a tensor on CUDA device 0"):
        op.forward(x, w, t, out)
