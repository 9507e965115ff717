#!/usr/bin/env python3
"""Writes tests/data/tokenizers/golden.jsonl: what `tokenizers` computes for a fixed corpus.

For every tests/data/tokenizers/*/tokenizer.json and about 300 strings (the fixed edge cases
of corpus.py plus strings from every category, seeded), one line per (string, flag):

  {"tokenizer": "qwen2-large", "text": ..., "add_special_tokens": false, "ids": [...],
   "decoded": decode(ids, skip_special_tokens=False)}

add_special_tokens is written both ways only where the post-processor adds tokens (llama3's
template); for the others (qwen2's ByteLevel post-processor, gpt2-edge's none) both give the
same ids, so only false is written. ASCII only (ensure_ascii), deterministic. Written against tokenizers==0.22.1.
"""

import argparse
import glob
import json
import os
import random
import sys

from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SEED = 20250101
PER_CATEGORY = 12
LONG = 2
MAX_SHORT_BYTES = 300  # keeps the file small; the long category is kept on purpose


def golden_strings():
    rng = random.Random(SEED)
    out = list(corpus.FIXED)
    for gen in corpus.GENERATORS_SHORT + [corpus.g_mix]:
        k = 0
        while k < PER_CATEGORY:
            s = gen(rng)
            if len(s.encode("utf-8")) <= MAX_SHORT_BYTES:
                out.append(s)
                k += 1
    for _ in range(LONG):
        out.append(corpus.g_long(rng)[:1000])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.path.join(REPO, "tests", "data", "tokenizers"))
    ap.add_argument("--out", help="output file (default: DIR/golden.jsonl)")
    args = ap.parse_args()
    out_path = args.out or os.path.join(args.dir, "golden.jsonl")
    paths = sorted(glob.glob(os.path.join(args.dir, "*", "tokenizer.json")))
    if not paths:
        print(f"no tokenizer.json under {args.dir}", file=sys.stderr)
        return 2
    strings = golden_strings()
    lines = []
    for path in paths:
        name = os.path.basename(os.path.dirname(path))
        tok = Tokenizer.from_file(path)
        adds = tok.encode("a", add_special_tokens=True).ids != \
            tok.encode("a", add_special_tokens=False).ids
        for flag in ([False, True] if adds else [False]):
            for s in strings:
                ids = tok.encode(s, add_special_tokens=flag).ids
                rec = {"tokenizer": name, "text": s, "add_special_tokens": flag, "ids": ids,
                       "decoded": tok.decode(ids, skip_special_tokens=False)}
                lines.append(json.dumps(rec, ensure_ascii=True) + "\n")
    with open(out_path, "w", encoding="ascii", newline="\n") as f:
        f.writelines(lines)
    print(f"{out_path}: {len(lines)} lines ({len(strings)} strings, {len(paths)} tokenizers), "
          f"{os.path.getsize(out_path)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
