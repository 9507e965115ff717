// Layout formulas written once as index expressions (index_expr.h): the scheduler evaluates
// them, the megakernel's source prints them (layout_device_functions) and superopt/ proves
// them (bounds, each item covered exactly once).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "ir/index_expr.h"

namespace mpk::ir {

// Part c of `parts` when `len` items are split evenly: [c * len / parts, (c + 1) * len / parts).
// Used for the KV positions of an attention chunk (len = the live length, position + 1) and a
// merge's output elements over its chunks. Variables: c, len, parts.
struct EvenSplit {
  IndexExpr begin, end;
};
const EvenSplit& even_split_formula();

// The formula evaluated: {begin, end}.
std::pair<int64_t, int64_t> even_split(int64_t len, int64_t parts, int64_t c);

// A linear tile's work items (int arithmetic on the device): item `it` of a tile whose rows
// are grouped by `rows` and whose K is split in `ks` parts (the even split) is row group
// it / ks, first row row0 = (it / ks) * rows, K part part = it % ks; with ks > 1 the sum of
// part p for tile row r goes to shared slot p * total + r of part_sums (total: the tile's
// rows). Variables: it, ks, rows; p, total, r. `item` is the inverse the prover checks (not
// printed): the item of row group g and K part p. Variables: g, p, ks.
struct LinearItems {
  IndexExpr row0, part, slot, item;
};
const LinearItems& linear_items_formula();

// The output tile of warps computing mma.sync m16n8 fragments (the prefill's GEMM and attention
// tiles): element e (0, 1) of half h (0, 1) of fragment (mi, ni) held by lane `lane` of warp
// `warp` sits at row = (warp / wn) * wtm + mi * 16 + lane / 4 + 8 * h and col = (warp % wn) * wtn
// + ni * 8 + lane % 4 * 2 + e of the tile (wn warps across, each a wtm x wtn warp tile).
// Variables: warp, mi, ni, lane, h, e; wn, wtm, wtn. The inverse the prover checks (not
// printed), from row and col: warp_of, mi_of, ni_of, lane_of, h_of, e_of.
struct MmaTile {
  IndexExpr row, col;
  IndexExpr warp_of, mi_of, ni_of, lane_of, h_of, e_of;
};
const MmaTile& mma_tile_formula();

// Chunks of `width` elements of a row-major tile with `ch` chunks per row, loaded by `threads`
// threads: chunk i of thread tid is j = tid + i * threads, at row j / ch and column
// j % ch * width. Variables: tid, i; threads, ch. The inverse (not printed), from row r and
// column c: tid_of, i_of.
struct ChunkLoad {
  IndexExpr row, col;
  IndexExpr tid_of, i_of;
  int64_t width;  // elements per chunk (a constant of the layout)
};
// 16-byte chunks of bf16 (width 8): the GEMM operands and attention's keys and values.
const ChunkLoad& chunk_load_formula();
// Pairs of elements (width 2): attention's Q, staged from fp32, and its keys and values when a
// head's row is not a whole number of 16-byte chunks.
const ChunkLoad& pair_load_formula();

// The 128-byte swizzle of a K-major bf16 tile whose rows are 128 bytes (the prefill's wgmma
// operands, kernels/prefill_wgmma.cuh): 16-byte chunk c (0..7) of row r is stored in chunk
// c ^ (r % 8) of the same row: the pattern the TMA's 128-byte swizzle writes and the
// descriptors' 128-byte mode reads (it spreads the eight rows of a core matrix over distinct
// banks). Not printed: the hardware applies it; the proof states what the kernels rely on. Variables: r, c. The inverse (not printed), from the stored chunk s of row r:
// c_of.
struct Swizzle128 {
  IndexExpr chunk;
  IndexExpr c_of;
};
const Swizzle128& swizzle128_formula();

// Where the prefill's wgmma instructions read their operands (kernels/prefill_wgmma.cuh): a K
// step of a ring buffer holds A's 128 rows, then W's BN (256, or 128 for the narrow tile; the
// SwiGLU tile: Wg's 128, then Wu's), each row 128 bytes (64 bf16) in the 128-byte swizzle. One
// m64nBNk16 of warpgroup wg and K slice kk (16 bf16) reads A from a shared-memory descriptor whose start is a_start bytes past
// the A tile and B from b_start bytes past the W tile, both with 8-row groups kWgmmaSbo bytes
// apart, in the descriptors' 128-byte swizzle mode. Variables: wg, kk.
inline constexpr int64_t kWgmmaSbo = 1024;
struct WgmmaOperands {
  IndexExpr a_start, b_start;
};
const WgmmaOperands& wgmma_operand_formulas();

// Where the wgmma attention (kernels/prefill_wgmma_attention.cuh) reads its operands, in the
// same 128-byte swizzle with 8-row groups kWgmmaSbo bytes apart. Q: each warpgroup's 64 rows
// as two boxes of 64 rows x 64 of d (d 0..63, then 64..127), warpgroup after warpgroup; a
// block's keys, and its values: two boxes of `box` / 128 rows x 64 of d each. S's m64n64k16 of
// warpgroup wg and slice kk (d 16 kk.., kk < 8) reads A at q_start bytes past Q and B at
// k_start bytes past the keys, both K-major; P V's m64n128k16 for keys 16 kk.. (kk < box /
// 2,048) reads B at v_start bytes past the values, MN-major (the cache's rows as they are): 8
// keys of 128 bytes per row group, the second 64 of d `box` bytes on (the descriptor's leading
// offset). Variables: wg, kk, box (bytes of a block's box).
// q_store: where the warpgroup's threads store Q's element (r, d) (r < 64, d < 128) from fp32,
// bytes past its Q region: the layout a TMA box pair of 64 rows x 64 of d leaves, 128-byte
// swizzle included (chunk (d % 64 / 8) ^ (r % 8) of row r of box d / 64). Variables: r, d.
struct WgmmaAttentionOperands {
  IndexExpr q_start, k_start, v_start, q_store;
};
const WgmmaAttentionOperands& wgmma_attention_operand_formulas();

// The order a GEMM grid visits its tiles: the tile rows in groups of g, block (x, y) of a grid of
// (g nn, ceil(nm / g)) computes tile row m = y g + x % g and tile column n = x / g (blocks with m
// >= nm exit), so that the CTAs resident at once share g rows of A and a few columns of W in L2
// instead of sweeping all of W. Variables: x, y, g. The inverse (not printed), from m and n:
// x_of, y_of.
struct TileOrder {
  IndexExpr m, n;
  IndexExpr x_of, y_of;
};
const TileOrder& tile_order_formula();

// One stage of a bitonic sort of m keys in shared memory (the draws' sort, kernels/sample_topk.cuh,
// printed in ir::sample_sort_stage_nest):
// with compare distance s (a power of two below m), thread item j < m / 2 compares keys lo =
// j / s * 2s + j % s and hi = lo + s. Variables: j, s. The inverse (not printed), from a key
// index x: j_of, side_of (0: lo, 1: hi).
struct BitonicPair {
  IndexExpr lo, hi;
  IndexExpr j_of, side_of;
};
const BitonicPair& bitonic_pair_formula();

// The weight ring of staged linear tasks (kernels/stage.cuh): copy c of `bytes` bytes (a
// multiple of 16, at most the ring's `size`, a multiple of 128) goes to ring offset at: the
// even copies at the start, the odd ones as far up as 128-byte alignment allows, so that a copy
// and the one before it (the running task's) are apart when they fit together. The host sizes
// the ring for two consecutive copies of a and b bytes as need, for one of a bytes as alone
// (runtime/megakernel.h stage_ring_need). Variables: c, size, bytes; a, b.
struct StageRing {
  IndexExpr at, need, alone;
};
const StageRing& stage_ring_formula();

// The lane addresses of ldmatrix.x4 that load mma.sync m16n8k16 bf16 operands (the prefill's
// GEMM and attention tiles): lane `lane` names (row, col) of a 16 x 16 block of a row-major
// shared tile, the first of 8 bf16 forming row lane % 8 of matrix lane / 8; register i of each
// thread receives from matrix i. Three uses:
//   a   the A operand, from rows m and columns k;
//   b   the B operands of two n8 tiles, from rows n and columns k (registers 0, 1: the first
//       tile's halves k 0-7 and 8-15; 2, 3: the second's);
//   bt  the same from rows k and columns n, by ldmatrix .trans (V in attention).
// Variables: lane.
struct LdmatrixAddr {
  IndexExpr row, col;
};
struct LdmatrixOperands {
  LdmatrixAddr a, b, bt;
};
const LdmatrixOperands& ldmatrix_formulas();

// Attention's P from its S accumulators: A register i (of keys 16 kk .. 16 kk + 15) packs, as
// its halves j = 0, 1, accumulator element elem(i, j) of n8 tile 2 kk + tile(i) (the mma tile's
// fragment order, MmaTile: h = elem / 2, e = elem % 2). Variables: i, j.
struct AccAsA {
  IndexExpr tile, elem;
};
const AccAsA& acc_as_a_formula();

// The folded down projection's lanes (fold_down, kernels/linear.cuh mk_linear_fold): the tile's
// `rows` rows of W_down columns, each row `vpr` 16-byte vectors, are read by the compute warps
// with a row's vectors on a group of vp2 lanes (vp2 the smallest power of two >= vpr, at most
// 32), 32 / vp2 rows per warp and load slot. Warp w's rounds start at row group g0 = w, w + nw u,
// ... (nw warps, u slots per round); lane `lane` of slot j holds vector vec = lane % vp2 of row
// row = (g0 + j nw) (32 / vp2) + lane / vp2, guarded by g0 + j nw < groups, row < rows and
// vec < vpr, and a row's vp2 lanes add their sums by a shuffle butterfly. Variables: g0, j, lane;
// nw, vp2. The inverse (not printed), from row n and vector v (with u): warp_of, round_of, j_of,
// lane_of.
struct FoldLanes {
  IndexExpr row, vec;
  IndexExpr warp_of, round_of, j_of, lane_of;
};
const FoldLanes& fold_lanes_formula();

// Attention's states (kernels/attention.cuh, merge.cuh; sized by scheduler/decompose.cc): a
// state row is D + 2 floats, D unnormalised output sums, then the running max, then the
// running sum; element e of row `row` is at slot = row * (D + 2) + e. In the partials buffer
// KV head h's chunk c (of C) holds the states of its G query heads in rows partial_row = (h * C
// + c) * G + g; in a worker's shared memory warp w keeps its state of its pass's head i (of hp)
// in row warp_row = w * hp + i. Variables: row, e, D; h, c, g, C, G; w, i, hp.
struct AttentionStates {
  IndexExpr slot, partial_row, warp_row;
};
const AttentionStates& attention_states_formula();

// The decode attention's rows (kernels/attention.cuh, merge.cuh; the ranges declared by
// scheduler/decompose.cc, the cache sized by runtime/megakernel.cc) and the prefill's KV stores
// (kernels/prefill_rows.cuh): in an activation of heads x D floats (the queries, the step's new
// key and value rows, attention's output) element e of head hd is at head_elem = hd * D + e; KV
// head h's group of G query heads are heads q_head = h * G + g (g < G); a layer's KV cache of
// `cap` positions holds element e of KV head h's position j at kv_elem = (h * cap + j) * D + e.
// Variables: hd, e, D; h, g, G; j, cap.
struct AttentionRows {
  IndexExpr head_elem, q_head, kv_elem;
};
const AttentionRows& attention_rows_formula();

// A block's threads walking a rows x cols grid row-major in a strided loop (items idx = tid,
// tid + threads, ... while idx < rows cols, each idx once): item idx is element (row, col) =
// (idx / cols, idx % cols). Attention's combine and the merge walk query heads x head dim so
// (ir/task_nests.h, whose proofs check the items). Variables: idx, cols. The inverse the
// nests' covers use (not printed), from row r and column c: idx_of = r cols + c.
struct GridItems {
  IndexExpr row, col, idx_of;
};
const GridItems& grid_items_formula();

// The formulas evaluated. A range of states is [state_slot(first row, 0), state_slot(end row,
// 0)): KV head h's chunk c writes rows [partial_row(h, c, 0), partial_row(h, c, G)), head h's
// partials are rows [partial_row(h, 0, 0), partial_row(h, C, 0)), the buffer rows [0,
// partial_row(Hkv, 0, 0)); the warps' states take rows [0, warp_state_row(nw, 0, hp)).
int64_t state_slot(int64_t row, int64_t e, int64_t D);
int64_t partial_row(int64_t h, int64_t c, int64_t g, int64_t C, int64_t G);
int64_t warp_state_row(int64_t w, int64_t i, int64_t hp);
// The rows evaluated: an activation of `heads` heads has head_elem(heads, 0, D) elements, KV
// head h's query heads are [q_head(h, 0, G), q_head(h + 1, 0, G)), a layer's cache of Hkv heads
// has kv_elem(Hkv, 0, 0, cap, D) elements.
int64_t head_elem(int64_t hd, int64_t e, int64_t D);
int64_t q_head(int64_t h, int64_t g, int64_t G);
int64_t kv_elem(int64_t h, int64_t j, int64_t e, int64_t cap, int64_t D);

// Device functions printed from the formulas, for the megakernel's source:
// mk_even_split_begin(c, len, parts) and mk_even_split_end(c, len, parts), long long;
// mk_lin_row0(it, ks, rows) and mk_lin_part(it, ks), int (the split-K slot is printed in the
// linear's loop nests, ir/task_nests.h);
// the weight ring's mk_stage_at(c, size, bytes), long long (the bitonic pairs and the fold's
// lanes are printed in their loop nests, ir/task_nests.h); attention's states: mk_state_slot(row, e, D) and
// mk_partial_row(h, c, g, C, G), long long (global memory), mk_smem_state(row, e, D) and
// mk_warp_row(w, i, hp), int (shared memory); attention's rows: mk_head_elem(hd, e, D),
// mk_q_head(h, g, G) and mk_kv_elem(h, j, e, cap, D), long long.
std::string layout_device_functions();

// For the prefill's source (kernels/prefill_gemm.cuh, prefill_wgmma.cuh, prefill_attention.cuh,
// prefill_wgmma_attention.cuh): the even split as
// above (pf_even_split_begin, pf_even_split_end, long long), and templates over the tile
// constants: pf_frag_row<wn, wtm>(warp, mi, lane, h), pf_frag_col<wn, wtn>(warp, ni, lane, e),
// pf_chunk_row<threads, ch>(tid, i), pf_chunk_col<threads, ch>(tid, i) and
// pf_pair_row<threads, ch>(tid, i), pf_pair_col<threads, ch>(tid, i),
// pf_wg_a_start(wg, kk), pf_wg_b_start(kk) and PF_WG_SBO, pf_wa_q_start(wg, kk),
// pf_wa_k_start(kk, box), pf_wa_v_start(kk), pf_tile_m(x, y, g), pf_tile_n(x, g),
// pf_ldsm_{a,b,bt}_{row,col}(lane), pf_acc_a_tile(i) and pf_acc_a_elem(i, j), int;
// pf_kv_elem(h, j, e, cap, D), long long (ir::AttentionRows: where the decode reads the rows).
std::string prefill_layout_device_functions();

}  // namespace mpk::ir
