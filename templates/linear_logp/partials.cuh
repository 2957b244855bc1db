// Per-row partial statistics of a softmax over a slice of the vocabulary. The forward kernel
// writes one per (source, row), where a source is a vocabulary split of one GPU or a TP rank;
// the combine kernel merges them. Shared verbatim by the host (plain C++) and the kernels.
#pragma once

namespace shardjit {
namespace kernels {

// Over the columns v of the slice, with m = max_v z_v:
//   max    = m                                   (-inf when the slice has no valid column)
//   sum    = sum_v exp(z_v - m)                  (0 when empty)
//   ent    = sum_v exp(z_v - m) * (z_v - m)      (entropy term; 0 when empty or not wanted)
//   target = z_t if the row's target t lies in the slice, else -inf
struct RowPartial {
  float max;
  float sum;
  float ent;
  float target;
};

// The device status word of an op: what the combine kernel found wrong with the data.
struct DeviceStatus {
  unsigned int bad_rows;      // rows whose target is outside [0, valid_vocab) and not ignored
  unsigned int claimed;       // set by the first writer of first_bad_id
  long long first_bad_id;
};

}  // namespace kernels
}  // namespace shardjit
