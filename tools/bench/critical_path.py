#!/usr/bin/env python3
"""Critical-path breakdown of one decode step from the megakernel's per-task device timers.

Input: a timeline as decode_bench.py --profile-timeline writes it (JSON, optionally gzipped:
{"timeline": [[task name, worker, start, ready, end], ...]}, globaltimer ns; names like
"L3.gate_up[17]", "lm_head[5]", "argmax[0]"). Every stage waits for the whole previous stage
(one event per stage), so the step is a chain of stages: qkv, attn, attn_out (o_proj),
gate_up, mlp_out (down) per layer, then lm_head and argmax. For each stage:

  span       previous stage's last end -> this stage's last end (the critical path's share)
  hand-off   previous stage's last end -> the ready time of this stage's last-ending task
             (the event's release, the poll that sees it, behind whatever the worker issued)
  busy       that task's ready -> end (input staging, compute, reduction, release)
  spread     first -> last ready time among the stage's tasks

The fixed per-step cost: from the first task's start to the first qkv task's ready time (step
boundary: embedding and the first poll), lm_head and argmax.

Timelines of linear tasks that also carry [.., input, weights, dots] (profile sessions since
the phase timers) split that task's busy time into its phases:

  input      ready -> its input vector staged in shared memory (loads from L2, the prologue)
  weights    input -> its staged weights landed (stage_weights only)
  dots       -> every warp's dot products done
  out        dots -> the task's end (split-K fold, epilogue and stores, the last barrier)

Usage: critical_path.py TIMELINE [--json OUT]; critical_path.py --self-test
"""
import argparse
import collections
import gzip
import json
import re
import statistics
import sys

STAGES = ["qkv", "attn", "attn_out", "gate_up", "mlp_out"]


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["timeline"]


def stage_of(name):
    m = re.match(r"^(?:L(\d+)\.)?([a-z_]+)\[", name)
    if not m:
        raise ValueError(f"unexpected task name {name!r}")
    return (int(m.group(1)) if m.group(1) is not None else None, m.group(2))


PHASES = ("input_us", "weights_us", "dots_us", "out_us")


def phases(task):
    """A task's busy time by phase (PHASES, us), or None without the phase timers."""
    if len(task) < 6 or task[3] is None or task[5] is None:
        return None
    _, ready, end, inp, wgt, dots = task[:6]
    w = wgt if wgt is not None else inp
    return {"input_us": (inp - ready) / 1e3, "weights_us": (w - inp) / 1e3,
            "dots_us": (dots - w) / 1e3, "out_us": (end - dots) / 1e3}


def breakdown(timeline):
    by = collections.defaultdict(list)  # (layer, stage) -> [(start, ready, end, input, weights, dots)]
    for entry in timeline:
        by[stage_of(entry[0])].append(tuple(entry[2:5]) + tuple(entry[5:8]))
    layers = sorted({l for l, _ in by if l is not None})
    chain = [(l, s) for l in layers for s in STAGES if (l, s) in by]
    chain += [(None, s) for s in ("lm_head", "argmax") if (None, s) in by]
    t0 = min(e[2] for e in timeline)
    first_ready = min(t[1] for t in by[chain[0]])
    rows = []
    prev_end = first_ready
    for key in chain:
        tasks = by[key]
        last = max(tasks, key=lambda t: t[2])
        readies = [t[1] for t in tasks]
        rows.append({
            "layer": key[0], "stage": key[1], "tasks": len(tasks),
            "span_us": (last[2] - prev_end) / 1e3,
            "handoff_us": (last[1] - prev_end) / 1e3,
            "busy_us": (last[2] - last[1]) / 1e3,
            "spread_us": (max(readies) - min(readies)) / 1e3,
            "busy_median_us": statistics.median(t[2] - t[1] for t in tasks) / 1e3,
            "phases": phases(last),
        })
        prev_end = last[2]
    return {"step_us": (prev_end - t0) / 1e3, "boundary_us": (first_ready - t0) / 1e3, "stages": rows}


def summary(b):
    per = collections.defaultdict(list)
    for r in b["stages"]:
        per[r["stage"]].append(r)
    out = []
    for stage in STAGES + ["lm_head", "argmax"]:
        rs = per.get(stage)
        if not rs:
            continue
        mean = lambda k: statistics.fmean(r[k] for r in rs)
        row = {"stage": stage, "count": len(rs), **{k: mean(k) for k in
               ("span_us", "handoff_us", "busy_us", "spread_us", "busy_median_us")}}
        ph = [r["phases"] for r in rs if r["phases"]]
        if len(ph) == len(rs):
            row.update({k: statistics.fmean(p[k] for p in ph) for k in PHASES})
        out.append(row)
    return out


def per_layer(s):
    """A layer's critical path by kind of time (us, means over layers): the hand-offs, the
    linear stages' phases summed, and the busy time of stages without phases (attention), or
    None when a linear stage has no phases."""
    rows = [r for r in s if r["stage"] in STAGES]
    if not rows or not any("input_us" in r for r in rows):
        return None
    out = {"span_us": sum(r["span_us"] for r in rows), "handoff_us": sum(r["handoff_us"] for r in rows)}
    for k in PHASES:
        out[k] = sum(r.get(k, 0.0) for r in rows)
    out["other_busy_us"] = sum(r["busy_us"] for r in rows if "input_us" not in r)
    return out


def self_test():
    # Two tasks per stage, one layer, known times (ns): every number of the breakdown follows.
    tl, t = [], 1000
    for stage in STAGES:
        tl.append([f"L0.{stage}[0]", 0, t - 500, t + 300, t + 2300])
        tl.append([f"L0.{stage}[1]", 1, t - 400, t + 100, t + 2000])
        t += 2300
    tl.append(["lm_head[0]", 2, t - 100, t + 200, t + 9200])
    tl.append(["argmax[0]", 3, t, t + 9500, t + 10000])
    b = breakdown(tl)
    assert abs(b["boundary_us"] - 0.6) < 1e-9, b["boundary_us"]  # first start 500, qkv ready 1100
    st = {r["stage"]: r for r in b["stages"]}
    # qkv runs from the first ready time (1100) to the last end (3300); its last-ending task was
    # ready at 1300.
    assert abs(st["qkv"]["span_us"] - 2.2) < 1e-9 and abs(st["qkv"]["handoff_us"] - 0.2) < 1e-9, st["qkv"]
    for stage in STAGES[1:]:
        r = st[stage]
        assert abs(r["span_us"] - 2.3) < 1e-9 and abs(r["handoff_us"] - 0.3) < 1e-9, r
        assert abs(r["busy_us"] - 2.0) < 1e-9 and abs(r["spread_us"] - 0.2) < 1e-9, r
    assert abs(st["argmax"]["handoff_us"] - 0.3) < 1e-9 and abs(st["argmax"]["busy_us"] - 0.5) < 1e-9
    assert len(summary(b)) == len(STAGES) + 2
    assert all("input_us" not in r for r in summary(b))
    # With the phase timers: the last-ending task's busy time by phase (qkv's task 0 was ready at
    # 1300 and ended at 3300: input 1300 -> 1700, no staged weights, dots -> 3000, out -> 3300).
    for e in tl:
        e += [e[3] + 400, None, e[4] - 300] if not e[0].startswith("argmax") else [None, None, None]
    tl[1][6] = tl[1][5] + 200  # a staged task (not the last-ending one of its stage)
    s = {r["stage"]: r for r in summary(breakdown(tl))}
    q = s["qkv"]
    assert abs(q["input_us"] - 0.4) < 1e-9 and q["weights_us"] == 0, q
    assert abs(q["dots_us"] - 1.3) < 1e-9 and abs(q["out_us"] - 0.3) < 1e-9, q
    assert "input_us" not in s["argmax"], s["argmax"]
    tl[0][6] = tl[0][5] + 200
    q = summary(breakdown(tl))[0]
    assert abs(q["weights_us"] - 0.2) < 1e-9 and abs(q["dots_us"] - 1.1) < 1e-9, q
    # Per layer: five stages of 2.3 us spans (qkv 2.2), their hand-offs and phases add up.
    lay = per_layer(summary(breakdown(tl)))
    assert abs(lay["span_us"] - 11.4) < 1e-9 and abs(lay["handoff_us"] - 1.4) < 1e-9, lay
    parts = lay["handoff_us"] + sum(lay[k] for k in PHASES) + lay["other_busy_us"]
    assert abs(parts - lay["span_us"]) < 1e-9, lay
    assert per_layer(summary(breakdown([e[:5] for e in tl]))) is None
    print("critical_path self-test passed")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("timeline", nargs="?")
    ap.add_argument("--json", help="write the breakdown (per stage and summary) here")
    ap.add_argument("--self-test", action="store_true", help="check the arithmetic on a made-up step")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.timeline:
        ap.error("a timeline is needed")
    b = breakdown(load(a.timeline))
    s = summary(b)
    print(f"step {b['step_us']:.1f} us on the device clock; step boundary (first start -> first "
          f"qkv ready) {b['boundary_us']:.1f} us")
    print(f"{'stage':<10} {'n':>3} {'span':>8} {'hand-off':>9} {'busy':>8} {'spread':>8} "
          f"{'busy p50':>9} {'input':>7} {'weights':>8} {'dots':>7} {'out':>7}   (us, mean over "
          f"layers; busy, hand-off and phases of the last-ending task)")
    total = 0.0
    for r in s:
        total += r["span_us"] * r["count"]
        ph = "".join(f" {r[k]:>{w}.2f}" if k in r else f" {'':>{w}}"
                     for k, w in zip(PHASES, (7, 8, 7, 7)))
        print(f"{r['stage']:<10} {r['count']:>3} {r['span_us']:>8.2f} {r['handoff_us']:>9.2f} "
              f"{r['busy_us']:>8.2f} {r['spread_us']:>8.2f} {r['busy_median_us']:>9.2f}{ph}")
    ho = sum(r["handoff_us"] for r in b["stages"])
    print(f"sum of spans {total:.1f} us: hand-offs {ho:.1f} us, busy {total - ho:.1f} us")
    lay = per_layer(s)
    if lay:
        print(f"a layer: {lay['span_us']:.1f} us = hand-offs {lay['handoff_us']:.1f} + input "
              f"{lay['input_us']:.1f} + weights {lay['weights_us']:.1f} + dots {lay['dots_us']:.1f} + out "
              f"{lay['out_us']:.1f} + stages without phases (attention) {lay['other_busy_us']:.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"breakdown": b, "summary": s}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
