// Proofs about index expressions (ir/index_expr.h) with Z3. Encoding: integers, C truncating
// division and remainder, every intermediate value inside int64 as a side condition,
// quantifier-free. Each query has a limit on Z3's work (z3_check.h); unknown counts as not proved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/index_expr.h"
#include "ir/layouts.h"

namespace mpk::superopt {

struct Obligation {
  std::string name;            // e.g. "bounds", "at most once", "at least once"
  std::string result;          // "proved", "refuted" or "unknown"
  double ms = 0;
  std::string counterexample;  // "c=1 len=3 parts=2 ..." when refuted
  uint64_t work = 0;           // Z3's resource count for the query (z3_check.h: the limit)
};

struct ProofRecord {
  std::string subject;  // what was proved, with its formulas
  std::string z3_version;
  std::vector<Obligation> obligations;
  bool proved() const;
  std::string to_json() const;  // {"subject":..,"z3":..,"obligations":[{name,result,ms,...}]}
};

// The even split of `len` items into `parts` (ir::EvenSplit, or a mutant of it), for a part
// count the plan fixes (one proof per task class), every run-time length 0 <= len <= max_len
// and every part 0 <= c < parts, all symbolic:
//   defined       no division by zero, no 64-bit overflow;
//   bounds        0 <= begin <= end <= len;
//   exactly once  part 0 begins at 0, the last part ends at len, and each part ends where the
//                 next begins: with the bounds, every item lies in exactly one part.
ProofRecord prove_even_split(const ir::EvenSplit& f, int64_t max_len, int64_t parts,
                             unsigned timeout_ms = 10000);

// A linear tile's work items (ir::LinearItems, or a mutant), for a variant's rows per group and
// a K part count (constants: one proof per task class), every tile of 1 <= total <= max_total
// rows and every item, row and part symbolic, in int arithmetic:
//   defined         no division by zero, no int overflow;
//   items           an item names a row group's first row and a K part, each pair from
//                   exactly one item (the description's inverse map checked);
//   rows            each tile row lies in the rows of exactly one group;
//   slots (ks > 1)  under the kernel's guard ks * total <= slots, a (part, row) sum's slot is
//                   inside part_sums and no two pairs share one.
ProofRecord prove_linear_items(const ir::LinearItems& f, int64_t num_parts, int64_t rows,
                               int64_t max_total, int64_t slots, unsigned timeout_ms = 10000);

// A warp-tiled mma.sync output tile (ir::MmaTile, or a mutant) of bm x bn elements computed by
// warps_m x warps_n warps (warp tiles of wtm = bm / warps_m by wtn = bn / warps_n, multiples of
// 16 and 8: constants, one proof per tile shape), in int arithmetic over every warp, fragment
// (mi < wtm / 16, ni < wtn / 8), lane, half and element, all symbolic:
//   defined        no division by zero, no int overflow;
//   bounds         every element inside the tile;
//   pairs          a holder's e = 0 at an even column, e = 1 at the next in its row;
//   exactly once   the description's inverse maps each tile element to a holder in range that
//                  holds it; as holders and elements are equally many (checked), a bijection;
//   heads          with one warp across (warps_n 1) and bn a multiple of `head` (a multiple of
//                  16): the epilogue of kernels/prefill_wgmma.cuh (pf_wg_head_rope_store) that
//                  norms and rotates heads of `head` columns: fragment ni holds columns of head
//                  ni / (head / 8); fragment ni + head / 16 the column head / 2 to the right in
//                  the same row (ni in the head's first half); two holders of one row are one
//                  warp, fragment row and half, and lanes of one quad (lane / 4).
ProofRecord prove_mma_tile(const ir::MmaTile& f, int64_t bm, int64_t bn, int64_t warps_m, int64_t warps_n,
                           unsigned timeout_ms = 10000, int64_t head = 128);

// A tile of `rows` rows of ch chunks of the layout's width (f.width elements: 8 bf16 are 16
// bytes, 2 a pair) loaded by `threads` threads in rows * ch / threads rounds (ir::ChunkLoad, or a
// mutant) into shared-memory rows of `ld` elements (constants):
//   defined; bounds (row < rows, column a multiple of width with column + width <= ch * width, so
//   the chunk lies inside its shared row and the tile's rows * ld elements); exactly once
//   through the inverse, as above.
ProofRecord prove_chunk_load(const ir::ChunkLoad& f, int64_t rows, int64_t ch, int64_t threads, int64_t ld,
                             unsigned timeout_ms = 10000);

// The 128-byte swizzle (ir::Swizzle128, or a mutant) over a tile of `rows` rows of 128 bytes,
// row r and chunk c symbolic, in int arithmetic:
//   defined; bounds (the stored chunk lies in its row: 0 <= chunk < 8, so row r's bytes stay
//   [128 r, 128 r + 128) of the tile's rows * 128); the hardware's pattern (the chunk equals bits
//   4-6 XOR bits 7-9 of the unswizzled byte address r * 128 + c * 16, the 128-byte mode wgmma
//   reads on a 1,024-byte aligned tile); exactly once (two chunks of one row never share a slot,
//   and the inverse names the chunk stored in every slot).
ProofRecord prove_swizzle128(const ir::Swizzle128& f, int64_t rows, unsigned timeout_ms = 10000);

// The prefill's wgmma operand reads (ir::WgmmaOperands: `start`, a_start or b_start, or a
// mutant) against the TMA's stores, for one operand: a ring tile of tile_rows rows of 128 bytes
// at a 1,024-byte aligned shared-memory address, warpgroups wg < wgs whose operand row i < rows
// is tile row wg * wg_rows + i (A: 2 x 64 rows of 128; W: both read all 256), 8-row groups `sbo`
// bytes apart; for every warpgroup, K slice kk < 4, row i, element j < 16 of the slice and tile
// address, symbolic, in 32-bit arithmetic:
//   defined   the start formula in int;
//   bounds    the start and the byte read lie inside the tile;
//   element   the byte the descriptor reads for (i, j) is where the TMA stored the element of
//             tile row wg * wg_rows + i, K element 16 kk + j. Both written here from the PTX ISA
//             and the CUDA tensor-map documentation, independently of the formula: the
//             descriptor's 128-byte swizzle mode reads (i, j) at start + (i / 8) sbo + (i % 8)
//             128 + 2 j, and the 128-byte swizzle box stores (row, e) at tile + 128 row + 2 e,
//             both then swizzled alike on the absolute address (bits 4-6 XOR bits 7-9: the
//             pattern prove_swizzle128 shows a bijection within each row), so equal addresses
//             before it suffice.
ProofRecord prove_wgmma_operand(const ir::IndexExpr& start, const std::string& what, int64_t wgs, int64_t wg_rows,
                                int64_t rows, int64_t tile_rows, int64_t sbo, unsigned timeout_ms = 10000);

// The general form (the overload above is its case of one box, warpgroup regions wg_rows rows
// apart): a K-major operand laid out as the wgmma attention's (ir::WgmmaAttentionOperands'
// Q and keys): K slices kk < `slices` of 16, over boxes of 64 K-elements `box_bytes` apart
// (slice kk in box kk / 4), warpgroup wg's rows in its own region `wg_bytes` on (0: all read
// the same rows), each row 128 bytes; the start formula may read `box` (= box_bytes). Stored:
// wg wg_bytes + (kk / 4) box_bytes + 128 i + 2 (16 (kk % 4) + j) for row i < rows, element j <
// 16 of the slice; `bytes`: the region's size (bounds).
struct WgmmaBoxedOperand {
  int64_t wgs, rows, slices, box_bytes, wg_bytes, bytes, sbo;
};
ProofRecord prove_wgmma_operand(const ir::IndexExpr& start, const std::string& what, const WgmmaBoxedOperand& shape,
                                unsigned timeout_ms = 10000);

// An MN-major operand (the wgmma attention's values, ir::WgmmaAttentionOperands::v_start): the
// TMA stored K row k (a key) and N element n (of d, n < 64 boxes) at (n / 64) box_bytes + 128 k
// + 2 (n % 64), boxes of `box_bytes` / 128 rows. Slice kk < `slices` reads K rows 16 kk + i (i
// < 16) and N elements n < `n`; the descriptor's 128-byte swizzle mode, MN-major, reads (i, n)
// at start + (n / 64) lbo + 2 (n % 64) + (i / 8) sbo + 128 (i % 8) (the PTX ISA's canonical
// MN-major layout: 64 elements of N a row, 8-row groups sbo apart along K, the next 64 of N lbo
// on), both swizzled alike on the absolute address as for prove_wgmma_operand. Obligations:
// defined, bounds (start and reads inside the boxes), element (the read is the store of K row
// 16 kk + i, N element n). The start formula may read `box` (= box_bytes).
ProofRecord prove_wgmma_operand_mn(const ir::IndexExpr& start, const std::string& what, int64_t slices, int64_t n,
                                   int64_t box_bytes, int64_t lbo, int64_t sbo, unsigned timeout_ms = 10000);

// Threads that store an operand themselves in the TMA's layout (the wgmma attention's Q,
// ir::WgmmaAttentionOperands::q_store): `store` (variables r, d) is the byte of element (r, d),
// r < rows, d < cols, past a region whose base is 1,024-byte aligned; a thread stores `vec`
// consecutive elements d.. (d a multiple of vec) from there. The TMA's layout: boxes of 64
// elements of d `box_bytes` apart, row r 128 bytes on, 16-byte chunk c of a row in chunk
// swizzle.chunk(r, c) (prove_swizzle128 shows that is the hardware's 128-byte pattern).
// Obligations: defined; bounds (the vec elements inside the boxes); the TMA's chunk (defined,
// index 0..7); element (element d + k of the store lands where the TMA would have put
// (r, d + k)).
ProofRecord prove_swizzled_store(const ir::IndexExpr& store, const ir::Swizzle128& swizzle, const std::string& what,
                                 int64_t rows, int64_t cols, int64_t vec, int64_t box_bytes,
                                 unsigned timeout_ms = 10000);

// The tile order (ir::TileOrder, or a mutant) with group size g (a constant) over every grid of
// nm x nn tiles, 1 <= nm <= max_m and 1 <= nn <= max_n, and every block (x, y) of its launch
// grid (g nn, ceil(nm / g)), all symbolic, in int arithmetic: defined; bounds (0 <= n < nn and 0
// <= m < ceil(nm / g) g: blocks past nm exit); at most once (two blocks of the grid with m < nm
// never share a tile); at least once (the inverse maps each tile to a block of the grid that
// computes it).
ProofRecord prove_tile_order(const ir::TileOrder& f, int64_t g, int64_t max_m, int64_t max_n,
                             unsigned timeout_ms = 10000);

// One stage of a bitonic sort (ir::BitonicPair, or a mutant) with compare distance `s` (a
// constant power of two: one proof per stage distance), over every key count m, a multiple of
// 2s up to max_m, and every item j < m / 2, symbolic, in int arithmetic:
//   defined; bounds (0 <= lo < hi < m: the compared keys are two and inside the m keys);
//   exactly once (each of the m keys is compared by the one item and side the inverse names:
//   the items of a stage touch disjoint slots, so they run concurrently without a race).
ProofRecord prove_bitonic_stage(const ir::BitonicPair& f, int64_t s, int64_t max_m, unsigned timeout_ms = 10000);

// The weight ring's placement (ir::StageRing, or a mutant) for every ring of size bytes, a
// multiple of 128 up to max_size, every copy number c < 2^32 and copy of 16 <= bytes <= size
// bytes (a multiple of 16), all symbolic, in long long arithmetic: defined; bounds (0 <= at,
// at + bytes <= size, at a multiple of 128: the bulk copy's destination is 16-byte aligned);
// the host's sizes (for copies of 16 <= a, b <= max_size bytes, multiples of 16: alone and
// need are multiples of 128, alone holds a, the placement reads c's parity alone, and in any
// ring of at least need bytes (a multiple of 128) copies c and c + 1 of a and b bytes are apart: when the host's ring is that large,
// every copy is issued ahead; when the shared memory left caps it lower, the kernel's own
// overlap test makes a copy wait for its task).
ProofRecord prove_stage_ring(const ir::StageRing& f, int64_t max_size, unsigned timeout_ms = 10000);

// The folded down projection's lanes (ir::FoldLanes, or a mutant) for a lane group width vp2
// (1..32, a power of two), nw compute warps and u load slots per round (constants: one proof
// per task class), every tile of 1 <= rows <= max_rows rows of vpr vectors (vp2 the smallest
// power of two >= vpr), every warp, round, slot and lane symbolic, warp w's rounds starting at
// g0 = w + round nw u (the kernel's loop), in int arithmetic:
//   defined       no division by zero, no int overflow;
//   bounds        under the kernel's guard, a row of the tile and a vector of that row;
//   at most once  two guarded holders of the same (row, vector) are the same warp, round, slot
//                 and lane;
//   at least once each (row, vector) is held, under the guard, by the holder the inverse names;
//   shuffles      the butterfly's partners (lane ^ o, o = vp2 / 2 .. 1) hold the same row.
ProofRecord prove_fold_lanes(const ir::FoldLanes& f, int64_t vp2, int64_t nw, int64_t u, int64_t max_rows,
                             unsigned timeout_ms = 10000);

// ldmatrix.x4's lane addresses (ir::LdmatrixAddr, or a mutant) for one operand use, lane, the
// thread t receiving, its register i and half j symbolic, in int arithmetic: defined; bounds
// (each lane's 8 bf16 lie in the 16 x 16 block: 0 <= row < 16, col 0 or 8); the fragment (what
// the hardware delivers to t's register i, half j, written here from the PTX ISA independently of
// the formula: row lane % 8 of matrix lane / 8 with lane = 8 i + t / 4 and element 2 (t % 4) + j
// of it, or with .trans lane = 8 i + 2 (t % 4) + j and element t / 4, is the element of the
// block that mma.sync m16n8k16 expects there).
enum class LdmatrixUse { A, B, Bt };
ProofRecord prove_ldmatrix(const ir::LdmatrixAddr& f, LdmatrixUse use, unsigned timeout_ms = 10000);

// Attention's P (ir::AccAsA, or a mutant) over the accumulators' fragment order (ir::MmaTile,
// one warp across): for every lane, register i < 4 and half j < 2, symbolic: defined; bounds
// (tile 0 or 1, elem < 4); the fragment (the accumulator element packed there, at (row, col) of
// the 16 x 16 block of key tiles 2 kk and 2 kk + 1, is the A operand element mma.sync expects:
// row t / 4 + 8 (i % 2), column 2 (t % 4) + j + 8 (i / 2)).
ProofRecord prove_acc_as_a(const ir::AccAsA& f, const ir::MmaTile& tile, unsigned timeout_ms = 10000);

// Attention's chunk partials (ir::AttentionStates' slot and partial_row, or mutants) for a chunk
// count C >= 2, G query heads per KV head and head dimension D (constants: one proof per
// attention shape), every KV head h < Hkv <= max_heads, chunk c, query head g < G and element
// e < D + 2 symbolic, in long long arithmetic, with base(h, c) = slot(partial_row(h, c, 0), 0)
// the chunk's first slot (where the host points the chunk task) and S the state element's slot
// slot(partial_row(h, c, g), e):
//   defined       no 64-bit overflow;
//   bounds        0 <= S < slot(partial_row(Hkv, 0, 0), 0), the buffer the scheduler sizes;
//   chunk range   S inside the chunk task's declared write [base(h, c), base(h, c) + slot(G, 0));
//   chunk write   the chunk task's address base(h, c) + slot(g, 0) + e is S;
//   merge read    the head's base plus slot(partial_row(0, c, g), 0) + e is S, inside the
//                 head's declared read [base(h, 0), base(h, C)): the base given to a merge task,
//                 base(h, 0), and the one a chunk k < C folding the merge in computes, base(h, k)
//                 - slot(partial_row(0, k, 0), 0);
//   exactly once  two distinct (h, c, g, e) have distinct slots.
ProofRecord prove_attention_partials(const ir::AttentionStates& f, int64_t C, int64_t G, int64_t D,
                                     int64_t max_heads, unsigned timeout_ms = 10000);

// The attention warps' states in shared memory (ir::AttentionStates' slot and warp_row, or
// mutants) for nw warps, hp heads per pass and head dimension D (constants), every warp w < nw,
// head i < hp and element e < D + 2 symbolic, in int arithmetic: defined; bounds (the address
// slot(warp_row(w, i), 0) + e the kernel uses lies in [0, slot(warp_row(nw, 0), 0)), the region
// the host reserves); exactly once (two distinct (w, i, e) have distinct slots: no two warps'
// states share one); a row's slots consecutive (slot(row, e) = slot(row, 0) + e: the kernel
// also reads the max at slot(row, D)).
ProofRecord prove_attention_warp_states(const ir::AttentionStates& f, int64_t nw, int64_t hp, int64_t D,
                                        unsigned timeout_ms = 10000);

// The decode attention's rows (ir::AttentionRows, or mutants) for C >= 1 chunks, G query heads
// a KV head and head dimension D (constants: one proof per attention shape), the chunks' KV
// ranges from `split` (the even split of the live length position + 1), every KV head count
// 1 <= Hkv <= max_heads, position 0 <= position < cap (the host's check before a step), KV head
// h < Hkv, query head g < G, chunk c < C, element e < D and position j symbolic, the cache's
// capacity cap a constant (the plan's), in long long arithmetic:
//   defined       no 64-bit overflow, the split included;
//   query rows    element e of query head q_head(h, g) (the queries read, the output written)
//                 lies in KV head h's declared range [head_elem(q_head(h, 0), 0),
//                 head_elem(q_head(h + 1, 0), 0)) and in the activation's
//                 head_elem(q_head(Hkv, 0), 0) elements; distinct (h, g, e), distinct elements;
//   new rows      element e of KV head h's new key or value row lies in [head_elem(h, 0),
//                 head_elem(h + 1, 0)) and in the activation's head_elem(Hkv, 0) elements;
//   consecutive   head_elem(hd, e) = head_elem(hd, 0) + e and kv_elem(h, j, e) = kv_elem(h, j,
//                 0) + e (the kernels address a row from its first element);
//   chunk positions  chunk c's range lies in the live positions: 0 <= begin <= end <=
//                 position + 1 (and position < cap);
//   cache bounds  every position j < cap (so every one a chunk reads, and the appended one)
//                 lies in the layer's kv_elem(Hkv, 0, 0) elements, in KV head h's
//                 [kv_elem(h, 0, 0), kv_elem(h + 1, 0, 0));
//   cache once    distinct (h, j, e) with j < cap, distinct elements;
//   new row       a chunk other than the last reads no position >= position (the row the last
//                 chunk appends in this step, unordered with the other chunks' tasks); the
//                 last chunk's range holds it (it reads the row after appending it).
ProofRecord prove_attention_rows(const ir::AttentionRows& f, const ir::EvenSplit& split, int64_t C, int64_t G,
                                 int64_t D, int64_t capacity, int64_t max_heads, unsigned timeout_ms = 10000);

// Mutants of an expression for the mutation suite: every constant +-1, every variable replaced
// by each other variable of the expression, every + - * / replaced by the others.
std::vector<ir::IndexExpr> mutants(const ir::IndexExpr& e);

}  // namespace mpk::superopt
