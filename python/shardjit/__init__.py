"""shardjit: run-time generated GPU kernels for tensor-parallel LLM workloads.

Tensors are taken through DLPack (PyTorch, CuPy, JAX, NumPy for the argument checks) and streams
as integers (a cudaStream_t, e.g. ``torch.cuda.current_stream().cuda_stream``; 0 is the legacy
default stream). Errors of the library are :class:`ShardjitError` with a ``code`` attribute;
arguments the library refuses raise :class:`InvalidArgumentError`, also a :class:`ValueError`, and
arguments the binding itself refuses a plain :class:`TypeError` (a tensor of the wrong dtype, an
unknown keyword) or :class:`ValueError` (a tensor of the wrong shape or strides, or not on the op's
GPU; an unknown dtype name).
"""

try:
    from . import _shardjit
except ImportError:  # a build tree: the extension sits on sys.path next to this package's sources
    import _shardjit  # type: ignore[no-redef]


Runtime = _shardjit.Runtime
LinearLogp = _shardjit.LinearLogp
Communicator = _shardjit.Communicator
ReduceScatter = _shardjit.ReduceScatter
MoeCombine = _shardjit.MoeCombine
prewarm = _shardjit.prewarm
ShardjitError = _shardjit.ShardjitError
InvalidArgumentError = _shardjit.InvalidArgumentError
NotFoundError = _shardjit.NotFoundError
NoDeviceError = _shardjit.NoDeviceError

__version__ = _shardjit.__version__

__all__ = [
    "Runtime",
    "LinearLogp",
    "Communicator",
    "ReduceScatter",
    "MoeCombine",
    "prewarm",
    "ShardjitError",
    "InvalidArgumentError",
    "NotFoundError",
    "NoDeviceError",
    "__version__",
]
