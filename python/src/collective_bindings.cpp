// Communicator, ReduceScatter and MoeCombine: the cross-GPU half of the API, one process per GPU.
// Ids travel as bytes (rank 0 makes one, the launcher sends it to the others); tensors through
// DLPack; streams as integers (a cudaStream_t; 0: the legacy default stream).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
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

CommOptions options_arg(std::optional<double> timeout_seconds) {
  CommOptions options;
  if (timeout_seconds) {
    const double max_seconds = static_cast<double>(kMaxCommTimeout.count()) / 1000.0;
    if (!(*timeout_seconds > 0) || !(*timeout_seconds <= max_seconds)) {
      throw nb::value_error(("timeout_seconds: expected a positive number of seconds, at most " +
                             std::to_string(static_cast<long long>(max_seconds)) + " (a year)")
                                .c_str());
    }
    options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(*timeout_seconds * 1000.0)));
  }
  return options;
}

}  // namespace

void bind_collectives(nb::module_& m) {
  nb::class_<Communicator>(m, "Communicator",
                           "The NCCL group of one process per GPU that the cross-GPU ops run on. Every host-side "
                           "wait on the peers is bounded by timeout_seconds (default 300), and an NCCL collective "
                           "that runs that long without finishing (or that NCCL reports an error on) is aborted by a "
                           "watchdog thread, so that a torch.cuda.synchronize() after a peer died returns; the op's "
                           "check() then raises.")
      .def_static(
          "new_unique_id",
          [] {
            const CommUniqueId id = Communicator::new_unique_id();
            return nb::bytes(id.data(), id.size());
          },
          "A fresh group id (bytes) for rank 0 to send to the others; needs NCCL, not a GPU.")
      .def(
          "__init__",
          [](Communicator* self, Runtime& runtime, int device, int rank, int size, const nb::bytes& unique_id,
             std::optional<double> timeout_seconds) {
            const CommUniqueId id = unique_id_arg(unique_id);
            const CommOptions options = options_arg(timeout_seconds);
            nb::gil_scoped_release release;
            new (self) Communicator(Communicator::create(runtime, device, rank, size, id, options));
          },
          nb::arg("runtime"), nb::arg("device"), nb::arg("rank"), nb::arg("size"), nb::arg("unique_id"),
          nb::kw_only(), nb::arg("timeout_seconds") = nb::none(), nb::keep_alive<1, 2>(),
          "Joins the group as `rank` of `size` on CUDA device `device`; every rank calls it.")
      .def_prop_ro("rank", &Communicator::rank)
      .def_prop_ro("size", &Communicator::size)
      .def_prop_ro("device", &Communicator::device);

  nb::class_<ReduceScatter>(m, "ReduceScatter",
                            "Rank r receives the sum over all ranks of rows [offset_r, offset_r + rows_per_rank[r]) "
                            "of their inputs. Built by every rank at the same time.")
      .def(
          "__init__",
          [](ReduceScatter* self, Runtime& runtime, Communicator& comm, std::int64_t hidden,
             std::vector<std::int64_t> rows_per_rank, const std::string& dtype, const std::string& path,
             std::size_t nccl_above_bytes) {
            ReduceScatterConfig config;
            config.hidden = hidden;
            config.rows_per_rank = std::move(rows_per_rank);
            config.dtype = parse_dtype_arg("dtype", dtype);
            config.path = path_arg(path);
            config.nccl_above_bytes = nccl_above_bytes;
            nb::gil_scoped_release release;
            new (self) ReduceScatter(runtime, comm, config);
          },
          nb::arg("runtime"), nb::arg("comm"), nb::kw_only(), nb::arg("hidden"), nb::arg("rows_per_rank"),
          nb::arg("dtype") = "bf16", nb::arg("path") = "auto", nb::arg("nccl_above_bytes") = 0,
          nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>())
      .def_prop_ro("path", [](const ReduceScatter& op) { return std::string(collective_path_name(op.path())); },
                   "'peer' or 'nccl': what the op runs")
      .def(
          "run",
          [](ReduceScatter& op, const Tensor& input, const Tensor& output, std::uintptr_t stream) {
            const DType dtype = op.config().dtype;
            const MatrixView in = matrix_view(input, "input", dtype, op.device());
            const MatrixView out = matrix_view(output, "output", dtype, op.device());
            nb::gil_scoped_release release;
            op.run(in, out, stream_arg(stream));
          },
          nb::arg("input"), nb::arg("output"), nb::arg("stream") = 0,
          "Enqueues the reduce-scatter of input [T, H] into output [rows_per_rank[rank], H].")
      .def(
          "check",
          [](ReduceScatter& op, std::uintptr_t stream) {
            nb::gil_scoped_release release;
            op.check(stream_arg(stream));
          },
          nb::arg("stream") = 0, "Waits for the stream (bounded); raises if a call gave up waiting for a peer.");

  nb::class_<MoeCombine>(m, "MoeCombine",
                         "The combine step of an expert-parallel MoE layer: each owned token's output is the sum over "
                         "source ranks of gate x the row its position names. Built by every rank at the same time.")
      .def(
          "__init__",
          [](MoeCombine* self, Runtime& runtime, Communicator& comm, std::int64_t hidden, std::int64_t capacity,
             const std::string& dtype, bool gates, const std::string& path, std::size_t nccl_above_bytes) {
            MoeCombineConfig config;
            config.hidden = hidden;
            config.capacity = capacity;
            config.dtype = parse_dtype_arg("dtype", dtype);
            config.gates = gates;
            config.path = path_arg(path);
            config.nccl_above_bytes = nccl_above_bytes;
            nb::gil_scoped_release release;
            new (self) MoeCombine(runtime, comm, config);
          },
          nb::arg("runtime"), nb::arg("comm"), nb::kw_only(), nb::arg("hidden"), nb::arg("capacity"),
          nb::arg("dtype") = "bf16", nb::arg("gates") = false, nb::arg("path") = "auto",
          nb::arg("nccl_above_bytes") = 0, nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>())
      .def_prop_ro("path", [](const MoeCombine& op) { return std::string(collective_path_name(op.path())); },
                   "'peer' or 'nccl': what the op runs")
      .def(
          "run",
          [](MoeCombine& op, const Tensor& rows, const Tensor& positions, const Tensor& output,
             const std::optional<Tensor>& gates, std::uintptr_t stream) {
            const MoeCombineConfig& c = op.config();
            if (c.gates != gates.has_value()) {
              throw nb::value_error(c.gates ? "gates: the op was built with gates=True; pass fp32 gates [tokens, world]"
                                            : "gates: the op was built with gates=False; pass none");
            }
            MoeCombineCall call;
            const int device = op.device();
            call.rows = matrix_view(rows, "rows", c.dtype, device);
            call.positions = matrix_view(positions, "positions", DType::kInt32, device);
            if (gates) call.gates = matrix_view(*gates, "gates", DType::kFP32, device);
            call.output = matrix_view(output, "output", c.dtype, device);
            nb::gil_scoped_release release;
            op.run(call, stream_arg(stream));
          },
          nb::arg("rows"), nb::arg("positions"), nb::arg("output"), nb::kw_only(), nb::arg("gates") = nb::none(),
          nb::arg("stream") = 0,
          "Enqueues one combine: rows [R <= capacity, H], positions int32 [tokens, world] (-1: none), "
          "output [tokens, H], gates fp32 [tokens, world] when built with gates=True.")
      .def(
          "check",
          [](MoeCombine& op, std::uintptr_t stream) {
            BadPositionReport report;
            {
              nb::gil_scoped_release release;
              report = op.check(stream_arg(stream));
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
