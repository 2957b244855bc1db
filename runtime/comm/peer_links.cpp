#include "runtime/comm/peer_links.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/comm/collective_build.hpp"
#include "runtime/driver/cuda_driver.hpp"

namespace shardjit {
namespace {

struct BusId {
  char text[32];  // "0000:18:00.0"
};

// Native atomics from `mine` to the GPU at `bus`, false where that GPU is not visible here.
bool native_atomics_to(CUdevice mine, const BusId& bus) {
  const DriverApi& cu = driver();
  CUdevice peer = 0;
  if (cu.cuDeviceGetByPCIBusId(&peer, bus.text) != CUDA_SUCCESS) return false;
  int native = 0;
  if (cu.cuDeviceGetP2PAttribute(&native, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, mine, peer) != CUDA_SUCCESS) {
    return false;
  }
  return native != 0;
}

}  // namespace

bool agreed_whole_line_links(Communicator::Impl& comm, bool wanted) {
  const CUdevice mine = comm.device.device();
  BusId bus{};
  if (driver().cuDeviceGetPCIBusId(bus.text, sizeof(bus.text), mine) != CUDA_SUCCESS) bus.text[0] = '\0';
  const std::vector<BusId> buses = exchange_records(comm, bus, "peer link bus id exchange");
  std::int32_t ok = wanted && bus.text[0] != '\0' ? 1 : 0;
  for (int r = 0; r < comm.size && ok; ++r) {
    if (r != comm.rank) ok = native_atomics_to(mine, buses[static_cast<std::size_t>(r)]) ? 1 : 0;
  }
  const std::vector<std::int32_t> all = exchange_records(comm, ok, "peer link agreement");
  for (std::int32_t o : all) {
    if (o == 0) return false;
  }
  return true;
}

}  // namespace shardjit
