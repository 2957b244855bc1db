/* What the live C programs (a GPU and the CUDA runtime) share: their start and end, a runtime
 * that compiles what it misses, reproducible random values, bf16 conversions done by hand (C has
 * no bf16 type), and device buffers. */
#ifndef SHARDJIT_TESTS_C_API_LIVE_PROGRAM_H_
#define SHARDJIT_TESTS_C_API_LIVE_PROGRAM_H_

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "shardjit/c_api.h"

/* Whether `program` has what it runs on: its one argument (a cache folder) and a GPU. Sets
 * *exit_code (2: usage, 0: no GPU, nothing to run) when it has not. */
static inline int live_start(int argc, char** argv, const char* program, int* exit_code) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CACHE_DIR\n", argv[0]);
    *exit_code = 2;
    return 0;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("%s: no GPU here, nothing to run\n", program);
    *exit_code = 0;
    return 0;
  }
  return 1;
}

/* A runtime that compiles the kernels it misses into `cache_dir`; NULL (the message printed)
 * when it cannot be made. */
static inline shardjit_runtime* live_runtime(const char* cache_dir) {
  shardjit_runtime_options options;
  shardjit_runtime_options_init(&options);
  options.cache_dir = cache_dir;
  options.jit = 1;
  shardjit_runtime* runtime = NULL;
  CHECK(shardjit_runtime_create(&options, &runtime) == SHARDJIT_OK);
  if (runtime == NULL) fprintf(stderr, "%s\n", shardjit_last_error());
  return runtime;
}

/* The exit code once every check has run: 0 when all held. */
static inline int live_finish(const char* program) {
  if (failures != 0) {
    fprintf(stderr, "%s: %d check(s) failed\n", program, failures);
    return 1;
  }
  printf("%s: all checks passed\n", program);
  return 0;
}

/* Values in [-scale, scale) from a fixed linear congruential sequence. */
static inline void fill(float* values, int count, unsigned* state, float scale) {
  for (int i = 0; i < count; ++i) {
    *state = *state * 1664525u + 1013904223u;
    values[i] = scale * ((float)(*state >> 8) / 8388608.0f - 1.0f);
  }
}

/* fp32 -> bf16 rounded to nearest even (finite values only, which is all these programs make). */
static inline uint16_t bf16_of(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static inline float float_of_bf16(uint16_t value) {
  const uint32_t bits = (uint32_t)value << 16;
  float out;
  memcpy(&out, &bits, sizeof out);
  return out;
}

/* Rounds `values` to bf16 in place and writes their bits to `out`: the reference then computes
 * on exactly what the device reads. */
static inline void round_to_bf16(float* values, uint16_t* out, int count) {
  for (int i = 0; i < count; ++i) {
    out[i] = bf16_of(values[i]);
    values[i] = float_of_bf16(out[i]);
  }
}

/* A device copy of `bytes` of host memory; NULL when the allocation fails. */
static inline void* to_device(const void* host, size_t bytes) {
  void* device = NULL;
  if (cudaMalloc(&device, bytes) != cudaSuccess) return NULL;
  if (cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaFree(device);
    return NULL;
  }
  return device;
}

/* ||got - want|| / ||want|| over `count` values. */
static inline double relative_error(const double* got, const double* want, int count) {
  double diff = 0.0, norm = 0.0;
  for (int i = 0; i < count; ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return sqrt(diff) / sqrt(norm);
}

#endif
