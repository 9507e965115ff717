#!/usr/bin/env bash
# mpk-run's argument checks and stop reasons: usage errors exit 2 with a short message, and
# tokens decoded before the KV cache filled are printed with the reason.
# Usage: mpk_run_cli_test.sh MPK_RUN FIXTURE_DIR
set -uo pipefail
run=$1
model=$2
fail=0
expect_exit() {  # want, description, args...
  local want=$1 what=$2
  shift 2
  local err
  err=$("$run" "$@" 2>&1 >/dev/null)
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want: $err"
    fail=1
  elif [ "${#err}" -gt 400 ] && [ "$want" = 2 ]; then
    echo "FAIL: $what: a ${#err}-character message"
    fail=1
  else
    echo "ok: $what (exit $got)"
  fi
}
base=(--model "$model" --backend reference --prompt-ids 215,354,185)
expect_exit 2 "negative --max-new-tokens" "${base[@]}" --max-new-tokens -1
expect_exit 2 "--max-new-tokens 2^64" "${base[@]}" --max-new-tokens 18446744073709551616
expect_exit 2 "--steps-per-launch 0" "${base[@]}" --steps-per-launch 0
expect_exit 2 "--kv-capacity -5" "${base[@]}" --kv-capacity -5
expect_exit 2 "an unknown option" "${base[@]}" --no-such-option
expect_exit 2 "a missing --model" --prompt-ids 1
expect_exit 2 "a bad token id list" --model "$model" --prompt-ids 1,x
expect_exit 2 "a blank before a token id" --model "$model" --prompt-ids " 5"
expect_exit 2 "a signed token id" --model "$model" --prompt-ids +5
# A typo in a long list: the message names the item, not the whole list.
long_ids="$(seq -s, 1 400),x7,5"
expect_exit 2 "a typo in a long token id list" --model "$model" --prompt-ids "$long_ids"
long_err=$("$run" --model "$model" --prompt-ids "$long_ids" 2>&1)
if [[ "$long_err" != *"'x7' is not a token id"* ]]; then
  echo "FAIL: the bad item is not named"
  fail=1
fi
expect_exit 2 "a token id past the vocabulary" --model "$model" --backend reference --prompt-ids 5,99999999
expect_exit 2 "--temperature nan" "${base[@]}" --temperature nan
expect_exit 2 "--top-p nan" "${base[@]}" --top-p nan
expect_exit 2 "--tune-budget nan" "${base[@]}" --tune-budget nan
expect_exit 0 "--help" --help
# --dump-graph alone loads nothing for a backend: it works with one this machine may not have.
if ! "$run" --model "$model" --backend gpu --dump-graph --json 2>/dev/null |
    python3 -c "import json,sys; assert json.load(sys.stdin)['graph']"; then
  echo "FAIL: --dump-graph alone"
  fail=1
else
  echo "ok: --dump-graph alone"
fi

# The cache fills after 3 new tokens: they are printed, with the reason, and the run succeeds.
out=$("$run" "${base[@]}" --kv-capacity 6 --max-new-tokens 10 --json 2>/dev/null)
code=$?
if [ $code != 0 ] || ! python3 - "$out" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
assert len(j["tokens"]) == 3, j["tokens"]
assert j["stop_reason"] == "kv_cache_full", j["stop_reason"]
assert j["phases_ms"]["read"] > 0 and j["phases_ms"]["load"] >= j["phases_ms"]["read"], j["phases_ms"]
PY
then
  echo "FAIL: KV cache full: exit $code, output: $out"
  fail=1
else
  echo "ok: KV cache full keeps its 3 tokens"
fi
# --logits-out: one row per generated token even when the cache fills; a failed run leaves an
# earlier file as it was.
tmp=$(mktemp -d)
"$run" "${base[@]}" --kv-capacity 6 --max-new-tokens 10 --logits-out "$tmp/l.bin" >/dev/null 2>&1
vocab=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$model/config.json")
size=$(stat -c %s "$tmp/l.bin" 2>/dev/null || echo 0)
echo keep > "$tmp/k.bin"
"$run" --model "$model" --backend reference --prompt-ids 5,99999999 --logits-out "$tmp/k.bin" >/dev/null 2>&1
if [ "$size" != $((3 * 4 * vocab)) ] || [ "$(cat "$tmp/k.bin")" != keep ] || [ -e "$tmp/k.bin.part" ]; then
  echo "FAIL: --logits-out: $size bytes for 3 tokens of vocab $vocab; failed run left '$(head -c 20 "$tmp/k.bin")'"
  fail=1
else
  echo "ok: --logits-out rows and a failed run"
fi
rm -rf "$tmp"
# Text in and out: --prompt excludes --prompt-ids; the JSON holds the encoded prompt and the
# generated text, which the streamed stdout of a plain run repeats.
expect_exit 2 "--prompt with --prompt-ids" "${base[@]}" --prompt "hi"
expect_exit 2 "--prompt that encodes to nothing" --model "$model" --backend reference --prompt ""
text=(--model "$model" --backend reference --prompt "Hello, wörld 🙂" --max-new-tokens 6)
out=$("$run" "${text[@]}" --json 2>/dev/null)
streamed=$("$run" "${text[@]}" 2>/dev/null)
code=$?
if [ $code != 0 ] || ! python3 - "$out" "$streamed" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
assert len(j["prompt_ids"]) >= 4 and len(j["tokens"]) == 6, j
assert isinstance(j["text"], str), j
assert sys.argv[2] == j["text"], (sys.argv[2], j["text"])
PY
then
  echo "FAIL: --prompt: exit $code, output: $out / $streamed"
  fail=1
else
  echo "ok: --prompt streams the text the JSON reports"
fi
# Sampling: a seed reproduces its tokens; bad values are usage errors.
expect_exit 2 "--temperature -1" "${base[@]}" --temperature -1
expect_exit 2 "--top-p 0" "${base[@]}" --top-p 0
samp=("${base[@]}" --max-new-tokens 8 --temperature 0.9 --top-k 20 --top-p 0.9 --json)
a=$("$run" "${samp[@]}" --seed 5 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['tokens'])")
b=$("$run" "${samp[@]}" --seed 5 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['tokens'])")
if [ -z "$a" ] || [ "$a" != "$b" ]; then
  echo "FAIL: --seed 5 gave '$a' then '$b'"
  fail=1
else
  echo "ok: --seed reproduces its tokens"
fi
exit $fail
