// shardjit::Error -> Python: ShardjitError (with .code, the code's stable name) and, for bad
// arguments, InvalidArgumentError, which is also a ValueError.
#include <exception>
#include <string>

#include "bindings.hpp"
#include "shardjit/error.hpp"

namespace nb = nanobind;

namespace shardjit::python {
namespace {

PyObject* g_base = nullptr;
PyObject* g_invalid_argument = nullptr;
PyObject* g_not_found = nullptr;
PyObject* g_no_device = nullptr;

PyObject* new_type(nb::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("shardjit.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}

void raise(const Error& error) {
  PyObject* type = g_base;
  switch (error.code()) {
    case ErrorCode::kInvalidArgument: type = g_invalid_argument; break;
    case ErrorCode::kNotFound: type = g_not_found; break;
    case ErrorCode::kNoDevice: type = g_no_device; break;
    default: break;
  }
  nb::object instance = nb::borrow(type)(nb::str(error.what()));
  instance.attr("code") = nb::str(error_code_name(error.code()));
  PyErr_SetObject(type, instance.ptr());
}

}  // namespace

void bind_errors(nb::module_& m) {
  g_base = new_type(m, "ShardjitError", PyExc_RuntimeError,
                    "A failure reported by shardjit; .code is its stable name, e.g. 'compile_failed'.");
  nb::object bases = nb::make_tuple(nb::handle(g_base), nb::handle(PyExc_ValueError));
  g_invalid_argument = new_type(m, "InvalidArgumentError", bases.ptr(),
                                "Bad input from the caller (shapes, dtypes, options).");
  bases = nb::make_tuple(nb::handle(g_base), nb::handle(PyExc_LookupError));
  g_not_found = new_type(m, "NotFoundError", bases.ptr(),
                         "A kernel missing from the cache in cache-only mode, or an unknown template.");
  g_no_device = new_type(m, "NoDeviceError", g_base, "A GPU operation on a machine without a usable GPU.");
  nb::register_exception_translator([](const std::exception_ptr& caught, void*) {
    try {
      std::rethrow_exception(caught);
    } catch (const Error& error) {
      raise(error);
    }
  });
}

}  // namespace shardjit::python
