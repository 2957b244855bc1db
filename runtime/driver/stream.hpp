// Streams and events the library owns: created when an op or a communicator is built, never per
// call, and destroyed with it.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "runtime/driver/device.hpp"

namespace shardjit {

// A non-blocking stream (it does not synchronize with the legacy default stream) in a device's
// primary context.
class OwnedStream {
 public:
  OwnedStream() = default;
  explicit OwnedStream(const DeviceContext& device);
  ~OwnedStream();
  OwnedStream(OwnedStream&& other) noexcept;
  OwnedStream& operator=(OwnedStream&& other) noexcept;
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;

  CUstream get() const { return stream_; }

 private:
  void release() noexcept;
  const DeviceContext* device_ = nullptr;
  CUstream stream_ = nullptr;
};

// An event for ordering streams (no timing, which makes record and wait cheaper), or, with
// `timing`, for measuring the time between two of them (cuEventElapsedTime).
class OwnedEvent {
 public:
  OwnedEvent() = default;
  explicit OwnedEvent(const DeviceContext& device, bool timing = false);
  ~OwnedEvent();
  OwnedEvent(OwnedEvent&& other) noexcept;
  OwnedEvent& operator=(OwnedEvent&& other) noexcept;
  OwnedEvent(const OwnedEvent&) = delete;
  OwnedEvent& operator=(const OwnedEvent&) = delete;

  CUevent get() const { return event_; }

 private:
  void release() noexcept;
  const DeviceContext* device_ = nullptr;
  CUevent event_ = nullptr;
};

// Whether `stream` is being captured into a CUDA graph (then nothing may synchronize with it);
// never the legacy stream (null or CU_STREAM_LEGACY).
bool stream_is_capturing(CUstream stream);

// The id of the capture sequence `stream` is part of, unique in the process; 0 when it is not
// being captured (and for the legacy stream, which never is).
std::uint64_t stream_capture_id(CUstream stream);

// An op's buffer `what` must grow for a call on `stream`. Throws kInvalidArgument, naming the
// remedy, when the stream is being captured: the growth would synchronize and allocate inside the
// capture, which the driver refuses with an error that names neither.
void check_growth_outside_capture(CUstream stream, const std::string& what);

// A call `what` is about to wait for `stream` on the host. Throws kInvalidArgument, naming the
// call and `remedy`, when the stream is being captured: the wait would end the capture with a
// driver error that names neither.
void check_wait_outside_capture(CUstream stream, const std::string& what,
                                const std::string& remedy = "call it outside the capture, after launching the graph");

// Grows `buffer` to at least `bytes` for a call on `stream`, whose queued work may still read the
// old buffer: refused during capture (check_growth_outside_capture), otherwise the stream is
// drained and the old buffer freed before the new one is allocated (the two may not fit
// together). Nothing happens when the buffer is already large enough.
void grow_buffer_for_stream(DeviceBuffer& buffer, std::size_t bytes, const DeviceContext& device, CUstream stream,
                            const std::string& what);

}  // namespace shardjit
