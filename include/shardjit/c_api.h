/* The C API of shardjit: opaque handles, status codes and a per-thread last-error message.
 * No C++ type crosses it; every function is safe to call with bad arguments (it returns a
 * status and sets the message, it never aborts; no exception crosses it, not even when host
 * memory runs out).
 *
 * Option and config structs (shardjit_runtime_options, shardjit_linear_logp_config,
 * shardjit_reduce_scatter_config, shardjit_moe_combine_config) start with a size_t struct_size.
 * Their *_init fills the defaults and struct_size, the struct's size in the header the caller
 * was built with (*_init is inline here so that sizeof is taken in the caller's build; it passes
 * the size to the library's *_init_sized); the caller then sets the fields it wants. The library
 * reads the caller's first struct_size bytes over its own defaults, so fields are only ever
 * appended, and a caller built against an older header (a layout the library still supports)
 * keeps the defaults of the fields it does not know. A struct_size the library does not know (0:
 * a struct never passed through *_init; larger than the library's own: a header newer than the
 * library) is refused with SHARDJIT_ERROR_INVALID_ARGUMENT, naming the struct, the value and what
 * was expected. The per-call structs (shardjit_matrix, shardjit_vector, shardjit_linear_logp_grads,
 * shardjit_linear_logp_backward_inputs, shardjit_moe_combine_call) never change layout: a new
 * field would come with a new function (as shardjit_linear_logp_backward_v2 came with the
 * entropy's gradient). */
#ifndef SHARDJIT_C_API_H_
#define SHARDJIT_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum shardjit_status {
  SHARDJIT_OK = 0,
  SHARDJIT_ERROR_INVALID_ARGUMENT = 1,
  SHARDJIT_ERROR_NOT_FOUND = 2,
  SHARDJIT_ERROR_COMPILE_FAILED = 3,
  SHARDJIT_ERROR_CACHE = 4,
  SHARDJIT_ERROR_DRIVER = 5,
  SHARDJIT_ERROR_NO_DEVICE = 6,
  SHARDJIT_ERROR_COMM = 7,
  SHARDJIT_ERROR_DEVICE_STATUS = 8,
  SHARDJIT_ERROR_INTERNAL = 9
} shardjit_status;

typedef enum shardjit_dtype {
  SHARDJIT_BF16 = 0,
  SHARDJIT_FP16 = 1,
  SHARDJIT_FP32 = 2,
  SHARDJIT_INT32 = 3,
  SHARDJIT_INT64 = 4
} shardjit_dtype;

/* The message of this thread's last call that returned a shardjit_status: "" if it returned
 * SHARDJIT_OK (functions returning void or a name neither set nor clear it). Valid until the
 * thread's next call. */
const char* shardjit_last_error(void);
/* "ok", "invalid_argument", ...; "unknown" for a value that is no shardjit_status */
const char* shardjit_status_name(shardjit_status status);
/* "MAJOR.MINOR.PATCH" */
const char* shardjit_version(void);

/* ---- runtime ---------------------------------------------------------------------------- */

typedef struct shardjit_runtime shardjit_runtime;

/* The fields of shardjit::RuntimeOptions (runtime.hpp). Each unset value (NULL, -1) leaves the
 * setting to its environment variable, then the default; the int switches take 0 or 1. */
typedef struct shardjit_runtime_options {
  size_t struct_size;        /* set by shardjit_runtime_options_init: sizeof in the caller's header */
  const char* cache_dir;     /* NULL: SHARDJIT_CACHE_DIR, then the default */
  int jit;                   /* -1: SHARDJIT_JIT, by default 1; 0: cache-only; 1: compile missing kernels */
  const char* template_dir;  /* NULL: SHARDJIT_TEMPLATE_DIR, then the embedded templates */
  const char* log_level;     /* NULL: SHARDJIT_LOG_LEVEL */
  int64_t cache_max_bytes;   /* -1: SHARDJIT_CACHE_MAX_BYTES; the disk cache's cap */
  const char* dump_dir;      /* NULL: SHARDJIT_DUMP_DIR; source, PTX and CUBIN of every compile */
  int peer_blocks;           /* -1: SHARDJIT_PEER_BLOCKS; a cap on a peer kernel's blocks, 0: one per SM */
  int peer_lines;            /* -1: SHARDJIT_PEER_LINES; 0: small reduce-scatters in flagged words */
  int hopper_path;           /* -1: SHARDJIT_HOPPER_PATH; 0: the portable main loop on sm_90a too.
                              * A server and its prewarm must agree on it (docs/deploy.md) */
  int autotune;              /* -1: SHARDJIT_AUTOTUNE; 1: ops time their tile candidates when built */
  int compile_jobs;          /* -1: SHARDJIT_COMPILE_JOBS; kernels compiled at once, 0: one per hardware thread */
} shardjit_runtime_options;

void shardjit_runtime_options_init_sized(shardjit_runtime_options* options, size_t struct_size);
static inline void shardjit_runtime_options_init(shardjit_runtime_options* options) {
  shardjit_runtime_options_init_sized(options, sizeof(shardjit_runtime_options));
}
shardjit_status shardjit_runtime_create(const shardjit_runtime_options* options, shardjit_runtime** out);
void shardjit_runtime_destroy(shardjit_runtime* runtime);

/* ---- log lines (shardjit/logging.hpp) -------------------------------------------------- */

/* Levels of the library's log lines, as shardjit::LogLevel. */
enum { SHARDJIT_LOG_TRACE = 0, SHARDJIT_LOG_DEBUG, SHARDJIT_LOG_INFO, SHARDJIT_LOG_WARN, SHARDJIT_LOG_ERROR,
       SHARDJIT_LOG_CRITICAL };

/* Receives each line at or above the logger's level (SHARDJIT_LOG_LEVEL, a runtime's log_level):
 * its level, its text (NUL-terminated, valid during the call) and the `user` pointer given with
 * it. Runs on whichever thread logged, one line at a time; it must return promptly and must not
 * call the library. */
typedef void (*shardjit_log_handler)(int level, const char* text, void* user);

/* Sends every later line to `handler` instead of stderr; NULL sends them to stderr again. */
shardjit_status shardjit_set_log_handler(shardjit_log_handler handler, void* user);

/* ---- tensor views (non-owning; device memory stays the caller's) ------------------------- */

typedef struct shardjit_matrix {
  void* data;
  shardjit_dtype dtype;
  int64_t rows;
  int64_t cols;
  int64_t row_stride; /* elements; 0: packed */
} shardjit_matrix;

typedef struct shardjit_vector {
  void* data;
  shardjit_dtype dtype;
  int64_t size;
} shardjit_vector;

/* ---- communicator (tensor parallelism; see communicator.hpp) ---------------------------- */

/* One rank of an NCCL group, for the tensor-parallel ops. NCCL is opened at run time: without
 * it (or without a GPU) these calls return SHARDJIT_ERROR_COMM (or SHARDJIT_ERROR_NO_DEVICE).
 * Every host-side wait on the peers is bounded by the communicator's timeout; when it runs out
 * the call returns SHARDJIT_ERROR_COMM and a communicator made by shardjit_comm_create is
 * aborted. The runtime outlives the communicator, which outlives the ops built on it; a
 * communicator and its ops are used by one thread at a time (of that rule, this much is checked:
 * a call of an op made while another thread is inside a call of the same op returns
 * SHARDJIT_ERROR_INVALID_ARGUMENT). */
typedef struct shardjit_comm shardjit_comm;

/* The size of a unique id (the bytes of an ncclUniqueId). */
#define SHARDJIT_COMM_UNIQUE_ID_BYTES 128

/* Writes a fresh id for a new group (ncclGetUniqueId) to `out`. Needs NCCL but no GPU: a
 * launcher may call it before it starts its per-GPU processes, then send the bytes to every
 * rank by its own means. */
shardjit_status shardjit_comm_new_unique_id(char out[SHARDJIT_COMM_UNIQUE_ID_BYTES]);

/* Joins the group `unique_id` as `rank` of `size` on CUDA device `device`; returns once every
 * rank has joined, or after timeout_ms with SHARDJIT_ERROR_COMM. timeout_ms bounds this join and
 * every later wait on the peers; 0: the default (5 minutes); at most a year (31536000000), every
 * wait being bounded. The communicator owns its NCCL communicator. */
shardjit_status shardjit_comm_create(shardjit_runtime* runtime, int device, int rank, int size,
                                     const char unique_id[SHARDJIT_COMM_UNIQUE_ID_BYTES], int64_t timeout_ms,
                                     shardjit_comm** out);

/* Uses the caller's ncclComm_t, made for `device`, which the caller keeps alive longer than
 * the communicator and destroys itself (a timeout does not abort it: that is the caller's to
 * do). timeout_ms as in shardjit_comm_create. */
shardjit_status shardjit_comm_wrap(shardjit_runtime* runtime, void* nccl_comm, int device, int64_t timeout_ms,
                                   shardjit_comm** out);

void shardjit_comm_destroy(shardjit_comm* comm);

shardjit_status shardjit_comm_rank(const shardjit_comm* comm, int* rank);
shardjit_status shardjit_comm_size(const shardjit_comm* comm, int* size);
shardjit_status shardjit_comm_device(const shardjit_comm* comm, int* device);

/* Changes the bound of later waits (e.g. a long one while the ops are built, a short one
 * after); 0 < timeout_ms <= a year (31536000000). */
shardjit_status shardjit_comm_set_timeout(shardjit_comm* comm, int64_t timeout_ms);

/* Aborts now: a created communicator is torn down with ncclCommAbort (its pending collectives
 * end); a wrapped one is only marked unusable. Every later call of an op built on it returns
 * SHARDJIT_ERROR_COMM. */
shardjit_status shardjit_comm_abort(shardjit_comm* comm);

/* *aborted = 1 once the communicator was aborted (after a timeout, an NCCL error or
 * shardjit_comm_abort), else 0. */
shardjit_status shardjit_comm_aborted(const shardjit_comm* comm, int* aborted);

/* ---- LinearLogp ------------------------------------------------------------------------- */

typedef struct shardjit_linear_logp shardjit_linear_logp;

/* keep_logits_bytes's default (shardjit::kKeepLogitsAuto): as much as holds the backward's
 * buffers within 1 GiB, at least 256 MiB. */
#define SHARDJIT_KEEP_LOGITS_AUTO ((int64_t)-1)

typedef struct shardjit_linear_logp_config {
  size_t struct_size;    /* set by shardjit_linear_logp_config_init: sizeof in the caller's header */
  int64_t hidden;
  int64_t vocab_start;
  int64_t vocab_local;
  int64_t vocab_global;  /* 0: vocab_start + vocab_local */
  int64_t valid_vocab;   /* 0: vocab_global */
  shardjit_dtype dtype;
  int has_bias;
  shardjit_dtype bias_dtype;
  shardjit_dtype target_dtype;
  int64_t ignore_index;
  float temperature;
  int want_entropy;
  int strict;
  int device;
  int64_t max_rows;
  /* Backward (shardjit_linear_logp_backward); see LinearLogpConfig in linear_logp.hpp. */
  int want_backward;
  int grad_weight_fp32;
  int dz_fp32;
  int64_t backward_workspace_bytes; /* 0: 256 MiB */
  float grad_filter_threshold;      /* 0: exact */
  int64_t keep_logits_bytes;        /* SHARDJIT_KEEP_LOGITS_AUTO by default; 0: keep no more than the dZ buffer and the accumulator hold */
} shardjit_linear_logp_config;

void shardjit_linear_logp_config_init_sized(shardjit_linear_logp_config* config, size_t struct_size);
static inline void shardjit_linear_logp_config_init(shardjit_linear_logp_config* config) {
  shardjit_linear_logp_config_init_sized(config, sizeof(shardjit_linear_logp_config));
}
/* One GPU, the whole vocabulary: vocab_start 0, vocab_global 0 or vocab_local (else
 * SHARDJIT_ERROR_INVALID_ARGUMENT; a shard of a larger vocabulary needs the tensor-parallel create). */
shardjit_status shardjit_linear_logp_create(shardjit_runtime* runtime, const shardjit_linear_logp_config* config,
                                            shardjit_linear_logp** out);

/* Tensor parallel: this rank's shard [vocab_start, vocab_start + vocab_local) of a
 * vocab_global vocabulary split over the ranks of `comm` in rank order; config->device is the
 * communicator's device. Collective: every rank calls it at the same time with its own shard;
 * the layouts are checked across ranks once, here, and a bad one (or a failure on any rank)
 * returns the same status and message on every rank. Forward and backward then give every rank
 * the same logp, lse, entropy and grad_hidden. Set max_rows before capturing calls into a CUDA
 * graph. See LinearLogp's TP constructor in linear_logp.hpp for the rules the ranks keep. */
shardjit_status shardjit_linear_logp_create_tp(shardjit_runtime* runtime, const shardjit_linear_logp_config* config,
                                               shardjit_comm* comm, shardjit_linear_logp** out);

/* For a tensor-parallel op this is collective, like its creation: every rank destroys its op,
 * and one rank alone waits up to the communicator's timeout (then aborts the communicator). */
void shardjit_linear_logp_destroy(shardjit_linear_logp* op);

/* hidden [N, H], weight [V_local, H], bias [V_local] (data NULL without bias), targets [N];
 * logp [N] required, lse and entropy [N] optional (data NULL); all fp32 outputs. `stream` is a
 * CUstream / cudaStream_t (NULL: the default stream). */
shardjit_status shardjit_linear_logp_forward(shardjit_linear_logp* op, shardjit_matrix hidden, shardjit_matrix weight,
                                             shardjit_vector bias, shardjit_vector targets, shardjit_vector logp,
                                             shardjit_vector lse, shardjit_vector entropy, void* stream);

/* Gradients written by the backward; a view with NULL data is not computed. With `accumulate`,
 * grad_weight and grad_bias are added to rather than overwritten. */
typedef struct shardjit_linear_logp_grads {
  shardjit_matrix hidden;
  shardjit_matrix weight;
  shardjit_vector bias;
  int accumulate;
} shardjit_linear_logp_grads;

/* The inputs of the forward, its lse output, and the upstream gradients grad_logp and grad_lse
 * [N] (fp32; either may have NULL data). Needs config.want_backward. */
shardjit_status shardjit_linear_logp_backward(shardjit_linear_logp* op, shardjit_matrix hidden, shardjit_matrix weight,
                                              shardjit_vector bias, shardjit_vector targets, shardjit_vector lse,
                                              shardjit_vector grad_logp, shardjit_vector grad_lse,
                                              const shardjit_linear_logp_grads* grads, void* stream);

/* What the backward reads besides the forward's inputs: fp32 vectors of N elements (see
 * LinearLogpBackwardInputs in linear_logp.hpp). lse (the forward's) is required; the others may
 * have NULL data (zero gradients). */
typedef struct shardjit_linear_logp_backward_inputs {
  shardjit_vector lse;
  shardjit_vector entropy;       /* the forward's entropy; required with grad_entropy */
  shardjit_vector grad_logp;
  shardjit_vector grad_lse;
  shardjit_vector grad_entropy;  /* needs config.want_entropy */
} shardjit_linear_logp_backward_inputs;

/* The backward with every input: shardjit_linear_logp_backward plus the entropy's gradient and
 * reduce_grad_hidden, 1 (a tensor-parallel op sums grad_hidden over the ranks) or 0 (it leaves
 * this rank's partial; every rank passes the same); no effect on a single-GPU op. */
shardjit_status shardjit_linear_logp_backward_v2(shardjit_linear_logp* op, shardjit_matrix hidden,
                                                 shardjit_matrix weight, shardjit_vector bias, shardjit_vector targets,
                                                 const shardjit_linear_logp_backward_inputs* inputs,
                                                 const shardjit_linear_logp_grads* grads, int reduce_grad_hidden,
                                                 void* stream);

/* Waits for `stream`; returns and clears the count of rows with an out-of-range target and the
 * first such id (either pointer may be NULL). A tensor-parallel op returns SHARDJIT_ERROR_COMM
 * if a call gave up waiting for a peer. */
shardjit_status shardjit_linear_logp_check(shardjit_linear_logp* op, void* stream, int64_t* bad_rows,
                                           int64_t* first_bad_id);

/* ---- cross-GPU ops: ReduceScatter and MoeCombine (see reduce_scatter.hpp, moe_combine.hpp) -- */

/* How a cross-GPU op moves data between the ranks (collective_path.hpp). */
typedef enum shardjit_collective_path {
  /* PEER where every rank can map every peer's memory and the data is not larger than the
   * config's nccl_above_bytes; else NCCL. */
  SHARDJIT_COLLECTIVE_AUTO = 0,
  /* JIT kernels reading the peers' buffers directly; creating an op with it where a peer is not
   * reachable returns SHARDJIT_ERROR_COMM on every rank. */
  SHARDJIT_COLLECTIVE_PEER = 1,
  /* NCCL collectives (plus a local kernel for the MoE combine): works across hosts. */
  SHARDJIT_COLLECTIVE_NCCL = 2
} shardjit_collective_path;

/* "auto", "peer", "nccl"; "unknown" for a value that is not a shardjit_collective_path. */
const char* shardjit_collective_path_name(shardjit_collective_path path);

/* Both ops are built collectively, like shardjit_linear_logp_create_tp: every rank of `comm`
 * creates the same ops in the same order with the same config (checked once, at create: a
 * difference, or a failure on any rank, returns the same status and message on every rank) and
 * makes the same calls; every rank destroys them. Create every op before capturing a CUDA graph
 * that uses one. The communicator outlives its ops, the runtime the communicator. A peer that
 * does not join a call within the communicator's timeout makes that call's output NaN and the
 * next *_check return SHARDJIT_ERROR_COMM. */

typedef struct shardjit_reduce_scatter shardjit_reduce_scatter;

typedef struct shardjit_reduce_scatter_config {
  size_t struct_size;              /* set by shardjit_reduce_scatter_config_init: sizeof in the caller's header */
  shardjit_dtype dtype;            /* bf16, fp16 or fp32 */
  int64_t hidden;                  /* H; H x element size a multiple of 4 bytes */
  /* One block size per rank (0 allowed; T = their sum): rows_per_rank_count entries, copied at
   * create (the array may be freed after it). */
  const int64_t* rows_per_rank;
  size_t rows_per_rank_count;
  shardjit_collective_path path;
  size_t nccl_above_bytes;         /* AUTO takes NCCL for inputs of more bytes than this; 0: never by size */
} shardjit_reduce_scatter_config;

void shardjit_reduce_scatter_config_init_sized(shardjit_reduce_scatter_config* config, size_t struct_size);
static inline void shardjit_reduce_scatter_config_init(shardjit_reduce_scatter_config* config) {
  shardjit_reduce_scatter_config_init_sized(config, sizeof(shardjit_reduce_scatter_config));
}
shardjit_status shardjit_reduce_scatter_create(shardjit_runtime* runtime, shardjit_comm* comm,
                                               const shardjit_reduce_scatter_config* config,
                                               shardjit_reduce_scatter** out);
void shardjit_reduce_scatter_destroy(shardjit_reduce_scatter* op);

/* Enqueues on `stream` the reduce-scatter of `input` [T, H] into `output` [rows_per_rank[rank], H]
 * (rank = this rank of the communicator): output = the sum over the ranks of their inputs' rows
 * of this rank's block (on the peer path in fp32 and rank order, the same bits every run; on
 * NCCL's path in NCCL's order and the dtype). Both packed, of the config's dtype, 16-byte aligned. A
 * rank's calls must run in the order they are enqueued. */
shardjit_status shardjit_reduce_scatter_run(shardjit_reduce_scatter* op, shardjit_matrix input, shardjit_matrix output,
                                            void* stream);

/* *path = SHARDJIT_COLLECTIVE_PEER or SHARDJIT_COLLECTIVE_NCCL: what the op runs. */
shardjit_status shardjit_reduce_scatter_path(const shardjit_reduce_scatter* op, shardjit_collective_path* path);

/* Waits for `stream` (bounded by the communicator's timeout); SHARDJIT_ERROR_COMM if a call gave
 * up waiting for a peer. */
shardjit_status shardjit_reduce_scatter_check(shardjit_reduce_scatter* op, void* stream);

typedef struct shardjit_moe_combine shardjit_moe_combine;

typedef struct shardjit_moe_combine_config {
  size_t struct_size;              /* set by shardjit_moe_combine_config_init: sizeof in the caller's header */
  shardjit_dtype dtype;            /* bf16, fp16 or fp32 */
  int64_t hidden;                  /* H; H x element size a multiple of 4 bytes */
  int64_t capacity;                /* rows of every rank's expert-output buffer */
  int gates;                       /* whether calls pass gate weights */
  shardjit_collective_path path;
  size_t nccl_above_bytes;         /* AUTO takes NCCL for buffers of more bytes than this; 0: never by size */
} shardjit_moe_combine_config;

/* One combine: output row of each token this rank owns = the sum over source ranks s, in rank
 * order, of gates[token][s] x row positions[token][s] of s's rows (-1: not routed to s). */
typedef struct shardjit_moe_combine_call {
  shardjit_matrix rows;       /* this rank's expert outputs [R <= capacity, H], packed; data NULL:
                               * the first `rows.rows` rows of shardjit_moe_combine_rows_buffer */
  shardjit_matrix positions;  /* int32 [tokens, world], packed */
  shardjit_matrix gates;      /* fp32 [tokens, world], packed; only with config.gates */
  shardjit_matrix output;     /* [tokens, H], packed */
} shardjit_moe_combine_call;

void shardjit_moe_combine_config_init_sized(shardjit_moe_combine_config* config, size_t struct_size);
static inline void shardjit_moe_combine_config_init(shardjit_moe_combine_config* config) {
  shardjit_moe_combine_config_init_sized(config, sizeof(shardjit_moe_combine_config));
}
shardjit_status shardjit_moe_combine_create(shardjit_runtime* runtime, shardjit_comm* comm,
                                            const shardjit_moe_combine_config* config, shardjit_moe_combine** out);
void shardjit_moe_combine_destroy(shardjit_moe_combine* op);

/* Enqueues one combine on `stream`. Every rank calls it; token counts may differ per rank. */
shardjit_status shardjit_moe_combine_run(shardjit_moe_combine* op, const shardjit_moe_combine_call* call, void* stream);

/* Zero copy: the op's own rows buffer [capacity, H] (device memory the op owns, valid while the
 * op lives). Write the rows there, then run with call->rows.data NULL and call->rows.rows set. */
shardjit_status shardjit_moe_combine_rows_buffer(shardjit_moe_combine* op, shardjit_matrix* buffer);

/* *path = SHARDJIT_COLLECTIVE_PEER or SHARDJIT_COLLECTIVE_NCCL: what the op runs. */
shardjit_status shardjit_moe_combine_path(const shardjit_moe_combine* op, shardjit_collective_path* path);

/* Waits for `stream` (bounded); SHARDJIT_ERROR_COMM if a call gave up waiting for a peer.
 * Returns and clears the count of (token, source) positions outside [-1, capacity) (their rows
 * are NaN) and one of them (meaningful when the count is > 0); either pointer may be NULL. */
shardjit_status shardjit_moe_combine_check(shardjit_moe_combine* op, void* stream, int64_t* bad_positions,
                                           int64_t* first_bad_position);

#ifdef __cplusplus
}
#endif

#endif /* SHARDJIT_C_API_H_ */
