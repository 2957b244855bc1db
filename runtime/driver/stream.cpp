#include "runtime/driver/stream.hpp"

#include <utility>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

OwnedStream::OwnedStream(const DeviceContext& device) : device_(&device) {
  ScopedContext scope(device);
  SHARDJIT_CU(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
}

OwnedStream::~OwnedStream() { release(); }

OwnedStream::OwnedStream(OwnedStream&& other) noexcept
    : device_(other.device_), stream_(std::exchange(other.stream_, nullptr)) {}

OwnedStream& OwnedStream::operator=(OwnedStream&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void OwnedStream::release() noexcept {
  if (stream_ == nullptr) return;
  try {
    ScopedContext scope(*device_);
    driver().cuStreamDestroy(stream_);
  } catch (const std::exception& e) {
    log().warn("destroying a stream failed: {}", e.what());
  }
  stream_ = nullptr;
}

OwnedEvent::OwnedEvent(const DeviceContext& device, bool timing) : device_(&device) {
  ScopedContext scope(device);
  SHARDJIT_CU(cuEventCreate(&event_, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING));
}

OwnedEvent::~OwnedEvent() { release(); }

OwnedEvent::OwnedEvent(OwnedEvent&& other) noexcept
    : device_(other.device_), event_(std::exchange(other.event_, nullptr)) {}

OwnedEvent& OwnedEvent::operator=(OwnedEvent&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void OwnedEvent::release() noexcept {
  if (event_ == nullptr) return;
  try {
    ScopedContext scope(*device_);
    driver().cuEventDestroy(event_);
  } catch (const std::exception& e) {
    log().warn("destroying an event failed: {}", e.what());
  }
  event_ = nullptr;
}

namespace {

// The legacy stream is never captured, and asking about it while another thread captures in the
// global mode would be an error of its own. It is null or CU_STREAM_LEGACY.
bool is_legacy_stream(CUstream stream) { return stream == nullptr || stream == CU_STREAM_LEGACY; }

}  // namespace

bool stream_is_capturing(CUstream stream) {
  if (is_legacy_stream(stream)) return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  SHARDJIT_CU(cuStreamIsCapturing(stream, &status));
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

std::uint64_t stream_capture_id(CUstream stream) {
  if (is_legacy_stream(stream)) return 0;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  SHARDJIT_CU(cuStreamGetCaptureInfo(stream, &status, &id, nullptr, nullptr, nullptr, nullptr));
  return status == CU_STREAM_CAPTURE_STATUS_NONE ? 0 : static_cast<std::uint64_t>(id);
}

void check_growth_outside_capture(CUstream stream, const std::string& what) {
  if (!stream_is_capturing(stream)) return;
  throw Error(ErrorCode::kInvalidArgument,
              what + " would have to grow during CUDA graph capture; build the op with max_rows >= the largest "
                     "row count of a call, or run one call of that size before capturing");
}

void check_wait_outside_capture(CUstream stream, const std::string& what, const std::string& remedy) {
  if (!stream_is_capturing(stream)) return;
  throw Error(ErrorCode::kInvalidArgument,
              what + " waits for the stream on the host, and the stream is being captured into a CUDA graph; " +
                  remedy);
}

void grow_buffer_for_stream(DeviceBuffer& buffer, std::size_t bytes, const DeviceContext& device, CUstream stream,
                            const std::string& what) {
  if (bytes <= buffer.bytes()) return;
  check_growth_outside_capture(stream, what);
  if (buffer.bytes() > 0) SHARDJIT_CU(cuStreamSynchronize(stream));
  log().debug("{} grows to {} bytes", what, bytes);
  buffer = DeviceBuffer();
  buffer = DeviceBuffer(device, bytes);
}

}  // namespace shardjit
