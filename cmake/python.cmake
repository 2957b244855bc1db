# The Python module (python/), built only when Python's development files and nanobind are
# found: a machine without them still builds and tests the C++ library.
find_package(Python 3.9 COMPONENTS Interpreter Development.Module QUIET)
# A wheel build (pip install ., scikit-build-core sets SKBUILD) exists for the module: skipping it
# there would ship a package that fails at import.
if(SKBUILD)
  set(shardjit_python_missing FATAL_ERROR)
else()
  set(shardjit_python_missing STATUS)
endif()
if(NOT Python_FOUND)
  message(${shardjit_python_missing} "shardjit: Python development files not found, the Python module is skipped")
  return()
endif()
if(NOT nanobind_DIR)
  execute_process(COMMAND ${Python_EXECUTABLE} -m nanobind --cmake_dir
                  OUTPUT_VARIABLE shardjit_nanobind_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE shardjit_nanobind_rc ERROR_QUIET)
  if(shardjit_nanobind_rc EQUAL 0 AND IS_DIRECTORY "${shardjit_nanobind_dir}")
    set(nanobind_DIR "${shardjit_nanobind_dir}" CACHE PATH "nanobind's CMake folder")
  endif()
endif()
find_package(nanobind CONFIG QUIET)
if(NOT nanobind_FOUND)
  message(${shardjit_python_missing} "shardjit: nanobind not found (pip install nanobind), the Python module is skipped")
  return()
endif()
message(STATUS "shardjit: Python module with ${Python_EXECUTABLE}, nanobind ${nanobind_VERSION}")
add_subdirectory(python)
