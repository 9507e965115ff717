#!/usr/bin/env bash
# The tokenizer against the reference library (Hugging Face tokenizers, pinned) on 10,000
# generated strings per bundled tokenizer file (tools/tokenizer/): ids, decoded text and the
# streaming decoder, with and without the template's special tokens. Needs build/ (setup.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
ver=0.22.1
if ! python3 -c "import sys, tokenizers; sys.exit(tokenizers.__version__ != '$ver')" 2>/dev/null; then
  python3 -m pip install -q "tokenizers==$ver" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "tokenizers==$ver"
fi
python3 tools/tokenizer/oracle_check.py --self-test
for t in tests/data/tokenizers/*/tokenizer.json; do
  for flag in "" --add-special-tokens; do
    python3 tools/tokenizer/oracle_check.py --mpk-tokenize build/bin/mpk-tokenize --tokenizer "$t" \
      --n 10000 $flag
  done
done
