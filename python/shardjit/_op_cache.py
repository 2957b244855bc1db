"""The ops that shardjit.torch builds for its callers, and the Runtime they share.

An op is built once per key (everything that changes what it computes or how it is built: device,
shapes, dtypes, options, process group) and kept in a bounded least-recently-used cache; the
least recently used op is closed when the cache is full. Its kernels stay in the Runtime's cache,
so a rebuild costs the workspace allocation, not a compile.

A shardjit op serves one call at a time and keeps its calls in order on the GPU. Each entry has
a lock, held while a call is enqueued (microseconds), and the stream of its last call
(shardjit.torch's _enqueue.py orders a call on another stream behind it). A call takes its entry
through OpCache.locked, never by get and then the lock: between those, another thread's miss may
evict the entry and close its op.
"""

import itertools
import os
import threading

from . import _shardjit

DEFAULT_CAPACITY = 32

_runtime_lock = threading.Lock()
_runtime = None


def runtime():
    """The shardjit.Runtime of every op shardjit.torch builds (made on first use, options from
    the SHARDJIT_* environment). It logs from info on unless SHARDJIT_LOG_LEVEL says otherwise,
    so that the notice of an op that has to compile reaches logging.getLogger("shardjit"), which
    shows it where the program lets INFO through."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = _shardjit.Runtime(log_level=None if os.environ.get("SHARDJIT_LOG_LEVEL") else "info")
        return _runtime


def set_runtime(value):
    """Makes `value` (a shardjit.Runtime) the Runtime of the ops built from now on."""
    global _runtime
    if not isinstance(value, _shardjit.Runtime):
        raise TypeError(f"set_runtime: runtime: expected a shardjit.Runtime, got {type(value).__name__}")
    with _runtime_lock:
        _runtime = value


class CachedOp:
    """One op of the cache with what orders its calls: a lock and the stream of its last call."""

    __slots__ = ("op", "lock", "last_stream", "last_stream_handle", "last_use", "evicted")

    def __init__(self, op):
        self.op = op
        self.lock = threading.Lock()
        self.last_stream = None  # a torch.cuda.Stream
        self.last_stream_handle = None  # its cudaStream_t, as an int
        self.last_use = 0  # the cache's use count at this entry's last lookup
        self.evicted = False  # set under the lock, before the op is closed

    # `with cache.locked(key, build) as entry:` ends by releasing the lock locked() took.
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.lock.release()


class OpCache:
    """Ops by key, at most `capacity` of them; `build()` makes a missing one. Thread-safe: two
    threads that miss the same key build it once (the second waits for the first).

    A hit takes no lock (it is on every call's path): a dict read and a stamp from a shared
    counter, both atomic in CPython. Recency is that stamp; the scan for the least recent entry
    happens only when a miss overfills the cache."""

    def __init__(self, capacity=DEFAULT_CAPACITY):
        self._entries = {}
        self._uses = itertools.count(1)
        self._lock = threading.RLock()
        self._capacity = _checked_capacity(capacity)

    def get(self, key, build):
        entry = self._entries.get(key)
        if entry is None:
            with self._lock:
                entry = self._entries.get(key)
                if entry is None:
                    entry = CachedOp(build())
                    self._entries[key] = entry
                    entry.last_use = next(self._uses)
                    self._evict(self._capacity)
                    return entry
        entry.last_use = next(self._uses)
        return entry

    def locked(self, key, build):
        """The entry of `key`, as get() gives it, with its lock held until the `with` block that
        takes it ends. An entry that another thread's miss evicted between the lookup and the lock
        is looked up again (and so rebuilt), never used: its op is closed."""
        while True:
            entry = self.get(key, build)
            entry.lock.acquire()
            if not entry.evicted:
                return entry
            entry.lock.release()

    def set_capacity(self, capacity):
        with self._lock:
            self._capacity = _checked_capacity(capacity)
            self._evict(self._capacity)

    def clear(self):
        with self._lock:
            self._evict(0)

    def keys(self):
        """The keys, least recently used first."""
        with self._lock:
            return sorted(self._entries, key=lambda key: self._entries[key].last_use)

    def __len__(self):
        with self._lock:
            return len(self._entries)

    def _evict(self, keep):
        while len(self._entries) > keep:
            oldest = min(self._entries, key=lambda key: self._entries[key].last_use)
            entry = self._entries.pop(oldest)
            with entry.lock:
                entry.evicted = True
                close = getattr(entry.op, "close", None)
                if close is not None:
                    close()


def _checked_capacity(capacity):
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"op cache capacity: expected a positive int, got {capacity!r}")
    return capacity


_ops = OpCache()


def ops():
    """The process's op cache (shared by LinearLogp, ReduceScatter and MoeCombine)."""
    return _ops


def set_op_cache_size(capacity):
    """Keeps at most `capacity` ops (default 32); closes the least recently used beyond it. With
    tensor parallelism every rank must make the same calls, so that every rank evicts alike
    (destroying a collective op is collective)."""
    _ops.set_capacity(capacity)


def clear_op_cache():
    """Closes every cached op (collective for tensor-parallel ones: every rank calls it)."""
    _ops.clear()

