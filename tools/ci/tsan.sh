#!/usr/bin/env bash
# TSan build (build-san-tsan) of the kernel cache's tests (threads and processes sharing a cache
# file), the C API tests and the C API multi-session test, and their run. Only these targets
# are built.
source "$(dirname "$0")/lib.sh"
ci_env

targets=(mpk_cache_tests cache_test_worker mpk_api_tests mpk_api_threads_tests)
ci_phase "tsan configure" ci_configure build-san-tsan thread
ci_phase "tsan build" cmake --build build-san-tsan -j "$MPK_CI_JOBS" --target "${targets[@]}"
# The tests run pinned to one CPU. oneTBB (the reference backend's thread pool) is not built
# with TSan, so the hand-off of every parallel_for task to a TBB worker is invisible to it and
# reported as a race; on one CPU, TBB starts no workers and runs tasks on the calling thread.
# The tests' own threads and processes still run concurrently and are all checked: TSan finds
# races by happens-before, not by timing. Nothing is suppressed.
cpu=$(taskset -cp $$ | sed 's/.*: //' | cut -d, -f1 | cut -d- -f1)
echo "ci: tsan: tests pinned to CPU $cpu (oneTBB is not instrumented; see tools/ci/tsan.sh)"
run_tests() {
  local rc=0 t
  for t in mpk_cache_tests mpk_api_tests mpk_api_threads_tests; do
    echo "ci: tsan: $t"
    taskset -c "$cpu" build-san-tsan/bin/$t --gtest_brief=1 || { echo "ci: tsan: $t FAILED"; rc=1; }
  done
  return $rc
}
ci_phase "tsan tests" run_tests
