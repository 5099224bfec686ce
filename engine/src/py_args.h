// Argument checks and array marshalling shared by the binding files (written once, as in
// EnvPool's py_envpool.h). Every check raises a Python exception; nothing here can abort.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <climits>
#include <string>

namespace drm::py_args {

namespace py = pybind11;

// operator.index() semantics: Python and NumPy integers pass, floats and strings raise
// TypeError. Values beyond long long saturate so range checks report them.
inline long long to_integer(const py::handle& value) {
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long result = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) return overflow > 0 ? LLONG_MAX : LLONG_MIN;
  return result;
}

// An integer in [lo, hi], or ValueError naming the argument and what it means.
inline long long in_range(const py::handle& value, const char* name, long long lo, long long hi,
                          const char* meaning) {
  const long long v = to_integer(value);
  if (v < lo || v > hi) {
    throw py::value_error(std::string(name) + " must be " + std::to_string(lo) + ".." +
                          std::to_string(hi) + " (" + meaning + "), got " +
                          py::str(value).cast<std::string>());
  }
  return v;
}

// min_press_interval as every planning binding takes it: frames between new presses, 0..255.
inline int press_interval(const py::handle& value) {
  return static_cast<int>(
      in_range(value, "min_press_interval", 0, 255, "frames between new presses"));
}

// A C-contiguous uint8 array of exactly `n` elements (any shape), or TypeError/ValueError.
inline py::array_t<uint8_t> uint8_vector(const py::handle& obj, const char* name, py::ssize_t n) {
  if (!py::isinstance<py::array>(obj)) {
    throw py::type_error(std::string(name) + " must be a numpy.ndarray of dtype uint8");
  }
  auto arr = py::reinterpret_borrow<py::array>(obj);
  if (!arr.dtype().is(py::dtype::of<uint8_t>())) {
    throw py::type_error(std::string(name) + " must have dtype uint8, got " +
                         py::str(arr.dtype()).cast<std::string>());
  }
  if (arr.size() != n) {
    throw py::value_error(std::string(name) + " must have " + std::to_string(n) +
                          " elements, got " + std::to_string(arr.size()));
  }
  if (!(arr.flags() & py::array::c_style)) {
    throw py::value_error(std::string(name) + " must be C-contiguous");
  }
  return py::reinterpret_borrow<py::array_t<uint8_t>>(arr);
}

}  // namespace drm::py_args
