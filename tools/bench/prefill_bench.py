#!/usr/bin/env python3
"""Time to first token of mpk's tensor-core prefill against transformers eager and torch.compile.

One process, one GPU, one random-weight Qwen3 of a named shape (built in bf16 on the GPU, saved
with save_pretrained); batch 1, prompts of --lengths tokens (default 39, 1024, 4096;
bench_common.prompt_ids), each prefilled and its first token taken (the argmax of the last
position's logits):

  mpk            build/bin/prefill_bench: one model load, per prompt --warmup untimed and --repeat
                 timed prefills on one session; ttft_ms is its host steady_clock around the whole
                 prefill call (every chunk, the device argmax, the token readback); it also reports
                 the chunks' device time and writes the last position's logits (raw fp32)
  hf eager       transformers bf16, sdpa attention: model(ids, use_cache=True, logits_to_keep=1)
                 + argmax under no_grad, a fresh DynamicCache each run; CUDA events around each of
                 --repeat runs after --warmup untimed ones
  torch.compile  torch.compile(the same prefill + argmax, dynamic=False), default mode, compiled
                 afresh per length (seconds recorded); --compile-warmup + --compile-repeat runs

The truth: the same weights upcast to fp32 after the bf16 phases (no TF32), eager. Per length,
relative L2 (float64) and top-1 agreement against it of mpk's logits and of transformers bf16's;
the criterion (mpk at least as close to fp32 as transformers bf16) is printed, not asserted.
TFLOP/s of every row: one FLOP count (prefill_bench.cc's prefill_flops) over the row's p50, and
its fraction of --peak-tflops. --out writes JSON, rewritten after every phase; --skip leaves
phases out (mpk, eager, compile, fp32); --deadline EPOCH skips a phase that would not fit.
--self-test checks the mpk side, the FLOP count, the accuracy measures and the report against a
stand-in prefill_bench, without torch, numpy or a GPU.
Usage:
  python3 tools/bench/prefill_bench.py --shape qwen3-8b --out prefill.json
  python3 tools/bench/prefill_bench.py --self-test
"""

import argparse
import array
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402

# Rough seconds a phase needs (for --deadline): mpk for all lengths, the others per length (a
# torch.compile per length compiles afresh).
PHASE_ESTIMATE_S = {
    "qwen3-0.6b": {"mpk": 60, "eager": 8, "compile": 50, "fp32": 20},
    "qwen3-8b": {"mpk": 120, "eager": 12, "compile": 80, "fp32": 40},
    "tiny": {"mpk": 10, "eager": 2, "compile": 40, "fp32": 5},
}
PHASES = ["mpk", "eager", "compile", "fp32"]
ROWS = [("mpk", "mpk"), ("hf_eager", "hf eager (sdpa)"), ("torch_compile", "torch.compile")]
SOURCES = ("mpk", "hf_eager", "torch_compile", "fp32")  # logits kept per length


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=sorted(bc.SHAPES), default="qwen3-0.6b")
    ap.add_argument("--lengths", type=int, nargs="+", default=[39, 1024, 4096], help="prompt lengths")
    ap.add_argument("--repeat", type=int, default=10, help="timed prefills per length (mpk, eager)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed prefills per length first (mpk, eager)")
    ap.add_argument("--compile-repeat", type=int, default=5, help="timed torch.compile runs per length")
    ap.add_argument("--compile-warmup", type=int, default=2, help="untimed runs after the compiling one")
    ap.add_argument("--steps-max-tokens", type=int, default=1024,
                    help="prefill_bench: prompts up to this long also go once through the decode step")
    ap.add_argument("--peak-tflops", type=float, default=989.4, help="dense bf16 peak (H100/H200 SXM)")
    ap.add_argument("--prefill-bench", default=os.path.join(bc.REPO_ROOT, "build", "bin", "prefill_bench"))
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--device", default="cuda", help="torch device (cpu: testing only, with --skip mpk)")
    ap.add_argument("--seed", type=int, default=1234, help="weight seed")
    ap.add_argument("--model-dir", help="save the model here (default: a temporary folder, removed)")
    ap.add_argument("--deadline", type=float, help="absolute time (seconds since the epoch) after which "
                                                   "no phase starts")
    ap.add_argument("--skip", nargs="*", default=[], choices=PHASES, help="phases to leave out")
    ap.add_argument("--self-test", action="store_true", help="check the mpk side against a stand-in")
    args = ap.parse_args(argv)
    if min(args.lengths) < 1 or min(args.repeat, args.compile_repeat) < 1:
        ap.error("--lengths and the repeats must be positive")
    args.lengths = list(dict.fromkeys(args.lengths))  # one prompt per length
    return args


# ----------------------------------------------------------------------------- pure helpers
# No torch or numpy here: --self-test runs them anywhere.

def prefill_flops(c, n):
    """Multiply-adds x2 of one prefill of n tokens, as prefill_bench.cc's prefill_flops counts
    them: every projection for every token (the LM head for the last one only) and causal
    attention (QK^T and PV over keys [0, t] for row t). c: a bench_common.SHAPES entry."""
    h, layers = float(c["hidden_size"]), c["num_hidden_layers"]
    q = float(c["num_attention_heads"]) * c["head_dim"]
    kv = float(c["num_key_value_heads"]) * c["head_dim"]
    per_token = h * (q + 2 * kv) + q * h + 3 * h * c["intermediate_size"]
    attn = 2.0 * c["num_attention_heads"] * c["head_dim"] * n * (n + 1) / 2  # 2 matmuls
    return 2 * (per_token * n * layers + attn * layers + h * c["vocab_size"])


def read_f32(path, count):
    """prefill_bench's logits file (raw little-endian float32) as an array('f') of count values."""
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    if sys.byteorder != "little":
        a.byteswap()
    if len(a) != count:
        raise ValueError(f"{path} holds {len(a)} floats, not {count}")
    return a


def argmax(v):
    return max(range(len(v)), key=v.__getitem__)  # the first maximum, as torch and C++ take it


def accuracy(a, ref):
    """Relative L2 ||a - ref|| / ||ref|| (float64 sums) and top-1 agreement of two logits rows."""
    if len(a) != len(ref):
        raise ValueError(f"{len(a)} logits against {len(ref)}")
    num = den = 0.0
    for x, y in zip(a, ref):
        num += (x - y) * (x - y)
        den += y * y
    tok, ref_tok = argmax(a), argmax(ref)
    return {"rel_l2": math.sqrt(num / den) if den else float("inf"), "top1_agree": tok == ref_tok,
            "token": tok, "ref_token": ref_tok}


# ----------------------------------------------------------------------------- mpk phase

def run_prefill_bench(cmd, timeout_s, env):
    """Runs prefill_bench (a line per prompt on stdout; the results go to its --out file): the
    record of the run, with "error" when it failed."""
    rec = {"command": " ".join(cmd)}
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=max(1.0, timeout_s), env=env)
    except subprocess.TimeoutExpired:
        rec["error"] = f"prefill_bench timed out after {timeout_s:.0f} s"
        return rec
    except OSError as e:
        rec["error"] = f"prefill_bench could not start: {e}"
        return rec
    rec.update(wall_s=round(time.time() - t0, 3), exit_code=p.returncode,
               stdout_tail=p.stdout[-2000:], stderr_tail=p.stderr[-2000:])
    if p.returncode != 0:
        rec["error"] = f"prefill_bench exited {p.returncode}: {p.stderr.strip()[-1500:]}"
    return rec


def phase_mpk(args, result, model_dir, vocab, deadline, logits):
    """Every length in one prefill_bench run: its JSON goes into result["mpk"] whole, the TTFT
    summaries into result["ttft"]["mpk"], the logits into logits["mpk"] (kept out of the JSON)."""
    tmp = tempfile.mkdtemp(prefix="mpk-prefill-")
    try:
        prompts, out = os.path.join(tmp, "prompts.json"), os.path.join(tmp, "result.json")
        with open(prompts, "w") as f:
            json.dump({str(n): bc.prompt_ids(n, vocab) for n in args.lengths}, f)
        cmd = [args.prefill_bench, "--model", model_dir, "--prompts", prompts, "--repeat", str(args.repeat),
               "--warmup", str(args.warmup), "--steps-max-tokens", str(args.steps_max_tokens),
               "--logits-dir", tmp, "--out", out]
        rec = result["mpk_run"] = run_prefill_bench(cmd, min(max(deadline.left() - 10, 30), 480),
                                                    bc.mpk_env(args.prefill_bench))
        res = None
        if "error" not in rec:
            res, why = bc.read_json_file(out)
            rec["error"] = why  # None when it was read
        if res is None:
            result["errors"].append(f"mpk: {rec['error']}")
            bc.log(f"  mpk FAILED: {rec['error']}")
            return False
        del rec["error"]
        result["mpk"] = res
        for n in args.lengths:
            e = (res.get("prompts") or {}).get(str(n)) or {}
            try:
                if e.get("tokens") != n or not (e.get("ttft_ms") or {}).get("p50"):
                    raise ValueError(f"prefill_bench reported no timing of {n} tokens")
                logits["mpk"][n] = read_f32(e["logits"], vocab)
            except (OSError, ValueError, KeyError) as err:
                result["errors"].append(f"mpk {n}: {type(err).__name__}: {err}")
                continue
            result["ttft"]["mpk"][str(n)] = e["ttft_ms"]
            bc.log(f"  mpk {n} tokens: p50 {e['ttft_ms']['p50']:.3f} ms ({e.get('chunks')} chunk(s))")
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------- peers (torch)

def prefill_step(model):
    """One prefill + first token: (token, the last position's logits). use_cache=True makes and
    fills a fresh DynamicCache per call (writing the KV cache is part of a prefill)."""
    def step(ids):
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        last = out.logits[:, -1]
        return last.argmax(-1), last
    return step


def time_runs(fn, warmup, repeat, device):
    """warmup untimed calls, then repeat timed ones (CUDA events around each; the host clock on a
    CPU device): (ms per run, the last run's result)."""
    for _ in range(warmup):
        fn()
    timer = bc.StepTimer(repeat, device)
    for i in range(repeat):
        timer.start(i)
        out = fn()
        timer.stop(i)
    return timer.ms(), out


def phase_peer(name, model, args, result, vocab, logits, deadline, est_s):
    """hf_eager: the bf16 model as it is; torch_compile: torch.compile(dynamic=False) of the same
    step, afresh per length (torch._dynamo.reset() after each: no recompile limit applies, the
    compile time of each length is its own). A failure is recorded and ends the phase: the other
    lengths would most likely fail alike."""
    import torch
    compiled = name == "torch_compile"
    warmup, repeat = (args.compile_warmup, args.compile_repeat) if compiled else (args.warmup, args.repeat)
    for n in args.lengths:
        if not deadline.allows(est_s):
            result["skipped"].append(f"{name} {n}: {deadline.left():.0f} s left")
            continue
        ids = torch.tensor([bc.prompt_ids(n, vocab)], device=args.device)
        step = prefill_step(model)
        try:
            with torch.no_grad():
                if compiled:
                    step = torch.compile(step, dynamic=False)
                    t0 = time.perf_counter()
                    step(ids)
                    if args.device.startswith("cuda"):
                        torch.cuda.synchronize()
                    result["compile_s"][str(n)] = round(time.perf_counter() - t0, 1)
                ms, (_, last) = time_runs(lambda: step(ids), warmup, repeat, args.device)
            result["ttft"][name][str(n)] = bc.summarize(ms)
            logits[name][n] = array.array("f", last[0].float().cpu().tolist())  # bf16 -> fp32: exact
            bc.log(f"  {name} {n} tokens: p50 {bc.percentile(ms, 50):.3f} ms"
                   + (f" (compiled in {result['compile_s'][str(n)]} s)" if compiled else ""))
        except Exception as e:  # noqa: BLE001 - record it and go on with the next phase
            result["errors"].append(f"{name} {n}: {type(e).__name__}: {str(e)[:1500]}")
            bc.log(f"  {name} {n} FAILED: {type(e).__name__}: {str(e)[:300]}")
            return
        finally:
            step = None
            if compiled:
                torch._dynamo.reset()
            bc.free_gpu()


def phase_fp32(model, args, vocab, logits):
    """The truth: the same weights upcast in place (exact), fp32 matmuls without TF32."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model.float()
    step = prefill_step(model)
    for n in args.lengths:
        with torch.no_grad():
            _, last = step(torch.tensor([bc.prompt_ids(n, vocab)], device=args.device))
        logits["fp32"][n] = array.array("f", last[0].cpu().tolist())
    bc.log(f"  fp32 logits of {len(args.lengths)} prompt(s)")


# ----------------------------------------------------------------------------- derived figures

def derive(result, args, logits):
    """TFLOP/s, mpk's speed-ups and the accuracy against fp32, per length."""
    ttft, tfl = result["ttft"], result["tflops_p50"]
    for n in args.lengths:
        k = str(n)
        flops = result["flops"][k] = prefill_flops(bc.SHAPES[args.shape], n)
        for row, _ in ROWS:
            if k in ttft[row]:
                tf = flops / (ttft[row][k]["p50"] * 1e-3) / 1e12
                tfl[row][k] = {"tflops": tf, "of_peak": tf / args.peak_tflops}
        # prefill_bench's own figure: the same count over the same p50, or the two counts differ.
        own = (((result.get("mpk") or {}).get("prompts") or {}).get(k) or {}).get("tflops_at_p50")
        if own is not None and k in tfl["mpk"] and abs(own / tfl["mpk"][k]["tflops"] - 1) > 1e-6:
            result["errors"].append(f"mpk {n}: prefill_bench reports {own:.3f} TFLOP/s, this script's "
                                    f"FLOP count gives {tfl['mpk'][k]['tflops']:.3f}")
        if k in ttft["mpk"]:
            result["speedup_p50"][k] = {p: ttft[p][k]["p50"] / ttft["mpk"][k]["p50"]
                                        for p, _ in ROWS[1:] if k in ttft[p]}
        if n in logits["fp32"]:
            acc = result["accuracy"][k] = {s: accuracy(logits[s][n], logits["fp32"][n])
                                           for s in SOURCES[:3] if n in logits[s]}
            if "mpk" in acc and "hf_eager" in acc:
                result["criterion"][k] = {"mpk_rel_l2": acc["mpk"]["rel_l2"],
                                          "hf_eager_rel_l2": acc["hf_eager"]["rel_l2"],
                                          "holds": acc["mpk"]["rel_l2"] <= acc["hf_eager"]["rel_l2"]}


# ----------------------------------------------------------------------------- report

def fmt(x, spec, suffix=""):
    return "n/a" if x is None else format(x, spec) + suffix


def table(result, k):
    """(label, p50, p95, p99, TFLOP/s, fraction of the peak, mpk's speed-up over the row) per row
    of one length; the speed-up is the row's p50 / mpk's p50."""
    rows = []
    for row, label in ROWS:
        t, tf = result["ttft"][row].get(k) or {}, result["tflops_p50"][row].get(k) or {}
        rows.append((label, t.get("p50"), t.get("p95"), t.get("p99"), tf.get("tflops"), tf.get("of_peak"),
                     (result["speedup_p50"].get(k) or {}).get(row)))
    return rows


def print_report(result):
    c = result["conditions"]
    gpu, v = c.get("gpu", {}), c.get("versions", {})
    bc.log(f"\n== prefill_bench {result['shape']} ==")
    bc.log(f"GPU {gpu.get('name')} (driver {gpu.get('driver_version')}), {c.get('device', {}).get('sm_count')} "
           f"SMs; clocks at start: SM {gpu.get('clocks.sm')} / mem {gpu.get('clocks.mem')} (max "
           f"{gpu.get('clocks.max.sm')} / {gpu.get('clocks.max.mem')}), power limit {gpu.get('power.limit')}")
    after = c.get("clocks_after") or {}
    if after:
        bc.log("clocks right after each timed phase: " + "; ".join(
            f"{k}: SM {a.get('clocks.sm')} mem {a.get('clocks.mem')} {a.get('temperature.gpu')}C"
            for k, a in after.items()))
    bc.log(f"torch {v.get('torch')} (CUDA {v.get('cuda_runtime')}), transformers {v.get('transformers')}, "
           f"triton {v.get('triton')}, python {v.get('python')}")
    bc.log(f"batch 1, bf16 weights, prompts of {c['lengths']} tokens; mpk, hf eager: {c['warmup']} warm-up + "
           f"{c['repeat']} timed runs; torch.compile: {c['compile_warmup']} + {c['compile_repeat']} after the "
           f"compiling run; peak {c['peak_tflops']} TFLOP/s (dense bf16)")
    for n in c["lengths"]:
        k = str(n)
        e = ((result.get("mpk") or {}).get("prompts") or {}).get(k) or {}
        bc.log(f"-- prompt {n} tokens ({fmt(result['flops'].get(k), '.4g')} FLOP per prefill) --")
        bc.log(f"{'':<18}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'TFLOP/s':>9}{'of peak':>9}{'mpk faster':>12}")
        for label, p50, p95, p99, tf, frac, vs in table(result, k):
            pct = None if frac is None else 100 * frac
            bc.log(f"{label:<18}{fmt(p50, '.3f'):>10}{fmt(p95, '.3f'):>10}{fmt(p99, '.3f'):>10}"
                   f"{fmt(tf, '.1f'):>9}{fmt(pct, '.1f', '%'):>9}{fmt(vs, '.2f', 'x') if vs else '':>12}")
        if e:
            dev = (e.get("device_ms") or {}).get("p50")
            bc.log(f"mpk: {e.get('chunks')} chunk(s), device p50 {fmt(dev, '.3f')} ms, first token "
                   f"{e.get('first_token')}" + (
                       f"; decode-step prefill {fmt(e.get('decode_step_prefill_ms'), '.1f')} ms, rel L2 to it "
                       f"{fmt(e.get('rel_l2_vs_decode_step'), '.2e')}" if "rel_l2_vs_decode_step" in e else ""))
        if k in result["compile_s"]:
            bc.log(f"torch.compile: compiled in {result['compile_s'][k]} s")
        if result["accuracy"].get(k):
            bc.log("vs fp32: " + "; ".join(
                f"{dict(ROWS)[s]} rel L2 {a['rel_l2']:.3e}, top-1 {'agrees' if a['top1_agree'] else 'differs'} "
                f"({a['token']} vs {a['ref_token']})" for s, a in result["accuracy"][k].items()))
        crit = result["criterion"].get(k)
        if crit:
            bc.log(f"criterion (mpk at least as close to fp32 as hf bf16): "
                   f"{'holds' if crit['holds'] else 'DOES NOT HOLD'} ({crit['mpk_rel_l2']:.3e} vs "
                   f"{crit['hf_eager_rel_l2']:.3e})")
    for e in result["errors"]:
        bc.log(f"ERROR: {e}")
    for s in result["skipped"]:
        bc.log(f"skipped: {s}")
    bc.log("(mpk: prefill_bench's host steady_clock around the whole prefill call, incl. the device argmax "
           "and the token readback; peers: CUDA events around forward + argmax; mpk faster: the row's p50 / "
           "mpk's p50)")


# ----------------------------------------------------------------------------- main

def new_result(args):
    """The result object before anything is measured: the conditions known from the arguments."""
    return {"script": "prefill_bench.py", "shape": args.shape, "errors": [], "skipped": [],
            "ttft": {row: {} for row, _ in ROWS}, "tflops_p50": {row: {} for row, _ in ROWS}, "flops": {},
            "speedup_p50": {}, "compile_s": {}, "accuracy": {}, "criterion": {},
            "conditions": {"clocks_after": {}, "shape_config": bc.SHAPES[args.shape], "batch": 1, "dtype": "bf16",
                           "attn_implementation": "sdpa", "torch_compile": "default mode, dynamic=False",
                           "lengths": args.lengths, "repeat": args.repeat, "warmup": args.warmup,
                           "compile_repeat": args.compile_repeat, "compile_warmup": args.compile_warmup,
                           "steps_max_tokens": args.steps_max_tokens, "peak_tflops": args.peak_tflops,
                           "prompts": "bench_common.prompt_ids(n, vocab)",
                           "weight_init": f"N(0, {bc.WEIGHT_STD}) matrices, 1 + N(0, {bc.NORM_STD}) norms, "
                                          f"seed {args.seed}"}}


def main(argv=None):
    args = parse_args(argv)
    if args.self_test:
        return self_test()
    deadline = bc.Deadline(args.deadline)
    est = PHASE_ESTIMATE_S.get(args.shape, PHASE_ESTIMATE_S["qwen3-8b"])
    t_start = time.time()
    result, logits = new_result(args), {s: {} for s in SOURCES}
    cond = result["conditions"]
    cond["gpu"] = bc.nvidia_smi() if args.device.startswith("cuda") else {}
    import torch
    bc.quiet_transformers()
    import warnings
    warnings.filterwarnings("ignore")
    cond.update(versions=bc.versions(), device=bc.device_props(args.device))

    def save(phase=None):
        """Rewrites --out; after a timed phase, with the GPU's clocks and temperature right then."""
        if phase and cond["gpu"]:
            cond["clocks_after"][phase] = {k: v for k, v in bc.nvidia_smi().items()
                                           if k in ("clocks.sm", "clocks.mem", "temperature.gpu", "power.draw")}
        result["wall_s"] = round(time.time() - t_start, 1)
        bc.write_json(args.out, result)

    def wanted(phase):
        if phase in args.skip:
            return False
        if deadline.allows(est[phase]):
            return True
        result["skipped"].append(f"{phase}: {deadline.left():.0f} s left")
        return False

    bc.log(f"prefill_bench: {args.shape} on {cond['device'].get('device')}, torch {torch.__version__}, "
           f"transformers {cond['versions']['transformers']}, lengths {args.lengths}")
    model_dir, keep_dir = None, bool(args.model_dir)
    try:
        model, cfg = bc.build_model(args.shape, args.device, args.seed, attn_implementation="sdpa")
        vocab = cfg.vocab_size
        result["attn_implementation"] = getattr(cfg, "_attn_implementation", None)
        # 1. mpk on the saved weights (nothing else reads them: removed right after).
        if wanted("mpk"):
            _, pbytes = bc.weight_bytes(model, cfg)
            model_dir = args.model_dir or bc.model_tempdir(pbytes)
            t0 = time.time()
            bc.save_model(model, model_dir)
            result["model_save_s"] = round(time.time() - t0, 1)
            bc.log(f"  model {pbytes / 1e9:.3f} GB saved in {result['model_save_s']} s")
            bc.free_gpu()
            phase_mpk(args, result, model_dir, vocab, deadline, logits)
            if not keep_dir:
                shutil.rmtree(model_dir, ignore_errors=True)
            save("mpk")
        # 2. transformers eager, then 3. torch.compile (compiling leaves inductor's worker
        # processes behind), both bf16; then 4. the fp32 truth (the compiled code is gone by then).
        # A length of torch.compile starts only with time left for the fp32 phase after it too:
        # without the truth there is no accuracy figure.
        reserve = {"eager": 0, "compile": 0 if "fp32" in args.skip else est["fp32"]}
        for phase, name in (("eager", "hf_eager"), ("compile", "torch_compile")):
            if phase not in args.skip:
                phase_peer(name, model, args, result, vocab, logits, deadline, est[phase] + reserve[phase])
                save(name)
        if wanted("fp32"):
            try:
                phase_fp32(model, args, vocab, logits)
            except Exception as e:  # noqa: BLE001
                result["errors"].append(f"fp32: {type(e).__name__}: {str(e)[:1500]}")
                bc.log(f"  fp32 FAILED: {e}")
        del model
        bc.free_gpu()
    except Exception as e:  # noqa: BLE001 - keep what was measured
        result["errors"].append(f"{type(e).__name__}: {e}")
        result["traceback"] = traceback.format_exc()[-4000:]
        bc.log(traceback.format_exc())
    finally:
        derive(result, args, logits)
        save()
        if model_dir and not keep_dir:
            shutil.rmtree(model_dir, ignore_errors=True)
    print_report(result)
    return 1 if (result["errors"] or ("mpk" not in args.skip and not result["ttft"]["mpk"])) else 0


# ----------------------------------------------------------------------------- self-test

# A stand-in prefill_bench: the real one's JSON and logits files, from --prompts and the model's
# config.json (its FLOP count written out independently); FAIL: it exits 1 as the real one does.
FAKE_PREFILL_BENCH = r'''
import argparse, json, math, os, struct, sys
ap = argparse.ArgumentParser()
for a in ("--model", "--prompts", "--out", "--logits-dir", "--repeat", "--warmup", "--steps-max-tokens"):
    ap.add_argument(a, required=True, type=int if a in ("--repeat", "--warmup", "--steps-max-tokens") else str)
a = ap.parse_args()
if __FAIL__:
    sys.exit("prefill_bench: no tensor-core prefill: stand-in failure")
c = json.load(open(os.path.join(a.model, "config.json")))
V, h, L, H, hd = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["head_dim"]
res = {"model": a.model, "load_ms": 12.5, "repeat": a.repeat, "warmup": a.warmup, "prompts": {}}
for name, ids in json.load(open(a.prompts)).items():
    n, row, p50 = len(ids), [math.sin(0.37 * i + len(ids)) for i in range(V)], 0.01 * len(ids) + 1.0
    assert all(0 <= t < V for t in ids), "token id outside the vocabulary"
    with open(os.path.join(a.logits_dir, name + ".f32"), "wb") as f:
        f.write(struct.pack("<%df" % V, *row))
    flops = (2 * n * L * (2 * h * H * hd + 2 * h * c["num_key_value_heads"] * hd + 3 * h * c["intermediate_size"])
             + 2 * L * H * hd * n * (n + 1) + 2 * h * V)
    ms = {"p50": p50, "p95": 1.1 * p50, "p99": 1.2 * p50, "min": 0.9 * p50, "n": a.repeat}
    e = res["prompts"][name] = {
        "tokens": n, "chunks": -(-n // 4096), "ttft_ms": ms, "device_ms": dict(ms, p50=0.8 * p50),
        "tflops_at_p50": flops / (p50 * 1e-3) / 1e12, "first_token": max(range(V), key=row.__getitem__),
        "logits": os.path.join(a.logits_dir, name + ".f32")}
    if n <= a.steps_max_tokens:
        e.update(decode_step_prefill_ms=5.0 * n, rel_l2_vs_decode_step=3e-4)
    print("%s %d tokens: TTFT p50 %.3f ms" % (name, n, p50))
json.dump(res, open(a.out, "w"))
'''


def self_test():
    """The FLOP count, the accuracy measures, the mpk phase, derive() and the report, against a
    working and a failing stand-in prefill_bench; no torch, numpy or GPU. 0 when all checks hold."""
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            bc.log(f"  self-test FAILED: {what}")

    # tiny (h 64, 4 heads of 32, 2 KV heads, intermediate 160, 2 layers, vocab 1031), 39 tokens: per
    # token 64*(128+2*64) + 128*64 + 3*64*160 = 55296; attention 2*4*32*39*40/2 = 199680;
    # 2*(55296*39*2 + 199680*2 + 64*1031) = 9556864.
    check(prefill_flops(bc.SHAPES["tiny"], 39) == 9556864, "FLOP count of tiny at 39 tokens")
    a = accuracy([1.0, 2.0, 3.0], [1.0, 0.0, 2.0])  # difference (0, 2, 1): sqrt(5) / sqrt(5)
    check(a["rel_l2"] == 1.0 and a["top1_agree"] and a["token"] == 2, "accuracy: rel L2 1, same top-1")
    a = accuracy([2.0, 1.0, 0.0], [1.0, 2.0, 0.0])
    check(abs(a["rel_l2"] - math.sqrt(2 / 5)) < 1e-15 and not a["top1_agree"], "accuracy: top-1 differs")
    check(argmax([0.5, 3.0, 3.0]) == 1, "argmax takes the first maximum")
    tmp = tempfile.mkdtemp(prefix="prefill-bench-selftest-")
    try:
        with open(os.path.join(tmp, "x.f32"), "wb") as f:
            f.write(struct.pack("<3f", 1.5, -2.0, 0.25))
        check(list(read_f32(os.path.join(tmp, "x.f32"), 3)) == [1.5, -2.0, 0.25], "raw float32 file read")
        vocab = bc.SHAPES["tiny"]["vocab_size"]
        bc.write_json(os.path.join(tmp, "model", "config.json"), bc.SHAPES["tiny"])
        for fail in (False, True):
            fake = os.path.join(tmp, str(fail), "bin", "prefill_bench")
            os.makedirs(os.path.dirname(fake))
            with open(fake, "w") as f:
                f.write(f"#!{sys.executable}\n" + FAKE_PREFILL_BENCH.replace("__FAIL__", str(fail)))
            os.chmod(fake, 0o755)
            args = parse_args(["--shape", "tiny", "--prefill-bench", fake, "--lengths", "39", "100", "300", "39",
                               "--steps-max-tokens", "100", "--repeat", "7"])
            bc.log(f"self-test: {'a failing' if fail else 'a working'} prefill_bench")
            result, logits = new_result(args), {s: {} for s in SOURCES}
            ok = phase_mpk(args, result, os.path.join(tmp, "model"), vocab, bc.Deadline(None), logits)
            if not fail:  # made-up peers and truth: fp32 = mpk's logits scaled by 1.01; hf eager
                # twice as far from it at 39 and 100 tokens, half as far at 300 (the criterion fails)
                for n in logits["mpk"]:
                    logits["fp32"][n] = [1.01 * x for x in logits["mpk"][n]]
                    far = 1.01 + (0.005 if n == 300 else 0.02)
                    logits["hf_eager"][n] = [far * x for x in logits["mpk"][n]]
                    p = result["ttft"]["mpk"][str(n)]["p50"]
                    result["ttft"]["hf_eager"][str(n)] = bc.summarize([3 * p, 3 * p, 3.3 * p])
                result["ttft"]["torch_compile"]["100"] = bc.summarize([3.0] * 5)
            derive(result, args, logits)
            print_report(result)
            bc.write_json(os.path.join(tmp, "result.json"), result)
            if fail:
                check(not ok and "exited 1" in " ".join(result["errors"]) and not result["ttft"]["mpk"]
                      and not result["accuracy"], "a failing prefill_bench: an error, nothing made up")
                continue
            prompts, cmd = result.get("mpk", {}).get("prompts", {}), result["mpk_run"]["command"]
            check(ok and not result["errors"], f"no errors, the FLOP counts agree ({result['errors']})")
            check(args.lengths == [39, 100, 300] and all(f in cmd for f in (
                "--repeat 7", "--warmup 2", "--steps-max-tokens 100", "--logits-dir")), f"command line ({cmd})")
            check("rel_l2_vs_decode_step" in prompts.get("100", {}) and "rel_l2_vs_decode_step" not in
                  prompts.get("300", {}) and result["ttft"]["mpk"].get("300", {}).get("p50") == 4.0,
                  "mpk JSON kept")
            row = logits["mpk"].get(39, [])
            check(len(row) == vocab and argmax(row) == prompts["39"]["first_token"], "logits read, argmax")
            check(result["speedup_p50"]["100"]["torch_compile"] == 1.5 and
                  abs(result["speedup_p50"]["39"]["hf_eager"] - 3.0) < 1e-12, "speed-ups")
            tf = result["tflops_p50"]["hf_eager"]["39"]
            check(abs(tf["tflops"] / (9556864 / 4.17e-3 / 1e12) - 1) < 1e-12 and
                  abs(tf["of_peak"] / (tf["tflops"] / 989.4) - 1) < 1e-12, "peer TFLOP/s")
            acc = result["accuracy"].get("39", {})
            check(abs(acc.get("mpk", {}).get("rel_l2", 0) - 0.01 / 1.01) < 1e-6 and acc["mpk"]["top1_agree"]
                  and abs(acc["hf_eager"]["rel_l2"] - 0.02 / 1.01) < 1e-6, "accuracy against fp32")
            check(result["criterion"]["39"]["holds"] and not result["criterion"]["300"]["holds"], "criterion")
            rows = table(result, "100")
            check([r[0] for r in rows] == [lbl for _, lbl in ROWS] and rows[2][6] == 1.5 and rows[0][6] is None
                  and table(result, "300")[2][1:] == (None,) * 6, "table rows (n/a where not measured)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    bc.log(f"self-test {'passed' if not failures else 'FAILED: ' + '; '.join(failures)}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
