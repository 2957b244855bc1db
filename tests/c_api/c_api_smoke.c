/* A C program against the C API: it builds and links as C, and the API reports bad input with
 * statuses and messages instead of aborting. Exit 0 when every check holds. Argument: a fresh
 * cache folder. */
#include <stdio.h>
#include <string.h>

#include "shardjit/c_api.h"

static int failures = 0;

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                        \
    }                                                                    \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CACHE_DIR\n", argv[0]);
    return 2;
  }
  CHECK(strlen(shardjit_version()) > 0);
  CHECK(strcmp(shardjit_status_name(SHARDJIT_ERROR_INVALID_ARGUMENT), "invalid_argument") == 0);

  /* NULL out-pointers are errors, not crashes. */
  CHECK(shardjit_runtime_create(NULL, NULL) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "out is NULL") != NULL);

  shardjit_runtime_options options;
  shardjit_runtime_options_init(&options);
  options.cache_dir = argv[1];
  shardjit_runtime* runtime = NULL;
  CHECK(shardjit_runtime_create(&options, &runtime) == SHARDJIT_OK);
  CHECK(runtime != NULL);
  CHECK(strcmp(shardjit_last_error(), "") == 0);

  /* A bad config is reported with what was expected. */
  shardjit_linear_logp_config config;
  shardjit_linear_logp_config_init(&config);
  CHECK(config.ignore_index == -100 && config.temperature == 1.0f && config.target_dtype == SHARDJIT_INT64);
  config.hidden = 100;
  config.vocab_local = 1000;
  shardjit_linear_logp* op = NULL;
  CHECK(shardjit_linear_logp_create(runtime, &config, &op) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(op == NULL);
  CHECK(strstr(shardjit_last_error(), "multiple of 8") != NULL);

  config.hidden = 64;
  config.dtype = (shardjit_dtype)42;
  CHECK(shardjit_linear_logp_create(runtime, &config, &op) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "42") != NULL);

  CHECK(shardjit_linear_logp_forward(NULL, (shardjit_matrix){0}, (shardjit_matrix){0}, (shardjit_vector){0},
                                     (shardjit_vector){0}, (shardjit_vector){0}, (shardjit_vector){0},
                                     (shardjit_vector){0}, NULL) == SHARDJIT_ERROR_INVALID_ARGUMENT);

  shardjit_linear_logp_grads grads = {0};
  CHECK(shardjit_linear_logp_backward(NULL, (shardjit_matrix){0}, (shardjit_matrix){0}, (shardjit_vector){0},
                                      (shardjit_vector){0}, (shardjit_vector){0}, (shardjit_vector){0},
                                      (shardjit_vector){0}, &grads, NULL) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "op is NULL") != NULL);

  /* A valid config needs a GPU: without one, a no-device status; with one, an op. */
  config.want_backward = 1;
  config.grad_weight_fp32 = 1;
  config.dtype = SHARDJIT_BF16;
  shardjit_status status = shardjit_linear_logp_create(runtime, &config, &op);
  CHECK(status == SHARDJIT_OK || status == SHARDJIT_ERROR_NO_DEVICE);
  if (status == SHARDJIT_OK) {
    int64_t bad = -1;
    CHECK(shardjit_linear_logp_check(op, NULL, &bad, NULL) == SHARDJIT_OK && bad == 0);
  } else {
    CHECK(strlen(shardjit_last_error()) > 0);
  }
  shardjit_linear_logp_destroy(op);
  shardjit_runtime_destroy(runtime);

  if (failures == 0) printf("c api: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
