#!/usr/bin/env bash
# ASan + UBSan build (build-san) of every CPU test and the fuzz targets (no GPU tests, no
# benchmarks), then the CPU tests (ctest without the `gpu` label; the fuzz seed corpora run as
# tests too). UBSan stops at the first finding. See docs/FUZZING.md.
source "$(dirname "$0")/lib.sh"
ci_env

# Left out, with the reason (nothing else is):
#  install_find_package builds a separate consumer project with the default compiler against
#    the installed library, which would need the sanitizer runtime; tools/test.sh runs it.
#  the findings listed in tools/ci/pending.txt, until their fix lands;
#  the Z3- and NVRTC-bound tests listed in tools/ci/solver_bound.txt (why: its header).
exclude='^install_find_package$'
echo "ci: excluded: install_find_package (its consumer project links without the sanitizer" \
     "runtime; tools/test.sh runs it)"
bound=$(grep -v '^#' tools/ci/solver_bound.txt | sed '/^$/d')
echo "ci: excluded: $(echo "$bound" | wc -l) Z3- and NVRTC-bound tests (tools/ci/solver_bound.txt;" \
     "tools/test.sh runs them)"
exclude="$exclude|^($(echo "$bound" | sed 's/\./\\./g' | paste -sd'|'))\$"
while read -r regex what; do
  [ -n "$regex" ] || continue
  exclude="$exclude|$regex"
  echo "ci: excluded, pending fix: $regex: $what"
done < <(pending test)

ci_phase "asan+ubsan configure" ci_configure build-san address,undefined -DMPK_BUILD_FUZZERS=ON \
  -DMPK_BUILD_GPU_PROGRAMS=OFF
ci_phase "asan+ubsan build" cmake --build build-san -j "$MPK_CI_JOBS"
ci_phase "asan+ubsan ctest" ctest --test-dir build-san -LE gpu -E "$exclude" \
  --output-on-failure -j "$MPK_CI_JOBS" --timeout 1800
