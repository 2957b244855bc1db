// shardjit-host-bench: host-side costs of the kernel cache and the compiler, on any machine (no
// GPU needed). Run with --benchmark_format=json to keep the numbers.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
