/* A live LinearLogp backward through the C API, against a double-precision reference computed
 * here. The case takes every path a C caller can reach: bf16 inputs and a bf16 bias, int64
 * targets with an ignored row, a temperature, padding past valid_vocab, a dZ workspace small
 * enough to cut the vocabulary into chunks (grad_hidden summed over them), the first chunk kept
 * from the forward (on the Hopper path) in the first backward and recomputed in the second, fp32
 * grad_weight and grad_bias accumulated over the two calls, and both upstream gradients; then
 * through shardjit_linear_logp_backward_v2 the entropy's gradient beside them, after a forward
 * that writes the entropy, and that call's argument errors. Exit 0 when every check holds, or
 * with a message when there is no GPU. Argument: a cache folder. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "live_program.h"
#include "shardjit/c_api.h"

enum { kN = 37, kH = 72, kV = 700, kValid = 690 };

static const float kTemperature = 1.25f;
static const int64_t kIgnoreIndex = -100;
/* bf16 inputs and outputs; dZ is rounded to 16 bits: a few parts in a thousand, where a view or
 * a field that reaches the op wrongly gives errors of order one. */
static const double kTolerance = 8e-3;

static float x[kN * kH], w[kV * kH], bias[kV], grad_logp[kN], grad_lse[kN], grad_entropy[kN];
static uint16_t x16[kN * kH], w16[kV * kH], bias16[kV];
static int64_t targets[kN];
static double ref_hidden[kN * kH], ref_weight[kV * kH], ref_bias[kV];
static double got_hidden[kN * kH], got_weight[kV * kH], got_bias[kV];

/* dz = (g [v = t] + (h - g) p - e p (z - (lse - H))) / T per row (e = 0 without
 * `with_entropy`), then the three products, in double. */
static void reference_grads(int with_entropy) {
  static double dz[kN * kV];
  memset(dz, 0, sizeof dz);
  for (int i = 0; i < kN; ++i) {
    if (targets[i] == kIgnoreIndex) continue;
    double z[kValid], max = -INFINITY, sum = 0.0;
    for (int v = 0; v < kValid; ++v) {
      double dot = bias[v];
      for (int k = 0; k < kH; ++k) dot += (double)x[i * kH + k] * (double)w[v * kH + k];
      z[v] = dot / kTemperature;
      if (z[v] > max) max = z[v];
    }
    for (int v = 0; v < kValid; ++v) sum += exp(z[v] - max);
    const double lse = max + log(sum);
    double entropy = lse;
    for (int v = 0; v < kValid; ++v) entropy -= exp(z[v] - lse) * z[v];
    const double e = with_entropy ? grad_entropy[i] : 0.0;
    for (int v = 0; v < kValid; ++v) {
      const double p = exp(z[v] - lse);
      const double hit = v == targets[i] ? grad_logp[i] : 0.0;
      dz[i * kV + v] = (hit + ((double)grad_lse[i] - grad_logp[i]) * p - e * p * (z[v] - (lse - entropy))) / kTemperature;
    }
  }
  memset(ref_hidden, 0, sizeof ref_hidden);
  memset(ref_weight, 0, sizeof ref_weight);
  memset(ref_bias, 0, sizeof ref_bias);
  for (int i = 0; i < kN; ++i) {
    for (int v = 0; v < kV; ++v) {
      const double d = dz[i * kV + v];
      if (d == 0.0) continue;
      for (int k = 0; k < kH; ++k) {
        ref_hidden[i * kH + k] += d * w[v * kH + k];
        ref_weight[v * kH + k] += d * x[i * kH + k];
      }
      ref_bias[v] += d;
    }
  }
}

/* Copies the three gradients back to the host as doubles. */
static void read_grads(void* d_hidden, void* d_weight, void* d_bias) {
  static uint16_t hidden16[kN * kH];
  static float weight32[kV * kH], bias32[kV];
  CHECK(cudaMemcpy(hidden16, d_hidden, sizeof hidden16, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(cudaMemcpy(weight32, d_weight, sizeof weight32, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(cudaMemcpy(bias32, d_bias, sizeof bias32, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int i = 0; i < kN * kH; ++i) got_hidden[i] = float_of_bf16(hidden16[i]);
  for (int i = 0; i < kV * kH; ++i) got_weight[i] = weight32[i];
  for (int i = 0; i < kV; ++i) got_bias[i] = bias32[i];
}

/* The gradients of `calls` accumulated backwards: grad_hidden is overwritten by each call,
 * grad_weight and grad_bias sum them. */
static void check_grads(int calls) {
  static double want_weight[kV * kH], want_bias[kV];
  for (int i = 0; i < kV * kH; ++i) want_weight[i] = calls * ref_weight[i];
  for (int i = 0; i < kV; ++i) want_bias[i] = calls * ref_bias[i];
  const double hidden_error = relative_error(got_hidden, ref_hidden, kN * kH);
  const double weight_error = relative_error(got_weight, want_weight, kV * kH);
  const double bias_error = relative_error(got_bias, want_bias, kV);
  printf("after %d backward(s): relative error grad_hidden %.2e, grad_weight %.2e, grad_bias %.2e\n", calls,
         hidden_error, weight_error, bias_error);
  CHECK(hidden_error < kTolerance);
  CHECK(weight_error < kTolerance);
  CHECK(bias_error < kTolerance);
  /* Padding columns get no gradient. */
  for (int v = kValid; v < kV; ++v) CHECK(got_bias[v] == 0.0);
}

int main(int argc, char** argv) {
  int exit_code = 0;
  if (!live_start(argc, argv, "c api backward", &exit_code)) return exit_code;
  unsigned state = 2024u;
  fill(x, kN * kH, &state, 1.0f);
  fill(w, kV * kH, &state, 0.5f);
  fill(bias, kV, &state, 1.0f);
  fill(grad_logp, kN, &state, 1.0f);
  fill(grad_lse, kN, &state, 1.0f);
  fill(grad_entropy, kN, &state, 2.0f);
  round_to_bf16(x, x16, kN * kH);
  round_to_bf16(w, w16, kV * kH);
  round_to_bf16(bias, bias16, kV);
  for (int i = 0; i < kN; ++i) targets[i] = (i * 97 + 11) % kValid;
  targets[5] = kIgnoreIndex;
  reference_grads(0);

  shardjit_runtime* runtime = live_runtime(argv[1]);
  if (runtime == NULL) return 1;
  shardjit_linear_logp_config config;
  shardjit_linear_logp_config_init(&config);
  config.hidden = kH;
  config.vocab_local = kV;
  config.valid_vocab = kValid;
  config.dtype = SHARDJIT_BF16;
  config.has_bias = 1;
  config.bias_dtype = SHARDJIT_BF16;
  config.target_dtype = SHARDJIT_INT64;
  config.ignore_index = kIgnoreIndex;
  config.temperature = kTemperature;
  config.want_entropy = 1;
  config.want_backward = 1;
  config.grad_weight_fp32 = 1;
  /* Two 256-column tiles of dZ for these rows: the vocabulary goes in two chunks. */
  config.backward_workspace_bytes = 2 * kN * 256 * 2;
  shardjit_linear_logp* op = NULL;
  CHECK(shardjit_linear_logp_create(runtime, &config, &op) == SHARDJIT_OK);
  if (op == NULL) {
    fprintf(stderr, "%s\n", shardjit_last_error());
    return 1;
  }

  static float zeros[kV * kH];
  float nan_fill[kN];
  for (int i = 0; i < kN; ++i) nan_fill[i] = NAN;
  void* dx = to_device(x16, sizeof x16);
  void* dw = to_device(w16, sizeof w16);
  void* db = to_device(bias16, sizeof bias16);
  void* dt = to_device(targets, sizeof targets);
  void* dlogp = to_device(nan_fill, sizeof nan_fill);
  void* dlse = to_device(nan_fill, sizeof nan_fill);
  void* dgrad_logp = to_device(grad_logp, sizeof grad_logp);
  void* dgrad_lse = to_device(grad_lse, sizeof grad_lse);
  void* dgrad_entropy = to_device(grad_entropy, sizeof grad_entropy);
  void* dentropy = to_device(nan_fill, sizeof nan_fill);
  void* dgrad_hidden = to_device(zeros, kN * kH * sizeof(uint16_t));
  void* dgrad_weight = to_device(zeros, kV * kH * sizeof(float));
  void* dgrad_bias = to_device(zeros, kV * sizeof(float));
  CHECK(dx && dw && db && dt && dlogp && dlse && dgrad_logp && dgrad_lse && dgrad_hidden && dgrad_weight &&
        dgrad_bias && dgrad_entropy && dentropy);

  const shardjit_matrix hidden = {dx, SHARDJIT_BF16, kN, kH, 0};
  const shardjit_matrix weight = {dw, SHARDJIT_BF16, kV, kH, 0};
  const shardjit_vector bias_view = {db, SHARDJIT_BF16, kV};
  const shardjit_vector target_view = {dt, SHARDJIT_INT64, kN};
  const shardjit_vector lse = {dlse, SHARDJIT_FP32, kN};
  const shardjit_vector no_entropy = {NULL, SHARDJIT_FP32, 0};
  CHECK(shardjit_linear_logp_forward(op, hidden, weight, bias_view, target_view,
                                     (shardjit_vector){dlogp, SHARDJIT_FP32, kN}, lse, no_entropy,
                                     NULL) == SHARDJIT_OK);
  const shardjit_linear_logp_grads grads = {{dgrad_hidden, SHARDJIT_BF16, kN, kH, 0},
                                            {dgrad_weight, SHARDJIT_FP32, kV, kH, 0},
                                            {dgrad_bias, SHARDJIT_FP32, kV},
                                            1};
  const shardjit_vector grad_logp_view = {dgrad_logp, SHARDJIT_FP32, kN};
  const shardjit_vector grad_lse_view = {dgrad_lse, SHARDJIT_FP32, kN};
  for (int call = 1; call <= 2; ++call) {
    CHECK(shardjit_linear_logp_backward(op, hidden, weight, bias_view, target_view, lse, grad_logp_view,
                                        grad_lse_view, &grads, NULL) == SHARDJIT_OK);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    read_grads(dgrad_hidden, dgrad_weight, dgrad_bias);
    check_grads(call);
  }

  /* The entropy's gradient: a forward that writes the entropy, then one backward_v2 into cleared
   * gradients (accumulate adds to zeros). */
  const shardjit_vector entropy = {dentropy, SHARDJIT_FP32, kN};
  CHECK(shardjit_linear_logp_forward(op, hidden, weight, bias_view, target_view,
                                     (shardjit_vector){dlogp, SHARDJIT_FP32, kN}, lse, entropy, NULL) == SHARDJIT_OK);
  CHECK(cudaMemset(dgrad_weight, 0, kV * kH * sizeof(float)) == cudaSuccess);
  CHECK(cudaMemset(dgrad_bias, 0, kV * sizeof(float)) == cudaSuccess);
  shardjit_linear_logp_backward_inputs inputs = {lse, entropy, grad_logp_view, grad_lse_view,
                                                 {dgrad_entropy, SHARDJIT_FP32, kN}};
  CHECK(shardjit_linear_logp_backward_v2(op, hidden, weight, bias_view, target_view, &inputs, &grads, 1, NULL) ==
        SHARDJIT_OK);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  reference_grads(1);
  read_grads(dgrad_hidden, dgrad_weight, dgrad_bias);
  check_grads(1);
  CHECK(shardjit_linear_logp_backward_v2(op, hidden, weight, bias_view, target_view, &inputs, &grads, 2, NULL) ==
        SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "reduce_grad_hidden") != NULL);
  inputs.entropy.data = NULL;
  CHECK(shardjit_linear_logp_backward_v2(op, hidden, weight, bias_view, target_view, &inputs, &grads, 1, NULL) ==
        SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "entropy") != NULL);
  CHECK(shardjit_linear_logp_backward_v2(op, hidden, weight, bias_view, target_view, NULL, &grads, 1, NULL) ==
        SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "inputs") != NULL);

  int64_t bad_rows = -1;
  CHECK(shardjit_linear_logp_check(op, NULL, &bad_rows, NULL) == SHARDJIT_OK && bad_rows == 0);

  void* buffers[] = {dx,           dw,           db,         dt,            dlogp,   dlse,     dgrad_logp,
                     dgrad_lse,    dgrad_hidden, dgrad_weight, dgrad_bias, dgrad_entropy, dentropy};
  for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; ++i) cudaFree(buffers[i]);
  shardjit_linear_logp_destroy(op);
  shardjit_runtime_destroy(runtime);
  return live_finish("c api backward");
}
