#!/usr/bin/env bash
# Sets up a fresh Debian machine that has the CUDA toolkit: installs the packages, configures
# and builds mpk into build/. With --run, then runs the main job (tools/run_example.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
# clang, lld, llvm (llvm-symbolizer) and the clang runtimes: the sanitizer and fuzzing builds of
# tools/ci/ (libFuzzer, ASan, UBSan, TSan).
$SUDO apt-get install -y --no-install-recommends \
  cmake ninja-build g++ ccache pkg-config file python3 python3-pip \
  libz3-dev libtbb-dev libsqlite3-dev libfmt-dev libgtest-dev nlohmann-json3-dev \
  libcli11-dev libssl-dev libpcre2-dev libutf8proc-dev \
  clang lld llvm libclang-rt-14-dev

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$CUDA_HOME/include/nvrtc.h" ]; then
  echo "setup: the CUDA toolkit (NVRTC headers) was not found under $CUDA_HOME." >&2
  echo "setup: install CUDA 12.x/13.x and set CUDA_HOME (a GPU is not needed to build)." >&2
  exit 1
fi
export PATH="$CUDA_HOME/bin:$PATH"

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT="$CUDA_HOME"
cmake --build build -j "$(nproc)"

if [ "${1:-}" = "--run" ]; then
  bash tools/run_example.sh
fi
