#!/usr/bin/env python3
"""Decode latency of mpk against transformers eager and torch.compile, with the bandwidth bound.

One process, one model, one GPU: a random-weight Qwen3 of a named shape is built in bf16 on the
GPU and saved with save_pretrained; then, batch 1, a fixed 39-token prompt, decode positions
39..338 (300 tokens, greedy, EOS ignored):

  mpk            build/bin/mpk-run --backend gpu --json --ignore-eos --kv-capacity 512 (its own
                 timer: host steady_clock around each one-token decode, incl. the 4-byte readback)
  hf eager       transformers, eager PyTorch, default attention, DynamicCache; CUDA events around
                 each decode step (forward + argmax)
  torch.compile  torch.compile(step, mode="reduce-overhead", fullgraph=True) over
                 StaticCache(max_cache_len=512), cudagraph_mark_step_begin() before each step,
                 the returned token cloned; warmed up first; CUDA events around each step

The bound: weight bytes read per token (every matrix and norm once; a tied embedding once as the
LM head, an untied one only as the row the lookup reads) / the read bandwidth measured here with
read-only streaming kernels over a buffer much larger than L2 (torch.sum and a Triton
read-and-accumulate kernel over bf16; the faster one is the bandwidth).

mpk's first 32 greedy tokens are compared with transformers' (bf16 activations there, fp32 in
mpk: a divergence is reported, not a failure). Prints the conditions and a table; --out writes
JSON (rewritten after every phase, so a run cut short still leaves what it measured).
Usage:
  python3 tools/bench/decode_bench.py --shape qwen3-0.6b --out bench.json
"""

import argparse
import os
import shutil
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402

# Rough seconds a phase needs (for --deadline); a phase that would not fit is skipped.
PHASE_ESTIMATE_S = {
    "qwen3-0.6b": {"mpk": 30, "compile": 75, "eager": 45},
    "qwen3-8b": {"mpk": 45, "compile": 80, "eager": 50},
    "tiny": {"mpk": 5, "compile": 60, "eager": 5},
}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bc.add_common_args(ap)
    ap.add_argument("--steps", type=int, default=300, help="timed decode steps")
    ap.add_argument("--kv-capacity", type=int, default=512, help="mpk KV capacity = StaticCache length")
    ap.add_argument("--warmup-steps", type=int, default=8, help="untimed decode steps before timing")
    ap.add_argument("--compare-tokens", type=int, default=32, help="greedy tokens compared")
    ap.add_argument("--bw-gib", type=float, default=4.0, help="read-bandwidth buffer size (GiB)")
    ap.add_argument("--bw-reps", type=int, default=20)
    ap.add_argument("--skip", nargs="*", default=[], choices=["bw", "mpk", "eager", "compile"],
                    help="phases to leave out")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.prompt_len < 1:
        ap.error("--steps and --prompt-len must be positive")
    if args.prompt_len + args.steps + 1 > args.kv_capacity:
        ap.error(f"--kv-capacity {args.kv_capacity} < prompt + steps + 1")
    return args


# ----------------------------------------------------------------------------- read bandwidth

def _triton_read_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def read_sum(x_ptr, out_ptr, iters, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        nprog = tl.num_programs(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(0, iters):
            blk = (i * nprog + pid).to(tl.int64)
            offs = blk * BLOCK + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + offs, cache_modifier=".cg").to(tl.float32)
        tl.store(out_ptr + pid, tl.sum(acc, axis=0))

    return read_sum


def time_fn(fn, reps, device):
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        st[i].record()
        fn()
        en[i].record()
    torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in zip(st, en))
    return ms[len(ms) // 2], ms


def measure_bandwidth(device, gib, reps, sm_count):
    """Read-only streaming bandwidth (bytes read / median time) by torch.sum and by a Triton
    kernel over one bf16 buffer; plus a device copy (read + write) for reference."""
    import torch
    unit = 8192 * sm_count * 8  # every (block, grid) tried below divides the element count
    n = max(1, int(gib * 2**30 / 2) // unit) * unit
    buf = torch.empty(n, dtype=torch.bfloat16, device=device)
    buf.uniform_(-1.0, 1.0)
    nbytes = buf.numel() * buf.element_size()
    res = {"buffer_bytes": nbytes, "dtype": "bf16", "reps": reps, "methods": {}}
    out = {}

    def torch_sum():
        out["s"] = torch.sum(buf, dtype=torch.float32)

    med, _ = time_fn(torch_sum, reps, device)
    res["methods"]["torch.sum(bf16 -> fp32)"] = {"median_ms": med, "tb_per_s": nbytes / med / 1e9}
    try:
        kern = _triton_read_kernel()
        want = float(torch.sum(buf, dtype=torch.float32))
        tol = 1e-7 * 0.5 * n + 1.0  # |x| averages 0.5; fp32 sums of random signs differ far less
        best = None
        for block in (4096, 8192):
            for mult in (2, 4, 8):
                grid = sm_count * mult
                nblk = n // block
                if nblk % grid:
                    continue
                partial = torch.empty(grid, dtype=torch.float32, device=device)
                iters = nblk // grid

                def tri(block=block, grid=grid, iters=iters, partial=partial):
                    kern[(grid,)](buf, partial, iters, BLOCK=block, num_warps=8)

                med, _ = time_fn(tri, reps, device)
                got = float(partial.double().sum())
                okay = abs(got - want) <= tol
                cand = {"median_ms": med, "tb_per_s": nbytes / med / 1e9, "block": block,
                        "grid": grid, "sum_matches_torch": okay}
                if okay and (best is None or med < best["median_ms"]):
                    best = cand
        if best:
            res["methods"]["triton read-accumulate (.cg loads)"] = best
    except Exception as e:  # noqa: BLE001 - torch.sum alone then
        res["triton_error"] = f"{type(e).__name__}: {e}"[:500]
    half = n // 2
    src, dst = buf[:half], torch.empty(half, dtype=torch.bfloat16, device=device)
    med, _ = time_fn(lambda: dst.copy_(src), reps, device)
    res["copy_read_plus_write_tb_per_s"] = 2 * half * 2 / med / 1e9
    best_name = max(res["methods"], key=lambda k: res["methods"][k]["tb_per_s"])
    res["read_tb_per_s"] = res["methods"][best_name]["tb_per_s"]
    res["method"] = best_name
    del buf, dst, src
    return res


# ----------------------------------------------------------------------------- peers

def hf_eager(model, prompt, steps, warmup, device):
    """transformers eager: prefill, then `steps` timed one-token steps (forward + argmax) with a
    DynamicCache. Returns (per-step ms, greedy tokens t0..t_steps)."""
    import torch
    ids = torch.tensor([prompt], device=device)

    def run(n, timer=None):
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
            past = out.past_key_values
            tok = out.logits[:, -1:].argmax(-1)
            toks = torch.empty(n + 1, dtype=torch.long, device=device)
            toks[0] = tok[0, 0]
            for i in range(n):
                if timer:
                    timer.start(i)
                out = model(input_ids=tok, past_key_values=past, use_cache=True)
                past = out.past_key_values
                tok = out.logits[:, -1:].argmax(-1)
                if timer:
                    timer.stop(i)
                toks[i + 1] = tok[0, 0]
            return toks

    run(warmup)
    timer = bc.StepTimer(steps, device)
    t0 = time.perf_counter()
    toks = run(steps, timer)
    ms = timer.ms()
    wall = time.perf_counter() - t0
    return ms, [int(t) for t in toks.tolist()], wall


def hf_compile(model, cfg, prompt, steps, warmup, device, kv_capacity, fullgraph=True):
    """torch.compile(mode="reduce-overhead") of one decode step over a StaticCache."""
    import torch
    from transformers import StaticCache
    cache = StaticCache(config=cfg, max_cache_len=kv_capacity)
    ids = torch.tensor([prompt], device=device)

    def step(tok):
        out = model(input_ids=tok, past_key_values=cache, use_cache=True)
        return out.logits[:, -1:].argmax(-1)

    cstep = torch.compile(step, mode="reduce-overhead", fullgraph=fullgraph)

    def prefill():
        cache.reset()
        with torch.no_grad():
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1:].argmax(-1)

    def run(n, timer=None):
        tok = prefill()
        toks = torch.empty(n + 1, dtype=torch.long, device=device)
        toks[0] = tok[0, 0]
        with torch.no_grad():
            for i in range(n):
                if timer:
                    timer.start(i)
                torch.compiler.cudagraph_mark_step_begin()
                tok = cstep(tok).clone()
                if timer:
                    timer.stop(i)
                toks[i + 1] = tok[0, 0]
        return toks

    t0 = time.perf_counter()
    run(max(3, warmup))  # compiles, records the CUDA graph, replays
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    timer = bc.StepTimer(steps, device)
    t0 = time.perf_counter()
    toks = run(steps, timer)
    ms = timer.ms()
    wall = time.perf_counter() - t0
    toks = [int(t) for t in toks.tolist()]
    del cstep, cache
    return ms, toks, wall, compile_s


def reset_compiler():
    import torch
    try:
        torch._dynamo.reset()
    except Exception:  # noqa: BLE001
        pass


# ----------------------------------------------------------------------------- report

def fmt_ms(x):
    return "n/a" if x is None else f"{x:.3f}"


def table(result):
    bound = result.get("bound_ms")
    rows = []
    mpk = result["latency"].get("mpk")
    for name in ("mpk", "hf_eager", "torch_compile"):
        lat = result["latency"].get(name)
        if not lat:
            rows.append((name, None, None, None, None, None))
            continue
        ratio = lat["p50"] / bound if bound else None
        speed = (lat["p50"] / mpk["p50"]) if (mpk and name != "mpk") else None
        rows.append((name, lat["p50"], lat["p95"], lat["p99"], ratio, speed))
    return rows


def print_report(result):
    c = result.get("conditions", {})
    gpu = c.get("gpu", {})
    bc.log("")
    bc.log(f"== decode_bench {result['shape']} ==")
    bc.log(f"GPU {gpu.get('name')} (driver {gpu.get('driver_version')}), {c.get('device', {}).get('sm_count')} SMs; "
           f"clocks at start: SM {gpu.get('clocks.sm')} / mem {gpu.get('clocks.mem')} "
           f"(max {gpu.get('clocks.max.sm')} / {gpu.get('clocks.max.mem')}), power limit {gpu.get('power.limit')}")
    after = c.get("clocks_after", {})
    if after:
        bc.log("clocks right after each timed phase: " + "; ".join(
            f"{k}: SM {v.get('clocks.sm')} mem {v.get('clocks.mem')} {v.get('temperature.gpu')}C"
            for k, v in after.items()))
    v = c.get("versions", {})
    bc.log(f"torch {v.get('torch')} (CUDA {v.get('cuda_runtime')}), transformers {v.get('transformers')}, "
           f"triton {v.get('triton')}, python {v.get('python')}")
    bc.log(f"batch 1, bf16 weights, prompt {c.get('prompt_len')} tokens, decode positions "
           f"{c.get('positions')}, {c.get('steps')} timed steps, greedy, EOS ignored, KV capacity "
           f"{c.get('kv_capacity')}")
    bw = result.get("bandwidth") or {}
    if bw.get("read_tb_per_s"):
        bc.log(f"read bandwidth {bw['read_tb_per_s']:.3f} TB/s ({bw['method']}; "
               + ", ".join(f"{k} {m['tb_per_s']:.3f}" for k, m in bw["methods"].items())
               + f"; copy r+w {bw['copy_read_plus_write_tb_per_s']:.3f} TB/s) over {bw['buffer_bytes'] / 2**30:.1f} GiB")
    if result.get("weight_bytes_per_token"):
        bc.log(f"weight bytes read / token {result['weight_bytes_per_token'] / 1e9:.4f} GB "
               f"(parameters {result['parameter_bytes'] / 1e9:.4f} GB); bound "
               f"{fmt_ms(result.get('bound_ms'))} ms")
    bc.log(f"{'':<15}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'p50/bound':>11}{'mpk speed-up':>14}")
    for name, p50, p95, p99, ratio, speed in table(result):
        bc.log(f"{name:<15}{fmt_ms(p50):>9}{fmt_ms(p95):>9}{fmt_ms(p99):>9}"
               f"{('n/a' if ratio is None else f'{ratio:.2f}x'):>11}"
               f"{('' if speed is None else f'{speed:.2f}x'):>14}")
    bc.log(f"{'bound':<15}{fmt_ms(result.get('bound_ms')):>9}")
    for k, t in result.get("tokens_agreement", {}).items():
        txt = "identical" if t["identical"] else f"first divergence at step {t['first_divergence_step']}"
        bc.log(f"greedy tokens {k} (first {t['compared']}): {txt}")
    for e in result.get("errors", []):
        bc.log(f"ERROR: {e}")
    for s in result.get("skipped", []):
        bc.log(f"skipped: {s}")
    bc.log("(mpk: mpk-run's host steady_clock per one-token decode incl. the 4-byte token readback; "
           "peers: CUDA events around each step)")


# ----------------------------------------------------------------------------- main

def main(argv=None):
    args = parse_args(argv)
    deadline = bc.Deadline(args.deadline)
    est = PHASE_ESTIMATE_S.get(args.shape, PHASE_ESTIMATE_S["qwen3-8b"])
    t_start = time.time()
    cuda = args.device.startswith("cuda")
    result = {"script": "decode_bench.py", "shape": args.shape, "latency": {}, "errors": [],
              "skipped": [], "tokens": {}, "tokens_agreement": {}}
    result["conditions"] = {"gpu": bc.nvidia_smi() if cuda else {}, "clocks_after": {}}
    import torch
    import transformers
    bc.quiet_transformers()
    import warnings
    warnings.filterwarnings("ignore")
    cond = result["conditions"]
    cond.update(versions=bc.versions(), device=bc.device_props(args.device),
                shape_config=bc.SHAPES[args.shape], batch=1, dtype="bf16",
                prompt_len=args.prompt_len, steps=args.steps, kv_capacity=args.kv_capacity,
                positions=f"{args.prompt_len}..{args.prompt_len + args.steps - 1}",
                weight_init=f"N(0, {bc.WEIGHT_STD}) matrices, 1 + N(0, {bc.NORM_STD}) norms, seed {args.seed}")

    def clocks(tag):
        if cuda:
            cond["clocks_after"][tag] = {k: v for k, v in bc.nvidia_smi().items()
                                         if k in ("clocks.sm", "clocks.mem", "temperature.gpu", "power.draw")}

    def save():
        result["wall_s"] = round(time.time() - t_start, 1)
        bc.write_json(args.out, result)

    bc.log(f"decode_bench: {args.shape} on {cond['device'].get('device')}, torch {torch.__version__}, "
           f"transformers {transformers.__version__}")
    model_dir, keep_dir = None, bool(args.model_dir)
    try:
        # 1. Read bandwidth.
        if "bw" not in args.skip and cuda:
            try:
                bw = measure_bandwidth(args.device, args.bw_gib, args.bw_reps,
                                       cond["device"].get("sm_count", 132))
                result["bandwidth"] = bw
                clocks("bandwidth")
                bc.log(f"  read bandwidth {bw['read_tb_per_s']:.3f} TB/s ({bw['method']})")
            except Exception as e:  # noqa: BLE001
                result["errors"].append(f"bandwidth: {type(e).__name__}: {e}")
            bc.free_gpu()
            save()

        # 2. The model.
        model, cfg = bc.build_model(args.shape, args.device, args.seed)
        result["attn_implementation"] = getattr(cfg, "_attn_implementation", None)
        wbytes, pbytes = bc.weight_bytes(model, cfg)
        result["weight_bytes_per_token"] = wbytes
        result["parameter_bytes"] = pbytes
        if result.get("bandwidth", {}).get("read_tb_per_s"):
            result["bound_ms"] = wbytes / (result["bandwidth"]["read_tb_per_s"] * 1e12) * 1e3
        model_dir = args.model_dir or bc.model_tempdir(pbytes)
        t0 = time.time()
        bc.save_model(model, model_dir)
        result["model_save_s"] = round(time.time() - t0, 1)
        prompt = bc.prompt_ids(args.prompt_len, cfg.vocab_size)
        cond["prompt"] = prompt
        bc.log(f"  model {pbytes / 1e9:.3f} GB saved in {result['model_save_s']} s; weight bytes/token "
               f"{wbytes / 1e9:.4f} GB; bound {fmt_ms(result.get('bound_ms'))} ms")
        save()

        # 3. mpk.
        if "mpk" not in args.skip:
            if deadline.allows(est["mpk"]):
                bc.free_gpu()
                cmd = bc.mpk_command(args.mpk_run, model_dir, prompt, args.steps, args.mpk_backend,
                                     kv_capacity=args.kv_capacity)
                res, rec = bc.run_mpk(cmd, min(max(deadline.left() - 10, 30), 420),
                                      env=bc.mpk_env(args.mpk_run))
                result["mpk_run"] = rec
                clocks("mpk")
                if res is None:
                    result["errors"].append(f"mpk: {rec.get('error')}")
                    bc.log(f"  mpk FAILED: {rec.get('error')}")
                else:
                    result["latency"]["mpk"] = res["latency_ms"]
                    result["mpk_prefill_ms"] = res.get("prefill_ms")
                    result["mpk_backend"] = res.get("backend")
                    result["tokens"]["mpk"] = res["tokens"]
                    if len(res["tokens"]) != args.steps:
                        result["errors"].append(f"mpk produced {len(res['tokens'])} tokens, not {args.steps}")
                    bc.log(f"  mpk ({res.get('backend')}): p50 {res['latency_ms']['p50']:.3f} ms "
                           f"(run {rec.get('wall_s')} s)")
            else:
                result["skipped"].append(f"mpk: {deadline.left():.0f} s left")
            save()

        # 4. transformers eager (before torch.compile: eager is bound by the host, and compiling
        # leaves inductor's worker processes behind).
        if "eager" not in args.skip:
            if deadline.allows(est["eager"]):
                try:
                    ms, toks, wall = hf_eager(model, prompt, args.steps, args.warmup_steps, args.device)
                    clocks("hf_eager")
                    result["latency"]["hf_eager"] = bc.summarize(ms)
                    result["hf_eager"] = {"cache": "DynamicCache", "wall_ms_per_step": wall * 1e3 / args.steps}
                    result["tokens"]["hf_eager"] = toks[:args.steps]
                    bc.log(f"  hf eager: p50 {result['latency']['hf_eager']['p50']:.3f} ms")
                except Exception as e:  # noqa: BLE001
                    result["errors"].append(f"hf eager: {type(e).__name__}: {str(e)[:1500]}")
                    bc.log(f"  hf eager FAILED: {e}")
                bc.free_gpu()
            else:
                result["skipped"].append(f"hf eager: {deadline.left():.0f} s left")
            save()

        # 5. torch.compile (reduce-overhead, static cache).
        if "compile" not in args.skip:
            if deadline.allows(est["compile"]):
                for fullgraph in (True, False):
                    try:
                        ms, toks, wall, compile_s = hf_compile(model, cfg, prompt, args.steps, args.warmup_steps,
                                                               args.device, args.kv_capacity, fullgraph)
                        clocks("torch_compile")
                        result["latency"]["torch_compile"] = bc.summarize(ms)
                        result["torch_compile"] = {"fullgraph": fullgraph, "warmup_and_compile_s": round(compile_s, 1),
                                                   "wall_ms_per_step": wall * 1e3 / args.steps}
                        result["tokens"]["torch_compile"] = toks[:args.steps]
                        bc.log(f"  torch.compile (fullgraph={fullgraph}): p50 "
                               f"{result['latency']['torch_compile']['p50']:.3f} ms (compile+warm-up {compile_s:.0f} s)")
                        break
                    except Exception as e:  # noqa: BLE001 - try without fullgraph, then give up
                        result["errors"].append(f"torch.compile fullgraph={fullgraph}: {type(e).__name__}: "
                                                f"{str(e)[:1500]}")
                        bc.log(f"  torch.compile fullgraph={fullgraph} FAILED: {type(e).__name__}: {str(e)[:300]}")
                        if not deadline.allows(est["compile"]):
                            break
                    finally:
                        reset_compiler()
                        bc.free_gpu()
            else:
                result["skipped"].append(f"torch.compile: {deadline.left():.0f} s left")
            save()

        # 6. Greedy tokens.
        toks = result["tokens"]
        n = args.compare_tokens
        ref_name = "hf_eager" if "hf_eager" in toks else ("torch_compile" if "torch_compile" in toks else None)
        if "mpk" in toks and ref_name:
            result["tokens_agreement"][f"mpk vs {ref_name}"] = bc.token_agreement(toks["mpk"], toks[ref_name], n)
        if "hf_eager" in toks and "torch_compile" in toks:
            result["tokens_agreement"]["torch_compile vs hf_eager"] = bc.token_agreement(
                toks["torch_compile"], toks["hf_eager"], n)
        speed = {}
        if "mpk" in result["latency"]:
            for peer in ("hf_eager", "torch_compile"):
                if peer in result["latency"]:
                    speed[peer] = result["latency"][peer]["p50"] / result["latency"]["mpk"]["p50"]
        result["mpk_speedup_p50"] = speed
        if result.get("bound_ms"):
            result["p50_over_bound"] = {k: v["p50"] / result["bound_ms"] for k, v in result["latency"].items()}
        del model
        bc.free_gpu()
    except Exception as e:  # noqa: BLE001 - keep what was measured
        result["errors"].append(f"{type(e).__name__}: {e}")
        result["traceback"] = traceback.format_exc()[-4000:]
        bc.log(traceback.format_exc())
    finally:
        save()
        if model_dir and not keep_dir:
            shutil.rmtree(model_dir, ignore_errors=True)
    print_report(result)
    return 1 if (result["errors"] or "mpk" not in result["latency"]) else 0


if __name__ == "__main__":
    sys.exit(main())
