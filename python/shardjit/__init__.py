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

Log lines of the library (compiles, cache evictions, warnings) go to the standard ``logging``
module's logger ``"shardjit"``, at the level SHARDJIT_LOG_LEVEL or a Runtime's ``log_level``
lets through (default warn; the Runtime of ``shardjit.torch`` logs from info on, so that an op
that has to compile says so, with the ``shardjit prewarm`` command that would have done it ahead).
"""

import atexit as _atexit
import os as _os

try:
    from . import _shardjit
except ImportError:  # a build tree: the extension sits on sys.path next to this package's sources
    import _shardjit  # type: ignore[no-redef]

# The library's log lines go to logging.getLogger("shardjit") (filtered there, and by
# SHARDJIT_LOG_LEVEL before): queued on the thread that logs them, handed over by one thread.
_shardjit._start_log_forwarding()
_atexit.register(_shardjit._stop_log_forwarding)
if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_shardjit._restart_log_forwarding_after_fork)


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
