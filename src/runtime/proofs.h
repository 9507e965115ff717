// The proofs a megakernel plan rests on (superopt/), checked before its kernel runs: the even
// split (ir/layouts.h) wherever the kernel cuts a range into parts at run time (an attention
// task cuts the live KV length into its chunk count; a linear task cuts each row's K into
// ks <= max_k_split parts, ks chosen on the device from the tile's shape, and the fold adds
// every part once), the linear tile's work items (ir/layouts.h: rows, K parts and split-K
// slots, for every linear variant and part count; a warp's dot products over a K part, their
// first round and the unaligned loop, loop nests per variant; the split-K fold's loop nest,
// ir::linear_fold_nest, for every part count above one), a linear's reorganised sums
// (ir/dot_product.h), attention's state layout (ir::AttentionStates: the chunk partials per
// attention shape with chunks, the warps' states in shared memory per head dimension), its
// rows (ir::AttentionRows: queries, new rows, output and KV cache per attention shape and
// capacity, the step's new row read by its appending chunk only), the loop nests of its
// passes' combine and of the merge (ir/task_nests.h), the online-softmax algebra
// (ir/online_softmax.h) attention rests on, and the argmax's loop nests (its partials, the next
// token's embedding row for every token id).
#pragma once

#include <string>
#include <vector>

#include "runtime/megakernel.h"
#include "superopt/index_prover.h"

namespace mpk::rt {

// One proof and what in the plan rests on it.
struct PlanProof {
  std::string use;  // "attention: KV length over 4 chunks; linear: K over 4 parts"
  superopt::ProofRecord record;
};

// The proofs for every part count among `tasks` (attention chunk counts; 1..max_k_split when
// there is a linear task), in increasing count, then the work items of each linear variant the
// tasks use (kernel_variants(params)) for every part count, each variant's dot-product nests
// (ir::linear_dot_nest with and without a first round in registers, for 4- and 8-element
// vectors; ir::linear_dot_first_nest; ir::linear_dot_scalar_nest) with params.loads_in_flight,
// the split-K fold's nest, each tile shape's work items over the warps (ir::linear_items_nest,
// per variant, row count and part count the slots hold), the linear's sums, then
// attention's chunk partials and the merge's loop nest (ir::attention_merge_nest, with
// params.merge_batch) for each (chunks > 1, query heads, head dim), its rows for each
// (chunks, query heads, head dim, capacity), its passes' combine nest
// (ir::attention_combine_nest) for each (chunks, query heads, head dim) with the plan's warps
// and heads per pass, its warps' states for each head dim, the argmax's partials and the
// embedding row for each (hidden, vocabulary), and the online softmax when there is an
// attention task, whatever their results (memoised per process: each is proved once, for
// every length up to 2^31 and every tile up to 2^20 rows).
// An LM-head tile's argmax partial (ir::linear_argmax_nest) when a linear tile has one; the
// weight ring's placement (ir::StageRing) when a linear task's weights are staged.
// With fold_down, the folded tiles' lane map (ir::FoldLanes: each row and vector of the down
// columns read by one lane, the shuffles within a row's lanes) for each lane group width the
// tiles need, and the fold's loop nests (ir/task_nests.h fold_*) for each (down rows, tile
// columns) (for both vector widths: the tasks do not name the dtype). Not covered: that the
// tiles' adds together make the down projection (each tile's nest adds each row once; the
// scheduler tests that the tiles' columns cover the matrix once, the GPU tests check the sums
// against the reference).
std::vector<PlanProof> plan_proofs(const std::vector<MkTask>& tasks, const MegakernelParams& params);

// The proofs the prefill kernels rest on (runtime/prefill.h): the even split for every K-split
// count in split_counts (prefill_split_counts), the mma output tiles and chunked loads of every
// GEMM tile (gemm_tiles: those of other architectures too) and of attention for padded head
// dimension dp (16 .. 128), attention's pair loads (Q, and key/value rows that are not whole
// chunks), the mma.sync operands' ldmatrix lane addresses and attention's packing of P into an
// A operand, the wgmma tile's 128-byte swizzle, the GEMM grids' tile order for every group size
// tile_grid picks, memoised as above.
// The wgmma descriptors' start offsets and row-group stride (that they read what the TMA
// stored), the wgmma attention's Q staging (its threads store Q where the TMA's layout has it),
// and both attentions' softmax (ir::PrefillSoftmax, the scale in the exponent and over scaled
// scores: their weights, rescale and running-sum update are printed from the formulas proved).
// Not covered: the descriptors' bit fields and the tensor maps' encoding (the GPU tests check
// the products), the shared-memory sizes (derived from the tables the kernels are printed
// from: gemm_tile, kAttention) and the rescale of O (a multiply by the proved factor, written
// in the kernels). The row kernels' loop nests (ir/prefill_nests.h): embedding, RMSNorm and
// the argmax scan, SiLU-gating and add for every shape, the head norm with RoPE and without for
// each of `head_shapes` (heads, head dim; every row and position), the KV append for `kv_shape` (KV
// heads, head dim; every chunk, capacity and position; none when the KV heads are 0) and the
// KV shadow for its head dim (every plane, capacity and range of positions).
std::vector<PlanProof> prefill_proofs(const std::vector<int64_t>& split_counts, int dp,
                                      const std::vector<std::pair<int64_t, int64_t>>& head_shapes,
                                      std::pair<int64_t, int64_t> kv_shape);
// The same for `graph`'s prefill on a device of num_sms SMs: its split counts for chunks of up to
// kPrefillChunk rows, its padded head dimension, its head shapes and its KV cache's shape.
std::vector<PlanProof> prefill_proofs(const ir::Graph& graph, int num_sms);

// The proofs the top-k draw rests on (kernels/sample.cuh, sample_topk.cuh): its loop nests for
// the params' block size: the passes over the
// num_logits logits, their strided sample, the radix histogram's reset, the loops over the
// candidates, thread 0's in-order sums for the nucleus's cut and its walk down the radix
// histogram, the sort's padding and each of its stages (ir/task_nests.h sample_*), memoised as
// above. Not covered: the gathering pass's
// slots (a counter and a guard), that the walk finds its bin (data: the bins' counts), that
// distinct samples read distinct logits.
std::vector<PlanProof> draw_proofs(const MegakernelParams& params, int64_t num_logits);

// The cache entry's verification record of `proofs`: {"passed": true, "method": ...,
// "records": [{the record's fields, "use": ...}, ...]} (cache/entry.h: a verified entry).
// Throws Error(Internal) naming the use, the obligation, its result and the counterexample
// when one failed.
std::string verification_record(const std::vector<PlanProof>& proofs);

// verification_record(plan_proofs(tasks, params)).
std::string prove_plan(const std::vector<MkTask>& tasks, const MegakernelParams& params);

}  // namespace mpk::rt
