// The cross-GPU synchronization state the peer kernels share with the host: every rank's signal
// area (at the end of its symmetric buffer, mapped into every peer), the status word the host
// reads in check(), and the bound on every wait. Shared verbatim by the host and the kernels, so
// only built-in types appear here.
#pragma once

namespace shardjit {
namespace kernels {

constexpr int kMaxPeers = 8;
// Barrier slots per rank: a kernel's blocks each own one or a few (the host keeps grids within
// this).
constexpr int kMaxPeerSlots = 2048;
// Threads of a block of the peer kernels.
constexpr int kPeerThreads = 512;

// Flags are epochs: a call's n-th use of a slot publishes n and waits for n, so nothing is ever
// reset between calls and a rank that runs ahead cannot be confused with one that lags. The
// area is zeroed before its IPC handle is published.
struct PeerSignals {
  unsigned long long start[kMaxPeerSlots][kMaxPeers];  // [slot][source rank]: "my data of epoch e is ready"
  unsigned long long end[kMaxPeerSlots][kMaxPeers];    // [slot][source rank]: "I am done reading epoch e"
  unsigned long long epoch[kMaxPeerSlots];             // this rank's last epoch per slot (local only)
};

struct PeerStatus {
  unsigned int timeouts;        // waits that ran out: a peer did not join the call in time
  unsigned int bad_positions;   // MoE combine: positions outside [-1, source capacity)
  long long first_bad_position;
  unsigned int claimed;         // set by the first writer of first_bad_position
};

struct PeerSync {
  PeerSignals* signals[kMaxPeers];  // rank q's signal area as mapped here (this rank's own too)
  PeerStatus* status;
  unsigned long long timeout_ns;    // the longest a block waits for its peers
  int rank;
  int world;
};

}  // namespace kernels
}  // namespace shardjit
