/* ReduceScatter and MoeCombine run through the C API on a live group of one rank, their results
 * checked against values computed here: with one rank the reduce-scatter returns its input, and
 * the combine gives each token gate x the row it names (zeros where it names none). The
 * combine runs twice: from the caller's rows, and zero-copy from the op's own rows buffer.
 * Exit 0 when every check holds, or with a message when there is no GPU or no NCCL. Argument: a
 * cache folder. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "live_program.h"
#include "shardjit/c_api.h"

enum { kH = 96, kRsRows = 13, kCapacity = 16, kRows = 11, kTokens = 9 };

/* The reduce-scatter of one rank: its output is its input, bit for bit. */
static void check_reduce_scatter(shardjit_runtime* runtime, shardjit_comm* comm) {
  float values[kRsRows * kH];
  uint16_t input[kRsRows * kH], output[kRsRows * kH];
  unsigned state = 77u;
  fill(values, kRsRows * kH, &state, 4.0f);
  round_to_bf16(values, input, kRsRows * kH);
  memset(output, 0xff, sizeof output);

  const int64_t rows_per_rank[1] = {kRsRows};
  shardjit_reduce_scatter_config config;
  shardjit_reduce_scatter_config_init(&config);
  config.hidden = kH;
  config.rows_per_rank = rows_per_rank;
  config.rows_per_rank_count = 1;
  shardjit_reduce_scatter* op = NULL;
  CHECK(shardjit_reduce_scatter_create(runtime, comm, &config, &op) == SHARDJIT_OK);
  if (op == NULL) {
    fprintf(stderr, "%s\n", shardjit_last_error());
    return;
  }
  void* d_input = to_device(input, sizeof input);
  void* d_output = to_device(output, sizeof output);
  CHECK(d_input && d_output);
  CHECK(shardjit_reduce_scatter_run(op, (shardjit_matrix){d_input, SHARDJIT_BF16, kRsRows, kH, 0},
                                    (shardjit_matrix){d_output, SHARDJIT_BF16, kRsRows, kH, 0}, NULL) == SHARDJIT_OK);
  CHECK(shardjit_reduce_scatter_check(op, NULL) == SHARDJIT_OK);
  CHECK(cudaMemcpy(output, d_output, sizeof output, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(memcmp(output, input, sizeof input) == 0);
  printf("reduce-scatter of one rank: %s\n", memcmp(output, input, sizeof input) == 0 ? "input returned" : "wrong");
  cudaFree(d_input);
  cudaFree(d_output);
  shardjit_reduce_scatter_destroy(op);
}

/* Output row t = gates[t] x rows[positions[t]] rounded to bf16, or zeros for position -1. */
static void check_combined(const uint16_t* output, const float* rows, const int32_t* positions, const float* gates) {
  int wrong = 0;
  for (int t = 0; t < kTokens; ++t) {
    for (int k = 0; k < kH; ++k) {
      const double want = positions[t] < 0 ? 0.0 : (double)gates[t] * rows[positions[t] * kH + k];
      const double got = float_of_bf16(output[t * kH + k]);
      if (fabs(got - want) > fabs(want) / 128.0 + 1e-30) ++wrong;
    }
  }
  printf("moe combine of one rank: %d of %d values wrong\n", wrong, kTokens * kH);
  CHECK(wrong == 0);
}

static void check_moe_combine(shardjit_runtime* runtime, shardjit_comm* comm) {
  float rows[kRows * kH], gates[kTokens];
  uint16_t rows16[kRows * kH], output[kTokens * kH];
  const int32_t positions[kTokens] = {3, -1, 0, 10, 3, 7, -1, 1, 9};
  unsigned state = 91u;
  fill(rows, kRows * kH, &state, 2.0f);
  round_to_bf16(rows, rows16, kRows * kH);
  for (int t = 0; t < kTokens; ++t) gates[t] = 0.1f + 0.1f * (float)t;

  shardjit_moe_combine_config config;
  shardjit_moe_combine_config_init(&config);
  config.hidden = kH;
  config.capacity = kCapacity;
  config.gates = 1;
  shardjit_moe_combine* op = NULL;
  CHECK(shardjit_moe_combine_create(runtime, comm, &config, &op) == SHARDJIT_OK);
  if (op == NULL) {
    fprintf(stderr, "%s\n", shardjit_last_error());
    return;
  }
  memset(output, 0xff, sizeof output);
  void* d_rows = to_device(rows16, sizeof rows16);
  void* d_positions = to_device(positions, sizeof positions);
  void* d_gates = to_device(gates, sizeof gates);
  void* d_output = to_device(output, sizeof output);
  CHECK(d_rows && d_positions && d_gates && d_output);
  shardjit_moe_combine_call call;
  call.rows = (shardjit_matrix){d_rows, SHARDJIT_BF16, kRows, kH, 0};
  call.positions = (shardjit_matrix){d_positions, SHARDJIT_INT32, kTokens, 1, 0};
  call.gates = (shardjit_matrix){d_gates, SHARDJIT_FP32, kTokens, 1, 0};
  call.output = (shardjit_matrix){d_output, SHARDJIT_BF16, kTokens, kH, 0};
  CHECK(shardjit_moe_combine_run(op, &call, NULL) == SHARDJIT_OK);
  int64_t bad = -1;
  CHECK(shardjit_moe_combine_check(op, NULL, &bad, NULL) == SHARDJIT_OK && bad == 0);
  CHECK(cudaMemcpy(output, d_output, sizeof output, cudaMemcpyDeviceToHost) == cudaSuccess);
  check_combined(output, rows, positions, gates);

  /* Zero copy: the rows written into the op's own buffer, the call's rows.data NULL. */
  shardjit_matrix buffer = {0};
  CHECK(shardjit_moe_combine_rows_buffer(op, &buffer) == SHARDJIT_OK && buffer.data != NULL);
  CHECK(cudaMemcpy(buffer.data, rows16, sizeof rows16, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemset(d_output, 0xff, sizeof output) == cudaSuccess);
  call.rows.data = NULL;
  CHECK(shardjit_moe_combine_run(op, &call, NULL) == SHARDJIT_OK);
  CHECK(shardjit_moe_combine_check(op, NULL, &bad, NULL) == SHARDJIT_OK && bad == 0);
  CHECK(cudaMemcpy(output, d_output, sizeof output, cudaMemcpyDeviceToHost) == cudaSuccess);
  check_combined(output, rows, positions, gates);

  cudaFree(d_rows);
  cudaFree(d_positions);
  cudaFree(d_gates);
  cudaFree(d_output);
  shardjit_moe_combine_destroy(op);
}

int main(int argc, char** argv) {
  int exit_code = 0;
  if (!live_start(argc, argv, "c api collectives", &exit_code)) return exit_code;
  shardjit_runtime* runtime = live_runtime(argv[1]);
  if (runtime == NULL) return 1;

  char id[SHARDJIT_COMM_UNIQUE_ID_BYTES];
  shardjit_comm* comm = NULL;
  shardjit_status status = shardjit_comm_new_unique_id(id);
  if (status == SHARDJIT_OK) status = shardjit_comm_create(runtime, 0, 0, 1, id, 60000, &comm);
  if (status == SHARDJIT_ERROR_COMM) {
    printf("c api collectives: no NCCL here, nothing to run (%s)\n", shardjit_last_error());
    shardjit_runtime_destroy(runtime);
    return 0;
  }
  CHECK(status == SHARDJIT_OK && comm != NULL);
  if (comm != NULL) {
    check_reduce_scatter(runtime, comm);
    check_moe_combine(runtime, comm);
    shardjit_comm_destroy(comm);
  }
  shardjit_runtime_destroy(runtime);
  return live_finish("c api collectives");
}
