// shardjit._shardjit: the compiled half of the Python package (see python/shardjit/__init__.py).
#include <nanobind/nanobind.h>

#include "bindings.hpp"
#include "shardjit/runtime.hpp"

NB_MODULE(_shardjit, m) {
  m.doc() = "shardjit: run-time generated GPU kernels (compiled bindings)";
  m.attr("__version__") = shardjit::version();
  shardjit::python::bind_errors(m);
  shardjit::python::bind_tensor_views(m);
  shardjit::python::bind_runtime(m);
  shardjit::python::bind_collectives(m);
  shardjit::python::bind_linear_logp(m);
  shardjit::python::bind_log_forwarding(m);
}
