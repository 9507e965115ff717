#!/usr/bin/env bash
# mpk-tokenize's arguments: malformed --ids are usage errors (exit 2), an empty --text encodes
# to nothing instead of reading stdin, and --text / --ids round-trip.
# Usage: mpk_tokenize_cli_test.sh MPK_TOKENIZE MODEL_DIR
set -uo pipefail
run=$1
model=$2
fail=0
check() {  # want-exit, description, args...
  local want=$1 what=$2
  shift 2
  out=$(timeout 20 "$run" --tokenizer "$model" "$@" < /dev/null 2>/dev/null)
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"
    fail=1
  else
    echo "ok: $what (exit $got)"
  fi
}
for bad in "5,,7" "5," "5x" " 5" "-5" "4294967301" ""; do
  check 2 "--ids '$bad'" --ids "$bad"
done
check 0 "an empty --text" --text ""
[ -z "$out" ] || { echo "FAIL: an empty --text printed '$out'"; fail=1; }
check 0 "--text" --text "Hello, wörld"
ids=$out
check 0 "--ids of that text" --ids "$ids"
[ "$out" = "Hello, wörld" ] || { echo "FAIL: --ids $ids gave '$out'"; fail=1; }
exit $fail
