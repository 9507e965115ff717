#!/usr/bin/env bash
# Runs every test (GPU-labelled ones included), the example and compute-sanitizer (memcheck,
# racecheck, synccheck, initcheck) over mpk-run on every fixture, on a GPU machine, from a build
# folder made elsewhere and carried as build-gpu (see docs/PERFORMANCE.md, "GPU machine").
# Exits non-zero when a sanitizer reports an error or mpk-run fails under one.
# The build records absolute paths of /work/main; a link recreates them here. The bench scripts'
# self-tests are left out: their ctest commands name the build machine's Python (CI runs them).
# GPU_CHECKS_JOBS (default 4): GPU tests at once. They share the GPU (its contexts are
# time-sliced), and most of their wall time is NVRTC on the host's cores; the search's tests
# (TuneGpu: wall-clock budgets) then run alone. GPU_CHECKS_SAN_JOBS (default 1): compute-
# sanitizer runs at once: a kernel under racecheck is slow, and the megakernel's 5 s deadlock
# watchdog counts the time another context holds the GPU. GPU_CHECKS_CPU=0 leaves out the CPU
# tests (CI runs them on every change); GPU_CHECKS_GPU=0 the GPU tests and GPU_CHECKS_SAN=0 the
# sanitizer runs, so that one GPU machine call can take each part within its time limit;
# GPU_CHECKS_FILTER (a ctest -R regex) runs only the GPU tests it matches, to split them over
# calls (`ctest -N -L gpu` lists their names).
# Making build-gpu: configure and build in /work/main/build (the paths ctest records), run
# `ctest --test-dir build -N -L gpu` there (the GPU tests' lists, which this machine's CMake
# cannot make), then copy build to build-gpu, drop objects and static libraries, strip, and
# bundle its libraries (shared/device/bundle.sh, without libmpk: LD_LIBRARY_PATH would put it
# before another build's own).
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
if ! grep -qx "# Build directory: /work/main/build" build/CTestTestfile.cmake 2>/dev/null; then
  echo "gpu_checks: build/ was not configured as /work/main/build: ctest would find none of its tests" \
    "(see this script's header)" >&2
  exit 2
fi
if [ -z "$(find build -name "*gpu_tests*_tests.cmake" | head -1)" ]; then
  echo "gpu_checks: build/ holds no GPU test lists: run ctest -N -L gpu in it before copying" >&2
  exit 2
fi
export LD_LIBRARY_PATH=$root/build/devlibs:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
jobs=${GPU_CHECKS_JOBS:-4}
if [ "${GPU_CHECKS_CPU:-1}" != 0 ]; then
  ctest --test-dir /work/main/build --output-on-failure --timeout 120 -E "install_find_package|bench_.*_self_test" -LE gpu -j 8 \
    > "$out/ctest.log" 2>&1
  echo "ctest exit: $?"
  grep -E "tests passed|tests failed|Skipped|Failed|\(Failed\)" "$out/ctest.log" | head -40
fi
if [ "${GPU_CHECKS_GPU:-1}" != 0 ]; then
  filter=${GPU_CHECKS_FILTER:-.}
  ctest --test-dir /work/main/build --timeout 300 -L gpu -R "$filter" -E "^TuneGpu" -V -j "$jobs" \
    > "$out/ctest_gpu.log" 2>&1
  echo "gpu-labelled ctest exit: $? ($jobs at once; filter $filter)"
  tune=$(ctest --test-dir /work/main/build -N -L gpu -R "$filter" |
    sed -n 's/.*Test *#[0-9]*: \(TuneGpu\.[^ ]*\)$/\1/p' | sed 's/\./\\./g' | paste -sd'|')
  if [ -n "$tune" ]; then
    ctest --test-dir /work/main/build --timeout 300 -L gpu -R "^($tune)\$" -V >> "$out/ctest_gpu.log" 2>&1
    echo "gpu-labelled ctest, the search's tests alone: exit $?"
  fi
  echo "tests OK: $(grep -cE '^\s*[0-9]+: \[ +OK +\]' "$out/ctest_gpu.log")"
  grep -E "^\s*[0-9]+: \[ +(FAILED|SKIPPED) +\]|tests passed|tests failed|\((Failed|Timeout)\)" \
    "$out/ctest_gpu.log" | head -40
  build/bin/mpk-run --model tests/data/qwen3-bf16 --prompt-ids 5,17,300 --max-new-tokens 4 --backend gpu
  echo "mpk-run --backend gpu exit: $?"
fi
[ "${GPU_CHECKS_SAN:-1}" = 0 ] && exit 0

# compute-sanitizer on every fixture: a few tokens through the megakernel (single-step, and
# multi-step under memcheck), each tool's report in $out/sanitizer.log. A tool's error (exit 99)
# or mpk-run failing under it (another non-zero exit, e.g. a wait timeout) fails the script.
sanitizer=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
san_log=$out/sanitizer.log
: > "$san_log"
san_fail=0
san_runs=0
# One tool on one fixture: its report in $work/<n>.log, its result line in $work/<n>.res.
san_one() {
  local n=$1 fx=$2 tool=${3%%:*} steps=${3##*:} extra=() rc result
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  echo "=== $(basename "$fx") $tool steps_per_launch=$steps" > "$work/$n.log"
  timeout 600 "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit 50 \
    build/bin/mpk-run --model "$fx" --prompt-ids 5,17,300 --max-new-tokens 4 --backend gpu \
    --steps-per-launch "$steps" >> "$work/$n.log" 2>&1
  rc=$?
  case $rc in
    0) result=clean ;;
    99) result="ERRORS (see sanitizer.log)" ;;
    124) result="TIMEOUT (600 s)" ;;
    *) result="mpk-run failed (exit $rc)" ;;
  esac
  echo "--- exit $rc: $result" >> "$work/$n.log"
  printf "%-22s %-10s %-6s %s\n" "$(basename "$fx")" "$tool" "$steps" "$result" > "$work/$n.res"
}
printf "%-22s %-10s %-6s %s\n" fixture tool steps result
if [ ! -x "$sanitizer" ]; then
  echo "compute-sanitizer not found at $sanitizer" | tee -a "$san_log"
  san_fail=1
else
  work=$(mktemp -d)
  export -f san_one
  export sanitizer work
  n=0
  for fx in tests/data/*/; do
    [ -f "$fx/config.json" ] || continue
    for run in memcheck:1 memcheck:4 racecheck:1 synccheck:1 initcheck:1; do
      n=$((n + 1))
      echo "$n ${fx%/} $run"
    done
  done > "$work/runs"
  xargs -P "${GPU_CHECKS_SAN_JOBS:-1}" -L 1 bash -c 'san_one "$@"' _ < "$work/runs"
  while read -r i fx run; do
    if [ -f "$work/$i.res" ]; then
      cat "$work/$i.res"
      grep -q " clean$" "$work/$i.res" || san_fail=1
    else
      printf "%-22s %-10s %-6s %s\n" "$(basename "$fx")" "${run%%:*}" "${run##*:}" "NO RESULT"
      san_fail=1
    fi
    cat "$work/$i.log" >> "$san_log" 2>/dev/null
    san_runs=$((san_runs + 1))
  done < "$work/runs"
  rm -rf "$work"
fi
grep -E "ERROR SUMMARY|Error:|Invalid|Uninitialized|Race|hazard|Barrier" "$san_log" | sort | uniq -c | head -20
echo "compute-sanitizer: $san_runs runs, $( [ $san_fail = 0 ] && echo clean || echo FAILED )"
exit $san_fail
