#!/usr/bin/env bash
# Runs the whole test suite (building first if needed). GPU tests skip, with a printed reason,
# on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then bash tools/setup.sh; fi
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
