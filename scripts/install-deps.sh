#!/usr/bin/env bash
# Installs the Debian packages shardjit builds with (skipped when all are present). The CUDA
# toolkit (headers, NVRTC, NCCL) is expected under /usr/local/cuda or on CUDAToolkit_ROOT.
set -euo pipefail

packages=(cmake ninja-build g++ libspdlog-dev nlohmann-json3-dev libcli11-dev libssl-dev
          libgtest-dev libgmock-dev libbenchmark-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

if [ ! -f "${CUDAToolkit_ROOT:-/usr/local/cuda}/include/nvrtc.h" ]; then
  echo "error: the CUDA toolkit (nvrtc.h) was not found under ${CUDAToolkit_ROOT:-/usr/local/cuda};" \
       "install CUDA 12.4 or newer, or set CUDAToolkit_ROOT" >&2
  exit 1
fi

# The Python module's build and test tools (the C++ build skips the module without them).
if python3 -c "import nanobind, scikit_build_core, pytest, numpy" 2>/dev/null; then
  :
elif python3 -m pip --version >/dev/null 2>&1; then
  echo "installing the Python tools: nanobind scikit-build-core pytest numpy"
  python3 -m pip install --quiet nanobind scikit-build-core pytest numpy ||
    echo "note: pip could not install nanobind, scikit-build-core, pytest, numpy; the Python module is skipped" >&2
else
  echo "note: python3 -m pip is not available; the Python module and its tests are skipped" >&2
fi
