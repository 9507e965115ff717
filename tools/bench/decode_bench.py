#!/usr/bin/env python3
"""Decode latency of mpk against transformers eager and torch.compile, with the bandwidth bound.

One process, one model, one GPU: a random-weight Qwen3 of a named shape is built in bf16 on the
GPU and saved with save_pretrained; then, batch 1, a fixed 39-token prompt, decode positions
39..338 (300 tokens, greedy, EOS ignored):

  mpk single-step  build/bin/mpk-run --backend gpu --json --ignore-eos --kv-capacity 512, one
                   launch per token (--steps-per-launch 1, mpk-run's default); its own timer:
                   host steady_clock around each one-token decode, incl. the 4-byte readback
  mpk multi-step   the same with --steps-per-launch 300 (--multi-steps-per-launch, default
                   --steps): the whole decode in one launch, each step's argmax fed to the next
                   on the device; per-token latency: the device clock (globaltimer) per step
  hf eager         transformers, eager PyTorch, default attention, DynamicCache; CUDA events
                   around each decode step (forward + argmax)
  torch.compile    torch.compile(step, mode="reduce-overhead", fullgraph=True) over
                   StaticCache(max_cache_len=512), cudagraph_mark_step_begin() before each step,
                   the returned token cloned; warmed up first; CUDA events around each step

Also measured with mpk-run, each in a run of its own:
  TTFT             prompts of 39 and 1024 tokens (--ttft-prompts; the same pseudo-random ids),
                   --max-new-tokens 1, KV capacity max(512, prompt + 2): mpk-run's prefill_ms
                   (host time of the whole prefill: the tensor-core prefill for bf16 models;
                   prefill_bench.py measures it against the peers) is the time to first token
  profile          the single-step setting with --profile-out: per-kind device timers of the
                   last decode step (tasks, bytes streamed, span, GB/s, busy and wait per task),
                   printed as a table and kept in the JSON (profiling perturbs the timing, so no
                   latency figure comes from this run)

The bound: weight bytes read per token (every matrix and norm once; a tied embedding once as the
LM head, an untied one only as the row the lookup reads) / the read bandwidth measured here with
read-only streaming kernels over a buffer much larger than L2 (torch.sum and a Triton
read-and-accumulate kernel over bf16; the faster one is the bandwidth).

mpk's first 32 greedy tokens are compared with transformers' (bf16 activations there, fp32 in
mpk: a divergence is reported, not a failure), and the multi-step tokens with the single-step
ones (all of them). Prints the conditions and a table (p50/p95/p99, p50 over the bound, speed-up
over eager and over torch.compile); --out writes JSON (rewritten after every phase, so a run cut
short still leaves what it measured). --skip leaves phases out: bw, mpk (single-step),
mpk_multi, ttft, profile, eager, compile. --self-test checks the mpk-run side (command lines,
the JSON of a current or an older mpk-run, the profile table, the report) against a stand-in
mpk-run, without torch or a GPU.
Usage:
  python3 tools/bench/decode_bench.py --shape qwen3-0.6b --out bench.json
  python3 tools/bench/decode_bench.py --self-test
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402

# Rough seconds a phase needs (for --deadline); a phase that would not fit is skipped. ttft is
# per prompt.
PHASE_ESTIMATE_S = {
    "qwen3-0.6b": {"mpk": 30, "mpk_multi": 30, "ttft": 25, "profile": 30, "compile": 75, "eager": 45},
    "qwen3-8b": {"mpk": 45, "mpk_multi": 45, "ttft": 40, "profile": 45, "compile": 80, "eager": 50},
    "tiny": {"mpk": 5, "mpk_multi": 5, "ttft": 5, "profile": 5, "compile": 60, "eager": 5},
}
PHASES = ["bw", "mpk", "mpk_multi", "ttft", "profile", "eager", "compile"]

# Rows of the table: result["latency"] key and label.
ROWS = [("mpk", "mpk single-step"), ("mpk_multi", "mpk multi-step"),
        ("hf_eager", "hf eager"), ("torch_compile", "torch.compile")]
MPK_ROWS = ("mpk", "mpk_multi")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bc.add_common_args(ap)
    ap.add_argument("--steps", type=int, default=300, help="timed decode steps")
    ap.add_argument("--kv-capacity", type=int, default=512, help="mpk KV capacity = StaticCache length")
    ap.add_argument("--warmup-steps", type=int, default=8, help="untimed decode steps before timing")
    ap.add_argument("--compare-tokens", type=int, default=32, help="greedy tokens compared")
    ap.add_argument("--multi-steps-per-launch", type=int,
                    help="mpk-run --steps-per-launch of the multi-step row (default: --steps, the "
                         "whole decode in one launch)")
    ap.add_argument("--ttft-prompts", type=int, nargs="+", default=[39, 1024],
                    help="prompt lengths of the time-to-first-token phase")
    ap.add_argument("--bw-gib", type=float, default=4.0, help="read-bandwidth buffer size (GiB)")
    ap.add_argument("--bw-reps", type=int, default=20)
    ap.add_argument("--profile-timeline",
                    help="write the profiled step's per-task timers here (JSON; kept out of --out)")
    ap.add_argument("--skip", nargs="*", default=[], choices=PHASES, help="phases to leave out")
    ap.add_argument("--self-test", action="store_true",
                    help="check the mpk-run side against a stand-in mpk-run (no torch, no GPU)")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.prompt_len < 1:
        ap.error("--steps and --prompt-len must be positive")
    if args.prompt_len + args.steps + 1 > args.kv_capacity:
        ap.error(f"--kv-capacity {args.kv_capacity} < prompt + steps + 1")
    if args.multi_steps_per_launch is None:
        args.multi_steps_per_launch = args.steps
    if args.multi_steps_per_launch < 2:
        ap.error("--multi-steps-per-launch must be at least 2")
    if any(n < 1 for n in args.ttft_prompts):
        ap.error("--ttft-prompts must be positive")
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


# ----------------------------------------------------------------------------- mpk-run phases
# These use no torch: --self-test runs them against a stand-in mpk-run.

def run_mpk_cmd(args, cmd, deadline, cap_s=420, extra_params=""):
    """One mpk-run command, its time limit within the deadline: (result dict or None, record).
    extra_params: appended to the megakernel parameters ($MPK_MK_PARAMS) of this run."""
    env = bc.mpk_env(args.mpk_run)
    if extra_params:
        env["MPK_MK_PARAMS"] = ",".join(p for p in (env.get("MPK_MK_PARAMS", ""), extra_params) if p)
    return bc.run_mpk(cmd, min(max(deadline.left() - 10, 30), cap_s), env=env)


def phase_mpk_decode(args, result, model_dir, prompt, deadline, name):
    """A timed mpk row: "mpk" (one launch per token) or "mpk_multi" (--multi-steps-per-launch
    tokens per launch: by default the whole decode in one launch)."""
    label = dict(ROWS)[name]
    spl = 1 if name == "mpk" else args.multi_steps_per_launch
    cmd = bc.mpk_command(args.mpk_run, model_dir, prompt, args.steps, args.mpk_backend,
                         kv_capacity=args.kv_capacity, steps_per_launch=spl)
    res, rec = run_mpk_cmd(args, cmd, deadline)
    result[f"{name}_run"] = rec
    if res is not None and not (res.get("latency_ms") or {}).get("p50"):
        res, rec["error"] = None, "mpk-run reported no latency_ms"
    if res is None:
        result["errors"].append(f"{label}: {rec.get('error')}")
        bc.log(f"  {label} FAILED: {rec.get('error')}")
        return False
    timings = bc.mpk_timings(res)
    result["mpk_timings"][name] = timings
    result["tokens"][name] = res.get("tokens", [])
    per_token = name == "mpk" or bool(timings["device_step_ms"])
    if per_token:
        result["latency"][name] = res["latency_ms"]
    else:  # multi-step latency_ms without device step times would be per launch, not per token
        why = f"{label}: mpk-run ({res.get('backend')}) reported no device step times: no per-token latency"
        (result["skipped"] if res.get("backend") == "reference" else result["errors"]).append(why)
    if name == "mpk":
        result["mpk_prefill_ms"] = res.get("prefill_ms")
        result["mpk_backend"] = res.get("backend")
    result["errors"] += [f"{label}: {m}" for m in bc.mpk_run_mismatch(res, args.steps, spl)]
    detail = timing_detail(timings)
    bc.log(f"  {label} ({res.get('backend')}, {spl} step(s)/launch): p50 {res['latency_ms']['p50']:.3f} "
           f"ms/{'token' if per_token else 'launch'}{'; ' + detail if detail else ''} "
           f"(run {rec.get('wall_s')} s)")
    return True


def phase_ttft(args, result, model_dir, vocab, deadline, est_s):
    """Time to first token for each --ttft-prompts length: mpk-run's prefill_ms (the whole
    prefill), one new token, a run each."""
    for n in args.ttft_prompts:
        if not deadline.allows(est_s):
            result["skipped"].append(f"ttft {n}: {deadline.left():.0f} s left")
            continue
        kv = max(args.kv_capacity, n + 2)
        cmd = bc.mpk_command(args.mpk_run, model_dir, bc.prompt_ids(n, vocab), 1, args.mpk_backend,
                             kv_capacity=kv)
        res, rec = run_mpk_cmd(args, cmd, deadline)
        entry = {"prompt_len": n, "kv_capacity": kv, "run": rec}
        result["ttft"][str(n)] = entry
        if res is not None and res.get("prefill_ms") is None:
            res, rec["error"] = None, "mpk-run reported no prefill_ms"
        if res is None:
            result["errors"].append(f"ttft {n}: {rec.get('error')}")
            bc.log(f"  ttft {n} FAILED: {rec.get('error')}")
            continue
        entry.update(ttft_ms=res["prefill_ms"], ms_per_prompt_token=res["prefill_ms"] / n,
                     first_token=(res.get("tokens") or [None])[0], backend=res.get("backend"))
        bc.log(f"  ttft {n} tokens: {res['prefill_ms']:.1f} ms ({res['prefill_ms'] / n:.3f} ms/token; "
               f"run {rec.get('wall_s')} s)")


def phase_profile(args, result, model_dir, prompt, deadline):
    """The single-step setting once more with --profile-out and the kernel's phase timers
    (phase_timers=1): mpk-run's per-kind report of the last decode step goes into
    result["profile"] (this run's latencies are kept beside it, but profiling perturbs them)."""
    tmp = tempfile.mkdtemp(prefix="mpk-profile-")
    path = os.path.join(tmp, "profile.json")
    try:
        cmd = bc.mpk_command(args.mpk_run, model_dir, prompt, args.steps, args.mpk_backend,
                             kv_capacity=args.kv_capacity, steps_per_launch=1, profile_out=path)
        res, rec = run_mpk_cmd(args, cmd, deadline, extra_params="phase_timers=1")
        result["profile_run"] = rec
        if res is not None:
            rec["latency_ms_perturbed"] = res.get("latency_ms")
            report, why = bc.read_json_file(path)
            if report is None:
                res, rec["error"] = None, f"no profile report: {why}"
        if res is None:
            result["errors"].append(f"profile: {rec.get('error')}")
            bc.log(f"  profile FAILED: {rec.get('error')}")
            return False
        timeline = report.pop("timeline", None)
        if args.profile_timeline and timeline is not None:
            bc.write_json(args.profile_timeline, {"timer": report.get("timer"), "timeline": timeline},
                          indent=None)  # compact: one entry per task
        result["profile"] = report
        for line in profile_table(report):
            bc.log("  " + line)
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def derive(result, args):
    """Token agreement, speed-ups and ratios to the bound, from what was measured."""
    toks = result["tokens"]
    n = args.compare_tokens
    ref_name = "hf_eager" if "hf_eager" in toks else ("torch_compile" if "torch_compile" in toks else None)
    if "mpk" in toks and ref_name:
        result["tokens_agreement"][f"mpk vs {ref_name}"] = bc.token_agreement(toks["mpk"], toks[ref_name], n)
    if "mpk_multi" in toks and "mpk" in toks:
        result["tokens_agreement"]["mpk_multi vs mpk"] = bc.token_agreement(
            toks["mpk_multi"], toks["mpk"], args.steps)
    if "hf_eager" in toks and "torch_compile" in toks:
        result["tokens_agreement"]["torch_compile vs hf_eager"] = bc.token_agreement(
            toks["torch_compile"], toks["hf_eager"], n)
    lat = result["latency"]
    result["speedup_p50"] = {row: {peer: lat[peer]["p50"] / lat[row]["p50"]
                                   for peer in ("hf_eager", "torch_compile") if peer in lat}
                             for row in MPK_ROWS if row in lat}
    result["mpk_speedup_p50"] = result["speedup_p50"].get("mpk", {})
    if result.get("bound_ms"):
        result["p50_over_bound"] = {k: v["p50"] / result["bound_ms"] for k, v in lat.items()}


# ----------------------------------------------------------------------------- report

def fmt(x, spec):
    return "n/a" if x is None else format(x, spec)


def fmt_ms(x):
    return fmt(x, ".3f")


def timing_detail(t):
    """The device-step and launch timers of an mpk row, when its mpk-run reported them."""
    parts = []
    for key, what in (("device_step_ms", "device step"), ("launch_ms", "launch")):
        d = t.get(key) or {}
        if d.get("p50") is not None:
            n = (f", {d['n']} launch{'es' if d['n'] != 1 else ''}"
                 if key == "launch_ms" and d.get("n") is not None else "")
            parts.append(f"{what} p50 {fmt_ms(d.get('p50'))} p99 {fmt_ms(d.get('p99'))} ms{n}")
    return "; ".join(parts)


def table(result):
    """(label, p50, p95, p99, p50/bound, speed-up over eager, speed-up over torch.compile) per
    row; a speed-up over X is X's p50 / the row's p50."""
    bound = result.get("bound_ms")
    lat = result["latency"]
    rows = []
    for key, label in ROWS:
        row = lat.get(key)
        if not row:
            rows.append((label, None, None, None, None, None, None))
            continue
        ratio = row["p50"] / bound if bound else None
        vs = [lat[p]["p50"] / row["p50"] if (p in lat and p != key) else None
              for p in ("hf_eager", "torch_compile")]
        rows.append((label, row["p50"], row.get("p95"), row.get("p99"), ratio, *vs))
    return rows


def profile_table(report):
    """Lines of the per-kind table of an mpk-run --profile-out report (keys it lacks: n/a)."""
    step = report.get("step_us")
    lines = [f"where the time goes (last decode step of the profiled run): step {fmt(step, '.1f')} us, "
             f"{report.get('tasks')} tasks on {report.get('workers')} workers, KV length "
             f"{report.get('kv_len', 'n/a')}; timer: {report.get('timer')}",
             f"{'kind':<12}{'tasks':>7}{'stages':>7}{'MB':>10}{'span us':>10}{'of step':>8}{'GB/s':>8}"
             f"{'busy us':>9}{'wait us':>9}"]
    tot_tasks, tot_bytes, tot_span = 0, 0, 0.0

    def line(kind, tasks, stages, nbytes, span, gbps, busy, wait):
        share = f"{100 * span / step:.1f}%" if (span is not None and step) else "n/a"
        mb = None if nbytes is None else nbytes / 1e6
        return (f"{str(kind):<12}{fmt(tasks, 'd'):>7}{fmt(stages, 'd'):>7}{fmt(mb, '.2f'):>10}"
                f"{fmt(span, '.1f'):>10}{share:>8}{fmt(gbps, '.0f'):>8}{fmt(busy, '.2f'):>9}{fmt(wait, '.2f'):>9}")

    for k in report.get("kinds") or []:
        nbytes, span, gbps = k.get("bytes"), k.get("span_us"), k.get("gbps")
        if gbps is None and nbytes is not None and span:
            gbps = nbytes / span / 1e3
        lines.append(line(k.get("kind"), k.get("tasks"), k.get("stages"), nbytes, span, gbps,
                          k.get("busy_us_mean"), k.get("wait_us_mean")))
        tot_tasks += k.get("tasks") or 0
        tot_bytes += nbytes or 0
        tot_span += span or 0.0
    lines.append(line("all kinds", tot_tasks, None, tot_bytes, tot_span,
                      tot_bytes / tot_span / 1e3 if tot_span else None, None, None))
    lines.append("(span: the sum over a kind's stages of first ready to last end; kinds may overlap, "
                 "so the spans need not add up to the step; GB/s = weight and KV bytes streamed / "
                 "span; busy, wait: mean per task, compute and waiting for its events)")
    return lines


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
           f"{c.get('kv_capacity')}; mpk multi-step: {c.get('multi_steps_per_launch')} steps per launch")
    bw = result.get("bandwidth") or {}
    if bw.get("read_tb_per_s"):
        bc.log(f"read bandwidth {bw['read_tb_per_s']:.3f} TB/s ({bw['method']}; "
               + ", ".join(f"{k} {m['tb_per_s']:.3f}" for k, m in bw["methods"].items())
               + f"; copy r+w {bw['copy_read_plus_write_tb_per_s']:.3f} TB/s) over {bw['buffer_bytes'] / 2**30:.1f} GiB")
    if result.get("weight_bytes_per_token"):
        bc.log(f"weight bytes read / token {result['weight_bytes_per_token'] / 1e9:.4f} GB "
               f"(parameters {result['parameter_bytes'] / 1e9:.4f} GB); bound "
               f"{fmt_ms(result.get('bound_ms'))} ms")
    bc.log(f"{'':<18}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'p50/bound':>11}{'vs eager':>10}{'vs compile':>12}")
    for label, p50, p95, p99, ratio, vs_eager, vs_compile in table(result):
        bc.log(f"{label:<18}{fmt_ms(p50):>9}{fmt_ms(p95):>9}{fmt_ms(p99):>9}"
               f"{('n/a' if ratio is None else f'{ratio:.2f}x'):>11}"
               f"{('' if vs_eager is None else f'{vs_eager:.2f}x'):>10}"
               f"{('' if vs_compile is None else f'{vs_compile:.2f}x'):>12}")
    bc.log(f"{'bound':<18}{fmt_ms(result.get('bound_ms')):>9}")
    bc.log("(vs X: X's p50 / the row's p50, above 1 = faster than X)")
    for key in MPK_ROWS:
        t = result.get("mpk_timings", {}).get(key)
        if t:
            detail = timing_detail(t)
            bc.log(f"{dict(ROWS)[key]}: {t.get('steps_per_launch')} step(s)/launch; p50/p95/p99 timer: "
                   f"{t.get('timer') or 'host steady_clock per one-token decode'}"
                   f"{'; ' + detail if detail else ''}")
    ttft = {k: e for k, e in result.get("ttft", {}).items() if e.get("ttft_ms") is not None}
    if ttft:
        bc.log("time to first token (mpk-run prefill_ms: the prompt token by token through the decode path): "
               + "; ".join(f"{e['prompt_len']} tokens {e['ttft_ms']:.1f} ms ({e['ms_per_prompt_token']:.3f} ms/token)"
                           for e in ttft.values()))
    if result.get("profile"):
        for line in profile_table(result["profile"]):
            bc.log(line)
    for k, t in result.get("tokens_agreement", {}).items():
        txt = "identical" if t["identical"] else f"first divergence at step {t['first_divergence_step']}"
        bc.log(f"greedy tokens {k} (first {t['compared']}): {txt}")
    for e in result.get("errors", []):
        bc.log(f"ERROR: {e}")
    for s in result.get("skipped", []):
        bc.log(f"skipped: {s}")
    bc.log("(mpk single-step: mpk-run's host steady_clock per one-token decode incl. the 4-byte token readback; "
           "mpk multi-step: device clock per step within one launch; peers: CUDA events around each step)")


# ----------------------------------------------------------------------------- main

def main(argv=None):
    args = parse_args(argv)
    if args.self_test:
        return self_test()
    deadline = bc.Deadline(args.deadline)
    est = PHASE_ESTIMATE_S.get(args.shape, PHASE_ESTIMATE_S["qwen3-8b"])
    t_start = time.time()
    cuda = args.device.startswith("cuda")
    result = new_result(args)
    result["conditions"]["gpu"] = bc.nvidia_smi() if cuda else {}
    import torch
    import transformers
    bc.quiet_transformers()
    import warnings
    warnings.filterwarnings("ignore")
    cond = result["conditions"]
    cond.update(versions=bc.versions(), device=bc.device_props(args.device))

    def clocks(tag):
        if cuda:
            cond["clocks_after"][tag] = {k: v for k, v in bc.nvidia_smi().items()
                                         if k in ("clocks.sm", "clocks.mem", "temperature.gpu", "power.draw")}

    def save():
        result["wall_s"] = round(time.time() - t_start, 1)
        bc.write_json(args.out, result)

    def wanted(phase, label):
        """Whether a phase runs: not in --skip, and it fits before the deadline."""
        if phase in args.skip:
            return False
        if deadline.allows(est[phase]):
            return True
        result["skipped"].append(f"{label}: {deadline.left():.0f} s left")
        return False

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

        # 3. mpk: single-step, multi-step, time to first token, then the profiled run (each a
        # separate mpk-run on the same weights).
        bc.free_gpu()
        for name in MPK_ROWS:
            if wanted(name, dict(ROWS)[name]):
                phase_mpk_decode(args, result, model_dir, prompt, deadline, name)
                clocks(name)
                save()
        if "ttft" not in args.skip:
            phase_ttft(args, result, model_dir, cfg.vocab_size, deadline, est["ttft"])
            save()
        if args.mpk_backend == "reference" and "profile" not in args.skip:
            result["skipped"].append("profile: the reference backend has no device timers")
        elif wanted("profile", "profile"):
            phase_profile(args, result, model_dir, prompt, deadline)
            save()

        # 4. transformers eager (before torch.compile: eager is bound by the host, and compiling
        # leaves inductor's worker processes behind).
        if wanted("eager", "hf eager"):
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
            save()

        # 5. torch.compile (reduce-overhead, static cache).
        if wanted("compile", "torch.compile"):
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
            save()

        # 6. Greedy tokens, speed-ups, ratios to the bound.
        derive(result, args)
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


def new_result(args):
    """The result object before anything is measured: the conditions known from the arguments."""
    return {"script": "decode_bench.py", "shape": args.shape, "latency": {}, "mpk_timings": {},
            "ttft": {}, "errors": [], "skipped": [], "tokens": {}, "tokens_agreement": {},
            "conditions": {
                "clocks_after": {}, "shape_config": bc.SHAPES[args.shape], "batch": 1, "dtype": "bf16",
                "prompt_len": args.prompt_len, "steps": args.steps, "kv_capacity": args.kv_capacity,
                "multi_steps_per_launch": args.multi_steps_per_launch,
                "ttft_prompts": args.ttft_prompts,
                "positions": f"{args.prompt_len}..{args.prompt_len + args.steps - 1}",
                "weight_init": f"N(0, {bc.WEIGHT_STD}) matrices, 1 + N(0, {bc.NORM_STD}) norms, seed {args.seed}"}}


# ----------------------------------------------------------------------------- self-test

# A stand-in mpk-run: the JSON of the spec (current), or of an mpk-run from before
# --steps-per-launch and --profile-out (older: it rejects those flags as CLI11 does).
FAKE_MPK_RUN = r'''
import argparse, json, sys
OLDER = __OLDER__
ap = argparse.ArgumentParser()
for a in ("--model", "--prompt-ids", "--backend", "--logits-out"):
    ap.add_argument(a)
ap.add_argument("--max-new-tokens", type=int, default=16)
ap.add_argument("--kv-capacity", type=int)
ap.add_argument("--json", action="store_true")
ap.add_argument("--ignore-eos", action="store_true")
if not OLDER:
    ap.add_argument("--steps-per-launch", type=int, default=1)
    ap.add_argument("--profile-out")
a, extra = ap.parse_known_args()
if extra:
    sys.exit("The following arguments were not expected: " + " ".join(extra))
prompt = [int(t) for t in a.prompt_ids.split(",")]
n = a.max_new_tokens
assert a.kv_capacity >= len(prompt) + n, "KV capacity too small"
lat = {"p50": 2.0, "p95": 2.4, "p99": 2.5, "mean": 2.1, "n": n}
out = {"backend": a.backend, "prompt_ids": prompt, "tokens": [(7 * i + len(prompt)) % 1000 for i in range(n)],
       "prefill_ms": 1.5 * len(prompt), "latency_ms": lat,
       "timer": "host steady_clock around each mpk_session_decode(1)"}
if not OLDER:
    spl = a.steps_per_launch
    launches = -(-n // spl)
    out.update(steps_per_launch=spl, device_step_ms={"p50": 1.9, "p95": 2.0, "p99": 2.1, "mean": 1.95, "n": n},
               launch_ms={"p50": 2.0 * min(n, spl), "p95": 2.1 * min(n, spl), "p99": 2.2 * min(n, spl),
                          "mean": 2.0 * min(n, spl), "n": launches},
               tuning={"policy": "cache-only", "tuned": True})
    if spl > 1:
        out["latency_ms"] = out["device_step_ms"]
        out["timer"] = "device globaltimer per decode step (multi-step launches)"
    if a.profile_out:
        kinds = [{"kind": "qkv", "tasks": 140, "stages": 28, "bytes": 176160768, "span_us": 300.0,
                  "busy_us_mean": 3.5, "wait_us_mean": 1.0, "gbps": 587.2},
                 {"kind": "lm_head", "tasks": 132, "stages": 1, "bytes": 311164928, "span_us": 90.0,
                  "busy_us_mean": 80.0, "wait_us_mean": 2.0}]
        json.dump({"timer": "globaltimer", "step_us": 1900.0, "workers": 132, "tasks": 14693,
                   "kv_len": len(prompt) + n, "kinds": kinds,
                   "timeline": [["L0.qkv[0]", 0, 64, 2624, 6560]]}, open(a.profile_out, "w"))
print("loading ...")
print(json.dumps(out))
'''


def self_test():
    """The mpk-run phases, derive() and the report, against a stand-in mpk-run (a current one,
    then an older one), without torch or a GPU. Returns 0 when every check holds."""
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            bc.log(f"  self-test FAILED: {what}")

    tmp = tempfile.mkdtemp(prefix="decode-bench-selftest-")
    try:
        for older in (False, True):
            fake = os.path.join(tmp, "older" if older else "current", "bin", "mpk-run")
            os.makedirs(os.path.dirname(fake))
            with open(fake, "w") as f:
                f.write(f"#!{sys.executable}\n" + FAKE_MPK_RUN.replace("__OLDER__", str(older)))
            os.chmod(fake, 0o755)
            timeline = os.path.join(tmp, "older" if older else "current", "timeline.json")
            args = parse_args(["--shape", "tiny", "--mpk-run", fake, "--mpk-backend", "reference",
                               "--steps", "40", "--kv-capacity", "128", "--profile-timeline", timeline])
            bc.log(f"self-test: {'an older' if older else 'a current'} mpk-run")
            result = new_result(args)
            deadline = bc.Deadline(None)
            prompt = bc.prompt_ids(args.prompt_len, 1031)
            phase_mpk_decode(args, result, tmp, prompt, deadline, "mpk")
            phase_mpk_decode(args, result, tmp, prompt, deadline, "mpk_multi")
            phase_ttft(args, result, tmp, 1031, deadline, 5)
            phase_profile(args, result, tmp, prompt, deadline)
            result["bound_ms"] = 0.5
            result["latency"]["hf_eager"] = bc.summarize([60.0, 65.0, 70.0])
            result["latency"]["torch_compile"] = bc.summarize([2.2, 2.25, 2.3])
            result["tokens"]["hf_eager"] = list(result["tokens"]["mpk"])
            derive(result, args)
            print_report(result)
            bc.write_json(os.path.join(tmp, "result.json"), result)

            single = result["mpk_run"]["command"]
            check("--steps-per-launch" not in single, "single-step command has no --steps-per-launch")
            check(result["latency"].get("mpk", {}).get("p50") == 2.0, "single-step row")
            check(result["ttft"].get("39", {}).get("ttft_ms") == 58.5, "ttft 39")
            check(result["ttft"].get("1024", {}).get("kv_capacity") == 1026, "ttft 1024 KV capacity")
            check(result["ttft"].get("1024", {}).get("ttft_ms") == 1536.0, "ttft 1024")
            check(abs(result["mpk_speedup_p50"]["torch_compile"] - 2.25 / 2.0) < 1e-9, "speed-up")
            lines = profile_table({"kinds": [{"kind": "x"}]})  # every key but one missing
            check(len(lines) == 5 and "n/a" in lines[2], "profile table with missing keys")
            if not older:
                check(not result["errors"], f"no errors ({result['errors']})")
                check("--steps-per-launch 40" in result["mpk_multi_run"]["command"], "multi-step command")
                check(result["latency"].get("mpk_multi", {}).get("p50") == 1.9, "multi-step row")
                check(result["mpk_timings"]["mpk_multi"]["launch_ms"]["n"] == 1, "one launch")
                check(result["mpk_timings"]["mpk_multi"]["tuning"] == {"policy": "cache-only", "tuned": True},
                      "whether the load ran a tuning result, kept")
                check(result["tokens_agreement"]["mpk_multi vs mpk"]["identical"], "multi-step tokens")
                check("--profile-out" in result["profile_run"]["command"]
                      and "--steps-per-launch" not in result["profile_run"]["command"], "profile command")
                check([k["kind"] for k in result.get("profile", {}).get("kinds", [])] == ["qkv", "lm_head"],
                      "profile report kept")
                tl = bc.read_json_file(timeline)[0] or {}
                check(tl.get("timeline") == [["L0.qkv[0]", 0, 64, 2624, 6560]] and "timeline" not in
                      result.get("profile", {}), "timeline written to its own file, not the result")
                check(any(r[0] == "mpk multi-step" and r[6] is not None for r in table(result)),
                      "multi-step row vs torch.compile")
            else:
                errs = " | ".join(result["errors"])
                check("mpk multi-step" in errs and "profile" in errs and len(result["errors"]) == 2,
                      f"an older mpk-run fails the multi-step and profile phases only ({errs})")
                check("mpk_multi" not in result["latency"] and "profile" not in result, "nothing made up")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    bc.log(f"self-test {'passed' if not failures else 'FAILED: ' + '; '.join(failures)}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
