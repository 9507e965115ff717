// The prefill's row kernels' loop nests (ir/loop_nest.h; kernels/prefill_rows.cuh): the
// prefill prints them (runtime/prefill.cc: prefill_source) and proves them (runtime/proofs.cc:
// prefill_proofs), as the megakernel does its task nests (task_nests.h). Each prints a device
// function the kernel's entry calls; the entries hold no index arithmetic of their own.
#pragma once

#include <cstdint>

#include "ir/loop_nest.h"

namespace mpk::ir {

// The row kernels' block sizes (PF_ROW_THREADS, PF_ARGMAX_THREADS in the kernels): the
// launches use them and the nests are proved for them.
inline constexpr int kPrefillRowThreads = 256;
inline constexpr int kPrefillArgmaxThreads = 1024;

// The largest head dimension pf_head_norm_rope takes (its shared buffers; PF_ROPE_MAX_D in the
// kernels): the prefill refuses a model past it (runtime/prefill.cc: prefill_unsupported).
inline constexpr int kRopeMaxHeadDim = 256;

// The element-wise kernels walk the grid in int: at most this many elements (their last index
// plus the grid's threads, at most 65,536 x 256, stays inside int). The prefill refuses a model
// whose chunk holds more (prefill_unsupported).
inline constexpr int64_t kPrefillMaxElements = INT32_MAX - (int64_t(1) << 24);
inline constexpr int64_t kPrefillMaxGridThreads = int64_t(1) << 24;
// The most rows a prefill chunk has (runtime/prefill.h: kPrefillChunk is at most this).
inline constexpr int64_t kPrefillMaxChunkRows = 4096;
// pf_kv_shadow: at most this many planes (a grid's y blocks) and positions per launch (their
// element pairs inside kPrefillMaxElements for any head dim the prefill takes); the host
// splits longer ranges.
inline constexpr int64_t kPrefillMaxPlanes = 65535;
inline constexpr int64_t kPrefillMaxShadowPositions = kPrefillMaxElements / (kRopeMaxHeadDim / 2);

// pf_embed: row `row` (blockIdx.x) of the output is row `tok` (tokens[row]) of the table,
// widened to fp32; the block's threads walk the H elements. Ranges: the token's table row, the
// output row. Accesses: the table (each element of the token's row read once, every one) and
// the output (each element written once, every one). The token itself is inside the table by
// the caller's contract (the session refuses an id past the vocabulary before any launch).
// Printed as pf_embed_row(table, tokens, out, H).
const LoopNest& prefill_embed_nest();

// pf_rms_norm: row `row` of x scaled by its RMS and by w, stored in fp32 or bf16 (the `bf16`
// argument picks the view of out). Two block-strided passes over the H elements (the squares'
// sum, then the scaled row) with the block's sum between them. Accesses: x in each pass (each
// element once, every one), w (each once, every one), out as fp32 and as bf16 (the same
// element; each once, every one). Printed as pf_rms_norm_row(x, w, out, H, eps, bf16).
const LoopNest& prefill_rms_norm_nest();

// pf_argmax's scan: each thread's best of the logits it takes (the block's threads walk the V
// logits) after the first logit, and whether one was not finite. Accesses: logit 0 (every
// thread's start), the logits (each once, every one). Printed as pf_argmax_scan(logits, V, v,
// idx, nonfinite).
const LoopNest& prefill_argmax_nest();

// pf_head_norm_rope: row `row` (blockIdx.x, position pos0 + row) of `heads` heads of D = 2 half
// elements (even: prefill_unsupported), each head RMS-normed by w when `norm` (w not null), then
// rotated by RoPE. The block's threads take the row's cos and sin of the half frequencies into
// shared cs and sn; after the barrier, warp `warp` (of nw) takes heads warp, warp + nw, ...:
// its lanes stage the head (normed or copied) in the warp's D slots of buf, then write the two
// rotated halves. Ranges: the row's heads D elements (in and out), the weight, the frequencies
// and cs/sn, the warps' buffers. Accesses: the frequencies, cs and sn (each written once, every
// one), x in the norm's two passes or the copy (each element once, every one, in its mode), the
// weight, the buffer and cs/sn read per head, the output's halves (each element written once,
// every one). Printed as pf_head_norm_rope_row(x, w, inv_freq, out, cs, sn, buf, heads, D, eps,
// pos0).
const LoopNest& prefill_head_norm_rope_nest();

// pf_head_rms_norm: row `row` (blockIdx.x) of `heads` heads of D = 2 half elements, each head
// RMS-normed by w, where no RoPE follows (pf_head_norm_rope's norm, without the rotation):
// warp `warp` (of nw) takes heads warp, warp + nw, ..., its lanes walking the head's elements
// twice (the squares' lane-strided sum, then the warp's butterfly, then the scaled elements).
// Ranges: the row's heads D elements (in and out), the weight. Accesses: x in both passes and
// the output (each element once, every one), the weight per head. Printed as
// pf_head_rms_norm_row(x, w, out, heads, D, eps).
const LoopNest& prefill_head_rms_norm_nest();

// pf_silu_mul: out[i] = silu(gate[i]) up[i] for i < n, in fp32 or bf16 (`bf16` picks the view),
// the grid's threads walking the n elements. Accesses: gate, up, out (each element once,
// every one). Printed as pf_silu_mul_all(gate, up, out, n, bf16).
const LoopNest& prefill_silu_mul_nest();

// pf_kv_store: rows [0, T) of the chunk's K and V ([T][Hkv][D], D = 2 half) into the layer's
// caches at positions pos0 + t (ir::AttentionRows' kv_elem; capacity cap), fp32 and the bf16
// shadow, one element pair per iteration (the grid's threads walk the T Hkv half pairs). A
// chunk past the capacity writes nothing (the session never asks for one). Ranges: the chunk's
// pairs, the layer's cache. Accesses: K and V as float2 pairs (each once, every one), the
// caches at the pair's first element (each written once, every one where the chunk fits; pairs
// start at even elements, D being even). Printed as pf_kv_store_all(k, v, kc, vc, kc16, vc16,
// T, Hkv, D, cap, pos0).
const LoopNest& prefill_kv_store_nest();

// pf_kv_shadow: the bf16 shadow of positions [from, from + len) of plane p (blockIdx.y: a
// layer's KV head, keys or values; ir::AttentionRows' kv_elem with the planes as heads, capacity
// cap, D = 2 half) from its fp32 cache, one element pair per iteration (the grid's threads walk
// the len half pairs). A range reaching past the capacity writes nothing at all (the session
// never asks for one: the launch checks it).
// Range: the plane. Accesses: the fp32 pair and its bf16 shadow at the same place (each once,
// every one). Printed as pf_kv_shadow_plane(kv, kv16, cap, D, from, len).
const LoopNest& prefill_kv_shadow_nest();

// pf_gemm_reduce: C[i] = the sum over z of partial[z n + i] in z order, plus bias[i % N] and
// R[i] when given, for the n = M N elements of a split GEMM's output, the grid's threads
// walking them. Ranges: the output, the splits' partial tiles, the bias. Accesses: the first
// split's and the others' partials (each term read once, every one), the bias, R and C (each
// output element once, every one). Printed as pf_gemm_reduce_all(partial, splits, bias, R, C,
// M, N).
const LoopNest& prefill_gemm_reduce_nest();

// pf_gemm_reduce_row: row `row` (the block's) of an M x N split GEMM, C[row N + i] = the sum over
// z of partial[z M N + row N + i] in z order plus bias[i] (pf_gemm_reduce_all's arithmetic), by
// the block's threads, each element once. M N as N + gap (gap = (M - 1) N): the partial planes
// hold a row at least, so distinct (z, i) read distinct elements. Printed as
// pf_gemm_reduce_row(partial, splits, bias, C, M, N); its launch has a block per row (row < M).
const LoopNest& prefill_gemm_reduce_row_nest();

// pf_add: out[i] = a[i] + b[i] for i < n, the grid's threads walking the n elements.
// Accesses: a, b, out (each element once, every one). Printed as pf_add_all(a, b, out, n).
const LoopNest& prefill_add_nest();

}  // namespace mpk::ir
