#!/usr/bin/env bash
# Runs each libFuzzer target of build-san (tools/ci/sanitize.sh builds them) for a short time
# from its committed seed corpus: MPK_FUZZ_SECONDS each (default 20). New inputs go to a
# scratch corpus, not to the repository. A crash, leak, timeout or out-of-memory fails the
# run; the reproducer is kept under build-san/fuzz-artifacts/ (see docs/FUZZING.md).
source "$(dirname "$0")/lib.sh"
ci_env

seconds=${MPK_FUZZ_SECONDS:-20}
targets=(safetensors config sharded_index cache_verify c_api tokenizer)
ci_phase "fuzz build" cmake --build build-san -j "$MPK_CI_JOBS" --target "${targets[@]/#/fuzz_}"

artifacts=$MPK_ROOT/build-san/fuzz-artifacts
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$artifacts"
fuzz_one() {
  local t=$1 dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  mkdir -p "$work/$t"
  local rc=0
  build-san/bin/fuzz_$t "$work/$t" "tests/fuzz/corpus/$t" "${dict[@]}" \
    -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2560 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$t-" > "$work/$t.log" 2>&1 || rc=$?
  grep -E "^(#[0-9]+\s+DONE|stat::number_of_executed_units|stat::average_exec_per_sec)" \
    "$work/$t.log" | sed "s/^/ci: fuzz $t: /" || true
  [ $rc = 0 ] && return 0
  local repro
  repro=$(ls -t "$artifacts/$t-"* 2>/dev/null | head -1)
  while read -r target regex what; do
    if [ "$target" = "$t" ] && grep -qE "$regex" "$work/$t.log"; then
      echo "ci: fuzz $t stopped on a finding pending its fix (tools/ci/pending.txt): $what;" \
           "input $repro"
      return 0
    fi
  done < <(pending fuzz)
  tail -60 "$work/$t.log"
  echo "ci: fuzz $t FAILED (exit $rc); reproducer: $repro"
  echo "ci: reproduce with: build-san/bin/fuzz_$t $repro"
  return $rc
}
rc=0
for t in "${targets[@]}"; do
  ci_phase "fuzz $t (${seconds} s)" fuzz_one "$t" || rc=1
done
exit $rc
