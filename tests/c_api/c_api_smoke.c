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

/* The communicator: bad arguments are named; without NCCL or a GPU, creating one is an error
 * status with a message (never an abort); with both, a group of one works. */
static void check_communicator(shardjit_runtime* runtime) {
  char id[SHARDJIT_COMM_UNIQUE_ID_BYTES];
  memset(id, 0, sizeof(id));
  shardjit_comm* comm = NULL;

  CHECK(shardjit_comm_new_unique_id(NULL) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "shardjit_comm_new_unique_id: out is NULL") != NULL);
  CHECK(shardjit_comm_create(runtime, 0, 0, 1, id, 0, NULL) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "out is NULL") != NULL);
  CHECK(shardjit_comm_create(NULL, 0, 0, 1, id, 0, &comm) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "runtime is NULL") != NULL);
  CHECK(comm == NULL);
  CHECK(shardjit_comm_create(runtime, 0, 0, 1, NULL, 0, &comm) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "unique_id is NULL") != NULL);
  CHECK(shardjit_comm_create(runtime, 0, 2, 2, id, 0, &comm) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "rank 2 of 2") != NULL);
  CHECK(shardjit_comm_create(runtime, 0, 0, 0, id, 0, &comm) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(shardjit_comm_create(runtime, 0, 0, 1, id, -5, &comm) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "timeout_ms = -5") != NULL);
  CHECK(comm == NULL);
  CHECK(shardjit_comm_wrap(runtime, NULL, 0, 0, &comm) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "nccl_comm is NULL") != NULL);
  CHECK(shardjit_comm_wrap(NULL, id, 0, 0, &comm) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "runtime is NULL") != NULL);

  int value = -1;
  CHECK(shardjit_comm_rank(NULL, &value) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "shardjit_comm_rank: comm is NULL") != NULL);
  CHECK(shardjit_comm_size(NULL, &value) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(shardjit_comm_device(NULL, &value) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(shardjit_comm_aborted(NULL, &value) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(shardjit_comm_abort(NULL) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(shardjit_comm_set_timeout(NULL, 1000) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(value == -1);
  shardjit_comm_destroy(NULL);

  shardjit_linear_logp_config config;
  shardjit_linear_logp_config_init(&config);
  config.hidden = 64;
  config.vocab_local = 300;
  shardjit_linear_logp* op = NULL;
  CHECK(shardjit_linear_logp_create_tp(runtime, &config, NULL, &op) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "shardjit_linear_logp_create_tp: comm is NULL") != NULL);
  CHECK(op == NULL);

  /* A unique id needs NCCL only; without it (or a network interface for its bootstrap) the
   * status is a comm error. */
  const shardjit_status id_status = shardjit_comm_new_unique_id(id);
  CHECK(id_status == SHARDJIT_OK || id_status == SHARDJIT_ERROR_COMM);
  if (id_status != SHARDJIT_OK) CHECK(strlen(shardjit_last_error()) > 0);

  /* Rank 0 of a group of one, within 20 s. */
  const shardjit_status status = shardjit_comm_create(runtime, 0, 0, 1, id, 20000, &comm);
  if (status != SHARDJIT_OK) {
    CHECK(status == SHARDJIT_ERROR_COMM || status == SHARDJIT_ERROR_NO_DEVICE || status == SHARDJIT_ERROR_DRIVER);
    CHECK(comm == NULL);
    CHECK(strlen(shardjit_last_error()) > 0);
    printf("c api: no communicator here (%s: %s)\n", shardjit_status_name(status), shardjit_last_error());
    return;
  }
  CHECK(comm != NULL);
  CHECK(shardjit_comm_rank(comm, &value) == SHARDJIT_OK && value == 0);
  CHECK(shardjit_comm_size(comm, &value) == SHARDJIT_OK && value == 1);
  CHECK(shardjit_comm_device(comm, &value) == SHARDJIT_OK && value == 0);
  CHECK(shardjit_comm_rank(comm, NULL) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "rank is NULL") != NULL);
  CHECK(shardjit_comm_set_timeout(comm, 0) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(shardjit_comm_set_timeout(comm, 30000) == SHARDJIT_OK);
  /* A bad layout is refused by the collective build, with a message. */
  config.hidden = 100;
  CHECK(shardjit_linear_logp_create_tp(runtime, &config, comm, &op) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(op == NULL);
  CHECK(strstr(shardjit_last_error(), "multiple of 8") != NULL);
  CHECK(shardjit_comm_aborted(comm, &value) == SHARDJIT_OK && value == 0);
  CHECK(shardjit_comm_abort(comm) == SHARDJIT_OK);
  CHECK(shardjit_comm_aborted(comm, &value) == SHARDJIT_OK && value == 1);
  shardjit_comm_destroy(comm);
}

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

  check_communicator(runtime);
  shardjit_runtime_destroy(runtime);

  if (failures == 0) printf("c api: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
