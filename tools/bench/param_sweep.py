#!/usr/bin/env python3
"""Multi-step decode latency of mpk for several megakernel parameter settings ($MPK_MK_PARAMS)
on a saved model, each run the same way (one launch for all steps, device step times), and
the tokens of every setting compared with the first's. A tuning aid: the decode benchmark
(decode_bench.py) is the measurement of record.

  param_sweep.py --model-dir DIR --params "" "rows_per_warp=1,loads_in_flight=8" --out x.json
  param_sweep.py --self-test     (against a stand-in mpk-run, no GPU)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402


STAND_IN = """#!/usr/bin/env python3
import json, os, sys
p = os.environ.get("MPK_MK_PARAMS", "")
if "fail" in p:
    sys.exit("mpk-run: stand-in failure")
n = int(sys.argv[sys.argv.index("--max-new-tokens") + 1])
spl = int(sys.argv[sys.argv.index("--steps-per-launch") + 1])
toks = [7] * n if "differ" not in p else [8] * n
lat = {"p50": 1.0 + len(p) / 100, "p95": 1.1, "p99": 1.2}
out = {"latency_ms": lat, "tokens": toks, "backend": "gpu", "steps_per_launch": spl}
if "nosteps" not in p:
    out["device_step_ms"] = lat
print(json.dumps(out))
"""


def self_test():
    """The sweep's bookkeeping against a stand-in mpk-run (no GPU): latencies recorded per
    setting, a setting whose tokens differ from the first's or that fails makes the exit code 1."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        fake = os.path.join(d, "mpk-run")
        with open(fake, "w") as f:
            f.write(STAND_IN)
        os.chmod(fake, 0o755)
        out = os.path.join(d, "sweep.json")
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write('{"vocab_size": 1000}')
        base = [sys.argv[0], "--model-dir", d, "--mpk-run", fake, "--steps", "5", "--out", out]
        sys.argv = base + ["--params", "", "rows_per_warp=1"]
        assert main() == 0
        rows = bc.read_json_file(out)[0]["rows"]
        assert [r["params"] for r in rows] == ["", "rows_per_warp=1"], rows
        assert rows[0]["latency_ms"]["p50"] == 1.0 and rows[1]["latency_ms"]["p50"] > 1.0, rows
        assert all(r["tokens_match_first"] for r in rows), rows
        sys.argv = base + ["--params", "", "differ"]
        assert main() == 1
        assert not bc.read_json_file(out)[0]["rows"][1]["tokens_match_first"]
        sys.argv = base + ["--params", "fail", ""]
        assert main() == 1
        rows = bc.read_json_file(out)[0]["rows"]
        assert "error" in rows[0] and rows[1]["tokens_match_first"], rows
        # An mpk-run without device step times would give per-launch figures as per-token ones.
        sys.argv = base + ["--params", "", "nosteps"]
        assert main() == 1
        assert "device step times" in bc.read_json_file(out)[0]["rows"][1]["error"]
    print("self-test passed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--params", nargs="+", required=True,
                    help="MPK_MK_PARAMS values, one run each ('' = the defaults)")
    ap.add_argument("--mpk-run", default=bc.DEFAULT_MPK_RUN)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--prompt-len", type=int, default=39)
    ap.add_argument("--vocab", type=int, help="default: the model's config.json vocab_size")
    ap.add_argument("--kv-capacity", type=int, default=512)
    ap.add_argument("--extra-env", nargs="*", default=[], help="NAME=VALUE for every run")
    ap.add_argument("--out")
    args = ap.parse_args()

    vocab = args.vocab
    if not vocab:
        cfg, why = bc.read_json_file(os.path.join(args.model_dir, "config.json"))
        if not isinstance(cfg, dict) or "vocab_size" not in cfg:
            ap.error(f"--vocab not given and no vocab_size in the model's config.json ({why})")
        vocab = cfg["vocab_size"]
    prompt = bc.prompt_ids(args.prompt_len, vocab)
    base_env = bc.mpk_env(args.mpk_run)
    for kv in args.extra_env:
        name, _, value = kv.partition("=")
        base_env[name] = value
    cmd = bc.mpk_command(args.mpk_run, args.model_dir, prompt, args.steps, "gpu",
                         kv_capacity=args.kv_capacity, steps_per_launch=args.steps)
    rows, first_tokens, failed = [], None, False
    for params in args.params:
        res, rec = bc.run_mpk(cmd, 600, env=dict(base_env, MPK_MK_PARAMS=params))
        row = {"params": params, "extra_env": args.extra_env, "run": rec}
        problems = [] if res is None else bc.mpk_run_mismatch(res, args.steps, args.steps)
        if res is not None and not res.get("device_step_ms"):  # latency_ms would be per launch
            problems.append("mpk-run reported no device step times: no per-token latency")
        if res is None or not (res.get("latency_ms") or {}).get("p50") or problems:
            row["error"] = "; ".join(problems) or rec.get("error", "no latency_ms")
            failed = True
            bc.log(f"{params or '(defaults)'}: FAILED: {row['error']}")
        else:
            row["latency_ms"] = res["latency_ms"]
            tokens = res.get("tokens", [])
            if first_tokens is None:
                first_tokens = tokens
            row["tokens_match_first"] = tokens == first_tokens
            failed |= not row["tokens_match_first"]
            lat = res["latency_ms"]
            bc.log(f"{params or '(defaults)'}: p50 {lat['p50']:.3f} p95 {lat['p95']:.3f} "
                   f"p99 {lat['p99']:.3f} ms/token; tokens "
                   f"{'match' if row['tokens_match_first'] else 'DIFFER from'} the first setting")
        rows.append(row)
    if args.out:
        bc.write_json(args.out, {"model_dir": args.model_dir, "steps": args.steps, "rows": rows,
                                 "gpu": bc.nvidia_smi()})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
