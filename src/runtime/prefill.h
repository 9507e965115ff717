// Prompt prefill on the tensor cores. A chunk of up to max_rows prompt tokens goes through the
// graph's ops in order, one kernel per op (kernels/prefill_*.cuh): projections as bf16
// tensor-core GEMMs, a linear and the residual add it feeds as one kernel, causal attention over
// the KV cache (the prefix and the chunk), which it leaves filled for the decode megakernel.
// The prompt's last chunk also runs the ops after last_row: the logits land in the decode
// step's logits buffer and the argmax's embedding in its carried embedding buffer, so decoding
// continues exactly as after a decode step. The host part here needs no device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "cuda/driver.h"
#include "cuda/nvrtc.h"
#include "ir/graph.h"
#include "ir/prefill_nests.h"
#include "runtime/megakernel.h"

namespace mpk::rt {

inline constexpr const char* kPrefillCodegenVersion = "pf-v0.8.0";
// Most tokens one chunk takes (a session's prefill activations are sized for up to this many).
inline constexpr size_t kPrefillChunk = 4096;
static_assert(int64_t(kPrefillChunk) <= ir::kPrefillMaxChunkRows, "the nests are proved for chunks of these rows");

// Empty when the prefill kernels run `graph` with weights of `dtype`; otherwise why not (such
// a model prefills through the decode step, one token at a time).
std::string prefill_unsupported(const ir::Graph& graph, DType weight_dtype);

// The block sizes of the row kernels printed from loop nests (ir/prefill_nests.h).
inline constexpr int kRowThreads = ir::kPrefillRowThreads;
inline constexpr int kArgmaxThreads = ir::kPrefillArgmaxThreads;

// A GEMM tile shape of kernels/prefill_gemm.cuh (mma.sync) or prefill_wgmma.cuh (wgmma): its
// kernel entries (`entry` and `entry`_group) are printed from this table by prefill_source, and
// the launches, the shared-memory sizes and the proofs read the same numbers.
struct GemmTile {
  const char* entry;  // "pf_gemm_128x256"
  int bm, bn, bk, warps_m, warps_n, stages;
  bool wgmma;         // rows of bk bf16 swizzled (bk = 64), else rows padded to bk + 8
  int producer_warps = 0;  // warps after the multiplying ones that only load (wgmma: TMA)
  constexpr int threads() const { return 32 * (warps_m * warps_n + producer_warps); }
  int smem_bytes() const {  // wgmma: plus the slack that aligns the ring to 1,024 bytes
    return wgmma ? stages * (bm + bn) * bk * 2 + 1024 : stages * (bm + bn) * (bk + 8) * 2;
  }
};
// The prefill attention's shape (kernels/prefill_attention.cuh, printed there as PF_ATT_*): the
// query rows and threads of a CTA (16 rows per warp), the keys of a block, and the padding of
// its shared rows (elements past the padded head dim dp: ldmatrix's 8 rows on distinct banks).
// Shared memory: keys and values, two blocks of each (double buffered), rows of dp + pad bf16.
// The launches, the shared-memory size and the proofs read these numbers.
struct AttentionShape {
  int rows, threads, keys, pad;
  int ld(int dp) const { return dp + pad; }
  int smem_bytes(int dp) const { return 2 * 2 * keys * ld(dp) * 2; }
};
inline constexpr AttentionShape kAttention{64, 128, 64, 8};
// The wgmma attention's shape (kernels/prefill_wgmma_attention.cuh, printed there as PF_WA_*;
// sm_90a, head dimension 128): the query rows of a CTA (two warpgroups of 64), the keys of a
// block, the stages of its ring; a producer warp follows the rows / 16 consumer warps. Shared
// memory: Q (256 bytes a row), then per stage a block's keys and values (256 bytes a row each),
// plus the 1,024 bytes that align them to the swizzle's period.
struct WgmmaAttentionShape {
  int rows, keys, stages;
  int consumer_warps() const { return rows / 16; }
  int threads() const { return 32 * (consumer_warps() + 1); }
  int smem_bytes() const { return rows * 256 + stages * 2 * keys * 256 + 1024; }
};
inline constexpr WgmmaAttentionShape kWgmmaAttention{128, 64, 4};

// True when the prefill compiled for `arch` runs its large tiles on wgmma (sm_90a).
bool prefill_wgmma(const std::string& arch);
// Large: 128 x 256, K steps of 64 (mma.sync: 3 stages, 8 warps; wgmma: 4 stages, two
// warpgroups and a producer warp); small: 64 x 128, steps of 32 in 6 stages, 4 warps (mma.sync).
const GemmTile& gemm_tile(bool large, const std::string& arch);
// The wgmma tile 128 columns wide (a group's grid where wgmma_group_narrow), or null where the
// large tile is not wgmma.
const GemmTile* gemm_narrow_tile(const std::string& arch);
// Every tile of the table (what the proofs cover).
std::vector<const GemmTile*> gemm_tiles();
// True when a grouped grid of m rows over projections of `cols` columns takes less time in the
// narrow wgmma tile than in the large one on num_sms SMs, by the tiles' measured times: e.g.
// Qwen3-8B's q, k and v at 1,024 rows (192 wide tiles make two waves of 132, the second short;
// 384 narrow ones three nearly full).
bool wgmma_group_narrow(int64_t m, std::span<const int64_t> cols, int num_sms);
// The descriptors the wgmma tile's entries read their bf16 operands through (row-major, rows x
// k at base): boxes of one K step by the rows the kernel's ring expects of them, in the 128-byte
// swizzle. A box of another size would not complete the ring's byte count (the kernel would
// hang), so the box sizes come from the tile table here only: activations (bm rows), a
// projection's weights (bn rows of the wgmma tile that reads them: the wide or the narrow),
// and the SwiGLU entry's gate and up (bn / 2 rows each).
CUtensorMap wgmma_activation_map(uint64_t base, int64_t rows, int64_t k);
CUtensorMap wgmma_weight_map(uint64_t base, int64_t rows, int64_t k, const GemmTile& tile);  // a wgmma tile
CUtensorMap wgmma_gate_up_map(uint64_t base, int64_t rows, int64_t k);
// Projections of one input launched as one grid: at most PF_GROUP_MAX (kernels/prefill_gemm.cuh).
inline constexpr size_t kGroupMax = 3;
// kernels/prefill_gemm.cuh's PfGemmGroup, byte for byte: each member's weights, bias (or 0),
// output, width and column tiles.
struct PfGemmGroup {
  uint64_t w[kGroupMax], bias[kGroupMax], c[kGroupMax];
  int32_t n[kGroupMax], tiles[kGroupMax];
  int32_t count;
};
// kernels/prefill_wgmma.cuh's PfTmaMaps: the weight descriptors of a group's members.
struct PfTmaMaps {
  CUtensorMap w[kGroupMax];
};

// kernels/prefill_wgmma.cuh's PfHeadRope: the head norm and RoPE the _rope entries apply in
// their epilogue, per group member (w 0: a plain store), for heads of kHeadRopeDim.
inline constexpr int kHeadRopeDim = 128;  // PF_HR_D
struct PfHeadRope {
  // sn: the sines, after cs's kv_capacity rows.
  uint64_t w[kGroupMax] = {}, cs[kGroupMax] = {}, sn[kGroupMax] = {};
  float eps[kGroupMax] = {};
  int32_t pos0 = 0;
};
// kernels/prefill_gemm.cuh's PfRowRope: the head norm + RoPE pf_gemm_reduce_group applies to
// a member's reduced rows (w 0: none), pf_head_norm_rope's arguments.
struct PfRowRope {
  uint64_t w[kGroupMax] = {}, inv_freq[kGroupMax] = {}, out[kGroupMax] = {};
  int32_t heads[kGroupMax] = {}, d[kGroupMax] = {};
  float eps[kGroupMax] = {};
  int32_t pos0 = 0;
};
// The prefill's source for `arch` (the wgmma tile only where prefill_wgmma).
std::string prefill_source(const std::string& arch);
std::vector<std::string> prefill_compile_options();
cuda::CompileResult compile_prefill(const std::string& arch);

// The kernels of the compiled prefill module.
class PrefillKernels {
 public:
  enum Id { Embed, RmsNorm, HeadRmsNorm, Rope, KvStore, KvShadow, SiluMul, Add, Argmax, GemmLarge,
            GemmSmall, GemmReduce, Attention16, Attention32, Attention64, Attention128, GemmLargeGroup,
            GemmSmallGroup, GemmReduceGroup, kCount };
  // `cubin`: compile_prefill(arch)'s (or prefill_source(arch)'s, compiled for the device).
  // `overlap`: launch each kernel as a programmatic dependent of the one before where the arch
  // has such launches (sm_90 on; RuntimeOptions::prefill_overlap). `streamk`: projections of one
  // tile row on the stream-K entries where the kernels have them (RuntimeOptions::prefill_streamk).
  PrefillKernels(const cuda::Context& ctx, std::span<const std::uint8_t> cubin, const std::string& arch,
                 bool overlap, bool streamk);
  const cuda::Function& operator[](Id id) const { return fns_[size_t(id)]; }
  // Whether launches overlap the kernel before them (kernels/prefill_common.cuh: pf_wait_prior).
  bool overlap() const { return overlap_; }
  // The SwiGLU entry of the wgmma tile (gate, up and their silu product in one kernel), or
  // null where the large tile is not wgmma.
  const cuda::Function* swiglu() const { return swiglu_ ? &*swiglu_ : nullptr; }
  // The wgmma attention entry (head dimension 128), or null where the prefill is not sm_90a's.
  const cuda::Function* attention_wgmma() const { return attention_wgmma_ ? &*attention_wgmma_ : nullptr; }
  // The narrow wgmma tile's group entry (gemm_narrow_tile), or null where it is not compiled.
  const cuda::Function* narrow_group() const { return narrow_group_ ? &*narrow_group_ : nullptr; }
  // The wgmma entries with the head norm and RoPE in the epilogue (PfHeadRope as the last
  // argument): the large tile alone, its group entry, the narrow tile's group entry; null where
  // the large tile is not wgmma.
  const cuda::Function* rope() const { return rope_ ? &*rope_ : nullptr; }
  const cuda::Function* group_rope(bool narrow) const {
    const auto& f = narrow ? narrow_group_rope_ : group_rope_;
    return f ? &*f : nullptr;
  }
  // The wgmma tile's stream-K entries (kernels/prefill_wgmma_streamk.cuh: a group, and gate with
  // up), or null where the large tile is not wgmma or they are off.
  const cuda::Function* streamk() const { return streamk_ ? &*streamk_ : nullptr; }
  const cuda::Function* streamk_swiglu() const { return streamk_swiglu_ ? &*streamk_swiglu_ : nullptr; }
  const GemmTile& tile(bool large) const { return gemm_tile(large, arch_); }
  const GemmTile* narrow_tile() const { return gemm_narrow_tile(arch_); }
  int gemm_smem(Id id) const;         // dynamic shared memory of a GEMM entry

 private:
  std::string arch_;
  bool overlap_;
  cuda::Module module_;
  std::vector<cuda::Function> fns_;
  std::optional<cuda::Function> swiglu_, attention_wgmma_, narrow_group_, rope_, group_rope_, narrow_group_rope_,
      streamk_, streamk_swiglu_;
};

// The tensors projections read, which their producers store in bf16 (the operand the tensor
// cores take, rounded once): true for outputs read by projections only.
std::vector<bool> prefill_bf16_tensors(const ir::Graph& graph);

// The attention entry (the smallest padded head dim >= head_dim) and its launch for `rows`
// query rows of `heads` heads. head_dim at most 128 (prefill_unsupported).
struct AttentionLaunch {
  PrefillKernels::Id id;
  cuda::LaunchConfig config;
};
AttentionLaunch attention_launch(int64_t rows, int heads, int head_dim);
// One layer's attention: q fp32 [rows, hq * head_dim] at positions pos0.., against the bf16
// shadow's key and value planes of the layer ([hkv][cap][head_dim] each), into out (bf16 when
// `bf16`). On the wgmma entry where the kernels have it, head_dim is 128 and the scale positive,
// else on attention_launch's.
struct AttentionArgs {
  uint64_t q = 0, kc16 = 0, vc16 = 0, out = 0;
  int rows = 0, hq = 0, hkv = 0, head_dim = 0, cap = 0, pos0 = 0;
  float scale = 0;
  bool bf16 = false;
};
void enqueue_attention(const PrefillKernels& k, const cuda::Stream& stream, const AttentionArgs& a);
// Whether enqueue_attention runs pf_attention_wgmma, given that the kernels have it (sm_90a):
// head dimension 128 and a positive scale (its maximum is over unscaled scores). Else
// pf_attention_<padded head dim>.
bool use_wgmma_attention(int head_dim, double scale);

// A projection's launch: large tiles (128 x 256, K steps of 64) when they make three quarters
// of a wave or more, else small ones (64 x 128, K steps of 32) with K's steps split evenly
// (ir/layouts.h) in `splits` parts of four steps or more when the tiles alone would leave SMs
// idle (partials added in order by pf_gemm_reduce). `wgmma` (the large tile is the wgmma one:
// prefill_wgmma): a short grid of one tile row (m <= 128) takes the large tile too, its K split in
// up to a wave of parts of four steps or more, where those make half a wave or more.
struct GemmLaunch {
  bool large = false;
  int grid_m = 1, grid_n = 1, splits = 1;
};
GemmLaunch gemm_launch(int64_t m, int64_t n, int64_t k, int num_sms, bool wgmma);
// The launch grid of nm x nn GEMM tiles in the tile order (ir/layouts.h: TileOrder): tile rows in
// groups of g = ceil(nm / ceil(nm / kTileGroup)) (at most kTileGroup, the last group full or
// nearly), grid (g nn, ceil(nm / g)); the kernels take g.
inline constexpr int kTileGroup = 8;
inline constexpr int64_t kTileOrderMaxColumns = int64_t(1) << 20;  // nn the proofs cover
struct TileGrid {
  int g = 1;
  unsigned x = 1, y = 1;
};
TileGrid tile_grid(int64_t nm, int64_t nn);
// The wgmma SwiGLU entry's launch over the grid `tg` (its X, Y: tg.x, tg.y): a CTA per tile, or
// for grids of five waves or more one CTA per SM, each walking the grid's blocks.
cuda::LaunchConfig wgmma_swiglu_config(const TileGrid& tg, int num_sms);
// The launch of a grid-strided element-wise kernel over n elements (the reduces, SiLU-gating,
// add, the KV append): blocks of 256, at most kPrefillMaxGridThreads threads.
cuda::LaunchConfig prefill_elementwise(long long n);
// Every split count gemm_launch gives the graph's projections for 1 .. max_rows rows, and every
// stream-K CTA count (streamk_ctas) of its projection steps (what the even split's proofs must
// cover), in increasing order.
std::vector<int64_t> prefill_split_counts(const ir::Graph& graph, int64_t max_rows, int num_sms);
// The attention entry's padded head dimension for the graph (16, 32, 64 or 128; -1: none).
int prefill_padded_head_dim(const ir::Graph& graph);
// The (heads, head dim) of every RoPE and head-norm op of `graph`, each once: the shapes
// pf_head_norm_rope and pf_head_rms_norm are proved for.
std::vector<std::pair<int64_t, int64_t>> prefill_head_shapes(const ir::Graph& graph);
// The kernels that run an op of `kind` in the prefill of `graph` compiled for `arch` (mpk-tune
// coverage), e.g. "pf_wgmma_128x256 | pf_gemm_64x128 (+ _group, pf_gemm_reduce)"; "view" for
// last_row.
std::string prefill_kernels_for(const ir::Graph& graph, ir::OpKind kind, const std::string& arch);
// The K-split partials' workspace for a device of num_sms SMs (any gemm_launch fits).
int64_t gemm_workspace_bytes(int num_sms);
// A group split in `splits` K parts over m rows: member j's partials (splits x m x n[j]
// floats) follow member j - 1's from `base`, each start 8-byte aligned for the tiles' column
// pairs. Sets parts.c[j] for the group's members (count, n) and returns the bytes they take.
int64_t lay_split_partials(PfGemmGroup& parts, int64_t splits, int64_t m, uint64_t base);
// A projection step of one tile row (rows <= the wgmma tile's) with `tiles` column tiles
// (PrefillProgram::streamk_tiles) goes stream-K where the kernels have the entries (kernels/
// prefill_wgmma_streamk.cuh) and the tiles make between half a wave and three quarters of one
// (from three quarters the large tiles run a wave each). Its `units` K steps over all column
// tiles are dealt to streamk_ctas(units, num_sms) CTAs, each with kStreamkMinSteps or more (a
// ring's worth of weights) and at most one per SM.
inline constexpr int64_t kStreamkMinSteps = 4;
bool prefill_streamk(int64_t rows, int64_t tiles, int num_sms);
int streamk_ctas(int64_t units, int num_sms);
// Their partials' workspace: two tiles of `rows` (at most the tile's) per CTA.
int64_t streamk_workspace_bytes(int num_sms, int64_t rows);

// Where a prefill reads and writes on the device.
struct PrefillBases {
  uint64_t scratch = 0;    // PrefillProgram::scratch_bytes() of activations
  uint64_t tokens = 0;     // the chunk's token ids, int32
  uint64_t weights = 0, consts = 0, kv = 0;  // the decode kernels' segments (MemoryPlan)
  uint64_t kv16 = 0;       // the KV cache's bf16 shadow, laid out as kv (half the bytes)
  uint64_t logits = 0;     // last chunk: the logits, fp32 [V]
  uint64_t embed_out = 0;  // last chunk: the argmax token's embedding, fp32 [H]
  uint64_t result = 0;     // last chunk: int32 {argmax, 1 if a logit is NaN or Inf}
};

// One kernel launch of the program, before the chunk's sizes are known.
struct PrefillStep {
  ir::OpKind kind;
  int op = -1;              // graph op
  std::vector<int> inputs;  // tensor ids
  int output = -1;          // tensor id (the add's output for a fused linear)
  int residual = -1;        // linear: the tensor its fused add adds
  bool tail = false;        // after last_row: the prompt's last chunk only
  // linear: further projections of the same input, run in the same grid when their grids are
  // short (q with k and v, gate with up), and their outputs
  std::vector<int> group_ops{}, group_outputs{};
  // linear: with one group member, when the next step is the silu_mul of the two outputs (in
  // order, its only reader): that step's output, which the SwiGLU kernel can write instead. The
  // input then stays live through the next step.
  int swiglu_output = -1;
  // head_rms_norm: the RoPE op that is its output's only reader, run by the same kernel; the
  // step's output is then the RoPE's, and the RoPE has no step of its own.
  int rope_op = -1;
  // linear, per member (this op, then group_ops), with PrefillProgram's fuse_head_rope: the step
  // of a head_rms_norm + RoPE (heads of kHeadRopeDim) that is the member's output's only reader,
  // or -1. Where the projection runs on a wgmma tile without a K split, its epilogue applies
  // them and writes that step's output, and the step launches nothing; so does the reduce of a
  // group split on the wgmma tile (pf_gemm_reduce_group). That output's memory is taken from
  // this step on either way.
  std::vector<int> head_rope{};
  // linear: the members' ops and their outputs, this op's first (head_rope's order).
  std::vector<int> member_ops() const {
    std::vector<int> ops = {op};
    ops.insert(ops.end(), group_ops.begin(), group_ops.end());
    return ops;
  }
  std::vector<int> member_outputs() const {
    std::vector<int> outs = {output};
    outs.insert(outs.end(), group_outputs.begin(), group_outputs.end());
    return outs;
  }
};

class PrefillProgram {
 public:
  // `graph` must pass prefill_unsupported; `mem` is the decode kernels' memory plan (weights,
  // consts, RoPE tables and the KV cache are shared); num_sms sizes the projections' grids.
  // fuse_head_rope: set PrefillStep::head_rope where it applies (RuntimeOptions::
  // prefill_fused_rope); the scratch then also holds rope_tables().
  PrefillProgram(const ir::Graph& graph, const MemoryPlan& mem, int64_t max_rows, int num_sms,
                 bool fuse_head_rope);

  int64_t max_rows() const { return max_rows_; }
  int64_t scratch_bytes() const { return scratch_bytes_; }
  const std::vector<PrefillStep>& steps() const { return steps_; }
  // Byte offset of tensor `id`'s slot in the scratch (-1: not in the scratch).
  int64_t slot_offset(int id) const { return slot_[size_t(id)]; }
  // What the session uploads once to the scratch at rope_tables_offset(): for each set of RoPE
  // frequencies a head_rope epilogue applies, cos(float(p) * inv_freq[j]) for positions p below
  // the KV capacity and j < kHeadRopeDim / 2 ([p][j]), then the sines alike. Empty when no step
  // has a head_rope.
  const std::vector<float>& rope_tables() const { return rope_tables_; }
  int64_t rope_tables_offset() const { return rope_tables_offset_; }
  // The stream-K tiles' counters (uint32, one per column tile of a projection), which the
  // session zeroes once: the kernels leave them at zero.
  int64_t counters_offset() const { return counters_offset_; }
  int64_t workspace_bytes() const { return workspace_bytes_; }  // the partials' (K splits, stream-K)
  int64_t counter_count() const { return counter_count_; }
  // Byte offsets in the scratch of graph op `rope`'s cos and sin tables (PfHeadRope's cs, sn),
  // or -1 when no epilogue applies it.
  int64_t rope_cos_offset(int rope) const { return rope_cos_[size_t(rope)]; }
  int64_t rope_sin_offset(int rope) const {
    return rope_cos_[size_t(rope)] < 0 ? -1 : rope_cos_[size_t(rope)] + mem_.kv_capacity * (kHeadRopeDim / 2) * 4;
  }

  // The column tiles of a projection step on the stream-K entries: PF_WG_BN wide, or for gate
  // with up (swiglu_output) half as wide, as many as each has columns.
  int64_t streamk_tiles(const PrefillStep& s) const;
  // Enqueues tokens [pos0, pos0 + rows) of a prompt (their ids already at bases.tokens) on
  // `stream`; `last`: also the ops after last_row. `after`, when set, is called after each
  // step's launches are enqueued (e.g. to record an event).
  void enqueue(const PrefillKernels& k, const cuda::Stream& stream, const PrefillBases& bases,
               int pos0, int rows, bool last,
               const std::function<void(const PrefillStep&)>& after = {}) const;
  // Enqueues the bf16 shadow of KV positions [from, to) (written by decode steps).
  void enqueue_shadow(const PrefillKernels& k, const cuda::Stream& stream, const PrefillBases& bases,
                      int from, int to) const;
  // What a step is, for profiles: "attention", "rms_norm", ..., a projection by its output's
  // name within the layer ("q", "gate", "mlp_out", "logits").
  std::string step_label(const PrefillStep& s) const;

 private:
  const ir::Graph& g_;
  const MemoryPlan& mem_;
  int64_t max_rows_;
  int num_sms_;
  std::vector<PrefillStep> steps_;
  std::vector<bool> bf16_;     // per tensor: stored in bf16
  int64_t workspace_offset_ = 0, workspace_bytes_ = 0;
  int64_t counters_offset_ = 0, counter_count_ = 0;
  std::vector<int64_t> slot_;  // per tensor
  int64_t scratch_bytes_ = 0;
  std::vector<float> rope_tables_;
  int64_t rope_tables_offset_ = 0;
  std::vector<int64_t> rope_cos_;  // per graph op
};

}  // namespace mpk::rt
