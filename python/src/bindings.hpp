// The parts of the Python module, one per file; module.cpp calls each bind_* once.
#pragma once

#include <nanobind/nanobind.h>

namespace shardjit::python {

void bind_errors(nanobind::module_& m);
void bind_tensor_views(nanobind::module_& m);
void bind_runtime(nanobind::module_& m);
void bind_linear_logp(nanobind::module_& m);
void bind_collectives(nanobind::module_& m);
void bind_log_forwarding(nanobind::module_& m);

}  // namespace shardjit::python
