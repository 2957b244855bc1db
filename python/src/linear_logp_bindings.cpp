// LinearLogp: the config's fields are keyword arguments of the constructor; forward, backward
// and check take DLPack tensors and the caller's CUDA stream as an integer (0: legacy default).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "closable.hpp"
#include "shardjit/communicator.hpp"
#include "shardjit/linear_logp.hpp"
#include "tensor_views.hpp"

namespace nb = nanobind;

namespace shardjit::python {
namespace {

template <typename T>
T number(const char* key, nb::handle value) {
  constexpr bool kWantBool = std::is_same_v<T, bool>;
  const std::string expected = kWantBool ? "True or False" : "a number";
  const std::string got = nb::cast<std::string>(nb::str(value.type().attr("__name__")));
  // True is an int to Python, but device=True or want_backward=1 is a mistake, not a value.
  if (nb::isinstance<nb::bool_>(value) != kWantBool) {
    throw nb::type_error((std::string(key) + ": expected " + expected + ", got " + got).c_str());
  }
  try {
    return nb::cast<T>(value);
  } catch (const nb::cast_error&) {
    if (!kWantBool && nb::isinstance<nb::int_>(value)) {
      throw nb::value_error((std::string(key) + ": " + nb::cast<std::string>(nb::str(value)) + " is out of range").c_str());
    }
    throw nb::type_error((std::string(key) + ": expected " + expected + ", got " + got).c_str());
  }
}

LinearLogpConfig config_from(const nb::kwargs& kwargs) {
  LinearLogpConfig c;
  for (auto [key_handle, value] : kwargs) {
    const std::string key = nb::cast<std::string>(key_handle);
    const char* k = key.c_str();
    if (key == "hidden") c.hidden = number<std::int64_t>(k, value);
    else if (key == "vocab_start") c.vocab_start = number<std::int64_t>(k, value);
    else if (key == "vocab_local") c.vocab_local = number<std::int64_t>(k, value);
    else if (key == "vocab_global") c.vocab_global = number<std::int64_t>(k, value);
    else if (key == "valid_vocab") c.valid_vocab = number<std::int64_t>(k, value);
    else if (key == "dtype") c.dtype = dtype_arg(k, value);
    else if (key == "bias_dtype") {
      if (value.is_none()) c.bias_dtype.reset();
      else c.bias_dtype = dtype_arg(k, value);
    } else if (key == "target_dtype") c.target_dtype = dtype_arg(k, value);
    else if (key == "ignore_index") c.ignore_index = number<std::int64_t>(k, value);
    else if (key == "temperature") c.temperature = number<float>(k, value);
    else if (key == "want_entropy") c.want_entropy = number<bool>(k, value);
    else if (key == "allow_tf32") c.allow_tf32 = number<bool>(k, value);
    else if (key == "strict") c.strict = number<bool>(k, value);
    else if (key == "device") c.device = number<int>(k, value);
    else if (key == "max_rows") c.max_rows = number<std::int64_t>(k, value);
    else if (key == "want_backward") c.want_backward = number<bool>(k, value);
    else if (key == "grad_weight_fp32") c.grad_weight_fp32 = number<bool>(k, value);
    else if (key == "dz_fp32") c.dz_fp32 = number<bool>(k, value);
    else if (key == "backward_workspace_bytes") c.backward_workspace_bytes = number<std::int64_t>(k, value);
    else if (key == "grad_filter_threshold") c.grad_filter_threshold = number<float>(k, value);
    else if (key == "keep_logits_bytes") c.keep_logits_bytes = number<std::int64_t>(k, value);
    else throw nb::type_error(("LinearLogp: unknown keyword argument '" + key + "'").c_str());
  }
  // A missing or bad hidden / vocab_local is the op's to refuse (resolve_layout): a tensor-parallel
  // op then refuses it on every rank alike, where a check here would fail one rank alone and leave
  // the others waiting in the layout exchange.
  return c;
}

using OptTensor = std::optional<Tensor>;
using OptOutput = std::optional<OutputTensor>;

LinearLogpInputs inputs_of(const LinearLogpConfig& c, const Tensor& hidden, const Tensor& weight,
                           const Tensor& targets, const OptTensor& bias) {
  LinearLogpInputs in;
  in.hidden = matrix_view(hidden, "hidden", c.dtype, c.device);
  in.weight = matrix_view(weight, "weight", c.dtype, c.device);
  in.targets = vector_view(targets, "targets", c.target_dtype, c.device);
  in.bias = vector_view(bias, "bias", c.bias_dtype, c.device);
  return in;
}

// The inputs given as device addresses (shardjit.torch's calls, tensor_views.hpp): hidden and
// targets of `rows` rows, weight and bias of the op's shape, in its dtypes.
LinearLogpInputs inputs_at(const LinearLogpConfig& c, std::int64_t rows, std::uintptr_t hidden,
                           std::uintptr_t weight, std::uintptr_t targets, std::uintptr_t bias) {
  LinearLogpInputs in;
  in.hidden = matrix_at(hidden, c.dtype, rows, c.hidden);
  in.weight = matrix_at(weight, c.dtype, c.vocab_local, c.hidden);
  in.targets = vector_at(targets, c.target_dtype, rows);
  in.bias = vector_at(bias, c.bias_dtype.value_or(DType::kFP32), c.vocab_local);
  return in;
}

// The dtypes of grad_weight and grad_bias: the op's, or fp32 with grad_weight_fp32.
DType weight_grad_dtype(const LinearLogpConfig& c) { return c.grad_weight_fp32 ? DType::kFP32 : c.dtype; }
std::optional<DType> bias_grad_dtype(const LinearLogpConfig& c) {
  return c.grad_weight_fp32 ? std::optional<DType>(DType::kFP32) : c.bias_dtype;
}

// help(): the constructors take **kwargs (the config's fields); the docstring names them.
constexpr const char* kConfigKeywordsDoc =
    "The single-GPU op over the whole vocabulary. Keywords (the fields of shardjit::LinearLogpConfig; dtypes as "
    "names or torch dtypes): hidden (int, a multiple of 8), vocab_local (int), vocab_start=0, vocab_global=0 "
    "(0: vocab_start + vocab_local), valid_vocab=0 (0: vocab_global), dtype='bf16' ('bf16', 'fp16', 'fp32'), "
    "bias_dtype=None, target_dtype='int64' ('int32', 'int64'), ignore_index=-100, temperature=1.0, "
    "want_entropy=False, allow_tf32=False, strict=False, device=0, max_rows=0, want_backward=False, "
    "grad_weight_fp32=False, dz_fp32=False, backward_workspace_bytes=0, grad_filter_threshold=0.0, "
    "keep_logits_bytes=-1 (what holds the backward's buffers within 1 GiB, at least 256 MiB; >= 0: that many "
    "bytes). An unknown "
    "keyword is a TypeError that names it.";

nb::dict config_dict(const LinearLogpConfig& c) {
  nb::dict d;
  d["hidden"] = c.hidden;
  d["vocab_start"] = c.vocab_start;
  d["vocab_local"] = c.vocab_local;
  d["vocab_global"] = c.vocab_global;
  d["valid_vocab"] = c.valid_vocab;
  d["dtype"] = dtype_name(c.dtype);
  d["bias_dtype"] = c.bias_dtype ? nb::object(nb::str(dtype_name(*c.bias_dtype))) : nb::none();
  d["target_dtype"] = dtype_name(c.target_dtype);
  d["ignore_index"] = c.ignore_index;
  d["temperature"] = c.temperature;
  d["want_entropy"] = c.want_entropy;
  d["allow_tf32"] = c.allow_tf32;
  d["strict"] = c.strict;
  d["device"] = c.device;
  d["max_rows"] = c.max_rows;
  d["want_backward"] = c.want_backward;
  d["grad_weight_fp32"] = c.grad_weight_fp32;
  d["dz_fp32"] = c.dz_fp32;
  d["backward_workspace_bytes"] = c.backward_workspace_bytes;
  d["grad_filter_threshold"] = c.grad_filter_threshold;
  d["keep_logits_bytes"] = c.keep_logits_bytes;
  return d;
}

}  // namespace

void bind_linear_logp(nb::module_& m) {
  using Op = Closable<LinearLogp>;
  bind_closable<LinearLogp>(
      m, "LinearLogp",
      "Log-probabilities of target tokens under an LM head, without the N x V logits. Keyword arguments are the "
      "fields of shardjit::LinearLogpConfig (dtypes by name).",
      "Destroys the op now, with the GIL released (freeing its GPU memory may wait for queued GPU work); later "
      "calls raise ValueError. A tensor-parallel op's destruction is collective where it attached the peer path "
      "(max_rows set, one host): every rank closes it (or lets it be collected), and each waits up to the "
      "communicator's timeout for the peers. Idempotent; also what the end of a `with` block does.")
      .def(
          "__init__",
          [](Op* self, Runtime& runtime, const nb::kwargs& kwargs) {
            const LinearLogpConfig config = config_from(kwargs);
            Op::build(self, [&] { return std::make_unique<LinearLogp>(runtime, config); });
          },
          nb::keep_alive<1, 2>(), kConfigKeywordsDoc)
      .def(
          "__init__",
          [](Op* self, Runtime& runtime, const Closable<Communicator>& comm, const nb::kwargs& kwargs) {
            LinearLogpConfig config = config_from(kwargs);
            const std::shared_ptr<Communicator> on = comm.use();
            // Each rank runs on its communicator's GPU: that is the device unless one is named.
            if (!kwargs.contains("device")) config.device = on->device();
            Op::build(self, [&] { return std::make_unique<LinearLogp>(runtime, config, *on); }, on);
          },
          nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>(),
          "The tensor-parallel op: this rank's shard (vocab_start, vocab_local, vocab_global) of the LM head, "
          "built by every rank of comm at the same time, on comm's GPU (device defaults to comm.device). Its "
          "backward's grad_hidden is summed over the ranks unless reduce_grad_hidden=False.")
      .def_prop_ro("config", [](const Op& self) { return config_dict(self.use()->config()); })
      .def_prop_ro("main_loop", [](const Op& self) { return std::string(self.use()->main_loop()); },
                   "'wgmma' (Hopper), 'mma.sync' (portable) or 'fp32 fma': the loop of the op's logit kernels")
      .def(
          "forward",
          [](Op& self, const Tensor& hidden, const Tensor& weight, const Tensor& targets, const OutputTensor& logp,
             const OptOutput& lse, const OptOutput& entropy, const OptTensor& bias, std::uintptr_t stream) {
            const std::shared_ptr<LinearLogp> op = self.use();
            const LinearLogpInputs in = inputs_of(op->config(), hidden, weight, targets, bias);
            LinearLogpOutputs out;
            const int device = op->config().device;
            out.logp = vector_view(logp, "logp", DType::kFP32, device);
            out.lse = vector_view(lse, "lse", DType::kFP32, device);
            out.entropy = vector_view(entropy, "entropy", DType::kFP32, device);
            nb::gil_scoped_release release;
            op->forward(in, out, stream_arg(stream));
          },
          nb::arg("hidden"), nb::arg("weight"), nb::arg("targets"), nb::arg("logp"), nb::kw_only(),
          nb::arg("lse") = nb::none(), nb::arg("entropy") = nb::none(), nb::arg("bias") = nb::none(),
          nb::arg("stream") = 0,
          "Enqueues the forward on `stream` (a cudaStream_t as an int). logp, lse, entropy: fp32 [N] outputs.")
      .def(
          "backward",
          [](Op& self, const Tensor& hidden, const Tensor& weight, const Tensor& targets, const Tensor& lse,
             const OptOutput& grad_hidden, const OptTensor& grad_logp, const OptTensor& grad_lse,
             const OptTensor& grad_entropy, const OptTensor& entropy, const OptOutput& grad_weight,
             const OptOutput& grad_bias, const OptTensor& bias, bool accumulate, bool reduce_grad_hidden,
             std::uintptr_t stream) {
            const std::shared_ptr<LinearLogp> op = self.use();
            const LinearLogpConfig& c = op->config();
            const LinearLogpInputs in = inputs_of(c, hidden, weight, targets, bias);
            LinearLogpBackwardInputs upstream;
            upstream.lse = vector_view(lse, "lse", DType::kFP32, c.device);
            upstream.entropy = vector_view(entropy, "entropy", DType::kFP32, c.device);
            upstream.grad_logp = vector_view(grad_logp, "grad_logp", DType::kFP32, c.device);
            upstream.grad_lse = vector_view(grad_lse, "grad_lse", DType::kFP32, c.device);
            upstream.grad_entropy = vector_view(grad_entropy, "grad_entropy", DType::kFP32, c.device);
            LinearLogpGrads grads;
            if (grad_hidden) grads.hidden = matrix_view(*grad_hidden, "grad_hidden", c.dtype, c.device);
            if (grad_weight) grads.weight = matrix_view(*grad_weight, "grad_weight", weight_grad_dtype(c), c.device);
            if (grad_bias) grads.bias = vector_view(*grad_bias, "grad_bias", bias_grad_dtype(c), c.device);
            grads.accumulate = accumulate;
            grads.reduce_hidden = reduce_grad_hidden;
            nb::gil_scoped_release release;
            op->backward(in, upstream, grads, stream_arg(stream));
          },
          nb::arg("hidden"), nb::arg("weight"), nb::arg("targets"), nb::arg("lse"), nb::arg("grad_hidden") = nb::none(),
          nb::kw_only(), nb::arg("grad_logp") = nb::none(), nb::arg("grad_lse") = nb::none(),
          nb::arg("grad_entropy") = nb::none(), nb::arg("entropy") = nb::none(), nb::arg("grad_weight") = nb::none(),
          nb::arg("grad_bias") = nb::none(), nb::arg("bias") = nb::none(), nb::arg("accumulate") = false,
          nb::arg("reduce_grad_hidden") = true, nb::arg("stream") = 0,
          "Enqueues the backward on `stream` (needs want_backward=True). lse (and entropy, needed with "
          "grad_entropy, which needs want_entropy=True) are the forward's outputs; grad_logp, grad_lse and "
          "grad_entropy the fp32 [N] upstream gradients (None: zero). grad_hidden, grad_weight, grad_bias: the "
          "gradients to write (None: not computed). reduce_grad_hidden=False leaves a tensor-parallel op's "
          "grad_hidden as this rank's partial.")
      .def(
          "_forward_at",
          [](Op& self, std::int64_t rows, std::uintptr_t hidden, std::uintptr_t weight, std::uintptr_t targets,
             std::uintptr_t logp, std::uintptr_t lse, std::uintptr_t entropy, std::uintptr_t bias,
             std::uintptr_t stream) {
            const std::shared_ptr<LinearLogp> op = self.use();
            const LinearLogpConfig& c = op->config();
            const LinearLogpInputs in = inputs_at(c, rows, hidden, weight, targets, bias);
            LinearLogpOutputs out;
            out.logp = vector_at(logp, DType::kFP32, rows);
            out.lse = vector_at(lse, DType::kFP32, rows);
            out.entropy = vector_at(entropy, DType::kFP32, rows);
            nb::gil_scoped_release release;
            op->forward(in, out, stream_arg(stream));
          },
          "forward() for shardjit.torch: the tensors as device addresses (0: absent) of contiguous tensors of the "
          "op's dtypes on its device, hidden [rows, H], the others as in forward(); the caller checks all that.")
      .def(
          "_backward_at",
          [](Op& self, std::int64_t rows, std::uintptr_t hidden, std::uintptr_t weight, std::uintptr_t targets,
             std::uintptr_t bias, std::uintptr_t lse, std::uintptr_t entropy, std::uintptr_t grad_logp,
             std::uintptr_t grad_lse, std::uintptr_t grad_entropy, std::uintptr_t grad_hidden,
             std::uintptr_t grad_weight, std::uintptr_t grad_bias, bool reduce_grad_hidden, std::uintptr_t stream) {
            const std::shared_ptr<LinearLogp> op = self.use();
            const LinearLogpConfig& c = op->config();
            const LinearLogpInputs in = inputs_at(c, rows, hidden, weight, targets, bias);
            LinearLogpBackwardInputs upstream;
            upstream.lse = vector_at(lse, DType::kFP32, rows);
            upstream.entropy = vector_at(entropy, DType::kFP32, rows);
            upstream.grad_logp = vector_at(grad_logp, DType::kFP32, rows);
            upstream.grad_lse = vector_at(grad_lse, DType::kFP32, rows);
            upstream.grad_entropy = vector_at(grad_entropy, DType::kFP32, rows);
            LinearLogpGrads grads;
            if (grad_hidden != 0) grads.hidden = matrix_at(grad_hidden, c.dtype, rows, c.hidden);
            if (grad_weight != 0) grads.weight = matrix_at(grad_weight, weight_grad_dtype(c), c.vocab_local, c.hidden);
            grads.bias = vector_at(grad_bias, bias_grad_dtype(c).value_or(DType::kFP32), c.vocab_local);
            grads.reduce_hidden = reduce_grad_hidden;
            nb::gil_scoped_release release;
            op->backward(in, upstream, grads, stream_arg(stream));
          },
          "backward() for shardjit.torch, as _forward_at: (rows, hidden, weight, targets, bias, lse, entropy, "
          "grad_logp, grad_lse, grad_entropy, grad_hidden, grad_weight, grad_bias, reduce_grad_hidden, stream).")
      .def(
          "check",
          [](Op& self, std::uintptr_t stream) {
            const std::shared_ptr<LinearLogp> op = self.use();
            BadTargetReport report;
            {
              nb::gil_scoped_release release;
              report = op->check(stream_arg(stream));
            }
            nb::dict out;
            out["bad_rows"] = report.bad_rows;
            out["first_bad_id"] = report.first_bad_id;
            return out;
          },
          nb::arg("stream") = 0,
          "Waits for `stream`; returns and clears the record of out-of-range target ids (bad_rows, first_bad_id).");
}

}  // namespace shardjit::python
