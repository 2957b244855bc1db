// Whether the links between the ranks' GPUs deliver a warp's 128-byte store whole, which the
// line protocol of the small peer reduce-scatter relies on (a flag in each 128-byte line vouches
// for the line's other 124 bytes). NVLink does; PCIe peer writes may arrive split. The driver
// does not name the link, so its proxy is the one NCCL's topology detection also leans on: a
// GPU pair with native peer atomics is joined by NVLink.
#pragma once

#include "runtime/comm/communicator_impl.hpp"

namespace shardjit {

// Collective, for ranks on one host whose memory is mapped both ways: true on every rank when
// every rank sees every peer's GPU (by PCI bus id) with native peer atomics and `wanted` is true
// on every rank; false on every rank otherwise (a peer GPU this process cannot see included).
bool agreed_whole_line_links(Communicator::Impl& comm, bool wanted);

}  // namespace shardjit
