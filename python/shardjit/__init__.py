"""shardjit: run-time generated GPU kernels for tensor-parallel LLM workloads.

Tensors are taken through DLPack (PyTorch, CuPy, JAX, NumPy for the argument checks) and streams
as integers (a cudaStream_t, e.g. ``torch.cuda.current_stream().cuda_stream``; 0 is the legacy
default stream). Errors of the library are :class:`ShardjitError` with a ``code`` attribute;
arguments the library refuses raise :class:`InvalidArgumentError`, also a :class:`ValueError`, and
arguments the binding itself refuses a plain :class:`TypeError` (a tensor of the wrong dtype, an
unknown keyword) or :class:`ValueError` (a tensor of the wrong shape or strides, or not on the op's
GPU; an array its producer marks read-only, such as a NumPy array with ``writeable=False``, passed
as an output; an unknown dtype name).

:class:`Communicator`, :class:`ReduceScatter`, :class:`MoeCombine` and :class:`LinearLogp` have
``close()`` and work as context managers: their destruction may wait for the peer processes (up to
the communicator's timeout), and closing, like the garbage collector's destruction, waits with the
GIL released. A closed object raises :class:`ValueError` on use; an op keeps the communicator it
was built on until the op itself is closed.
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
