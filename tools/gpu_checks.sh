#!/usr/bin/env bash
# Runs every test (GPU-labelled ones included) and the example on a GPU machine, from a build
# folder made elsewhere and carried as build-gpu (see docs/PERFORMANCE.md, "GPU machine").
# The build records absolute paths of /work/main; a link recreates them here. The bench scripts'
# self-tests are left out: their ctest commands name the build machine's Python (CI runs them).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if [ "$root" != /work/main ]; then
  mkdir -p /work && { [ -e /work/main ] || ln -s "$root" /work/main; }
fi
if [ -d build-gpu ]; then rm -rf build && mv build-gpu build; fi
# The copy may not keep modification times: mark the gtest test lists as up to date, or ctest
# would re-run discovery with the CMake modules of the build machine.
find build -name "*_tests.cmake" -exec touch {} +
export LD_LIBRARY_PATH=$root/build/devlibs:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
ctest --test-dir /work/main/build --output-on-failure --timeout 120 -E "install_find_package|bench_.*_self_test" -LE gpu -j 8 \
  > "$out/ctest.log" 2>&1
echo "ctest exit: $?"
grep -E "tests passed|tests failed|Skipped|Failed|\(Failed\)" "$out/ctest.log" | head -40
ctest --test-dir /work/main/build --timeout 120 -L gpu -V > "$out/ctest_gpu.log" 2>&1
echo "gpu-labelled ctest exit: $?"
grep -E "^\s*[0-9]+: \[ +(OK|FAILED|SKIPPED) +\]|tests passed|tests failed" "$out/ctest_gpu.log" | head -40
build/bin/mpk-run --model tests/data/qwen3-bf16 --prompt-ids 5,17,300 --max-new-tokens 4 --backend gpu
echo "mpk-run --backend gpu exit: $?"
