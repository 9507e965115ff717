// The task kernels' loop nests (ir/loop_nest.h), built from the layout formulas (layouts.h): the
// megakernel prints them (print) and superopt/ proves them (prove_loop_nest).
#pragma once

#include "ir/loop_nest.h"

namespace mpk::ir {

// The attention merge (kernels/merge.cuh): one KV head's chunk partials combined per query head
// and dimension. A block's threads walk the G x D outputs (GridItems); each thread reads its
// element's C chunk states, `B` (MK_MERGE_BATCH) chunks a round, from `part`, the head's first
// state row (AttentionStates), and writes the output element (AttentionRows). Parameters: G, D,
// C, h (the KV head), B, threads. Ranges: the head's partials [0, slot(partial_row(0, C, 0), 0)),
// the output heads of h's group, a batch's registers [0, B). Accesses: the batch's registers
// (mc, lc, oc), the states' max, sum and sums (each chunk's term of each output read once, every
// one read), the output (each element written once, every one).
// Printed as mk_attn_merge(const MkTask& t, const float* part).
const LoopNest& attention_merge_nest();

// An attention chunk's passes over its query heads (kernels/attention.cuh): `HP`
// (MK_HEADS_PER_PASS) heads a pass; each pass first runs `pass(g0)`, the warps' online softmax
// over the chunk's positions for heads g0 .. g0 + HP - 1, which leaves warp w's state of the
// pass's head i in shared-memory row warp_row(w, i, HP) of `wst` (AttentionStates; proved by
// prove_attention_warp_states), then a barrier, then the combine: the block's threads walk the
// pass's heads x D (GridItems), each reading every warp's state of its element, and write the
// output (one chunk: AttentionRows) or the chunk's partial state rows, relative to the chunk's
// first row (several; the rows by prove_attention_partials). Parameters: G, D, C, h (the KV
// head), HP, nw (warps), threads. Ranges: the warps' states, the output heads of h's group, the
// chunk's G partial rows. Accesses: the states' max (every warp's), sum and sums (every term
// read), the output or the partials (each element written once, every one, in its mode).
// Printed as mk_attn_passes(const MkTask& t, const float* wst, int group, int head_dim,
// int kv_head, Pass pass).
const LoopNest& attention_combine_nest();

// One pass of an attention chunk over its positions (kernels/attention.cuh, the `pass` of
// attention_combine_nest): warp w (of nw) takes the chunk's positions j0 + w, j0 + w + nw, ...
// < j1, its lanes elements lane + 32 c (c < DC) of the K and V rows of KV head kvh in the
// layer's cache (AttentionRows); per position, each of the pass's heads g0 + h < G (h < HP)
// takes its score against the staged query (qk: the group's heads, AttentionRows' head_elem)
// and updates its online-softmax state; then the warp stores its states in shared-memory rows
// warp_row(w, h, HP) of wst (AttentionStates), which the combine reads. The warp's first
// position may come from registers (`pre_`: kpre, vpre, loaded before the task's events by
// attention_kv_first_nest; the proof counts those elements as reads of the cache they came from).
// Parameters: G, D, kvh, cap, g0, j0, j1, HP, DC, nw, threads (32 nw). Ranges: a K or V
// row's D elements (K and V as pairs (position - j0 in [0, j1 - j0), element), printed at
// their place in the cache: distinct pairs are distinct places by the attention rows' proof),
// the staged queries, a state row's D + 2 slots, a row's and the heads' registers. Accesses: K
// and V (each element of the chunk read once a pass, every one), the queries per position (each score term once, every one of the
// pass's heads), the states as pairs (state row, slot in the row) (each written once, every
// one; that distinct pairs are distinct slots inside the warps' region is
// prove_attention_warp_states'). Printed as mk_attn_pass(t, qk, wst, kc, vc, group, head_dim,
// kv_head, cap, g0, j0, j1, pre, kpre, vpre).
const LoopNest& attention_pass_nest();

// The position of a chunk's rows warp w takes first (j0 + w): the pass's first, whose K and V
// rows attention_kv_first_nest loads before the task's events when they are old enough.
IndexExpr attention_first_position();

// A head's constants for staging it (kernels/attention.cuh), known before the task's events: a
// warp's lanes take the head RMSNorm scale's elements lane + 32 c < D (c < DC) and RoPE's
// rotation (cos, sin of position * inv_freq[i]) for i = lane + 32 c < D / 2 (c < DH); zero or
// the identity where the head has no norm or no rotation. Parameters: D, DC, DH, threads (32).
// Accesses: the scale and the frequencies (each element read once; every one when the head has a
// norm and a rotation: the flags are the body's code), the registers.
// Printed as mk_head_consts(const MkTask& t, int h, int position, MkHeadConsts& hc).
const LoopNest& attention_head_consts_nest();

// The K and V rows of the position warp w takes first (attention_first_position), loaded into
// registers before the task's events when the position is inside the chunk [j0, j1) and at most
// pos - 2 (history written by an earlier step: visible without the events). Returns whether it
// loaded them. Parameters: D, kvh, cap, j0, j1, pos, DC, nw, threads. Accesses: K and V as
// pairs (position - j0, element), the position inside the chunk's rows of earlier steps (below
// min(j1, pos - 1)), printed at their place in the cache (each element once; every element of
// every warp's first row that qualifies),
// the registers. Printed as mk_attn_first(kc, vc, head_dim, kv_head, cap, j0, j1, position,
// kpre, vpre).
const LoopNest& attention_kv_first_nest();

// An attention chunk's heads staged in shared memory and the step's new rows appended to the
// cache (kernels/attention.cuh): warp w takes heads w, w + nw, ... < G + A (the group's query
// heads, then the new key when the chunk appends: A = 1), each lane its elements lane + 32 c of
// the head's row (every load before any use, zero past D), applies the head RMSNorm and RoPE
// (pairs i, i + D / 2, rotated in place; the warp's first head with the constants loaded before
// the events, `first`, the others with their own), and the key's warp writes the staged key to
// the cache at `pos`; the last warp of an appending chunk copies the new value row. Parameters:
// G, D, kvh, cap, pos, A, DC, DH, nw, threads. Ranges: the group's query rows, KV head kvh's new
// K and V rows, the staged heads (G + 1 rows of D), the cache row at pos, the registers.
// Accesses: each row read once and every element of it; the staged rows (each element written
// once, every one; RoPE's pairs each once and every element of a head of even D); the cache rows
// (each element once, every one, when the chunk appends). Printed as mk_attn_stage(t, qk, kc,
// vc, group, head_dim, kv_head, cap, position, appends, first).
const LoopNest& attention_stage_nest();

// A linear's input staged in shared memory (kernels/linear.cuh, mk_linear_input): n units of W
// floats (a 16-byte vector when the operands are aligned, else one float; W a run-time value), in
// rounds of U units per thread (a thread's loads of x and b go out before any is used: the input
// comes from L2 right after the events), each staged through its prologue (mk_stage_unit:
// silu(x) * b, b * x for RMSNorm with x^2 added to the thread's sum of squares, or x; b may be
// null). Parameters: n, W, U, threads. Ranges: the input's unit starts [0, W n - W], a round's
// registers. Accesses: x and b (each unit read once, every one), the registers, the staged input
// (each unit written once, every one). Printed as mk_lin_stage(const MkTask& t, const float* x,
// const float* b, float* xs, bool vec, int n), returning the thread's sum of squares.
const LoopNest& linear_stage_nest();

// A warp's dot products over one K part of R weight rows (kernels/linear.cuh, 16-byte vectors):
// the part's n vectors from v0 in rounds of U loads per row and lane, 32 apart (every lane's R x
// U loads go out before any is used), the whole rounds, then the lane's partial one; when the
// first round is in registers (first_: F = 32 U, `pre`, loaded before the task's events by
// linear_dot_first_nest) it is used from there and the rounds start after it. acc[r] +=
// w_r[vec] . x[vec] per element (mk_dp_step). Parameters: v0, n, F (0 or 32 U), U, R, V
// (elements a vector), threads (32: the lanes). Ranges: the part from F on, its input elements,
// a round's and the rows' registers. Accesses: the weights (each row's vectors from F on read
// once, every one, none before F), the registers, the input per row (every row's every element
// of the part reached by a product, the first round's included). Printed as
// mk_dot_vecs<DT, R_, Smem>(w, xs, v0, n, first, pre, acc).
const LoopNest& linear_dot_nest();

// The first round of linear_dot_nest, loaded into registers (`pre`) before the task's events:
// each row's vectors [v0, v0 + min(n, 32 U)) read once, every one; the loads past the part zero.
// Printed as mk_dot_first<R_>(w, v0, n, pre).
const LoopNest& linear_dot_first_nest();

// A warp's dot products over a K part of elements [k0, k0 + n) of R rows that are not 16-byte
// aligned: one element per lane, 32 apart. Accesses: the weights and the input per row (each
// read once, every one). Printed as mk_dot_scalar<DT, R_>(w, xs, k0, n, acc).
const LoopNest& linear_dot_scalar_nest();

// A linear tile's work items (kernels/linear.cuh): the (row group, K part) pairs of
// LinearItems dealt to the block's nw warps on round-robin (item it to warp it % nw, in its
// round it / nw), the full groups of R rows first, each a call of mk_lin_dots (the group's dot
// products over the part's elements, mk_kpart); then, when R does not divide the tile's rows,
// the last group's items one row at a time. Lane 0 stores each row's sum: scaled through the
// epilogue (one part: o[j], the group's rows with their slices, bias and residual) or into its
// part slot (several; the kernel's guard ks * total <= S, as the fold's). Parameters: total, ks,
// R, S, nw (the threads: warps). Accesses: the rows (one part) and the slots (several), each
// stored once and every one. Printed as mk_lin_items<DT, R_, Smem>(t, xs, scale, total, ks,
// units, unit, aligned, part_sums, first, pre, ws): `first`, the first item's first round is in
// `pre`; Smem, the rows are staged at ws.
const LoopNest& linear_items_nest();

// A linear tile's split-K fold (kernels/linear.cuh): with ks > 1 K parts, after a barrier, the
// block's threads walk the tile's rows, each adding its row's ks part sums from the shared
// slots (LinearItems' slot) in part order and storing the scaled sum through the tile's
// epilogue (`rows[r] = v`: the row's slice, bias and residual). The kernel's guard ks * total
// <= S (the slots; mk_ksplit picks no split past it) is the nest's too. Parameters: total, ks,
// S, threads. Ranges: the slots, the tile's rows. Accesses: the part sums (each read once,
// every one), the rows (each stored once, every one). Printed as mk_lin_fold(const MkTask& t,
// const float* part_sums, int total, int ks, float scale).
const LoopNest& linear_fold_nest();

// An LM-head tile's argmax partial (kernels/linear.cuh), after its logits are stored: the block's
// threads walk the tile's rows (MkTileRows: row r of its concatenated slices), each reading its
// rows' logits (each once, every one) into its best (value, id): id = o + r (o: the logits'
// index of the tile's first row), a non-finite logit as NaN, under MPK_MK_SAMPLE_GUMBEL the
// Gumbel key when the draw asks for it (mk_better's order does not depend on the visit order).
// Parameters: total, o, threads. Printed as mk_lin_argmax(const MkTask& t, int total, const
// MkDraw& draw, float& best, int& bi).
const LoopNest& linear_argmax_nest();

// The folded down projection (fold_down, kernels/linear.cuh mk_linear_fold), in four nests:
// - fold_act_nest: a = silu(gate) * up over the tile's `cols` rows (its slices 0 and 1, each
//   read once and every one; a written once, every element). Printed as mk_fold_act(t, a).
// - fold_rows_nest: W_down's `rows` rows of the tile's columns, `vpr` 16-byte vectors each (V
//   elements), by lane groups of vp2 (FoldLanes): warp w's rounds from row group g0 = w, step
//   nw U; slot j of a round holds lane `lane`'s vector of row n (fold_lanes_formula), copied into
//   the thread's shared-memory slots tid + j threads with every copy of the round before any
//   use (the slots inside the buffer; that no thread touches another's, which lets its own
//   cp.async wait stand for a barrier, is the index's form, not proved); the products with a's elements (registers av), the group's lanes summed, lane 0 of the
//   group stores acc[n]. Under the kernel's guard vpr <= vp2. W_down as pairs (row, vector),
//   printed at row LD + vector: each read once, every one; acc each row once, every one.
//   Printed as mk_fold_rows<DT>(t, a, acc, sl, vpr, vp2).
// - fold_scalar_nest: the unaligned case: acc zeroed, then the block's threads walk rows x cols,
//   element (n, c) added into acc[n] atomically (each weight element read once, every one).
//   Printed as mk_fold_scalar<DT>(t, a, acc).
// - fold_out_nest: the rows' sums reduced into the output: Q quads of four rows (Q = rows / 4
//   when the kernel can, else 0; the kernel's guard 4 Q <= rows), then rows 4 Q .. rows - 1
//   (each once, every one; quad q is rows 4 q .. 4 q + 3, so the two loops meet at row 4 Q:
//   the nest proves each loop, the pairing of a quad with its rows is the code's). Printed as
//   mk_fold_out(t, acc).
const LoopNest& fold_act_nest();
const LoopNest& fold_rows_nest();
const LoopNest& fold_scalar_nest();
const LoopNest& fold_out_nest();

// The top-k draw's pass over the step's n logits (kernels/sample_topk.cuh): f(i, logits[i], true) for
// every i < n, in rounds that whole warps take together (f may use warp collectives; a lane past
// the end calls f with false): the n / 4 whole 16-byte vectors in rounds of U per thread (every
// load of a round before any use; f called per element through mk_sample_visit4), then the
// last n % 4 logits one per thread. Parameters: n, U, threads. Accesses: the vectors and the
// tail (each read once, every one), a round's registers. Printed as mk_sample_scan<F>(logits,
// n, f). sample_scan2_nest: the same with U = 2, printed as mk_sample_scan2 (the nucleus draw's
// passes: their work per logit is heavier, and eight rounds in flight cost the kernel a spill).
const LoopNest& sample_scan_nest();
const LoopNest& sample_scan2_nest();

// The top-k draw's strided sample (kernels/sample_topk.cuh), when n > S logits: S = half the
// sort's capacity; sample j is logit floor(j n / S) (computed as j (n / S) + j (n % S) / S, inside
// int for any n), loaded in rounds of U per thread (all loads of a
// round first), its key written to keys[j]. Parameters: n, S, U, threads. Accesses:
// the logits (inside), each key written once, every one. Printed as
// mk_sample_stride(logits, n, keys).
const LoopNest& sample_stride_nest();

// The top-k draw's radix histogram cleared before a pass (kernels/sample_topk.cuh): the block's
// threads walk its B = 256 bins, each written once, every one. Printed as
// mk_sample_hist_clear(hist).
const LoopNest& sample_hist_clear_nest();

// The nucleus's weights in integer units (ref/sampling_math.h), by one thread, loaded U = 8 at
// a time: their total (sample_total_nest: each read once, every one; printed as
// mk_sample_total(w, k)), and the cut (sample_cut_nest): from `run`, the mass ranked before
// them, added in order until it reaches `target` (a prefix, each read at most once; the loop
// stops at the cut). Returns the cut, the candidates the draw keeps (k when never reached).
// Parameters: k, U, threads (1). Printed as mk_sample_cut(w, k, run, target).
const LoopNest& sample_total_nest();
const LoopNest& sample_cut_nest();

// The radix select's walk down its histogram (kernels/sample_topk.cuh), by one thread: from the
// top of the B = 256 bins down to the first whose count brings the counts above it to `need`
// (each bin read at most once, inside; the loop stops there). Returns that bin and, in `above`,
// the count of the bins above it; bin 0 and every count when none does (the kernel's counts
// always reach it). Parameters: B, threads (1). Printed as mk_sample_walk(hist, need, above).
const LoopNest& sample_walk_nest();

// The nucleus's radix select over every logit (kernels/sample_topk.cuh): the block's threads
// clear the B = 256 bins' counts and masses (sample_mass_clear_nest: each written once, every
// one; printed as mk_sample_mass_clear(hist, mass)); one thread walks down the masses from the
// top to the first bin that brings the mass ranked before it (`above`, updated) to `target`
// (sample_mass_walk_nest: each bin read at most once, inside; it stops there). Returns that
// bin; bin 0 when none does (the kernel's masses always reach it). Parameters: B, threads.
const LoopNest& sample_mass_clear_nest();
const LoopNest& sample_mass_walk_nest();

// The draw's bitonic sort of n keys (kernels/sample_topk.cuh), over m, the next power of two:
// the block's threads zero the padding keys [n, m) (each written once, every one; printed as
// mk_sample_sort_pad(keys, n, m)); a stage of compare distance s over m = q 2s keys: item j < q s
// compares keys lo and lo + s (lo from ir::BitonicPair) in the direction `size` gives and swaps
// them (each key read once, every one; each stored at most once), printed as
// mk_sample_sort_stage(keys, m, s, size). Parameters: n, m, threads; s, q, threads (s fixed per
// proof).
const LoopNest& sample_sort_pad_nest();
const LoopNest& sample_sort_stage_nest();

// The top-k draw's loops over its n sorted candidate keys (kernels/sample_topk.cuh), the block's
// threads each taking keys j, j + threads, ...: their nucleus weights e^(z / T - z_max) into w
// (sample_weights_nest: each key read once and each weight written once, every one; printed as
// mk_sample_weights(keys, w, n, temperature, zmax)), and the argmax of the Gumbel keys over the
// nucleus's n candidates (sample_nucleus_draw_nest: each key read once, every one; printed as
// mk_sample_nucleus_draw(keys, n, prm, position, best, bi), each thread's best). Parameters: n,
// threads.
const LoopNest& sample_weights_nest();
const LoopNest& sample_nucleus_draw_nest();

// The argmax's read of the LM-head tiles' partials (kernels/argmax.cuh): the block's threads
// walk the n partials (value and index), each read once and every one. Parameters: n, threads.
// Printed as mk_argmax_partials(const MkTask& t, float& best, int& bi) (each thread's best).
const LoopNest& argmax_partials_nest();

// The next step's embedding row (kernels/argmax.cuh): token `feed`'s row of the [V][H] table
// copied to the hidden vector, in rounds of U elements per thread (a thread's U loads go out
// before its stores: a store could alias the next load), under the kernel's guard 0 <= feed <
// V. Parameters: H, V, feed (any int: the token is a run-time value), U, threads. Ranges: the
// table, the hidden vector, a round's registers. Accesses: the row read (inside the table for
// every feed the guard lets through, each element once, every one), the registers, the output
// (each element written once, every one). Printed as mk_embed_row<DT>(const MkTask& t, int feed).
const LoopNest& embedding_row_nest();

}  // namespace mpk::ir
