# Third-party dependencies, all from the system (Debian packages; scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(CUDAToolkit REQUIRED)   # headers, NVRTC (cuBLAS for the benchmarks only)
# A wheel (pip install .) must not need the build machine's shared spdlog and fmt libraries: with
# SHARDJIT_HEADER_ONLY_LOGGING (pyproject.toml sets it) spdlog::spdlog is their header-only form.
option(SHARDJIT_HEADER_ONLY_LOGGING "Use spdlog and fmt header-only (no shared spdlog/fmt at run time)" OFF)
if(SHARDJIT_HEADER_ONLY_LOGGING)
  find_package(fmt REQUIRED)
  find_path(SPDLOG_INCLUDE_DIR spdlog/spdlog.h REQUIRED)
  get_target_property(shardjit_fmt_include fmt::fmt-header-only INTERFACE_INCLUDE_DIRECTORIES)
  add_library(spdlog::spdlog INTERFACE IMPORTED)
  set_target_properties(spdlog::spdlog PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${SPDLOG_INCLUDE_DIR};${shardjit_fmt_include}"
    INTERFACE_COMPILE_DEFINITIONS "SPDLOG_FMT_EXTERNAL;FMT_HEADER_ONLY"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
else()
  find_package(spdlog REQUIRED)             # logging (spdlog over fmt)
endif()
find_package(OpenSSL REQUIRED)       # SHA-256 of cache keys

# NCCL ships inside the CUDA toolkit on some machines and in the system's folders on others.
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include /usr/include /usr/local/include)
find_library(NCCL_LIBRARY NAMES nccl
  HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_ROOT}/lib64)
if(NOT NCCL_INCLUDE_DIR)
  message(FATAL_ERROR "nccl.h not found: install NCCL (libnccl-dev) or a CUDA toolkit that bundles it")
endif()

if(SHARDJIT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(SHARDJIT_BUILD_TOOLS)
  find_package(CLI11 CONFIG QUIET)
  if(NOT CLI11_FOUND)
    find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${CLI11_INCLUDE_DIR})
  endif()
  find_package(nlohmann_json REQUIRED)
  find_package(benchmark QUIET)
endif()
