// How Python holds the C++ objects whose destructors may wait on the peer processes, up to the
// communicator's timeout (Communicator, ReduceScatter, MoeCombine, the tensor-parallel
// LinearLogp; the single-GPU LinearLogp alike): through a Closable, so that close() (or the end
// of a `with` block) destroys the object when the caller says, and both that and the garbage
// collector's destruction wait with the GIL released, leaving the other Python threads to run.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <nanobind/nanobind.h>

#include "shardjit/communicator.hpp"

namespace shardjit::python {

template <typename T>
class Closable {
 public:
  // nanobind's __init__: builds the object into the Python instance `self` with the GIL released,
  // since building may compile kernels or wait for the peers. `make()` returns a
  // std::unique_ptr<T>. `built_on`: an op's communicator, which the op's own reference keeps
  // alive, so that closing the Communicator first cannot pull it from under the op (the NCCL
  // group then ends with the last op built on it).
  template <typename Make>
  static void build(Closable* self, Make make, std::shared_ptr<Communicator> built_on = nullptr) {
    std::unique_ptr<T> made;
    {
      nanobind::gil_scoped_release release;
      made = make();
    }
    new (self) Closable(std::shared_ptr<T>(made.release(), Destroy{std::move(built_on)}));
  }

  // Runs in the Python object's deallocation, with the GIL held, like close().
  ~Closable() { close(); }
  Closable(const Closable&) = delete;
  Closable& operator=(const Closable&) = delete;

  // The object, for the caller to hold for the length of a call: a close() on another thread
  // while the call has released the GIL then leaves the destruction to the call's end instead of
  // freeing the object under it. ValueError "<class>: closed" once closed.
  std::shared_ptr<T> use() const {
    if (!object_) {
      const nanobind::str name(nanobind::type<Closable>().attr("__name__"));
      throw nanobind::value_error((std::string(name.c_str()) + ": closed").c_str());
    }
    return object_;
  }

  bool closed() const { return object_ == nullptr; }

  // With the GIL held; idempotent. Taken out while the GIL is held, so that a call from another
  // thread sees a closed object, never a half-destroyed one.
  void close() noexcept { std::shared_ptr<T>(std::move(object_)).reset(); }

 private:
  // Whoever drops the last reference (close(), the garbage collector, or a call that a close()
  // on another thread raced, at its end) destroys the object with the GIL released: the
  // destructor may wait for the peers. The op first, then its communicator, which it still uses.
  struct Destroy {
    mutable std::shared_ptr<Communicator> built_on;
    void operator()(T* object) const noexcept {
      std::shared_ptr<Communicator> communicator = std::move(built_on);
      std::optional<nanobind::gil_scoped_release> release;  // ends first: the GIL is back on return
      if (PyGILState_Check() != 0) release.emplace();
      delete object;
      communicator.reset();
    }
  };

  explicit Closable(std::shared_ptr<T> object) : object_(std::move(object)) {}

  std::shared_ptr<T> object_;
};

// The Python class over Closable<T>, with what every such class has: close(), closed and the
// context manager (`with` closes at the end of the block). `close_doc` says what closing waits for.
template <typename T>
nanobind::class_<Closable<T>> bind_closable(nanobind::module_& m, const char* name, const char* doc,
                                            const char* close_doc) {
  namespace nb = nanobind;
  nb::class_<Closable<T>> cls(m, name, doc);
  cls.def("close", [](Closable<T>& self) { self.close(); }, close_doc)
      .def_prop_ro("closed", &Closable<T>::closed, "True once close() has run (or a `with` block ended).")
      .def("__enter__", [](Closable<T>& self) -> Closable<T>& { return self; }, nb::rv_policy::reference,
           "Returns self.")
      .def("__exit__", [](Closable<T>& self, nb::handle, nb::handle, nb::handle) { self.close(); },
           nb::arg("exc_type").none(), nb::arg("exc_value").none(), nb::arg("traceback").none(),
           "Calls close(); an exception raised in the block propagates.");
  return cls;
}

}  // namespace shardjit::python
