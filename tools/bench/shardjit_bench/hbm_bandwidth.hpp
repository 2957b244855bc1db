// The device memory's bandwidth as a copy within the device measures it: the yardstick of the
// sweep's goal below 1024 rows, where an op that reads W once is bound by it.
#pragma once

namespace shardjit::bench {

// GB/s (10^9 bytes a second) of a device-to-device copy of `bytes` (random data, larger than
// L2), counting the bytes read and the bytes written: the median of timed copies after warm-up.
double measured_hbm_gbps(double bytes = 512.0 * (1 << 20));

}  // namespace shardjit::bench
