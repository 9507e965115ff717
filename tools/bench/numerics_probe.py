#!/usr/bin/env python3
"""Which bf16 rounding points does an implementation need to match transformers' bf16 model?

Builds the random-weight Qwen3 of check_transformers.py, takes transformers' bf16 eager model
as the reference (greedy 256 tokens after the 39-token prompt, then teacher-forced logits over
that sequence), and compares with it by the check's measures (rel L2, top-1, greedy tokens):
  - transformers bf16 with sdpa attention (another bf16 implementation of the same model);
  - an independent Qwen3 forward in fp32 (weights widened exactly, fp32 matmuls without TF32),
    rounding activations to bf16 at a chosen set of points (none: mpk's fp32 contract; all:
    every point where transformers' eager bf16 model rounds).
Usage: python3 tools/bench/numerics_probe.py --shape qwen3-0.6b --out probe.json
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402
import check_transformers as ct  # noqa: E402

POINTS = ("lin", "norm", "rope", "score", "prob", "attnout", "resid", "act")
VARIANTS = {
    "fp32": (),
    "all": POINTS,
    "all-but-prob": tuple(p for p in POINTS if p != "prob"),
    "all-but-score-prob": tuple(p for p in POINTS if p not in ("score", "prob")),
    "lin+resid": ("lin", "resid"),
    "all-but-rope": tuple(p for p in POINTS if p != "rope"),
}


def forward(W, cfg, ids, rp):
    """Logits [T, V] (fp32) of one causal forward over ids; rp: the rounding points."""
    import torch
    bf = torch.bfloat16

    def r(x, p):
        return x.to(bf).float() if p in rp else x

    def norm(x, g):
        v = x.pow(2).mean(-1, keepdim=True)
        return r(g * r(x * torch.rsqrt(v + cfg.rms_norm_eps), "norm"), "norm")

    def lin(x, w):
        return r(x @ w.t(), "lin")

    T = len(ids)
    H, KV, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    pos = torch.arange(T, device=W["embed"].device, dtype=torch.float32)
    rp_ = getattr(cfg, "rope_parameters", None) or {}
    theta = rp_.get("rope_theta", getattr(cfg, "rope_theta", None))
    inv = 1.0 / (theta **
                 (torch.arange(0, D, 2, device=pos.device, dtype=torch.int64).float() / D))
    fr = pos[:, None] * inv[None, :]
    emb = torch.cat((fr, fr), dim=-1)
    cos, sin = r(emb.cos(), "rope")[:, None, :], r(emb.sin(), "rope")[:, None, :]

    def rope(x):
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        rot = torch.cat((-x2, x1), dim=-1)
        return r(r(x * cos, "rope") + r(rot * sin, "rope"), "rope")

    mask = torch.full((T, T), float("-inf"), device=pos.device).triu(1)
    h = W["embed"][torch.tensor(ids, device=pos.device)]
    for L in W["layers"]:
        x = norm(h, L["in_norm"])
        q = rope(norm(lin(x, L["q"]).view(T, H, D), L["q_norm"]))
        k = rope(norm(lin(x, L["k"]).view(T, KV, D), L["k_norm"]))
        v = lin(x, L["v"]).view(T, KV, D)
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        s = r(r(torch.einsum("thd,shd->hts", q, k), "score") * (D ** -0.5), "score") + mask
        p = r(torch.softmax(s, dim=-1), "prob")
        o = r(torch.einsum("hts,shd->thd", p, v), "attnout").reshape(T, H * D)
        h = r(h + lin(o, L["o"]), "resid")
        x = norm(h, L["post_norm"])
        m = r(r(torch.nn.functional.silu(lin(x, L["gate"])), "act") * lin(x, L["up"]), "act")
        h = r(h + lin(m, L["down"]), "resid")
    return lin(norm(h, W["norm"]), W["lm_head"])


def weights_fp32(model):
    m = model.model

    def f(t):
        return t.detach().float()
    layers = [dict(in_norm=f(l.input_layernorm.weight), post_norm=f(l.post_attention_layernorm.weight),
                   q=f(l.self_attn.q_proj.weight), k=f(l.self_attn.k_proj.weight),
                   v=f(l.self_attn.v_proj.weight), o=f(l.self_attn.o_proj.weight),
                   q_norm=f(l.self_attn.q_norm.weight), k_norm=f(l.self_attn.k_norm.weight),
                   gate=f(l.mlp.gate_proj.weight), up=f(l.mlp.up_proj.weight), down=f(l.mlp.down_proj.weight))
              for l in m.layers]
    return dict(embed=f(m.embed_tokens.weight), norm=f(m.norm.weight), lm_head=f(model.lm_head.weight),
                layers=layers)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bc.add_common_args(ap)
    ap.add_argument("--steps", type=int, default=256)
    ap.add_argument("--greedy-compare", type=int, default=32)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args(argv)
    unknown = [v for v in args.variants.split(",") if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    bc.quiet_transformers()
    t0 = time.time()
    model, cfg = bc.build_model(args.shape, args.device, args.seed, attn_implementation="eager")
    prompt = bc.prompt_ids(args.prompt_len, cfg.vocab_size)
    toks = ct.greedy(model, prompt, args.steps, args.device)
    seq = prompt + toks[:-1]
    ref = ct.teacher_forced(model, seq, args.steps, args.device)
    res = {"shape": args.shape, "steps": args.steps, "versions": bc.versions(), "variants": {}}

    def report(name, logits, greedy_toks):
        c = ct.compare_rows(logits, ref)
        g = bc.token_agreement(toks, greedy_toks, args.greedy_compare)
        row = {k: c[k] for k in ("rel_l2_max", "rel_l2_median", "top1_agreement", "top1_agreement_tie_aware")}
        row["greedy"] = g
        res["variants"][name] = row
        bc.log(f"{name:<22} relL2 max {c['rel_l2_max']:.3e} median {c['rel_l2_median']:.3e} "
               f"top-1 {100 * c['top1_agreement']:.2f}% (tie-aware {100 * c['top1_agreement_tie_aware']:.2f}%) "
               f"greedy[:{args.greedy_compare}] "
               + ("same" if g["identical"] else f"diverge@{g['first_divergence_step']}"))
        bc.write_json(args.out, res)

    bc.set_attn_implementation(model, "sdpa")
    report("hf-bf16-sdpa", ct.teacher_forced(model, seq, args.steps, args.device),
           ct.greedy(model, prompt, args.greedy_compare, args.device))
    W = weights_fp32(model)
    del model
    bc.free_gpu()
    with torch.no_grad():
        for name in args.variants.split(","):
            rp = set(VARIANTS[name])
            logits = forward(W, cfg, seq, rp)[-args.steps:]
            g = list(prompt)
            for _ in range(args.greedy_compare):
                g.append(int(forward(W, cfg, g, rp)[-1].argmax()))
            report(name, logits, g[len(prompt):])
    res["wall_s"] = round(time.time() - t0, 1)
    bc.write_json(args.out, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
