"""Calls of cached ops on the caller's current CUDA stream, kept in order across streams.

A shardjit op keeps its calls in order on the GPU within one stream. A call on another stream
than the one of the entry's previous call first waits on that stream's work (an event), so that
threads and streams may share the cached ops. During a CUDA-graph capture the wait is skipped
(capture starts after a device synchronize, and the captured calls run in the capture's stream
order).

The current stream is read as its raw handle, a fraction of a microsecond; torch.cuda.current_stream
builds a Stream object, about 3 us a call. That object is made only where the stream changes, and
the entry keeps it while it is the last one's, to record the event on. PyTorch's own streams live
as long as the process; a stream made outside PyTorch (torch.cuda.ExternalStream) must outlive the
calls made on it, as for any CUDA work.
"""

import torch

try:
    _raw_current_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # a torch without it: the public lookup, slower
    def _raw_current_stream(device):
        return torch.cuda.current_stream(device).cuda_stream


def ordered_stream(entry, device):
    """The handle of CUDA device `device`'s (an index) current stream, ordered behind the stream of
    the previous call of `entry` (a _op_cache.CachedOp). The caller holds entry.lock and enqueues
    its call of entry.op on this stream before letting it go:

        with _op_cache.ops().locked(key, build) as entry:
            entry.op._forward_at(..., _enqueue.ordered_stream(entry, device))

    (A function the call is handed to would cost the hottest path a call and a closure more.)"""
    stream = _raw_current_stream(device)
    if entry.last_stream_handle != stream:
        _follow_last_stream(entry, device, stream)
    return stream


def _follow_last_stream(entry, device, handle):
    current = torch.cuda.current_stream(device)
    with torch.cuda.device(device):  # the capture query looks at the current device's stream
        capturing = torch.cuda.is_current_stream_capturing()
    if entry.last_stream is not None and not capturing:
        event = torch.cuda.Event()
        event.record(entry.last_stream)
        current.wait_event(event)
    entry.last_stream = current
    entry.last_stream_handle = handle
