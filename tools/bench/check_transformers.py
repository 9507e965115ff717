#!/usr/bin/env python3
"""Checks mpk's logits against transformers on a random-weight Qwen3 of a real shape.

One process, one model: a random-weight Qwen3 (bf16, built on the GPU) is saved with
save_pretrained; `mpk-run --backend gpu --logits-out` decodes greedily for --steps tokens after a
fixed 39-token prompt and writes one float32 logits row per step (row i: the logits from which
token i was chosen). The same sequence (prompt + mpk's tokens) then goes through transformers in
one teacher-forced forward pass (eager attention), giving its logits at the same positions.

Per step: relative L2 of the logits row, ||mpk - hf|| / ||hf||, and top-1 agreement.
Criteria (against the bf16 transformers model, the model as saved): every row's relative L2
<= 2e-2, top-1 agreement >= 99%, mpk's logits finite. mpk computes in fp32 from the bf16 weights while transformers
keeps bf16 activations, so the same comparison is also made against transformers in fp32 on the
same weights (upcast exactly): that one measures mpk's arithmetic rather than bf16 rounding.
Top-1 agreement is reported both strictly and tie-aware (mpk's token among the reference's
maximal logits: bf16 logits of a random model tie often); --top1 picks which one is the
criterion. mpk's first 32 greedy tokens must equal fp32 transformers' own greedy decode (a
criterion); against bf16 the same comparison is reported with the first divergence step.

Memory (Qwen3-8B on one H200: 16.4 GB of bf16 weights): while mpk-run runs, the transformers
model waits on the host, so that only one copy of the weights is on the GPU; the fp32 reference
is the same model upcast in place (32.8 GB). GPU memory at each stage is kept in the JSON.
mpk-run decodes with --steps-per-launch 1 by default (one logits row per step for
--logits-out); --steps-per-launch N is passed through.

The same criteria are applied to transformers itself with sdpa attention against its eager
attention (another correct bf16 implementation of the same model): reported beside mpk's rows
as the bf16 comparison's noise floor, not a criterion (--skip-peer leaves it out).

Prints each criterion with its measured value and limit. Exit status: 0 all criteria met, 1 a
criterion failed, 2 mpk-run failed or the check could not run. Usage:
  python3 tools/bench/check_transformers.py --shape qwen3-0.6b --steps 256 --out check.json
  python3 tools/bench/check_transformers.py --shape qwen3-8b --steps 256 --out check8b.json
"""

import argparse
import os
import shutil
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402

MAX_REL_L2 = 2e-2
MIN_TOP1 = 0.99
GREEDY_COMPARE = 32


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bc.add_common_args(ap)
    ap.add_argument("--steps", type=int, default=256, help="decode steps (logits rows) to compare")
    ap.add_argument("--greedy-compare", type=int, default=GREEDY_COMPARE,
                    help="greedy tokens compared with transformers' own greedy decode")
    ap.add_argument("--max-rel-l2", type=float, default=MAX_REL_L2)
    ap.add_argument("--min-top1", type=float, default=MIN_TOP1)
    ap.add_argument("--top1", choices=["strict", "tie-aware"], default="strict",
                    help="top-1 criterion: argmax equal (strict), or mpk's token among the "
                         "reference's maximal logits (tie-aware; bf16 logits tie often)")
    ap.add_argument("--skip-fp32", action="store_true", help="skip the fp32 transformers reference")
    ap.add_argument("--skip-peer", action="store_true",
                    help="skip transformers' sdpa-vs-eager comparison (the bf16 noise floor)")
    ap.add_argument("--hidden-act", default="silu", choices=["silu", "gelu_pytorch_tanh"],
                    help="the model's MLP activation (gelu_pytorch_tanh: mpk runs it on the host "
                         "between megakernel launches)")
    ap.add_argument("--steps-per-launch", type=int, default=1,
                    help="mpk-run --steps-per-launch (1: one launch per token, which --logits-out "
                         "needs for a logits row per step)")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.prompt_len < 1 or args.steps_per_launch < 1:
        ap.error("--steps, --prompt-len and --steps-per-launch must be positive")
    return args


def compare_rows(mpk, ref):
    """Per-row relative L2 and top-1 agreement of two [N, V] logits tensors (torch)."""
    import torch
    a, b = mpk.double(), ref.double()
    rel = ((a - b).norm(dim=-1) / b.norm(dim=-1)).tolist()
    top_m = a.argmax(-1)
    top_r = b.argmax(-1)
    agree = (top_m == top_r).tolist()
    # Tie-aware: mpk's token is one of the reference's maximal logits (bf16 logits tie often:
    # their spacing near |logit| 2..4 is 1/64).
    tie_ok = (b.gather(1, top_m[:, None])[:, 0] == b.max(dim=-1).values).tolist()
    disagreements = []
    r2 = torch.topk(b, 2, dim=-1).values
    m2 = torch.topk(a, 2, dim=-1).values
    for i, ok in enumerate(agree):
        if not ok:
            disagreements.append({
                "step": i, "mpk_top1": int(top_m[i]), "ref_top1": int(top_r[i]),
                "ref_top2_margin": float(r2[i, 0] - r2[i, 1]),
                "mpk_top2_margin": float(m2[i, 0] - m2[i, 1]),
                "ref_logit_gap_of_tokens": float(b[i, top_r[i]] - b[i, top_m[i]])})
    srt = sorted(rel)
    return {
        "rows": len(rel),
        "rel_l2_max": max(rel), "rel_l2_median": srt[len(srt) // 2], "rel_l2_mean": sum(rel) / len(rel),
        "rel_l2_worst_step": rel.index(max(rel)),
        "top1_agreement": sum(agree) / len(agree),
        "top1_agreement_tie_aware": sum(tie_ok) / len(tie_ok),
        "top1_disagreements": disagreements[:20],
        "ref_median_top2_margin": float((r2[:, 0] - r2[:, 1]).median()),
        "ref_logits_std": float(b.std(dim=-1).mean()),
        "rel_l2_per_step": [float(f"{x:.4g}") for x in rel],
    }


def greedy(model, prompt, steps, device):
    """transformers' own greedy decode with its KV cache (DynamicCache): `steps` tokens."""
    import torch
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt], device=device), use_cache=True)
        past = out.past_key_values
        tok = out.logits[:, -1:].argmax(-1)
        toks = [tok]
        for _ in range(steps - 1):
            out = model(input_ids=tok, past_key_values=past, use_cache=True)
            past = out.past_key_values
            tok = out.logits[:, -1:].argmax(-1)
            toks.append(tok)
        return [int(t) for t in torch.cat(toks, dim=1)[0].tolist()]


def teacher_forced(model, seq, rows, device):
    """Logits at the last `rows` positions of one uncached forward over seq: [rows, V] float32."""
    import torch
    with torch.no_grad():
        ids = torch.tensor([seq], device=device)
        try:
            out = model(input_ids=ids, use_cache=False, logits_to_keep=rows)
            logits = out.logits[0]
        except TypeError:
            logits = model(input_ids=ids, use_cache=False).logits[0, -rows:]
        return logits.float()


def peer_sdpa(model, seq, prompt, ref, eager_greedy, args):
    """The same comparison for another bf16 implementation of the same model: transformers
    itself with sdpa attention against its eager attention (ref, eager_greedy). The bf16
    criteria's noise floor on this model: how far two correct bf16 implementations are apart.
    Reported, not a criterion; the model goes back to eager attention."""
    import torch
    try:
        bc.set_attn_implementation(model, "sdpa")
        logits = teacher_forced(model, seq, ref.shape[0], args.device)
        cmp = compare_rows(logits, ref)
        g = greedy(model, prompt, args.greedy_compare, args.device)
        cmp["greedy_vs_eager"] = bc.token_agreement(eager_greedy, g, args.greedy_compare)
        del cmp["rel_l2_per_step"]
        cmp["criteria"] = criteria(cmp, args, bool(torch.isfinite(logits).all()), "sdpa logits finite")
        cmp["criteria_met"] = all(c["met"] for c in cmp["criteria"])
        return cmp
    except Exception as e:  # noqa: BLE001 - reported only
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        bc.set_attn_implementation(model, "eager")


def criteria(cmp, args, finite, finite_what="mpk logits finite", greedy=None):
    """Each criterion of one comparison, with its measured value, limit and outcome; `greedy`
    (a token_agreement) adds the identical-greedy-tokens criterion."""
    top1 = cmp["top1_agreement_tie_aware" if args.top1 == "tie-aware" else "top1_agreement"]
    other = ("strict", cmp["top1_agreement"]) if args.top1 == "tie-aware" else (
        "tie-aware", cmp["top1_agreement_tie_aware"])
    return [
        {"name": "rel_l2_max", "what": f"relative L2, worst of {cmp['rows']} rows",
         "measured": cmp["rel_l2_max"], "op": "<=", "limit": args.max_rel_l2,
         "met": cmp["rel_l2_max"] <= args.max_rel_l2},
        {"name": "top1_" + args.top1.replace("-", "_"), "what": f"top-1 agreement ({args.top1})",
         "measured": top1, "op": ">=", "limit": args.min_top1, "met": top1 >= args.min_top1,
         "also": {f"top1_{other[0].replace('-', '_')}": other[1]}},
        {"name": "logits_finite", "what": finite_what, "measured": finite, "op": "==",
         "limit": True, "met": finite},
    ] + ([] if greedy is None else [
        {"name": "greedy_identical", "what": f"first {greedy['compared']} greedy tokens",
         "measured": greedy["matching_before_divergence"], "op": ">=", "limit": args.greedy_compare,
         "met": greedy["identical"] and greedy["compared"] >= args.greedy_compare}])


def fmt_criterion(c):
    """'measured op limit' of a criterion: fractions as percentages, rel L2 in e-notation."""
    if c["name"].startswith("top1"):
        txt = f"{100 * c['measured']:.2f}% {c['op']} {100 * c['limit']:g}%"
        for k, v in c.get("also", {}).items():
            txt += f" ({k.replace('top1_', '').replace('_', '-')} {100 * v:.2f}%)"
        return txt
    if isinstance(c["measured"], bool):
        return "yes" if c["measured"] else "no"
    if isinstance(c["measured"], int):
        return f"{c['measured']} {c['op']} {c['limit']}"
    return f"{c['measured']:.3e} {c['op']} {c['limit']:g}"


def main(argv=None):
    args = parse_args(argv)
    deadline = bc.Deadline(args.deadline)
    result = {"script": "check_transformers.py", "shape": args.shape,
              "shape_config": bc.SHAPES[args.shape], "steps": args.steps,
              "prompt_len": args.prompt_len, "hidden_act": args.hidden_act,
              "criteria": {"max_rel_l2": args.max_rel_l2, "min_top1_agreement": args.min_top1,
                           "against": "transformers bf16 (and fp32, same weights upcast)"},
              "errors": [], "gpu": bc.nvidia_smi() if args.device.startswith("cuda") else {}}
    t_start = time.time()
    import torch
    import transformers
    bc.quiet_transformers()
    result["versions"] = bc.versions()
    result["device"] = bc.device_props(args.device)
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
    except Exception:  # noqa: BLE001
        pass
    bc.log(f"check_transformers: shape {args.shape}, {args.steps} steps, prompt {args.prompt_len}, "
           f"torch {torch.__version__}, transformers {transformers.__version__}, "
           f"{result['device'].get('device')}")

    cuda = args.device.startswith("cuda")
    result["gpu_memory"] = {}

    def memory(stage):
        """Records (and logs) GPU memory at a stage; the peak is since the previous stage."""
        if cuda:
            m = result["gpu_memory"][stage] = bc.gpu_memory(args.device)
            bc.log(f"  GPU memory {stage}: {m['allocated_gb']:.1f} GB allocated here (peak "
                   f"{m['peak_allocated_gb']:.1f}), {m['free_gb']:.1f} of {m['total_gb']:.1f} GB free")
            torch.cuda.reset_peak_memory_stats(torch.device(args.device))

    model, cfg = bc.build_model(args.shape, args.device, args.seed, attn_implementation="eager",
                                hidden_act=args.hidden_act)
    result["attn_implementation"] = getattr(cfg, "_attn_implementation", None)
    memory("model built (bf16)")
    wbytes, pbytes = bc.weight_bytes(model, cfg)
    result["parameter_bytes"] = pbytes
    model_dir = args.model_dir or bc.model_tempdir(pbytes)
    keep_dir = bool(args.model_dir)
    rc = 2
    try:
        t0 = time.time()
        files = bc.save_model(model, model_dir)
        result["model_dir"] = model_dir
        result["save_s"] = round(time.time() - t0, 2)
        bc.log(f"  model: {pbytes / 1e9:.3f} GB of parameters, saved in {result['save_s']} s "
               f"to {model_dir} ({len(files)} files)")
        prompt = bc.prompt_ids(args.prompt_len, cfg.vocab_size)
        result["prompt"] = prompt

        # mpk greedy with its logits; the transformers model waits on the host meanwhile (an
        # exact copy), so that one copy of the weights at a time is on the GPU.
        logits_path = os.path.join(model_dir, "mpk_logits.f32")
        cmd = bc.mpk_command(args.mpk_run, model_dir, prompt, args.steps, args.mpk_backend,
                             logits_out=logits_path, steps_per_launch=args.steps_per_launch)
        if cuda:
            model.to("cpu")
        bc.free_gpu()
        memory("before mpk-run (model on the host)")
        res, rec = bc.run_mpk(cmd, min(deadline.left() - 20, 400), env=bc.mpk_env(args.mpk_run))
        result["mpk_run"] = rec
        if res is None:
            result["errors"].append(rec.get("error"))
            bc.log(f"  mpk-run FAILED: {rec.get('error')}")
            return 2
        tokens = res["tokens"]
        result["mpk"] = dict(bc.mpk_timings(res), backend=res.get("backend"), tokens=tokens)
        if result["mpk"]["steps_per_launch"] != args.steps_per_launch:
            result["errors"].append(f"mpk-run reports {result['mpk']['steps_per_launch']} steps per "
                                    f"launch, not {args.steps_per_launch}")
        bc.log(f"  mpk-run ({res.get('backend')}, {args.steps_per_launch} step(s)/launch): "
               f"{len(tokens)} tokens in {rec.get('wall_s')} s, "
               f"p50 {(res.get('latency_ms') or {}).get('p50', float('nan')):.3f} ms/token")
        if cuda:
            model.to(args.device)
            if cfg.tie_word_embeddings:
                assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
        import numpy as np
        raw = np.fromfile(logits_path, dtype="<f4")
        V = cfg.vocab_size
        if raw.size != len(tokens) * V or len(tokens) != args.steps:
            msg = (f"mpk wrote {raw.size} floats for {len(tokens)} tokens (vocab {V}); "
                   f"expected {args.steps} rows")
            result["errors"].append(msg)
            bc.log("  " + msg)
            return 2
        mpk_logits = torch.from_numpy(raw.reshape(len(tokens), V)).to(args.device)
        os.remove(logits_path)
        finite = bool(torch.isfinite(mpk_logits).all())
        self_arg = (mpk_logits.argmax(-1).tolist())
        result["mpk_logits_finite"] = finite
        result["mpk_tokens_equal_own_logits_argmax"] = sum(int(a == b) for a, b in zip(self_arg, tokens))
        if not finite:
            result["errors"].append("mpk logits contain NaN or Inf")

        seq = prompt + tokens[:-1]
        checks = {}
        for label, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
            if label == "fp32":
                if args.skip_fp32:
                    continue
                if not deadline.allows(30):
                    result["errors"].append("fp32 reference skipped: deadline")
                    continue
                model = model.float()  # in place: exact upcast of the bf16 weights
            t0 = time.time()
            ref = teacher_forced(model, seq, len(tokens), args.device)
            cmp = compare_rows(mpk_logits, ref)
            g = greedy(model, prompt, args.greedy_compare, args.device)
            if label == "bf16" and not args.skip_peer:
                result["peer_bf16_sdpa"] = peer_sdpa(model, seq, prompt, ref, g, args)
            del ref
            cmp["hf_greedy_tokens"] = g
            cmp["greedy_vs_mpk"] = bc.token_agreement(tokens, g, args.greedy_compare)
            # mpk computes in fp32: its greedy tokens must be fp32 transformers' own. (Against bf16
            # activations greedy decoding of flat random logits diverges within a few steps even
            # between transformers' own eager and sdpa runs: reported only.)
            cmp["criteria"] = criteria(cmp, args, finite,
                                       greedy=cmp["greedy_vs_mpk"] if label == "fp32" else None)
            cmp["criteria_met"] = all(c["met"] for c in cmp["criteria"])
            cmp["seconds"] = round(time.time() - t0, 2)
            checks[label] = cmp
            result["checks"] = checks
            bc.write_json(args.out, result)
            bc.free_gpu()
            memory(f"after the {label} comparison")
        del model
        bc.free_gpu()

        ok = all(c["criteria_met"] for c in checks.values()) and "bf16" in checks
        result["passed"] = ok
        result["failed_criteria"] = [f"hf {label} {c['what']}: {fmt_criterion(c)}"
                                     for label, cmp in checks.items() for c in cmp["criteria"] if not c["met"]]
        rc = 0 if ok else 1
        # The table.
        bc.log("")
        bc.log(f"mpk vs transformers, {args.shape}, {len(tokens)} teacher-forced steps "
               f"(positions {args.prompt_len - 1}..{args.prompt_len + len(tokens) - 2})")
        bc.log(f"{'reference':<10} {'relL2 max':>10} {'median':>10} {'top-1':>8} {'tie-aware':>10} "
               f"{'greedy[:%d]' % args.greedy_compare:>14}  criteria")
        for label, c in checks.items():
            gv = c["greedy_vs_mpk"]
            gtxt = (f"same {gv['compared']}" if gv["identical"]
                    else f"diverge@{gv['first_divergence_step']}")
            bc.log(f"{'hf ' + label:<10} {c['rel_l2_max']:>10.3e} {c['rel_l2_median']:>10.3e} "
                   f"{100 * c['top1_agreement']:>7.2f}% {100 * c['top1_agreement_tie_aware']:>9.2f}% {gtxt:>14}  "
                   f"{'met' if c['criteria_met'] else 'FAILED'}")
            for d in c["top1_disagreements"][:5]:
                bc.log(f"    step {d['step']}: mpk {d['mpk_top1']} vs ref {d['ref_top1']}, ref margin "
                       f"{d['ref_top2_margin']:.4f}, ref gap between the two {d['ref_logit_gap_of_tokens']:.4f}")
        peer = result.get("peer_bf16_sdpa")
        if peer and "error" not in peer:
            gv = peer["greedy_vs_eager"]
            gtxt = f"same {gv['compared']}" if gv["identical"] else f"diverge@{gv['first_divergence_step']}"
            bc.log(f"{'peer':<10} {peer['rel_l2_max']:>10.3e} {peer['rel_l2_median']:>10.3e} "
                   f"{100 * peer['top1_agreement']:>7.2f}% {100 * peer['top1_agreement_tie_aware']:>9.2f}% "
                   f"{gtxt:>14}  {'met' if peer['criteria_met'] else 'FAILED'}  (transformers bf16 sdpa "
                   f"vs eager, the same criteria: the bf16 noise floor; reported, not a criterion)")
        elif peer:
            bc.log(f"peer comparison (sdpa vs eager) failed: {peer['error']}")
        bc.log("")
        bc.log("criteria:")
        for label, cmp in checks.items():
            for c in cmp["criteria"]:
                bc.log(f"  hf {label:<5} {c['what']:<34} {fmt_criterion(c):<42} "
                       f"{'met' if c['met'] else 'FAILED'}")
        if "bf16" not in checks:
            bc.log("  hf bf16 comparison missing: FAILED")
        bc.log("reported, not criteria:")
        for label, cmp in checks.items():
            if any(c["name"] == "greedy_identical" for c in cmp["criteria"]):
                continue  # a criterion above
            gv = cmp["greedy_vs_mpk"]
            bc.log(f"  hf {label:<5} first {gv['compared']} greedy tokens equal mpk's: "
                   + ("yes" if gv["identical"] else f"no, first divergence at step {gv['first_divergence_step']}"))
        bc.log(f"  mpk tokens equal to their own logits' argmax: "
               f"{result['mpk_tokens_equal_own_logits_argmax']}/{len(tokens)}")
        for e in result["errors"]:
            bc.log(f"ERROR: {e}")
        bc.log(f"check {'PASSED' if ok else 'FAILED'} (exit {rc}) in {time.time() - t_start:.0f} s"
               + ("" if ok else ": " + "; ".join(result["failed_criteria"] or ["no bf16 comparison"])))
        return rc
    except Exception as e:  # noqa: BLE001 - record, report, exit 2
        result["errors"].append(f"{type(e).__name__}: {e}")
        result["traceback"] = traceback.format_exc()[-4000:]
        bc.log(traceback.format_exc())
        return 2
    finally:
        result["exit_code"] = rc if "traceback" not in result else 2
        result["wall_s"] = round(time.time() - t_start, 1)
        bc.write_json(args.out, result)
        if not keep_dir:
            shutil.rmtree(model_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
