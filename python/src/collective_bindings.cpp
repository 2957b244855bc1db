// Communicator, ReduceScatter and MoeCombine: the cross-GPU half of the API, one process per GPU.
// Ids travel as bytes (rank 0 makes one, the launcher sends it to the others); tensors through
// DLPack; streams as integers (a cudaStream_t; 0: the legacy default stream).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "closable.hpp"
#include "shardjit/communicator.hpp"
#include "shardjit/moe_combine.hpp"
#include "shardjit/reduce_scatter.hpp"
#include "tensor_views.hpp"

namespace nb = nanobind;

namespace shardjit::python {
namespace {

CollectivePath path_arg(const std::string& name) {
  for (CollectivePath path : {CollectivePath::kAuto, CollectivePath::kPeer, CollectivePath::kNccl}) {
    if (name == collective_path_name(path)) return path;
  }
  throw nb::value_error(("path: expected 'auto', 'peer' or 'nccl', got '" + name + "'").c_str());
}

CommUniqueId unique_id_arg(const nb::bytes& bytes) {
  CommUniqueId id{};
  if (bytes.size() != id.size()) {
    throw nb::value_error(("unique_id: expected the " + std::to_string(id.size()) +
                           " bytes of Communicator.new_unique_id(), got " + std::to_string(bytes.size()))
                              .c_str());
  }
  std::memcpy(id.data(), bytes.c_str(), id.size());
  return id;
}

// Seconds from Python -> the C++ bound. Checked here, not left to the C++ check: a NaN or a
// huge number of seconds would not survive the conversion to milliseconds.
std::chrono::milliseconds timeout_arg(const char* what, double seconds) {
  const double max_seconds = static_cast<double>(kMaxCommTimeout.count()) / 1000.0;
  if (!(seconds > 0) || !(seconds <= max_seconds)) {
    throw nb::value_error((std::string(what) + ": expected a positive number of seconds, at most " +
                           std::to_string(static_cast<long long>(max_seconds)) + " (a year)")
                              .c_str());
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000.0)));
}

CommOptions options_arg(std::optional<double> timeout_seconds) {
  CommOptions options;
  if (timeout_seconds) options.timeout = timeout_arg("timeout_seconds", *timeout_seconds);
  return options;
}

// The `path` property of each op of this file.
template <class Op>
std::string path_name(const Closable<Op>& self) {
  return collective_path_name(self.use()->path());
}
constexpr const char* kPathDoc = "'peer' or 'nccl': what the op runs";

// What close() waits for, in the docstring of each op of this file.
constexpr const char* kCloseOpDoc =
    "Destroys the op now, with the GIL released; later calls raise ValueError. Destruction is collective: every "
    "rank closes the op (or lets it be collected), and each waits up to the communicator's timeout for the peers "
    "to release its buffers. Idempotent; also what the end of a `with` block does.";

}  // namespace

void bind_collectives(nb::module_& m) {
  bind_closable<Communicator>(
      m, "Communicator",
      "The NCCL group of one process per GPU that the cross-GPU ops run on. Every host-side wait on the peers is "
      "bounded by timeout_seconds (default 300), and an NCCL collective that runs that long without finishing (or "
      "that NCCL reports an error on) is aborted by a watchdog thread, so that a torch.cuda.synchronize() after a "
      "peer died returns; the op's check() then raises.",
      "Lets go of the NCCL communicator, with the GIL released; later calls raise ValueError. The ops built on it "
      "hold it until they are closed or collected too, and the last of them destroys it. Idempotent; also what "
      "the end of a `with` block does.")
      .def_static(
          "new_unique_id",
          [] {
            const CommUniqueId id = Communicator::new_unique_id();
            return nb::bytes(id.data(), id.size());
          },
          "A fresh group id (bytes) for rank 0 to send to the others; needs NCCL, not a GPU.")
      .def(
          "__init__",
          [](Closable<Communicator>* self, Runtime& runtime, int device, int rank, int size,
             const nb::bytes& unique_id, std::optional<double> timeout_seconds) {
            const CommUniqueId id = unique_id_arg(unique_id);
            const CommOptions options = options_arg(timeout_seconds);
            Closable<Communicator>::build(self, [&] {
              return std::make_unique<Communicator>(Communicator::create(runtime, device, rank, size, id, options));
            });
          },
          nb::arg("runtime"), nb::arg("device"), nb::arg("rank"), nb::arg("size"), nb::arg("unique_id"),
          nb::kw_only(), nb::arg("timeout_seconds") = nb::none(), nb::keep_alive<1, 2>(),
          "Joins the group as `rank` of `size` on CUDA device `device`; every rank calls it.")
      .def_prop_ro("rank", [](const Closable<Communicator>& c) { return c.use()->rank(); })
      .def_prop_ro("size", [](const Closable<Communicator>& c) { return c.use()->size(); })
      .def_prop_ro("device", [](const Closable<Communicator>& c) { return c.use()->device(); })
      .def(
          "set_timeout",
          [](Closable<Communicator>& c, double seconds) { c.use()->set_timeout(timeout_arg("seconds", seconds)); },
          nb::arg("seconds"),
          "Changes the bound of later waits on the peers, e.g. a long one while the ops are built (first-time "
          "kernel compiles on one rank keep the others waiting in the build exchange) and a short one for "
          "steady-state calls; collectives already enqueued keep the bound they were enqueued with. seconds: "
          "positive, at most a year, as timeout_seconds. Call it between the ops' calls, not while another thread "
          "is inside one.")
      .def_prop_ro("aborted", [](const Closable<Communicator>& c) { return c.use()->aborted(); },
                   "True once the communicator was aborted (after a timeout or an NCCL error, or by abort()); "
                   "every later call of an op that uses it raises ShardjitError (code 'comm_error').")
      .def(
          "abort",
          [](Closable<Communicator>& c) {
            const std::shared_ptr<Communicator> held = c.use();
            nb::gil_scoped_release release;  // ncclCommAbort waits for the group's kernels to end
            held->abort();
          },
          "Aborts now: the NCCL communicator is torn down with ncclCommAbort (its pending collectives end), "
          "and every later call of an op that uses it raises ShardjitError (code 'comm_error').");

  bind_closable<ReduceScatter>(m, "ReduceScatter",
                               "Rank r receives the sum over all ranks of rows [offset_r, offset_r + "
                               "rows_per_rank[r]) of their inputs. Built by every rank at the same time.",
                               kCloseOpDoc)
      .def(
          "__init__",
          [](Closable<ReduceScatter>* self, Runtime& runtime, const Closable<Communicator>& comm, std::int64_t hidden,
             std::vector<std::int64_t> rows_per_rank, nb::handle dtype, const std::string& path,
             std::size_t nccl_above_bytes) {
            ReduceScatterConfig config;
            config.hidden = hidden;
            config.rows_per_rank = std::move(rows_per_rank);
            config.dtype = dtype_arg("dtype", dtype);
            config.path = path_arg(path);
            config.nccl_above_bytes = nccl_above_bytes;
            const std::shared_ptr<Communicator> on = comm.use();
            Closable<ReduceScatter>::build(
                self, [&] { return std::make_unique<ReduceScatter>(runtime, *on, config); }, on);
          },
          nb::arg("runtime"), nb::arg("comm"), nb::kw_only(), nb::arg("hidden"), nb::arg("rows_per_rank"),
          nb::arg("dtype") = "bf16", nb::arg("path") = "auto", nb::arg("nccl_above_bytes") = 0,
          nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>())
      .def_prop_ro("path", &path_name<ReduceScatter>, kPathDoc)
      .def(
          "run",
          [](Closable<ReduceScatter>& self, const Tensor& input, const OutputTensor& output, std::uintptr_t stream) {
            const std::shared_ptr<ReduceScatter> op = self.use();
            const DType dtype = op->config().dtype;
            const MatrixView in = matrix_view(input, "input", dtype, op->device());
            const MatrixView out = matrix_view(output, "output", dtype, op->device());
            nb::gil_scoped_release release;
            op->run(in, out, stream_arg(stream));
          },
          nb::arg("input"), nb::arg("output"), nb::arg("stream") = 0,
          "Enqueues the reduce-scatter of input [T, H] into output [rows_per_rank[rank], H].")
      .def(
          "check",
          [](Closable<ReduceScatter>& self, std::uintptr_t stream) {
            const std::shared_ptr<ReduceScatter> op = self.use();
            nb::gil_scoped_release release;
            op->check(stream_arg(stream));
          },
          nb::arg("stream") = 0, "Waits for the stream (bounded); raises if a call gave up waiting for a peer.");

  bind_closable<MoeCombine>(m, "MoeCombine",
                            "The combine step of an expert-parallel MoE layer: each owned token's output is the sum "
                            "over source ranks of gate x the row its position names. Built by every rank at the same "
                            "time.",
                            kCloseOpDoc)
      .def(
          "__init__",
          [](Closable<MoeCombine>* self, Runtime& runtime, const Closable<Communicator>& comm, std::int64_t hidden,
             std::int64_t capacity,
             nb::handle dtype, bool gates, const std::string& path, std::size_t nccl_above_bytes) {
            MoeCombineConfig config;
            config.hidden = hidden;
            config.capacity = capacity;
            config.dtype = dtype_arg("dtype", dtype);
            config.gates = gates;
            config.path = path_arg(path);
            config.nccl_above_bytes = nccl_above_bytes;
            const std::shared_ptr<Communicator> on = comm.use();
            Closable<MoeCombine>::build(self, [&] { return std::make_unique<MoeCombine>(runtime, *on, config); },
                                        on);
          },
          nb::arg("runtime"), nb::arg("comm"), nb::kw_only(), nb::arg("hidden"), nb::arg("capacity"),
          nb::arg("dtype") = "bf16", nb::arg("gates") = false, nb::arg("path") = "auto",
          nb::arg("nccl_above_bytes") = 0, nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>())
      .def_prop_ro("path", &path_name<MoeCombine>, kPathDoc)
      .def(
          "run",
          [](Closable<MoeCombine>& self, const Tensor& rows, const Tensor& positions, const OutputTensor& output,
             const std::optional<Tensor>& gates, std::uintptr_t stream) {
            const std::shared_ptr<MoeCombine> op = self.use();
            const MoeCombineConfig& c = op->config();
            if (c.gates != gates.has_value()) {
              throw nb::value_error(c.gates ? "gates: the op was built with gates=True; pass fp32 gates [tokens, world]"
                                            : "gates: the op was built with gates=False; pass none");
            }
            MoeCombineCall call;
            const int device = op->device();
            call.rows = matrix_view(rows, "rows", c.dtype, device);
            call.positions = matrix_view(positions, "positions", DType::kInt32, device);
            if (gates) call.gates = matrix_view(*gates, "gates", DType::kFP32, device);
            call.output = matrix_view(output, "output", c.dtype, device);
            nb::gil_scoped_release release;
            op->run(call, stream_arg(stream));
          },
          nb::arg("rows"), nb::arg("positions"), nb::arg("output"), nb::kw_only(), nb::arg("gates") = nb::none(),
          nb::arg("stream") = 0,
          "Enqueues one combine: rows [R <= capacity, H], positions int32 [tokens, world] (-1: none), "
          "output [tokens, H], gates fp32 [tokens, world] when built with gates=True.")
      .def(
          "check",
          [](Closable<MoeCombine>& self, std::uintptr_t stream) {
            const std::shared_ptr<MoeCombine> op = self.use();
            BadPositionReport report;
            {
              nb::gil_scoped_release release;
              report = op->check(stream_arg(stream));
            }
            nb::dict out;
            out["bad_positions"] = report.bad_positions;
            out["first_bad_position"] = report.first_bad_position;
            return out;
          },
          nb::arg("stream") = 0,
          "Waits for the stream (bounded), raises if a call gave up waiting for a peer, and returns and clears "
          "the bad-position record: a dict (bad_positions, first_bad_position).");
}

}  // namespace shardjit::python
