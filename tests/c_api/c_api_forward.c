/* A live LinearLogp forward through the C API, against a double-precision reference computed
 * here: every config field the case sets (fp32, a bias, int32 targets, a temperature, padding past
 * valid_vocab, entropy, an ignored row) and every view must reach the op as meant. Exit 0 when
 * every check holds, or with a message when there is no GPU. Argument: a cache folder. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "live_program.h"
#include "shardjit/c_api.h"

enum { kN = 5, kH = 24, kV = 40, kValid = 37 };

int main(int argc, char** argv) {
  int exit_code = 0;
  if (!live_start(argc, argv, "c api forward", &exit_code)) return exit_code;
  const float temperature = 0.75f;
  const int ignore_index = -7;
  float x[kN * kH], w[kV * kH], bias[kV];
  unsigned state = 12345u;
  fill(x, kN * kH, &state, 1.0f);
  fill(w, kV * kH, &state, 0.5f);
  fill(bias, kV, &state, 2.0f);
  const int targets[kN] = {3, 36, ignore_index, 0, 20};

  shardjit_runtime* runtime = live_runtime(argv[1]);
  if (runtime == NULL) return 1;
  shardjit_linear_logp_config config;
  shardjit_linear_logp_config_init(&config);
  config.hidden = kH;
  config.vocab_local = kV;
  config.valid_vocab = kValid;
  config.dtype = SHARDJIT_FP32;
  config.has_bias = 1;
  config.bias_dtype = SHARDJIT_FP32;
  config.target_dtype = SHARDJIT_INT32;
  config.ignore_index = ignore_index;
  config.temperature = temperature;
  config.want_entropy = 1;
  shardjit_linear_logp* op = NULL;
  CHECK(shardjit_linear_logp_create(runtime, &config, &op) == SHARDJIT_OK);
  if (op == NULL) {
    fprintf(stderr, "%s\n", shardjit_last_error());
    return 1;
  }

  void* dx = to_device(x, sizeof x);
  void* dw = to_device(w, sizeof w);
  void* db = to_device(bias, sizeof bias);
  void* dt = to_device(targets, sizeof targets);
  float nan_fill[kN];
  for (int i = 0; i < kN; ++i) nan_fill[i] = NAN;
  void* dlogp = to_device(nan_fill, sizeof nan_fill);
  void* dlse = to_device(nan_fill, sizeof nan_fill);
  void* dentropy = to_device(nan_fill, sizeof nan_fill);
  CHECK(dx && dw && db && dt && dlogp && dlse && dentropy);
  const shardjit_matrix hidden = {dx, SHARDJIT_FP32, kN, kH, kH};
  const shardjit_matrix weight = {dw, SHARDJIT_FP32, kV, kH, kH};
  CHECK(shardjit_linear_logp_forward(op, hidden, weight, (shardjit_vector){db, SHARDJIT_FP32, kV},
                                     (shardjit_vector){dt, SHARDJIT_INT32, kN},
                                     (shardjit_vector){dlogp, SHARDJIT_FP32, kN},
                                     (shardjit_vector){dlse, SHARDJIT_FP32, kN},
                                     (shardjit_vector){dentropy, SHARDJIT_FP32, kN}, NULL) == SHARDJIT_OK);
  int64_t bad_rows = -1;
  CHECK(shardjit_linear_logp_check(op, NULL, &bad_rows, NULL) == SHARDJIT_OK && bad_rows == 0);
  float logp[kN], lse[kN], entropy[kN];
  cudaMemcpy(logp, dlogp, sizeof logp, cudaMemcpyDeviceToHost);
  cudaMemcpy(lse, dlse, sizeof lse, cudaMemcpyDeviceToHost);
  cudaMemcpy(entropy, dentropy, sizeof entropy, cudaMemcpyDeviceToHost);

  /* z = (x W^T + b) / T over the valid vocabulary; lse, logp of the target, entropy. */
  for (int i = 0; i < kN; ++i) {
    double z[kV], max = -INFINITY;
    for (int v = 0; v < kValid; ++v) {
      double dot = bias[v];
      for (int k = 0; k < kH; ++k) dot += (double)x[i * kH + k] * (double)w[v * kH + k];
      z[v] = dot / temperature;
      if (z[v] > max) max = z[v];
    }
    double sum = 0.0, weighted = 0.0;
    for (int v = 0; v < kValid; ++v) sum += exp(z[v] - max);
    const double ref_lse = max + log(sum);
    for (int v = 0; v < kValid; ++v) weighted += exp(z[v] - ref_lse) * z[v];
    const double ref_logp = targets[i] == ignore_index ? 0.0 : z[targets[i]] - ref_lse;
    const double ref_entropy = ref_lse - weighted;
    printf("row %d: logp %.6f (reference %.6f), lse %.6f (%.6f), entropy %.6f (%.6f)\n", i, logp[i], ref_logp,
           lse[i], ref_lse, entropy[i], ref_entropy);
    CHECK(fabs(logp[i] - ref_logp) < 1e-4);
    CHECK(fabs(lse[i] - ref_lse) < 1e-4);
    CHECK(fabs(entropy[i] - ref_entropy) < 1e-4);
  }

  cudaFree(dx);
  cudaFree(dw);
  cudaFree(db);
  cudaFree(dt);
  cudaFree(dlogp);
  cudaFree(dlse);
  cudaFree(dentropy);
  shardjit_linear_logp_destroy(op);
  shardjit_runtime_destroy(runtime);
  return live_finish("c api forward");
}
