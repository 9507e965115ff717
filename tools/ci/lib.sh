# Shared by the tools/ci scripts (sourced): the clang toolchain, ccache, sanitizer run-time
# options and phase timing. Build folders: build-san (ASan+UBSan, fuzzers), build-san-tsan
# (TSan).
set -euo pipefail
MPK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$MPK_ROOT"
export CCACHE_BASEDIR=$MPK_ROOT
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
MPK_CI_JOBS=${MPK_CI_JOBS:-$(nproc)}
# Full paths: a folder configured with "clang" and re-run with "/usr/bin/clang" would be reset.
MPK_CI_CC=$(command -v "${MPK_CI_CC:-clang}") &&
  MPK_CI_CXX=$(command -v "${MPK_CI_CXX:-clang++}") ||
  { echo "ci: clang/clang++ not found (tools/setup.sh installs them)" >&2; exit 1; }

# Findings are fatal and symbolized; suppression files (if any) are printed by ci_env.
symbolizer=$(command -v llvm-symbolizer || true)
if [ -n "$symbolizer" ]; then
  export ASAN_SYMBOLIZER_PATH=$symbolizer TSAN_SYMBOLIZER_PATH=$symbolizer
fi
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_odr_violation=2${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
for f in lsan tsan; do
  if [ -s "tools/ci/$f.supp" ]; then
    var=$(echo "$f" | tr a-z A-Z)_OPTIONS
    export "$var=${!var:+${!var}:}suppressions=$MPK_ROOT/tools/ci/$f.supp"
  fi
done

ci_env() {
  echo "ci: $($MPK_CI_CXX --version | head -1); jobs $MPK_CI_JOBS"
  echo "ci: ASAN_OPTIONS=$ASAN_OPTIONS"
  echo "ci: UBSAN_OPTIONS=$UBSAN_OPTIONS"
  echo "ci: TSAN_OPTIONS=$TSAN_OPTIONS"
  for f in tools/ci/*.supp; do
    [ -s "$f" ] && { echo "ci: suppressions in $f:"; grep -v '^#' "$f" | sed 's/^/ci:   /'; }
  done
  return 0
}

# ci_configure DIR SANITIZERS [cmake args...]: clang, -O1 with line tables, asserts kept.
ci_configure() {
  local dir=$1 san=$2
  shift 2
  cmake -S . -B "$dir" -G Ninja \
    -DCMAKE_C_COMPILER="$MPK_CI_CC" -DCMAKE_CXX_COMPILER="$MPK_CI_CXX" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld \
    -DCUDAToolkit_ROOT="$CUDA_HOME" -DMPK_SANITIZE="$san" "$@" > "$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; return 1; }
}

# ci_phase NAME COMMAND...: runs the command and prints its wall time.
ci_phase() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "ci: == $name"
  "$@" || rc=$?
  echo "ci: == $name: $((SECONDS - start)) s (exit $rc)"
  return $rc
}

# pending KIND: the pending.txt lines of one kind (test or fuzz), comments dropped.
pending() { grep -E "^$1 " "$MPK_ROOT/tools/ci/pending.txt" | cut -d' ' -f2- || true; }
