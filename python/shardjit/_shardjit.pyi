"""shardjit: run-time generated GPU kernels (compiled bindings).

Type stubs of the extension module shardjit._shardjit (nanobind). dtypes are names ('bf16', 'fp16',
'fp32', 'int32', 'int64') or torch dtypes (torch.bfloat16). Tensors are any DLPack array
(torch, CuPy, JAX, NumPy); inputs may be read-only, outputs may not. Streams are cudaStream_t
values as ints (0: the legacy default stream).
"""

from collections.abc import Sequence
from typing import Annotated, overload

from numpy.typing import NDArray

__version__: str

class ShardjitError(RuntimeError):
    """A failure reported by shardjit; .code is its stable name, e.g. 'compile_failed'."""

    code: str

class InvalidArgumentError(ShardjitError, ValueError):
    """Bad input from the caller (shapes, dtypes, options)."""

class NotFoundError(ShardjitError, LookupError):
    """A kernel missing from the cache in cache-only mode, or an unknown template."""

class NoDeviceError(ShardjitError):
    """A GPU operation on a machine without a usable GPU."""


def version() -> str:
    """The C++ library's version."""

class Runtime:
    """
    Kernel cache, compiler and loaded modules shared by every op. Each option left None takes its value from the environment (SHARDJIT_*), then the default.
    """

    def __init__(self, *, cache_dir: str | None = None, jit: bool | None = None, template_dir: str | None = None, cache_max_bytes: int | None = None, dump_dir: str | None = None, log_level: str | None = None, hopper_path: bool | None = None, autotune: bool | None = None, compile_jobs: int | None = None) -> None: ...

    @property
    def cache_dir(self) -> str: ...

    @property
    def jit_enabled(self) -> bool: ...

    def cache_entries(self) -> list:
        """
        The kernels in the disk cache: a list of dicts (key, spec, arch, size_bytes).
        """

def prewarm(hidden: int, vocab: int, *, archs: Sequence[str], tp: Sequence[int] = [1], dtypes: Sequence[str] = ['bf16'], valid_vocab: int = 0, target_dtypes: Sequence[str] = ['int64'], bias_dtypes: Sequence[str | None] = [None], entropy: Sequence[bool] = [False], backward: bool = False, dz_fp32: bool = False, grad_filter: bool = False, collectives: bool = False, cache_dir: str | None = None, jobs: int = 0, hopper_path: bool | None = None) -> dict:
    """
    Compiles the LinearLogp kernels of a model (hidden, vocab) for each TP degree, dtype and arch into the cache (with backward, dz_fp32 and grad_filter: also those of ops with these options; with collectives: also ReduceScatter's and MoeCombine's for each degree of tp up to 8, MoeCombine's only at 1); hopper_path (None: SHARDJIT_HOPPER_PATH) as the serving Runtime's; jobs: kernels compiled at once (0: one per hardware thread, as the CLI). Returns a dict: total, compiled, prebuilt (built with the library, copied into the cache), cached, failed, failures (messages), missing (messages of kernels built or found but not in the cache folder at the end, with the reason: a cache-only server would not find them). A wrong argument is a TypeError or ValueError naming it.
    """

class Communicator:
    """
    The NCCL group of one process per GPU that the cross-GPU ops run on. Every host-side wait on the peers is bounded by timeout_seconds (default 300), and an NCCL collective that runs that long without finishing (or that NCCL reports an error on) is aborted by a watchdog thread, so that a torch.cuda.synchronize() after a peer died returns; the op's check() then raises.
    """

    def __init__(self, runtime: Runtime, device: int, rank: int, size: int, unique_id: bytes, *, timeout_seconds: float | None = None) -> None:
        """
        Joins the group as `rank` of `size` on CUDA device `device`; every rank calls it.
        """

    def close(self) -> None:
        """
        Lets go of the NCCL communicator, with the GIL released; later calls raise ValueError. The ops built on it hold it until they are closed or collected too, and the last of them destroys it. Idempotent; also what the end of a `with` block does.
        """

    @property
    def closed(self) -> bool:
        """True once close() has run (or a `with` block ended)."""

    def __enter__(self) -> Communicator:
        """Returns self."""

    def __exit__(self, exc_type: object | None, exc_value: object | None, traceback: object | None) -> None:
        """Calls close(); an exception raised in the block propagates."""

    @staticmethod
    def new_unique_id() -> bytes:
        """
        A fresh group id (bytes) for rank 0 to send to the others; needs NCCL, not a GPU.
        """

    @property
    def rank(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def device(self) -> int: ...

    def set_timeout(self, seconds: float) -> None:
        """
        Changes the bound of later waits on the peers, e.g. a long one while the ops are built (first-time kernel compiles on one rank keep the others waiting in the build exchange) and a short one for steady-state calls; collectives already enqueued keep the bound they were enqueued with. seconds: positive, at most a year, as timeout_seconds. Call it between the ops' calls, not while another thread is inside one.
        """

    @property
    def aborted(self) -> bool:
        """
        True once the communicator was aborted (after a timeout or an NCCL error, or by abort()); every later call of an op that uses it raises ShardjitError (code 'comm_error').
        """

    def abort(self) -> None:
        """
        Aborts now: the NCCL communicator is torn down with ncclCommAbort (its pending collectives end), and every later call of an op that uses it raises ShardjitError (code 'comm_error').
        """

class ReduceScatter:
    """
    Rank r receives the sum over all ranks of rows [offset_r, offset_r + rows_per_rank[r]) of their inputs. Built by every rank at the same time.
    """

    def __init__(self, runtime: Runtime, comm: Communicator, *, hidden: int, rows_per_rank: Sequence[int], dtype: object = 'bf16', path: str = 'auto', nccl_above_bytes: int = 0) -> None: ...

    def close(self) -> None:
        """
        Destroys the op now, with the GIL released; later calls raise ValueError. Destruction is collective: every rank closes the op (or lets it be collected), and each waits up to the communicator's timeout for the peers to release its buffers. Idempotent; also what the end of a `with` block does.
        """

    @property
    def closed(self) -> bool:
        """True once close() has run (or a `with` block ended)."""

    def __enter__(self) -> ReduceScatter:
        """Returns self."""

    def __exit__(self, exc_type: object | None, exc_value: object | None, traceback: object | None) -> None:
        """Calls close(); an exception raised in the block propagates."""

    @property
    def path(self) -> str:
        """'peer' or 'nccl': what the op runs"""

    def run(self, input: Annotated[NDArray, dict(writable=False)], output: Annotated[NDArray, dict(writable=True)], stream: int = 0) -> None:
        """
        Enqueues the reduce-scatter of input [T, H] into output [rows_per_rank[rank], H].
        """

    def check(self, stream: int = 0) -> None:
        """
        Waits for the stream (bounded); raises if a call gave up waiting for a peer.
        """

class MoeCombine:
    """
    The combine step of an expert-parallel MoE layer: each owned token's output is the sum over source ranks of gate x the row its position names. Built by every rank at the same time.
    """

    def __init__(self, runtime: Runtime, comm: Communicator, *, hidden: int, capacity: int, dtype: object = 'bf16', gates: bool = False, path: str = 'auto', nccl_above_bytes: int = 0) -> None: ...

    def close(self) -> None:
        """
        Destroys the op now, with the GIL released; later calls raise ValueError. Destruction is collective: every rank closes the op (or lets it be collected), and each waits up to the communicator's timeout for the peers to release its buffers. Idempotent; also what the end of a `with` block does.
        """

    @property
    def closed(self) -> bool:
        """True once close() has run (or a `with` block ended)."""

    def __enter__(self) -> MoeCombine:
        """Returns self."""

    def __exit__(self, exc_type: object | None, exc_value: object | None, traceback: object | None) -> None:
        """Calls close(); an exception raised in the block propagates."""

    @property
    def path(self) -> str:
        """'peer' or 'nccl': what the op runs"""

    def run(self, rows: Annotated[NDArray, dict(writable=False)], positions: Annotated[NDArray, dict(writable=False)], output: Annotated[NDArray, dict(writable=True)], *, gates: Annotated[NDArray, dict(writable=False)] | None = None, stream: int = 0) -> None:
        """
        Enqueues one combine: rows [R <= capacity, H], positions int32 [tokens, world] (-1: none), output [tokens, H], gates fp32 [tokens, world] when built with gates=True.
        """

    def check(self, stream: int = 0) -> dict:
        """
        Waits for the stream (bounded), raises if a call gave up waiting for a peer, and returns and clears the bad-position record: a dict (bad_positions, first_bad_position).
        """

class LinearLogp:
    """
    Log-probabilities of target tokens under an LM head, without the N x V logits. Keyword arguments are the fields of shardjit::LinearLogpConfig (dtypes by name).
    """

    @overload
    def __init__(self, runtime: Runtime, /, *, hidden: int, vocab_local: int, vocab_start: int = 0, vocab_global: int = 0, valid_vocab: int = 0, dtype: object = 'bf16', bias_dtype: object | None = None, target_dtype: object = 'int64', ignore_index: int = -100, temperature: float = 1.0, want_entropy: bool = False, allow_tf32: bool = False, strict: bool = False, device: int = 0, max_rows: int = 0, want_backward: bool = False, grad_weight_fp32: bool = False, dz_fp32: bool = False, backward_workspace_bytes: int = 0, grad_filter_threshold: float = 0.0, keep_logits_bytes: int = -1) -> None:
        """
        The single-GPU op over the whole vocabulary. Keywords (the fields of shardjit::LinearLogpConfig; dtypes as names or torch dtypes): hidden (int, a multiple of 8), vocab_local (int), vocab_start=0, vocab_global=0 (0: vocab_start + vocab_local), valid_vocab=0 (0: vocab_global), dtype='bf16' ('bf16', 'fp16', 'fp32'), bias_dtype=None, target_dtype='int64' ('int32', 'int64'), ignore_index=-100, temperature=1.0, want_entropy=False, allow_tf32=False, strict=False, device=0, max_rows=0, want_backward=False, grad_weight_fp32=False, dz_fp32=False, backward_workspace_bytes=0, grad_filter_threshold=0.0, keep_logits_bytes=-1 (what holds the backward's buffers within 1 GiB, at least 256 MiB; >= 0: that many bytes). An unknown keyword is a TypeError that names it.
        """

    @overload
    def __init__(self, runtime: Runtime, comm: Communicator, /, *, hidden: int, vocab_local: int, vocab_start: int = 0, vocab_global: int = 0, valid_vocab: int = 0, dtype: object = 'bf16', bias_dtype: object | None = None, target_dtype: object = 'int64', ignore_index: int = -100, temperature: float = 1.0, want_entropy: bool = False, allow_tf32: bool = False, strict: bool = False, device: int = 0, max_rows: int = 0, want_backward: bool = False, grad_weight_fp32: bool = False, dz_fp32: bool = False, backward_workspace_bytes: int = 0, grad_filter_threshold: float = 0.0, keep_logits_bytes: int = -1) -> None:
        """
        The tensor-parallel op: this rank's shard (vocab_start, vocab_local, vocab_global) of the LM head, built by every rank of comm at the same time, on comm's GPU (device defaults to comm.device). Its backward's grad_hidden is summed over the ranks unless reduce_grad_hidden=False.
        """

    def close(self) -> None:
        """
        Destroys the op now, with the GIL released (freeing its GPU memory may wait for queued GPU work); later calls raise ValueError. A tensor-parallel op's destruction is collective where it attached the peer path (max_rows set, one host): every rank closes it (or lets it be collected), and each waits up to the communicator's timeout for the peers. Idempotent; also what the end of a `with` block does.
        """

    @property
    def closed(self) -> bool:
        """True once close() has run (or a `with` block ended)."""

    def __enter__(self) -> LinearLogp:
        """Returns self."""

    def __exit__(self, exc_type: object | None, exc_value: object | None, traceback: object | None) -> None:
        """Calls close(); an exception raised in the block propagates."""

    @property
    def config(self) -> dict: ...

    @property
    def main_loop(self) -> str:
        """
        'wgmma' (Hopper), 'mma.sync' (portable) or 'fp32 fma': the loop of the op's logit kernels
        """

    def forward(self, hidden: Annotated[NDArray, dict(writable=False)], weight: Annotated[NDArray, dict(writable=False)], targets: Annotated[NDArray, dict(writable=False)], logp: Annotated[NDArray, dict(writable=True)], *, lse: Annotated[NDArray, dict(writable=True)] | None = None, entropy: Annotated[NDArray, dict(writable=True)] | None = None, bias: Annotated[NDArray, dict(writable=False)] | None = None, stream: int = 0) -> None:
        """
        Enqueues the forward on `stream` (a cudaStream_t as an int). logp, lse, entropy: fp32 [N] outputs.
        """

    def backward(self, hidden: Annotated[NDArray, dict(writable=False)], weight: Annotated[NDArray, dict(writable=False)], targets: Annotated[NDArray, dict(writable=False)], lse: Annotated[NDArray, dict(writable=False)], grad_hidden: Annotated[NDArray, dict(writable=True)] | None = None, *, grad_logp: Annotated[NDArray, dict(writable=False)] | None = None, grad_lse: Annotated[NDArray, dict(writable=False)] | None = None, grad_entropy: Annotated[NDArray, dict(writable=False)] | None = None, entropy: Annotated[NDArray, dict(writable=False)] | None = None, grad_weight: Annotated[NDArray, dict(writable=True)] | None = None, grad_bias: Annotated[NDArray, dict(writable=True)] | None = None, bias: Annotated[NDArray, dict(writable=False)] | None = None, accumulate: bool = False, reduce_grad_hidden: bool = True, stream: int = 0) -> None:
        """
        Enqueues the backward on `stream` (needs want_backward=True). lse (and entropy, needed with grad_entropy, which needs want_entropy=True) are the forward's outputs; grad_logp, grad_lse and grad_entropy the fp32 [N] upstream gradients (None: zero). grad_hidden, grad_weight, grad_bias: the gradients to write (None: not computed). reduce_grad_hidden=False leaves a tensor-parallel op's grad_hidden as this rank's partial.
        """

    def check(self, stream: int = 0) -> dict:
        """
        Waits for `stream`; returns and clears the record of out-of-range target ids (bad_rows, first_bad_id).
        """
