// How a cross-GPU op (ReduceScatter, MoeCombine) moves data between the ranks.
#pragma once

namespace shardjit {

enum class CollectivePath : int {
  // kPeer where every rank can map every peer's memory (the GPUs of one host joined by NVLink
  // or PCIe P2P) and the input is not larger than the op's nccl_above_bytes; else kNccl.
  kAuto = 0,
  // JIT kernels that read the peers' symmetric buffers directly, with cross-GPU flags. Building
  // with it where a peer is not reachable raises Error(kCommError) on every rank.
  kPeer = 1,
  // NCCL collectives (plus a local kernel for the MoE combine): works across hosts.
  kNccl = 2,
};

// "auto", "peer", "nccl".
const char* collective_path_name(CollectivePath path) noexcept;

}  // namespace shardjit
