/* A C program against the C API: it builds and links as C, and the API reports bad input with
 * statuses and messages instead of aborting. Exit 0 when every check holds. Argument: a fresh
 * cache folder. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "shardjit/c_api.h"

/* `status` is the invalid-argument status and the message names `function` and `argument`. */
static int names_null(shardjit_status status, const char* function, const char* argument) {
  char expected[128];
  snprintf(expected, sizeof(expected), "%s: %s is NULL", function, argument);
  return status == SHARDJIT_ERROR_INVALID_ARGUMENT && strstr(shardjit_last_error(), expected) != NULL;
}

/* The struct_size values no library knows: 0 (a struct never passed through *_init) and one
 * beyond this header's size (what a header newer than the library would pass). */
static size_t unknown_size(int i, size_t own) { return i == 0 ? 0 : own + 8; }

/* `status` refuses `type_name`.struct_size = `size` (the library's own size being `own`, the
 * largest it expects; a struct that has grown also accepts its older sizes, "expected OLD to OWN")
 * and the message says what to do: call *_init, or that the header is newer than the library. */
static int refuses_size(shardjit_status status, const char* type_name, size_t size, size_t own) {
  char expected[192];
  snprintf(expected, sizeof expected, "%s.struct_size = %zu; expected ", type_name, size);
  const char* message = shardjit_last_error();
  if (status != SHARDJIT_ERROR_INVALID_ARGUMENT || strstr(message, expected) == NULL) return 0;
  char largest[64], range_end[64];
  snprintf(largest, sizeof largest, "expected %zu", own);
  snprintf(range_end, sizeof range_end, " to %zu", own);
  if (strstr(message, largest) == NULL && strstr(message, range_end) == NULL) return 0;
  if (size == 0) {
    snprintf(expected, sizeof expected, "call %s_init", type_name);
  } else {
    snprintf(expected, sizeof expected, "newer than this library, shardjit %s", shardjit_version());
  }
  return strstr(shardjit_last_error(), expected) != NULL;
}

/* *_init_sized writes the defaults of the first struct_size bytes only: a caller built against an
 * older header (a smaller struct) keeps its memory past them, and a newer header's extra fields
 * are left to the create call, which refuses the size. */
static void check_init_sized(void) {
  union {
    shardjit_linear_logp_config config;
    unsigned char bytes[sizeof(shardjit_linear_logp_config) + 8];
  } buffer;
  const size_t older = sizeof(size_t) + sizeof(int64_t); /* struct_size and hidden */
  memset(buffer.bytes, 0xAB, sizeof buffer.bytes);
  shardjit_linear_logp_config_init_sized(&buffer.config, older);
  CHECK(buffer.config.struct_size == older && buffer.config.hidden == 0);
  CHECK(buffer.bytes[older] == 0xAB && buffer.bytes[sizeof buffer.bytes - 1] == 0xAB);
  memset(buffer.bytes, 0xAB, sizeof buffer.bytes);
  shardjit_linear_logp_config_init_sized(&buffer.config, sizeof buffer.bytes);
  CHECK(buffer.config.struct_size == sizeof buffer.bytes && buffer.config.ignore_index == -100);
  CHECK(buffer.bytes[sizeof(shardjit_linear_logp_config)] == 0xAB && buffer.bytes[sizeof buffer.bytes - 1] == 0xAB);
  shardjit_linear_logp_config_init_sized(NULL, sizeof(shardjit_linear_logp_config)); /* a no-op */
}

/* A runtime options struct of an unknown size is refused by name (main then builds the runtime
 * from the same options with the size *_init set). */
static void check_runtime_struct_size(const shardjit_runtime_options* defaults) {
  CHECK(defaults->struct_size == sizeof(shardjit_runtime_options));
  static char marker;
  for (int i = 0; i < 2; ++i) {
    shardjit_runtime_options options = *defaults;
    options.struct_size = unknown_size(i, sizeof options);
    shardjit_runtime* runtime = (shardjit_runtime*)&marker;
    CHECK(refuses_size(shardjit_runtime_create(&options, &runtime), "shardjit_runtime_options", options.struct_size,
                       sizeof options));
    CHECK(runtime == NULL);
  }
}

/* Every runtime option is read under its own name: a value out of range is refused naming the
 * field, and values in range build a runtime. */
static void check_runtime_option_values(const shardjit_runtime_options* defaults) {
  struct {
    const char* field;
    shardjit_runtime_options options;
  } bad[8];
  for (int i = 0; i < 8; ++i) bad[i].options = *defaults;
  bad[0].field = "jit";
  bad[0].options.jit = 2;
  bad[1].field = "cache_max_bytes";
  bad[1].options.cache_max_bytes = -2;
  bad[2].field = "peer_blocks";
  bad[2].options.peer_blocks = -5;
  bad[3].field = "peer_lines";
  bad[3].options.peer_lines = 3;
  bad[4].field = "hopper_path";
  bad[4].options.hopper_path = 2;
  bad[5].field = "autotune";
  bad[5].options.autotune = -3;
  bad[6].field = "compile_jobs";
  bad[6].options.compile_jobs = -2;
  bad[7].field = "compile_jobs";
  bad[7].options.compile_jobs = 5000;
  for (int i = 0; i < 8; ++i) {
    shardjit_runtime* runtime = NULL;
    CHECK(shardjit_runtime_create(&bad[i].options, &runtime) == SHARDJIT_ERROR_INVALID_ARGUMENT);
    CHECK(runtime == NULL);
    char expected[96];
    snprintf(expected, sizeof expected, "shardjit_runtime_options.%s = ", bad[i].field);
    CHECK(strstr(shardjit_last_error(), expected) != NULL);
  }
  shardjit_runtime_options good = *defaults;
  good.cache_max_bytes = 1 << 20;
  good.peer_blocks = 8;
  good.peer_lines = 0;
  good.hopper_path = 0;
  good.autotune = 0;
  good.compile_jobs = 2;
  shardjit_runtime* runtime = NULL;
  CHECK(shardjit_runtime_create(&good, &runtime) == SHARDJIT_OK);
  shardjit_runtime_destroy(runtime);
  /* A caller built before compile_jobs was appended passes the older size: read, not refused. */
  shardjit_runtime_options older = good;
  older.struct_size = offsetof(shardjit_runtime_options, compile_jobs);
  older.compile_jobs = -7; /* past its size: never read */
  runtime = NULL;
  CHECK(shardjit_runtime_create(&older, &runtime) == SHARDJIT_OK);
  shardjit_runtime_destroy(runtime);
}

/* ReduceScatter and MoeCombine without a communicator: defaults mirror the C++ configs, every
 * NULL argument is named, and the create calls fail cleanly (no GPU or NCCL needed). */
static void check_collective_ops(shardjit_runtime* runtime) {
  const int64_t rows_per_rank[2] = {3, 5};
  shardjit_reduce_scatter_config rs_config;
  shardjit_reduce_scatter_config_init(&rs_config);
  CHECK(rs_config.struct_size == sizeof(shardjit_reduce_scatter_config));
  CHECK(rs_config.dtype == SHARDJIT_BF16 && rs_config.hidden == 0 && rs_config.rows_per_rank == NULL &&
        rs_config.rows_per_rank_count == 0 && rs_config.path == SHARDJIT_COLLECTIVE_AUTO &&
        rs_config.nccl_above_bytes == 0);
  rs_config.hidden = 64;
  rs_config.rows_per_rank = rows_per_rank;
  rs_config.rows_per_rank_count = 2;
  shardjit_moe_combine_config moe_config;
  shardjit_moe_combine_config_init(&moe_config);
  CHECK(moe_config.struct_size == sizeof(shardjit_moe_combine_config));
  CHECK(moe_config.dtype == SHARDJIT_BF16 && moe_config.hidden == 0 && moe_config.capacity == 0 &&
        moe_config.gates == 0 && moe_config.path == SHARDJIT_COLLECTIVE_AUTO && moe_config.nccl_above_bytes == 0);
  moe_config.hidden = 64;
  moe_config.capacity = 16;
  shardjit_reduce_scatter_config_init(NULL); /* no-ops, like the other *_init */
  shardjit_moe_combine_config_init(NULL);

  CHECK(strcmp(shardjit_collective_path_name(SHARDJIT_COLLECTIVE_AUTO), "auto") == 0);
  CHECK(strcmp(shardjit_collective_path_name(SHARDJIT_COLLECTIVE_PEER), "peer") == 0);
  CHECK(strcmp(shardjit_collective_path_name(SHARDJIT_COLLECTIVE_NCCL), "nccl") == 0);
  CHECK(strcmp(shardjit_collective_path_name((shardjit_collective_path)7), "unknown") == 0);

  /* Start from a non-NULL marker: a failed create must set *out to NULL. */
  static char marker;
  shardjit_reduce_scatter* rs = (shardjit_reduce_scatter*)&marker;
  CHECK(names_null(shardjit_reduce_scatter_create(runtime, NULL, &rs_config, NULL), "shardjit_reduce_scatter_create",
                   "out"));
  CHECK(names_null(shardjit_reduce_scatter_create(NULL, NULL, &rs_config, &rs), "shardjit_reduce_scatter_create",
                   "runtime"));
  CHECK(rs == NULL);
  rs = (shardjit_reduce_scatter*)&marker;
  CHECK(names_null(shardjit_reduce_scatter_create(runtime, NULL, &rs_config, &rs), "shardjit_reduce_scatter_create",
                   "comm"));
  CHECK(rs == NULL);
  CHECK(names_null(shardjit_reduce_scatter_create(runtime, NULL, NULL, &rs), "shardjit_reduce_scatter_create", "comm"));
  CHECK(names_null(shardjit_reduce_scatter_run(NULL, (shardjit_matrix){0}, (shardjit_matrix){0}, NULL),
                   "shardjit_reduce_scatter_run", "op"));
  shardjit_collective_path path = (shardjit_collective_path)-1;
  CHECK(names_null(shardjit_reduce_scatter_path(NULL, &path), "shardjit_reduce_scatter_path", "op"));
  CHECK(names_null(shardjit_reduce_scatter_check(NULL, NULL), "shardjit_reduce_scatter_check", "op"));
  CHECK(path == (shardjit_collective_path)-1);
  shardjit_reduce_scatter_destroy(NULL);

  shardjit_moe_combine* moe = (shardjit_moe_combine*)&marker;
  CHECK(names_null(shardjit_moe_combine_create(runtime, NULL, &moe_config, NULL), "shardjit_moe_combine_create",
                   "out"));
  CHECK(names_null(shardjit_moe_combine_create(NULL, NULL, &moe_config, &moe), "shardjit_moe_combine_create",
                   "runtime"));
  CHECK(moe == NULL);
  moe = (shardjit_moe_combine*)&marker;
  CHECK(names_null(shardjit_moe_combine_create(runtime, NULL, &moe_config, &moe), "shardjit_moe_combine_create",
                   "comm"));
  CHECK(moe == NULL);
  shardjit_moe_combine_call call;
  memset(&call, 0, sizeof(call));
  CHECK(names_null(shardjit_moe_combine_run(NULL, &call, NULL), "shardjit_moe_combine_run", "op"));
  shardjit_matrix buffer = {0};
  CHECK(names_null(shardjit_moe_combine_rows_buffer(NULL, &buffer), "shardjit_moe_combine_rows_buffer", "op"));
  CHECK(buffer.data == NULL);
  CHECK(names_null(shardjit_moe_combine_path(NULL, &path), "shardjit_moe_combine_path", "op"));
  int64_t bad = -1, first = -1;
  CHECK(names_null(shardjit_moe_combine_check(NULL, NULL, &bad, &first), "shardjit_moe_combine_check", "op"));
  CHECK(bad == -1 && first == -1 && path == (shardjit_collective_path)-1);
  shardjit_moe_combine_destroy(NULL);
}

/* ReduceScatter and MoeCombine on a live communicator (a group of one): the arguments checked
 * after the op handle, and bad configs refused by the collective build with a message. */
static void check_collective_ops_on(shardjit_runtime* runtime, shardjit_comm* comm) {
  const int64_t two_ranks[2] = {3, 5};
  shardjit_reduce_scatter_config rs_config;
  shardjit_reduce_scatter_config_init(&rs_config);
  rs_config.hidden = 64;
  shardjit_reduce_scatter* rs = NULL;
  CHECK(names_null(shardjit_reduce_scatter_create(runtime, comm, NULL, &rs), "shardjit_reduce_scatter_create",
                   "config"));
  for (int i = 0; i < 2; ++i) {
    shardjit_reduce_scatter_config unknown = rs_config;
    unknown.struct_size = unknown_size(i, sizeof unknown);
    CHECK(refuses_size(shardjit_reduce_scatter_create(runtime, comm, &unknown, &rs), "shardjit_reduce_scatter_config",
                       unknown.struct_size, sizeof unknown));
    CHECK(rs == NULL);
  }
  rs_config.rows_per_rank_count = 1; /* rows_per_rank left NULL */
  CHECK(shardjit_reduce_scatter_create(runtime, comm, &rs_config, &rs) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "config->rows_per_rank is NULL") != NULL);
  rs_config.rows_per_rank = two_ranks;
  rs_config.rows_per_rank_count = 2;
  CHECK(shardjit_reduce_scatter_create(runtime, comm, &rs_config, &rs) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "expected one per rank") != NULL);
  rs_config.rows_per_rank_count = 1;
  rs_config.path = (shardjit_collective_path)9;
  CHECK(shardjit_reduce_scatter_create(runtime, comm, &rs_config, &rs) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "not a shardjit_collective_path") != NULL);
  CHECK(rs == NULL);

  shardjit_moe_combine_config moe_config;
  shardjit_moe_combine_config_init(&moe_config);
  shardjit_moe_combine* moe = NULL;
  CHECK(names_null(shardjit_moe_combine_create(runtime, comm, NULL, &moe), "shardjit_moe_combine_create", "config"));
  for (int i = 0; i < 2; ++i) {
    shardjit_moe_combine_config unknown = moe_config;
    unknown.struct_size = unknown_size(i, sizeof unknown);
    CHECK(refuses_size(shardjit_moe_combine_create(runtime, comm, &unknown, &moe), "shardjit_moe_combine_config",
                       unknown.struct_size, sizeof unknown));
    CHECK(moe == NULL);
  }
  CHECK(shardjit_moe_combine_create(runtime, comm, &moe_config, &moe) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "hidden = 0") != NULL);
  CHECK(moe == NULL);

  /* Good configs: one rank runs the NCCL path; the out-pointers of live ops are checked too. */
  shardjit_collective_path path = SHARDJIT_COLLECTIVE_AUTO;
  rs_config.path = SHARDJIT_COLLECTIVE_AUTO;
  rs_config.rows_per_rank = two_ranks;
  rs_config.rows_per_rank_count = 1;
  CHECK(shardjit_reduce_scatter_create(runtime, comm, &rs_config, &rs) == SHARDJIT_OK);
  if (rs != NULL) {
    CHECK(shardjit_reduce_scatter_path(rs, &path) == SHARDJIT_OK && path == SHARDJIT_COLLECTIVE_NCCL);
    CHECK(names_null(shardjit_reduce_scatter_path(rs, NULL), "shardjit_reduce_scatter_path", "path"));
    CHECK(shardjit_reduce_scatter_check(rs, NULL) == SHARDJIT_OK);
    shardjit_reduce_scatter_destroy(rs);
  }
  moe_config.hidden = 64;
  moe_config.capacity = 16;
  CHECK(shardjit_moe_combine_create(runtime, comm, &moe_config, &moe) == SHARDJIT_OK);
  if (moe != NULL) {
    shardjit_matrix buffer = {0};
    CHECK(shardjit_moe_combine_rows_buffer(moe, &buffer) == SHARDJIT_OK);
    CHECK(buffer.data != NULL && buffer.dtype == SHARDJIT_BF16 && buffer.rows == 16 && buffer.cols == 64);
    CHECK(names_null(shardjit_moe_combine_rows_buffer(moe, NULL), "shardjit_moe_combine_rows_buffer", "buffer"));
    CHECK(shardjit_moe_combine_path(moe, &path) == SHARDJIT_OK && path == SHARDJIT_COLLECTIVE_NCCL);
    CHECK(names_null(shardjit_moe_combine_path(moe, NULL), "shardjit_moe_combine_path", "path"));
    CHECK(names_null(shardjit_moe_combine_run(moe, NULL, NULL), "shardjit_moe_combine_run", "call"));
    int64_t bad = -1, first = -1;
    CHECK(shardjit_moe_combine_check(moe, NULL, &bad, &first) == SHARDJIT_OK && bad == 0);
    CHECK(shardjit_moe_combine_check(moe, NULL, NULL, NULL) == SHARDJIT_OK);
    shardjit_moe_combine_destroy(moe);
  }
}

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
  check_collective_ops_on(runtime, comm);
  for (int i = 0; i < 2; ++i) {
    shardjit_linear_logp_config unknown = config;
    unknown.struct_size = unknown_size(i, sizeof unknown);
    CHECK(refuses_size(shardjit_linear_logp_create_tp(runtime, &unknown, comm, &op), "shardjit_linear_logp_config",
                       unknown.struct_size, sizeof unknown));
    CHECK(op == NULL);
  }
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
  CHECK(options.cache_dir == NULL && options.jit == -1 && options.template_dir == NULL && options.log_level == NULL &&
        options.cache_max_bytes == -1 && options.dump_dir == NULL && options.peer_blocks == -1 &&
        options.peer_lines == -1 && options.hopper_path == -1 && options.autotune == -1 &&
        options.compile_jobs == -1);
  options.cache_dir = argv[1];
  shardjit_runtime* runtime = NULL;
  check_runtime_option_values(&options);
  check_runtime_struct_size(&options);
  check_init_sized();
  CHECK(shardjit_runtime_create(&options, &runtime) == SHARDJIT_OK);
  CHECK(runtime != NULL);
  CHECK(strcmp(shardjit_last_error(), "") == 0);

  /* A bad config is reported with what was expected. */
  shardjit_linear_logp_config config;
  shardjit_linear_logp_config_init(&config);
  CHECK(config.struct_size == sizeof(shardjit_linear_logp_config));
  CHECK(config.ignore_index == -100 && config.temperature == 1.0f && config.target_dtype == SHARDJIT_INT64);
  /* The config is read before anything needs a GPU: an unknown size is refused here too. */
  for (int i = 0; i < 2; ++i) {
    shardjit_linear_logp_config unknown = config;
    unknown.struct_size = unknown_size(i, sizeof unknown);
    shardjit_linear_logp* refused = (shardjit_linear_logp*)&unknown;  /* any non-NULL value */
    CHECK(refuses_size(shardjit_linear_logp_create(runtime, &unknown, &refused), "shardjit_linear_logp_config",
                       unknown.struct_size, sizeof unknown));
    CHECK(refused == NULL);
  }
  CHECK(config.keep_logits_bytes == SHARDJIT_KEEP_LOGITS_AUTO); /* the C++ default */
  config.hidden = 100;
  config.vocab_local = 1000;
  shardjit_linear_logp* op = NULL;
  CHECK(shardjit_linear_logp_create(runtime, &config, &op) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(op == NULL);
  CHECK(strstr(shardjit_last_error(), "multiple of 8") != NULL);
  /* A caller built before keep_logits_bytes was appended passes the older size: read, not refused. */
  {
    shardjit_linear_logp_config older = config;
    older.struct_size = offsetof(shardjit_linear_logp_config, keep_logits_bytes);
    older.keep_logits_bytes = -1; /* past its size: never read */
    CHECK(shardjit_linear_logp_create(runtime, &older, &op) == SHARDJIT_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(shardjit_last_error(), "multiple of 8") != NULL);
  }

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
  const shardjit_linear_logp_backward_inputs backward_inputs = {{0}, {0}, {0}, {0}, {0}};
  CHECK(shardjit_linear_logp_backward_v2(NULL, (shardjit_matrix){0}, (shardjit_matrix){0}, (shardjit_vector){0},
                                         (shardjit_vector){0}, &backward_inputs, &grads, 1,
                                         NULL) == SHARDJIT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(shardjit_last_error(), "shardjit_linear_logp_backward_v2") != NULL);
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

  check_collective_ops(runtime);
  check_communicator(runtime);
  shardjit_runtime_destroy(runtime);

  if (failures == 0) printf("c api: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
