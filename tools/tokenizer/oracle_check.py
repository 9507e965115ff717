#!/usr/bin/env python3
"""Compares mpk-tokenize with Hugging Face `tokenizers` on a generated corpus.

  oracle_check.py --mpk-tokenize build/bin/mpk-tokenize \\
      --tokenizer tests/data/tokenizers/qwen2-large/tokenizer.json \\
      [--n 10000] [--seed 1] [--add-special-tokens]
  oracle_check.py --self-test [--tokenizer PATH] [--n N]

The corpus (corpus.generate(n, seed)) goes to one run of the CLI as JSON lines on stdin. The
CLI answers one JSON line per input: {"ids": [...], "text": decode(ids), "stream": the pieces of
a streaming decoder fed one id at a time} or {"error": "..."}. For every input:

  ids    == Tokenizer.from_file(path).encode(s, add_special_tokens=flag).ids
  text   == decode(oracle ids, skip_special_tokens=False)
  stream == text

Exit status: 0 when everything matches, 1 on a mismatch, 2 on a usage or process error (the
CLI failed, or its output is not one JSON object per input line).

--self-test needs no mpk binary: it runs this script's own stand-in for the CLI (built on
`tokenizers`) and checks that it matches, then runs a stand-in with injected faults and checks
that exactly those inputs are reported, so the comparison itself is tested.
"""

import argparse
import glob
import io
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MAX_REPORTED = 20
WINDOW = 12  # ids / characters shown on each side of the first difference


class ProcessError(Exception):
    pass


def _load_tokenizer(path):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(path)


# --- Stand-in CLI (self-test) -------------------------------------------------------------

def _fault_kind(i):
    # Deterministic fault pattern for the fault-injection run.
    return {3: "ids", 5: "text", 7: "stream", 11: "error"}.get(i % 97)


def stand_in(path, add_special_tokens, fault):
    """Implements the mpk-tokenize stdin/stdout contract with `tokenizers`."""
    from tokenizers.decoders import DecodeStream
    tok = _load_tokenizer(path)
    out = sys.stdout
    for i, line in enumerate(sys.stdin.buffer.read().split(b"\n")):
        if not line:
            continue
        s = json.loads(line)
        if fault == "short" and i == 1:
            break
        kind = _fault_kind(i) if fault == "inject" else None
        if kind == "error":
            out.write(json.dumps({"error": "injected"}) + "\n")
            continue
        ids = tok.encode(s, add_special_tokens=add_special_tokens).ids
        if kind == "ids":
            ids = ids[:-1] if ids else [0]
        text = tok.decode(ids, skip_special_tokens=False)
        ds = DecodeStream(skip_special_tokens=False)
        pieces = []
        for t in ids:
            piece = ds.step(tok, t)
            if piece is not None:
                pieces.append(piece)
        stream = "".join(pieces)
        # DecodeStream holds back text that ends in U+FFFD and has no flush; the contract's
        # stream is complete, so append what was held back.
        if text.startswith(stream):
            stream = text
        if kind == "text":
            text += "x"
            stream = text
        elif kind == "stream":
            stream = stream[1:] if stream else "x"
        out.write(json.dumps({"ids": ids, "text": text, "stream": stream}) + "\n")
    out.flush()
    return 3 if fault == "short" else 0


# --- Comparison ------------------------------------------------------------------------------

def run_cli(cmd, path, add_special_tokens, strings, timeout):
    argv = list(cmd) + ["--tokenizer", path] + (["--add-special-tokens"] if add_special_tokens else [])
    data = "".join(json.dumps(s, ensure_ascii=True) + "\n" for s in strings).encode("ascii")
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, input=data, capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ProcessError(f"running {argv}: {e}")
    elapsed = time.monotonic() - t0
    if p.returncode != 0:
        tail = p.stderr.decode("utf-8", "replace")[-2000:]
        raise ProcessError(f"{argv} exited with {p.returncode}; stderr:\n{tail}")
    # Split on \n only: the output may hold U+2028 and other characters that splitlines() takes
    # as line breaks.
    lines = p.stdout.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) != len(strings):
        raise ProcessError(f"{len(strings)} inputs but {len(lines)} output lines")
    results = []
    for k, line in enumerate(lines):
        try:
            obj = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ProcessError(f"output line {k + 1} is not UTF-8 JSON ({e}): {line[:200]!r}")
        if not isinstance(obj, dict):
            raise ProcessError(f"output line {k + 1} is not a JSON object: {line[:200]!r}")
        results.append(obj)
    return results, elapsed


def _first_diff(a, b):
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return min(len(a), len(b)) if len(a) != len(b) else -1


def _window(seq, k):
    lo = max(0, k - WINDOW)
    hi = k + WINDOW
    head = "..." if lo > 0 else ""
    tail = "..." if hi < len(seq) else ""
    return lo, head, seq[lo:hi], tail


def _show_ids(ids, k):
    if len(ids) <= 4 * WINDOW:
        return str(ids)
    lo, head, part, tail = _window(ids, k)
    return f"[{head}{', '.join(map(str, part))}{tail}] (len {len(ids)}, shown from {lo})"


def _show_text(s, k):
    if len(s) <= 8 * WINDOW:
        return repr(s)
    lo, head, part, tail = _window(s, k)
    return f"{head}{part!r}{tail} (len {len(s)}, shown from {lo})"


def compare(strings, got, oracle_ids, oracle_text):
    """Returns a list of (index, kinds, details) for every input that does not match."""
    bad = []
    for i, (s, g) in enumerate(zip(strings, got)):
        want_ids, want_text = oracle_ids[i], oracle_text[i]
        if "error" in g:
            bad.append((i, ["error"], [f"  error: {g['error']!r}",
                                       f"  want ids: {_show_ids(want_ids, 0)}"]))
            continue
        ids, text, stream = g.get("ids"), g.get("text"), g.get("stream")
        if not (isinstance(ids, list) and all(isinstance(t, int) for t in ids)
                and isinstance(text, str) and isinstance(stream, str)):
            bad.append((i, ["malformed"], [f"  output: {json.dumps(g)[:400]}"]))
            continue
        kinds, details = [], []
        if ids != want_ids:
            k = _first_diff(ids, want_ids)
            kinds.append("ids")
            details += [f"  ids differ at {k}:",
                        f"    mpk:    {_show_ids(ids, k)}",
                        f"    oracle: {_show_ids(want_ids, k)}"]
        if text != want_text:
            k = _first_diff(text, want_text)
            kinds.append("text")
            details += [f"  text differs at char {k}:",
                        f"    mpk:    {_show_text(text, k)}",
                        f"    oracle: {_show_text(want_text, k)}"]
        if stream != text:
            k = _first_diff(stream, text)
            kinds.append("stream")
            details += [f"  stream differs from text at char {k}:",
                        f"    stream: {_show_text(stream, k)}",
                        f"    text:   {_show_text(text, k)}"]
        if kinds:
            bad.append((i, kinds, details))
    return bad


def check(cmd, path, n, seed, add_special_tokens, timeout=900, out=sys.stdout):
    """Runs one comparison; returns (exit status, list of mismatches)."""
    strings = corpus.generate(n, seed)
    try:
        tok = _load_tokenizer(path)
    except Exception as e:  # tokenizers raises a plain Exception on a bad file
        print(f"oracle: cannot load {path}: {e}", file=out)
        return 2, []
    t0 = time.monotonic()
    enc = tok.encode_batch(strings, add_special_tokens=add_special_tokens)
    oracle_ids = [e.ids for e in enc]
    oracle_text = tok.decode_batch(oracle_ids, skip_special_tokens=False)
    oracle_s = time.monotonic() - t0
    try:
        got, cli_s = run_cli(cmd, path, add_special_tokens, strings, timeout)
    except ProcessError as e:
        print(f"error: {e}", file=out)
        return 2, []
    bad = compare(strings, got, oracle_ids, oracle_text)

    counts = {k: 0 for k in ("ids", "text", "stream", "error", "malformed")}
    for _, kinds, _ in bad:
        for k in kinds:
            counts[k] += 1
    n_tokens = sum(len(x) for x in oracle_ids)
    print(f"{path} (add_special_tokens={add_special_tokens}, n={n}, seed={seed}): "
          f"{n - len(bad)}/{n} match; {n_tokens} oracle tokens; cli {cli_s:.2f}s, "
          f"oracle {oracle_s:.2f}s", file=out)
    if bad:
        print("mismatches: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v), file=out)
    for i, kinds, details in bad[:MAX_REPORTED]:
        s = strings[i]
        shown = repr(s) if len(s) <= 300 else f"{s[:300]!r}... (len {len(s)})"
        print(f"#{i} [{', '.join(kinds)}] input {shown}", file=out)
        for d in details:
            print(d, file=out)
    if len(bad) > MAX_REPORTED:
        print(f"... {len(bad) - MAX_REPORTED} more", file=out)
    return (1 if bad else 0), bad


def self_test(args):
    me = [sys.executable, os.path.abspath(__file__), "--stand-in"]
    paths = [args.tokenizer] if args.tokenizer else \
        sorted(glob.glob(os.path.join(REPO, "tests", "data", "tokenizers", "*", "tokenizer.json")))
    if not paths:
        print("self-test: no tokenizer found", file=sys.stderr)
        return 2
    failed = False
    for path in paths:
        flags = [args.add_special_tokens] if args.tokenizer else [False, True]
        for flag in flags:
            rc, _ = check(me, path, args.n, args.seed, flag)
            if rc != 0:
                print(f"self-test: FAILED: the stand-in does not match on {path}")
                failed = True

    # Injected faults: exactly the faulted inputs must be reported, each with its kind.
    path, n = paths[0], min(args.n, 1000)
    buf = io.StringIO()
    rc, bad = check(me + ["--fault", "inject"], path, n, args.seed, False, out=buf)
    expected = {i: _fault_kind(i) for i in range(n) if _fault_kind(i)}
    found = {i: kinds for i, kinds, _ in bad}
    ok = rc == 1 and set(found) == set(expected) and all(
        expected[i] in kinds for i, kinds in found.items())
    print(f"self-test: injected {len(expected)} faults, {len(found)} reported, exit {rc}: "
          f"{'ok' if ok else 'FAILED'}")
    if not ok:
        print(buf.getvalue())
        failed = True

    # A CLI that fails or drops lines is a process error (exit 2).
    buf = io.StringIO()
    rc, _ = check(me + ["--fault", "short"], path, 10, args.seed, False, out=buf)
    print(f"self-test: failing CLI gives exit {rc}: {'ok' if rc == 2 else 'FAILED'}")
    failed |= rc != 2

    print("self-test: " + ("FAILED" if failed else "passed"))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mpk-tokenize", help="path of the mpk-tokenize binary")
    ap.add_argument("--tokenizer", help="tokenizer.json to check")
    ap.add_argument("--n", type=int, default=10000, help="corpus size (default 10000)")
    ap.add_argument("--seed", type=int, default=1, help="corpus seed (default 1)")
    ap.add_argument("--add-special-tokens", action="store_true")
    ap.add_argument("--timeout", type=float, default=900, help="seconds for the CLI run")
    ap.add_argument("--self-test", action="store_true",
                    help="check against a stand-in CLI built on tokenizers (no mpk binary)")
    ap.add_argument("--stand-in", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--fault", choices=["inject", "short"], help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.stand_in:
        if not args.tokenizer:
            ap.error("--tokenizer is required")
        return stand_in(args.tokenizer, args.add_special_tokens, args.fault)
    if args.n < 0:
        ap.error("--n must be >= 0")
    if args.self_test:
        return self_test(args)
    if not args.mpk_tokenize or not args.tokenizer:
        ap.error("--mpk-tokenize and --tokenizer are required (or use --self-test)")
    if not os.path.isfile(args.tokenizer):
        ap.error(f"no such file: {args.tokenizer}")
    if not os.access(args.mpk_tokenize, os.X_OK):
        ap.error(f"not an executable: {args.mpk_tokenize}")
    rc, _ = check([args.mpk_tokenize], args.tokenizer, args.n, args.seed,
                  args.add_special_tokens, args.timeout)
    return rc


if __name__ == "__main__":
    sys.exit(main())
