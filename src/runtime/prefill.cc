#include "runtime/prefill.h"

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "base/error.h"
#include "ir/layouts.h"
#include "ir/online_softmax.h"
#include "ir/prefill_nests.h"
#include "ir/rope.h"
#include "runtime/embedded_kernels.h"
#include "runtime/prefill_tiles.h"
#include "runtime/wgmma_asm.h"

namespace mpk::rt {
namespace {

constexpr int64_t kAlign = 256;

static_assert(offsetof(PfGemmGroup, count) == 96 && sizeof(PfGemmGroup) == 104, "PfGemmGroup as the kernel's");
static_assert(sizeof(PfTmaMaps) == kGroupMax * sizeof(CUtensorMap), "PfTmaMaps holds PF_GROUP_MAX maps");
static_assert(offsetof(PfHeadRope, eps) == 72 && offsetof(PfHeadRope, pos0) == 84, "PfHeadRope as the kernel's");
static_assert(sizeof(PfHeadRope) == 88 && std::size(PfHeadRope{}.w) == kGroupMax, "PfHeadRope as the kernel's");
static_assert(offsetof(PfRowRope, heads) == 72 && offsetof(PfRowRope, eps) == 96 && offsetof(PfRowRope, pos0) == 108 &&
                  sizeof(PfRowRope) == 112,
              "PfRowRope as the kernel's");
int64_t align_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Padded head dimensions with an attention entry (kernels/prefill_attention.cuh).
constexpr int kHeadDims[] = {16, 32, 64, 128};
using ir::kRopeMaxHeadDim;  // the head norm and RoPE kernel's largest head dim

int padded_head_dim(int d) {
  for (int p : kHeadDims)
    if (d <= p) return p;
  return -1;
}

bool tokens_rows(const ir::TensorDesc& t) { return !t.shape.empty() && t.shape[0] == ir::kTokens; }

bool writes_bf16(ir::OpKind k) {
  return k == ir::OpKind::RmsNorm || k == ir::OpKind::SiluMul || k == ir::OpKind::Attention;
}

// The KV cache's planes: each layer's KV heads, keys and values.
int64_t kv_planes(const ir::Graph& g) { return 2 * int64_t(g.kv_cache.num_layers) * g.kv_cache.num_kv_heads; }


// Every prefill launch: a programmatic dependent of the kernel before it where the kernels
// allow it (PrefillKernels::overlap; each waits for that kernel first, pf_wait_prior), so its
// blocks are on the SMs when the kernel before ends instead of launching then.
template <typename... Args>
void pf_launch(const PrefillKernels& k, const cuda::Function& fn, cuda::LaunchConfig c, const cuda::Stream& stream,
               const Args&... args) {
  c.programmatic = k.overlap();
  cuda::launch_args(fn, c, stream, args...);
}

}  // namespace

std::vector<bool> prefill_bf16_tensors(const ir::Graph& g) {
  // Read by projections only, from an op that can round its output (kernels/prefill_rows.cuh).
  std::vector<int> readers(g.tensors.size(), 0), linear_readers(g.tensors.size(), 0);
  for (const ir::Op& op : g.ops)
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      ++readers[size_t(op.inputs[i])];
      if (op.kind == ir::OpKind::Linear && i == 0) ++linear_readers[size_t(op.inputs[i])];
    }
  std::vector<bool> bf16(g.tensors.size(), false);
  for (const ir::Op& op : g.ops) {
    const size_t t = size_t(op.output);
    bf16[t] = writes_bf16(op.kind) && readers[t] > 0 && readers[t] == linear_readers[t] &&
              int(t) != g.logits;
  }
  return bf16;
}

std::string prefill_unsupported(const ir::Graph& g, DType weight_dtype) {
  if (weight_dtype != DType::BF16)
    return std::string("the tensor-core prefill reads bf16 weights, the model's are ") + dtype_name(weight_dtype);
  if (g.kv_cache.head_dim % 2 != 0)  // the KV append and shadow move element pairs
    return "head_dim " + std::to_string(g.kv_cache.head_dim) + " is odd";
  if (kv_planes(g) > ir::kPrefillMaxPlanes)  // the shadow's grid rows
    return std::to_string(kv_planes(g)) + " KV cache planes (layers x KV heads x 2), above " +
           std::to_string(ir::kPrefillMaxPlanes);
  if (padded_head_dim(g.kv_cache.head_dim) < 0)
    return "head_dim " + std::to_string(g.kv_cache.head_dim) + " is above the prefill attention's 128";
  int last_rows = 0;
  const std::vector<bool> bf16 = prefill_bf16_tensors(g);
  for (const ir::Op& op : g.ops) {
    switch (op.kind) {
      case ir::OpKind::Linear: {
        const int64_t k = g.weight(op.weight).shape.at(1);
        if (k % 8 != 0) return "a projection's input width " + std::to_string(k) + " is not a multiple of 8";
        if (!bf16[size_t(op.inputs[0])])
          return "the input of " + g.tensor(op.output).name + " is not a bf16 operand (prefill_bf16_tensors)";
        break;
      }
      case ir::OpKind::Rope:
      case ir::OpKind::HeadRmsNorm:
        if (op.attrs.head_dim > kRopeMaxHeadDim || op.attrs.head_dim % 2 != 0)
          return std::string(ir::op_name(op.kind)) + " over head_dim " + std::to_string(op.attrs.head_dim) +
                 ": the prefill's head norm and RoPE take even head dims up to " + std::to_string(kRopeMaxHeadDim);
        break;
      case ir::OpKind::GeluTanhMul: return "gelu_tanh_mul has no prefill kernel";
      case ir::OpKind::SiluMul:
      case ir::OpKind::Add:
        if (g.tensor(op.output).shape.back() > ir::kPrefillMaxElements / int64_t(kPrefillChunk))
          return std::string(ir::op_name(op.kind)) + " over rows of " +
                 std::to_string(g.tensor(op.output).shape.back()) +
                 ": a chunk's elements must stay below " + std::to_string(ir::kPrefillMaxElements);
        break;
      case ir::OpKind::LastRow: ++last_rows; break;
      default: break;
    }
  }
  if (last_rows != 1) return "the graph has no single last_row op";
  return {};
}

bool prefill_wgmma(const std::string& arch) { return arch == "sm_90a"; }

cuda::LaunchConfig prefill_elementwise(long long n) {
  cuda::LaunchConfig c;
  c.block.x = 256;
  c.grid.x = unsigned(std::clamp<long long>((n + 255) / 256, 1, ir::kPrefillMaxGridThreads / 256));
  return c;
}

std::string prefill_source(const std::string& arch) {
  std::string s = embedded_kernel("scalar.cuh");
  s += "// runtime/prefill.h: kAttention, kRowThreads, kArgmaxThreads; ir/prefill_nests.h: kRopeMaxHeadDim.\n"
       "#define PF_ATT_ROWS " +
       std::to_string(kAttention.rows) + "\n#define PF_ATT_THREADS " + std::to_string(kAttention.threads) +
       "\n#define PF_ATT_KEYS " + std::to_string(kAttention.keys) + "\n#define PF_ATT_PAD " +
       std::to_string(kAttention.pad) + "\n#define PF_ROPE_MAX_D " + std::to_string(kRopeMaxHeadDim) +
       "\n#define PF_ROW_THREADS " + std::to_string(kRowThreads) + "\n#define PF_ARGMAX_THREADS " +
       std::to_string(kArgmaxThreads) + "\n";
  s += embedded_kernel("prefill_common.cuh") + ir::prefill_layout_device_functions() +
       ir::prefill_softmax_device_functions();
  s += "// Printed from src/ir/prefill_nests.cc (proved by superopt/): do not edit.\n";
  for (const ir::LoopNest* n : {&ir::prefill_embed_nest(), &ir::prefill_rms_norm_nest(), &ir::prefill_argmax_nest(),
                                &ir::prefill_head_rms_norm_nest(), &ir::prefill_head_norm_rope_nest(),
                                &ir::prefill_kv_store_nest(),
                                &ir::prefill_kv_shadow_nest(), &ir::prefill_silu_mul_nest(), &ir::prefill_add_nest(),
                                &ir::prefill_gemm_reduce_nest(), &ir::prefill_gemm_reduce_row_nest()})
    s += ir::print(*n);
  for (const char* f : {"prefill_rows.cuh", "prefill_gemm.cuh", "prefill_attention.cuh"}) s += embedded_kernel(f);
  const GemmTile& large = gemm_tile(true, arch);
  if (large.wgmma) {
    s += "// The wgmma tile (runtime/prefill_tiles.h: kWgmmaTile).\n#define PF_WG_BM " + std::to_string(large.bm) +
         "\n#define PF_WG_BN " + std::to_string(large.bn) + "\n#define PF_WG_BK " + std::to_string(large.bk) +
         "\n#define PF_WG_STAGES " + std::to_string(large.stages) +
         "\n#define PF_WG_PRODUCER " + std::to_string(large.warps_m * large.warps_n) + "\n#define PF_WG_THREADS " +
         std::to_string(large.threads()) + "\n";
    s += "// Printed by runtime/wgmma_asm.cc.\n" + wgmma_function("pf_wgmma_ss", kWgmmaTile.bn, false) +
         wgmma_function("pf_wgmma_ss", kWgmmaNarrowTile.bn, false) +
         wgmma_function("pf_wgmma_64_ss", 64, false) + wgmma_function("pf_wgmma_128_rs", 128, true);
    s += embedded_kernel("prefill_wgmma.cuh") + embedded_kernel("prefill_wgmma_streamk.cuh");
    s += "// The wgmma attention (runtime/prefill.h: kWgmmaAttention).\n#define PF_WA_ROWS " +
         std::to_string(kWgmmaAttention.rows) + "\n#define PF_WA_KEYS " + std::to_string(kWgmmaAttention.keys) +
         "\n#define PF_WA_STAGES " + std::to_string(kWgmmaAttention.stages) + "\n#define PF_WA_PRODUCER " +
         std::to_string(kWgmmaAttention.consumer_warps()) + "\n#define PF_WA_THREADS " +
         std::to_string(kWgmmaAttention.threads()) + "\n";
    s += embedded_kernel("prefill_wgmma_attention.cuh");
  }
  s += "// The GEMM tiles (runtime/prefill_gemm.cc: gemm_tile).\n";
  for (const GemmTile* t : {&large, gemm_narrow_tile(arch), &kSmallTile})
    if (!t)
      continue;
    else if (t->wgmma)
      s += (t == &kWgmmaTile ? "PF_WGMMA_ENTRY(" + std::string(t->entry) + ", " + std::to_string(t->bn) + ")\n" +
                                   "PF_WGMMA_ROPE_ENTRY(" + std::string(t->entry) + ", " + std::to_string(t->bn) +
                                   ")\n" + "PF_WGMMA_SWIGLU_ENTRY(" + std::string(t->entry) + ")\n" +
                                   "PF_WGMMA_STREAMK_ENTRY(" + std::string(t->entry) + ")\n" +
                                   "PF_WGMMA_STREAMK_SWIGLU_ENTRY(" + std::string(t->entry) + ")\n"
                             : std::string()) +
           "PF_WGMMA_GROUP_ENTRY(" + std::string(t->entry) + ", " + std::to_string(t->bn) + ")\n" +
           "PF_WGMMA_GROUP_ROPE_ENTRY(" + std::string(t->entry) + ", " + std::to_string(t->bn) + ")\n";
    else
      s += "PF_GEMM_ENTRY(" + std::string(t->entry) + ", " + std::to_string(t->bm) + ", " + std::to_string(t->bn) +
           ", " + std::to_string(t->bk) + ", " + std::to_string(t->warps_m) + ", " + std::to_string(t->warps_n) +
           ", " + std::to_string(t->stages) + ")\n";
  return s;
}

std::vector<std::string> prefill_compile_options() { return {"--std=c++17"}; }

cuda::CompileResult compile_prefill(const std::string& arch) {
  cuda::CompileRequest r;
  r.source = prefill_source(arch);
  r.name = "mpk_prefill.cu";
  r.arch = arch;
  r.options = prefill_compile_options();
  return cuda::compile(r);
}

PrefillKernels::PrefillKernels(const cuda::Context& ctx, std::span<const std::uint8_t> cubin,
                               const std::string& arch, bool overlap, bool streamk)
    : arch_(arch), overlap_(overlap && arch.rfind("sm_", 0) == 0 && std::atoi(arch.c_str() + 3) >= 90),
      module_(ctx, cubin) {
  const std::string large = tile(true).entry, small = tile(false).entry;
  const std::string names[kCount] = {
      "pf_embed", "pf_rms_norm", "pf_head_rms_norm", "pf_head_norm_rope", "pf_kv_store", "pf_kv_shadow", "pf_silu_mul",
      "pf_add", "pf_argmax", large, small, "pf_gemm_reduce",
      "pf_attention_16", "pf_attention_32", "pf_attention_64", "pf_attention_128",
      large + "_group", small + "_group", "pf_gemm_reduce_group"};
  for (const std::string& n : names) fns_.push_back(module_.function(n));
  for (Id id : {GemmLarge, GemmSmall, GemmLargeGroup, GemmSmallGroup})
    fns_[size_t(id)].set_max_dynamic_shared(gemm_smem(id));
  if (tile(true).wgmma) {
    swiglu_.emplace(module_.function(large + "_swiglu"));
    swiglu_->set_max_dynamic_shared(gemm_smem(GemmLarge));
    narrow_group_.emplace(module_.function(std::string(kWgmmaNarrowTile.entry) + "_group"));
    narrow_group_->set_max_dynamic_shared(kWgmmaNarrowTile.smem_bytes());
    rope_.emplace(module_.function(large + "_rope"));
    rope_->set_max_dynamic_shared(gemm_smem(GemmLarge));
    group_rope_.emplace(module_.function(large + "_group_rope"));
    group_rope_->set_max_dynamic_shared(gemm_smem(GemmLargeGroup));
    narrow_group_rope_.emplace(module_.function(std::string(kWgmmaNarrowTile.entry) + "_group_rope"));
    narrow_group_rope_->set_max_dynamic_shared(kWgmmaNarrowTile.smem_bytes());
    if (streamk) {
      streamk_.emplace(module_.function(large + "_streamk"));
      streamk_->set_max_dynamic_shared(gemm_smem(GemmLarge));
      streamk_swiglu_.emplace(module_.function(large + "_streamk_swiglu"));
      streamk_swiglu_->set_max_dynamic_shared(gemm_smem(GemmLarge));
    }
    attention_wgmma_.emplace(module_.function("pf_attention_wgmma"));
    attention_wgmma_->set_max_dynamic_shared(kWgmmaAttention.smem_bytes());
  }
  for (int i = 0; i < 4; ++i)
    fns_[size_t(Attention16) + size_t(i)].set_max_dynamic_shared(kAttention.smem_bytes(kHeadDims[i]));
}

AttentionLaunch attention_launch(int64_t rows, int heads, int head_dim) {
  const int dp = padded_head_dim(head_dim);
  AttentionLaunch a{PrefillKernels::Attention16, {}};
  for (int i = 0; i < 4; ++i)
    if (kHeadDims[i] == dp) a.id = PrefillKernels::Id(PrefillKernels::Attention16 + i);
  a.config.grid.x = unsigned((rows + kAttention.rows - 1) / kAttention.rows);
  a.config.grid.y = unsigned(heads);
  a.config.block.x = unsigned(kAttention.threads);
  a.config.dynamic_shared = unsigned(kAttention.smem_bytes(dp));
  return a;
}

bool use_wgmma_attention(int head_dim, double scale) { return head_dim == 128 && scale > 0; }

void enqueue_attention(const PrefillKernels& k, const cuda::Stream& stream, const AttentionArgs& a) {
  if (k.attention_wgmma() && use_wgmma_attention(a.head_dim, a.scale)) {
    // Each plane as rows of 128 bf16, boxes of a key block's rows by 64 of d (the kernel's ring).
    const uint64_t rows = uint64_t(a.hkv) * uint64_t(a.cap);
    auto map = [&](uint64_t base) {
      return cuda::tensor_map_bf16(base, rows, 128, unsigned(kWgmmaAttention.keys), 64);
    };
    cuda::LaunchConfig c;
    c.grid.x = unsigned((a.rows + kWgmmaAttention.rows - 1) / kWgmmaAttention.rows);
    c.grid.y = unsigned(a.hq);
    c.block.x = unsigned(kWgmmaAttention.threads());
    c.dynamic_shared = unsigned(kWgmmaAttention.smem_bytes());
    pf_launch(k, *k.attention_wgmma(), c, stream, map(a.kc16), map(a.vc16), a.q, a.out, a.rows, a.hq, a.hkv,
              a.cap, a.pos0, a.scale, int(a.bf16));
    return;
  }
  const AttentionLaunch al = attention_launch(a.rows, a.hq, a.head_dim);
  pf_launch(k, k[al.id], al.config, stream, a.q, a.kc16, a.vc16, a.out, a.rows, a.hq, a.hkv, a.head_dim, a.cap,
            a.pos0, a.scale, int(a.bf16));
}

int PrefillKernels::gemm_smem(Id id) const {
  return tile(id == GemmLarge || id == GemmLargeGroup).smem_bytes();
}

int prefill_padded_head_dim(const ir::Graph& g) { return padded_head_dim(g.kv_cache.head_dim); }

std::vector<std::pair<int64_t, int64_t>> prefill_head_shapes(const ir::Graph& g) {
  std::set<std::pair<int64_t, int64_t>> shapes;
  for (const ir::Op& op : g.ops)
    if (op.kind == ir::OpKind::Rope || op.kind == ir::OpKind::HeadRmsNorm)
      shapes.insert({op.attrs.num_heads, op.attrs.head_dim});
  return {shapes.begin(), shapes.end()};
}

std::string prefill_kernels_for(const ir::Graph& g, ir::OpKind kind, const std::string& arch) {
  const std::string large = gemm_tile(true, arch).entry, small = gemm_tile(false, arch).entry;
  const bool swiglu = gemm_tile(true, arch).wgmma;
  switch (kind) {
    case ir::OpKind::Embedding: return "pf_embed";
    case ir::OpKind::RmsNorm: return "pf_rms_norm";
    case ir::OpKind::Linear:
      return large + " | " + small + " (+ _group, pf_gemm_reduce" +
             (swiglu ? "; gate with up: " + large + "_swiglu; one tile row: " + large + "_streamk, _streamk_swiglu"
                     : "") +
             ")";
    case ir::OpKind::HeadRmsNorm:
      return (swiglu ? "the " + large + " _rope epilogues (with the RoPE it feeds, heads of 128, "
                                        "unless MPK_PREFILL_FUSED_ROPE=0) | "
                     : std::string()) +
             "pf_head_norm_rope (with the RoPE it feeds) | pf_head_rms_norm";
    case ir::OpKind::Rope:
      return (swiglu ? "the " + large + " _rope epilogues (heads of 128, unless MPK_PREFILL_FUSED_ROPE=0) | "
                     : std::string()) +
             "pf_head_norm_rope";
    case ir::OpKind::Attention: {
      // enqueue_attention's choice for each attention op of the graph (both when they differ).
      const int d = g.kv_cache.head_dim;
      const std::string mma = "pf_attention_" + std::to_string(padded_head_dim(d));
      bool some = false, all = true;
      for (const ir::Op& op : g.ops)
        if (op.kind == ir::OpKind::Attention) {
          const bool w = prefill_wgmma(arch) && use_wgmma_attention(d, op.attrs.scale);
          some = some || w;
          all = all && w;
        }
      return "pf_kv_store, " + (all && some ? "pf_attention_wgmma" : some ? "pf_attention_wgmma | " + mma : mma);
    }
    case ir::OpKind::SiluMul: return swiglu ? "the " + large + "_swiglu epilogue | pf_silu_mul" : "pf_silu_mul";
    case ir::OpKind::GeluTanhMul: return "none";
    case ir::OpKind::Add: return "the pf_gemm epilogue | pf_add";
    case ir::OpKind::LastRow: return "view";
    case ir::OpKind::Argmax: return "pf_argmax, pf_embed";
  }
  return "?";
}

PrefillProgram::PrefillProgram(const ir::Graph& g, const MemoryPlan& mem, int64_t max_rows, int num_sms,
                               bool fuse_head_rope)
    : g_(g), mem_(mem), max_rows_(max_rows), num_sms_(num_sms) {
  MPK_ICHECK(max_rows >= 1) << "prefill chunk rows";
  const std::string why = prefill_unsupported(g, mem.weight_dtype);
  MPK_CHECK(why.empty(), Unsupported) << "prefill: " << why;
  // Readers of each tensor, to fuse a linear into the add that is its only reader.
  std::vector<int> readers(g.tensors.size(), 0);
  for (const ir::Op& op : g.ops)
    for (int in : op.inputs) ++readers[size_t(in)];
  bool tail = false;
  std::vector<bool> absorbed(g.ops.size(), false);  // RoPE ops run by their head norm's step
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const ir::Op& op = g.ops[i];
    if (absorbed[i]) continue;
    tail = tail || op.kind == ir::OpKind::LastRow;
    PrefillStep s{.kind = op.kind, .op = int(i), .inputs = op.inputs, .output = op.output, .tail = tail};
    if (op.kind == ir::OpKind::HeadRmsNorm && readers[size_t(op.output)] == 1)
      for (size_t j = i + 1; j < g.ops.size(); ++j)
        if (g.ops[j].kind == ir::OpKind::Rope && g.ops[j].inputs[0] == op.output &&
            g.ops[j].attrs.head_dim == op.attrs.head_dim && g.ops[j].attrs.num_heads == op.attrs.num_heads) {
          s.rope_op = int(j);
          s.output = g.ops[j].output;
          absorbed[j] = true;
          break;  // the norm's only reader
        }
    if (op.kind == ir::OpKind::Linear && i + 1 < g.ops.size() && readers[size_t(op.output)] == 1) {
      const ir::Op& next = g.ops[i + 1];
      if (next.kind == ir::OpKind::Add && (next.inputs[0] == op.output || next.inputs[1] == op.output)) {
        s.residual = next.inputs[0] == op.output ? next.inputs[1] : next.inputs[0];
        s.output = next.output;
        ++i;
      }
    }
    // The projections that follow on the same input (and K), none of them feeding an add.
    auto groupable = [&](const ir::Op& o) {
      return o.kind == ir::OpKind::Linear && o.output != g.logits && o.inputs[0] == op.inputs[0] &&
             g.weight(o.weight).shape.at(1) == g.weight(op.weight).shape.at(1);
    };
    auto feeds_add = [&](size_t j) {
      return j + 1 < g.ops.size() && g.ops[j + 1].kind == ir::OpKind::Add &&
             (g.ops[j + 1].inputs[0] == g.ops[j].output || g.ops[j + 1].inputs[1] == g.ops[j].output);
    };
    if (op.kind == ir::OpKind::Linear && s.residual < 0 && op.output != g.logits)
      while (i + 1 < g.ops.size() && s.group_ops.size() + 1 < kGroupMax && groupable(g.ops[i + 1]) &&
             !feeds_add(i + 1)) {
        ++i;
        s.group_ops.push_back(int(i));
        s.group_outputs.push_back(g.ops[i].output);
      }
    if (s.group_ops.size() == 1 && i + 1 < g.ops.size()) {
      const ir::Op& next = g.ops[i + 1];
      if (next.kind == ir::OpKind::SiluMul && next.inputs == std::vector<int>{s.output, s.group_outputs[0]} &&
          readers[size_t(s.output)] == 1 && readers[size_t(s.group_outputs[0])] == 1 && op.bias < 0 &&
          g.ops[size_t(s.group_ops[0])].bias < 0)
        s.swiglu_output = next.output;
    }
    steps_.push_back(std::move(s));
  }

  // A projection's member read only by a head norm + RoPE of kHeadRopeDim (q, k): its wgmma
  // epilogue can apply them (PrefillStep::head_rope).
  for (size_t s = 0; s < steps_.size(); ++s) {
    PrefillStep& st = steps_[s];
    if (st.kind != ir::OpKind::Linear) continue;
    const std::vector<int> outs = st.member_outputs();
    st.head_rope.assign(outs.size(), -1);
    if (!fuse_head_rope || st.residual >= 0 || st.swiglu_output >= 0) continue;
    for (size_t j = 0; j < outs.size(); ++j)
      for (size_t h = s + 1; h < steps_.size() && readers[size_t(outs[j])] == 1; ++h)
        if (steps_[h].inputs[0] == outs[j]) {
          const ir::Op& norm = g.ops[size_t(steps_[h].op)];
          if (steps_[h].kind == ir::OpKind::HeadRmsNorm && steps_[h].rope_op >= 0 && steps_[h].tail == st.tail &&
              norm.attrs.head_dim == kHeadRopeDim)
            st.head_rope[j] = int(h);
          break;
        }
  }
  bf16_ = prefill_bf16_tensors(g);
  // Activation slots, reused after their last reader: a step's output never shares its
  // inputs' memory. last_row's output is a view of its input's last row; the logits and the
  // argmax go where PrefillBases says.
  std::vector<int> alias(g.tensors.size(), -1);
  std::vector<size_t> last_use(g.tensors.size(), 0);
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (int in : steps_[s].inputs) last_use[size_t(in)] = s;
    if (steps_[s].residual >= 0) last_use[size_t(steps_[s].residual)] = s;
    if (steps_[s].kind == ir::OpKind::LastRow) alias[size_t(steps_[s].output)] = steps_[s].inputs[0];
    if (s > 0 && steps_[s - 1].swiglu_output >= 0) last_use[size_t(steps_[s - 1].inputs[0])] = s;
  }
  for (size_t t = 0; t < g.tensors.size(); ++t)  // a view keeps its base alive
    if (alias[t] >= 0) last_use[size_t(alias[t])] = std::max(last_use[size_t(alias[t])], last_use[t]);
  slot_.assign(g.tensors.size(), -1);
  std::multimap<int64_t, int64_t> free_slots;  // capacity -> offset
  std::map<int64_t, int64_t> capacity;         // offset -> capacity
  for (size_t s = 0; s < steps_.size(); ++s) {
    const PrefillStep& st = steps_[s];
    std::vector<int> outs = st.member_outputs();
    for (int h : st.head_rope)  // the epilogue may write the head norm's output in this step
      if (h >= 0) outs.push_back(steps_[size_t(h)].output);
    for (int out : outs) {
      if (slot_[size_t(out)] != -1) continue;  // placed by its projection's step (head_rope)
      const ir::TensorDesc& td = g.tensor(out);
      const bool placed_elsewhere = out == g.logits || out == g.next_token || alias[size_t(out)] >= 0;
      if (!placed_elsewhere) {
        const int64_t bytes =
            align_up((tokens_rows(td) ? max_rows : td.shape[0]) * td.shape.back() * (bf16_[size_t(out)] ? 2 : 4));
        auto it = free_slots.lower_bound(bytes);
        if (it != free_slots.end()) {
          slot_[size_t(out)] = it->second;
          free_slots.erase(it);
        } else {
          slot_[size_t(out)] = scratch_bytes_;
          capacity[scratch_bytes_] = bytes;
          scratch_bytes_ += bytes;
        }
      }
    }
    std::vector<int> done = st.inputs;
    if (st.residual >= 0) done.push_back(st.residual);
    if (s > 0 && steps_[s - 1].swiglu_output >= 0) done.push_back(steps_[s - 1].inputs[0]);
    for (int in : done) {
      if (last_use[size_t(in)] != s || slot_[size_t(in)] < 0) continue;
      free_slots.emplace(capacity.at(slot_[size_t(in)]), slot_[size_t(in)]);
      slot_[size_t(in)] = -2 - slot_[size_t(in)];  // freed: keep the offset, not reusable twice
    }
  }
  for (int64_t& o : slot_)
    if (o <= -2) o = -2 - o;
  workspace_offset_ = scratch_bytes_;  // the K-split partial tiles (gemm_launch), or stream-K's
  workspace_bytes_ = std::max(gemm_workspace_bytes(num_sms), streamk_workspace_bytes(num_sms, max_rows));
  scratch_bytes_ += align_up(workspace_bytes_);
  // The stream-K counters: every projection's columns in tiles of a SwiGLU tile's width (half
  // the others'), more than any one launch counts.
  for (const ir::Op& op : g.ops)
    if (op.kind == ir::OpKind::Linear)
      counter_count_ += ceil_div(g.weight(op.weight).shape.at(0), kWgmmaTile.bn / 2);
  counters_offset_ = scratch_bytes_;
  scratch_bytes_ += align_up(counter_count_ * 4);
  // The head_rope epilogues' cos and sin, one table per set of frequencies, after the workspace.
  rope_tables_offset_ = scratch_bytes_;
  rope_cos_.assign(g.ops.size(), -1);
  std::map<std::vector<float>, int64_t> table_of;  // frequencies -> their cos table's offset
  for (const PrefillStep& st : steps_)
    for (int h : st.head_rope) {
      if (h < 0) continue;
      const ir::Op& rope = g.ops[size_t(steps_[size_t(h)].rope_op)];
      const std::vector<float> f =
          ir::rope_inv_freq(rope.attrs.head_dim, rope.attrs.rope_theta, rope.attrs.rope_scaling);
      MPK_ICHECK(int64_t(f.size()) == kHeadRopeDim / 2) << "prefill: RoPE of " << f.size() << " frequencies";
      const auto [at, fresh] = table_of.emplace(f, rope_tables_offset_ + int64_t(rope_tables_.size()) * 4);
      rope_cos_[size_t(steps_[size_t(h)].rope_op)] = at->second;
      if (!fresh) continue;
      for (const bool sine : {false, true})
        for (int64_t p = 0; p < mem.kv_capacity; ++p)
          for (const float fj : f) {
            const float angle = float(p) * fj;  // as pf_head_norm_rope forms it
            rope_tables_.push_back(sine ? std::sin(angle) : std::cos(angle));
          }
    }
  scratch_bytes_ += align_up(int64_t(rope_tables_.size()) * 4);
}

int64_t PrefillProgram::streamk_tiles(const PrefillStep& s) const {
  MPK_ICHECK(s.kind == ir::OpKind::Linear) << "prefill: stream-K tiles of a " << ir::op_name(s.kind);
  auto cols = [&](int t) { return g_.tensor(t).shape.back(); };
  if (s.swiglu_output >= 0) return ceil_div(cols(s.output), kWgmmaTile.bn / 2);
  int64_t tiles = 0;
  for (int o : s.member_outputs()) tiles += ceil_div(cols(o), kWgmmaTile.bn);
  return tiles;
}

void PrefillProgram::enqueue_shadow(const PrefillKernels& k, const cuda::Stream& stream,
                                    const PrefillBases& b, int from, int to) const {
  if (to <= from) return;
  const int64_t planes = kv_planes(g_), d = g_.kv_cache.head_dim;
  MPK_ICHECK(planes <= ir::kPrefillMaxPlanes && from >= 0 && to <= mem_.kv_capacity)
      << "prefill: shadow of " << planes << " planes, positions " << from << " .. " << to;
  // Launches of at most kPrefillMaxShadowPositions positions (ir::prefill_kv_shadow_nest).
  for (int p0 = from, len = 0; p0 < to; p0 += len) {
    len = int(std::min<int64_t>(to - p0, ir::kPrefillMaxShadowPositions));
    cuda::LaunchConfig c = prefill_elementwise((long long)len * d / 2);
    c.grid.y = unsigned(planes);
    pf_launch(k, k[PrefillKernels::KvShadow], c, stream, b.kv, b.kv16, int(mem_.kv_capacity), int(d), p0, len);
  }
}

std::string PrefillProgram::step_label(const PrefillStep& s) const {
  if (s.rope_op >= 0) return std::string(ir::op_name(s.kind)) + "+rope";
  if (s.kind != ir::OpKind::Linear) return ir::op_name(s.kind);
  auto short_name = [&](int op) {
    const std::string& n = g_.tensor(g_.ops[size_t(op)].output).name;
    return n.substr(n.rfind('.') + 1);
  };
  std::string label = short_name(s.op);
  for (int o : s.group_ops) label += "+" + short_name(o);
  return label;
}

void PrefillProgram::enqueue(const PrefillKernels& k, const cuda::Stream& stream,
                             const PrefillBases& b, int pos0, int rows, bool last,
                             const std::function<void(const PrefillStep&)>& after) const {
  MPK_ICHECK(rows >= 1 && rows <= max_rows_) << "prefill chunk of " << rows << " rows";
  using K = PrefillKernels;
  std::vector<uint64_t> view(g_.tensors.size(), 0);  // last_row outputs
  auto ptr = [&](int t) -> uint64_t {
    if (t == g_.tokens) return b.tokens;
    if (t == g_.logits) return b.logits;
    if (view[size_t(t)]) return view[size_t(t)];
    MPK_ICHECK(slot_[size_t(t)] >= 0) << "prefill: tensor " << g_.tensor(t).name << " has no slot";
    return b.scratch + uint64_t(slot_[size_t(t)]);
  };
  auto nrows = [&](int t) -> int { return tokens_rows(g_.tensor(t)) ? rows : int(g_.tensor(t).shape[0]); };
  auto cols = [&](int t) -> int { return int(g_.tensor(t).shape.back()); };
  auto weight = [&](int w) {
    MPK_ICHECK(mem_.weight_offset[size_t(w)] >= 0) << "prefill: weight " << g_.weight(w).name << " not on the device";
    return b.weights + uint64_t(mem_.weight_offset[size_t(w)]);
  };
  auto cnst = [&](int w) -> uint64_t {
    if (w < 0) return 0;
    MPK_ICHECK(mem_.const_offset[size_t(w)] >= 0) << "prefill: " << g_.weight(w).name << " not in the consts";
    return b.consts + uint64_t(mem_.const_offset[size_t(w)]);
  };
  // RoPE op r of rows x to out, after the head norm of weight w (0: none).
  auto launch_rope = [&](size_t r, uint64_t w, float eps, uint64_t x, uint64_t out) {
    const ir::Op& rope = g_.ops[r];
    MPK_ICHECK(mem_.rope_offset[r] >= 0) << "prefill: RoPE without a table";
    cuda::LaunchConfig c;
    c.grid.x = unsigned(rows);
    c.block.x = kRowThreads;
    pf_launch(k, k[K::Rope], c, stream, x, w, b.consts + uint64_t(mem_.rope_offset[r]), out,
              rope.attrs.num_heads, rope.attrs.head_dim, eps, pos0);
  };
  // The head norm + RoPE steps a projection's epilogue ran (PrefillStep::head_rope).
  std::vector<bool> fused(steps_.size(), false);
  // The head norm + RoPE step that member j of linear step s feeds (PrefillStep::head_rope),
  // marked as run by the launch that takes it; null where there is none.
  auto take_norm = [&](const PrefillStep& s, size_t j) -> const PrefillStep* {
    if (j >= s.head_rope.size() || s.head_rope[j] < 0) return nullptr;
    fused[size_t(s.head_rope[j])] = true;
    return &steps_[size_t(s.head_rope[j])];
  };
  // Member j of linear step s into slot `at` of hr, where its epilogue can take the head norm
  // and RoPE: returns where the epilogue writes (the norm step's output), else 0.
  auto head_rope = [&](const PrefillStep& s, size_t j, PfHeadRope& hr, size_t at) -> uint64_t {
    const PrefillStep* h = k.rope() ? take_norm(s, j) : nullptr;
    if (!h) return 0;
    const ir::Op& norm = g_.ops[size_t(h->op)];
    MPK_ICHECK(rope_cos_offset(h->rope_op) >= 0) << "prefill: RoPE without a cos/sin table";
    // Rows pos0 .. pos0 + rows - 1 of the tables: inside kv_capacity, as the KV append checks.
    MPK_ICHECK(int64_t(pos0) + rows <= mem_.kv_capacity) << "prefill: RoPE past the tables";
    hr.w[at] = cnst(norm.weight);
    hr.cs[at] = b.scratch + uint64_t(rope_cos_offset(h->rope_op));
    hr.sn[at] = b.scratch + uint64_t(rope_sin_offset(h->rope_op));
    hr.eps[at] = float(norm.attrs.eps);
    hr.pos0 = pos0;
    return ptr(h->output);
  };
  // Member j of linear step s into rr where it feeds a head norm + RoPE that
  // pf_gemm_reduce_group can apply to its reduced rows (pf_head_norm_rope's arguments).
  auto row_rope = [&](const PrefillStep& s, size_t j, PfRowRope& rr) {
    const PrefillStep* h = take_norm(s, j);
    if (!h) return;
    const ir::Op &norm = g_.ops[size_t(h->op)], &rope = g_.ops[size_t(h->rope_op)];
    MPK_ICHECK(mem_.rope_offset[size_t(h->rope_op)] >= 0) << "prefill: RoPE without a table";
    // pf_head_norm_rope_row's proved range: up to 1,024 heads.
    MPK_ICHECK(norm.weight >= 0 && rope.attrs.head_dim <= kRopeMaxHeadDim && rope.attrs.head_dim % 2 == 0 &&
               rope.attrs.num_heads <= 1024 &&
               int64_t(rope.attrs.num_heads) * rope.attrs.head_dim == cols(h->inputs[0]))
        << "prefill: a head norm + RoPE of " << rope.attrs.num_heads << " x " << rope.attrs.head_dim;
    rr.w[j] = cnst(norm.weight);
    rr.inv_freq[j] = b.consts + uint64_t(mem_.rope_offset[size_t(h->rope_op)]);
    rr.out[j] = ptr(h->output);
    rr.heads[j] = int32_t(rope.attrs.num_heads);
    rr.d[j] = int32_t(rope.attrs.head_dim);
    rr.eps[j] = float(norm.attrs.eps);
    rr.pos0 = pos0;
  };
  bool silu_done = false;  // by the previous step's SwiGLU kernel
  for (size_t si = 0; si < steps_.size(); ++si) {
    const PrefillStep& s = steps_[si];
    if (s.tail && !last) break;
    const ir::Op& op = g_.ops[size_t(s.op)];
    const uint64_t out = s.kind == ir::OpKind::LastRow || s.kind == ir::OpKind::Argmax ? 0 : ptr(s.output);
    switch (s.kind) {
      case ir::OpKind::Embedding: {
        cuda::LaunchConfig c;
        c.grid.x = unsigned(rows);
        c.block.x = kRowThreads;
        pf_launch(k, k[K::Embed], c, stream, weight(op.weight), ptr(s.inputs[0]), out, cols(s.output));
        break;
      }
      case ir::OpKind::RmsNorm: {
        cuda::LaunchConfig c;
        c.grid.x = unsigned(nrows(s.output));
        c.block.x = kRowThreads;
        pf_launch(k, k[K::RmsNorm], c, stream, ptr(s.inputs[0]), cnst(op.weight), out,
                  cols(s.output), float(op.attrs.eps), int(bf16_[size_t(s.output)]));
        break;
      }
      case ir::OpKind::HeadRmsNorm: {
        if (fused[si]) break;  // its projection's epilogue wrote the output
        if (s.rope_op >= 0) {
          launch_rope(size_t(s.rope_op), cnst(op.weight), float(op.attrs.eps), ptr(s.inputs[0]), out);
          break;
        }
        cuda::LaunchConfig c;
        c.grid.x = unsigned(nrows(s.output));
        c.block.x = kRowThreads;
        pf_launch(k, k[K::HeadRmsNorm], c, stream, ptr(s.inputs[0]), cnst(op.weight), out, op.attrs.num_heads,
                  op.attrs.head_dim, float(op.attrs.eps));
        break;
      }
      case ir::OpKind::Rope: launch_rope(size_t(s.op), 0, 0.f, ptr(s.inputs[0]), out); break;
      case ir::OpKind::Attention: {
        const int d = op.attrs.head_dim, hq = op.attrs.num_heads, hkv = op.attrs.num_kv_heads;
        const int cap = int(mem_.kv_capacity);
        const uint64_t layer_bytes = uint64_t(mem_.kv_layer_elems) * 4;
        const uint64_t kc = b.kv + uint64_t(op.layer) * layer_bytes;
        const uint64_t vc = b.kv + uint64_t(g_.kv_cache.num_layers + op.layer) * layer_bytes;
        const uint64_t kc16 = b.kv16 + uint64_t(op.layer) * layer_bytes / 2;
        const uint64_t vc16 = b.kv16 + uint64_t(g_.kv_cache.num_layers + op.layer) * layer_bytes / 2;
        // The KV append writes nothing for a chunk past the capacity (ir::prefill_kv_store_nest).
        MPK_ICHECK(int64_t(pos0) + rows <= cap)
            << "prefill: rows " << pos0 << " + " << rows << " past the KV capacity " << cap;
        pf_launch(k, k[K::KvStore], prefill_elementwise((long long)rows * hkv * d / 2), stream, ptr(s.inputs[1]),
                  ptr(s.inputs[2]), kc, vc, kc16, vc16, rows, hkv, d, cap, pos0);
        enqueue_attention(k, stream, {ptr(s.inputs[0]), kc16, vc16, out, rows, hq, hkv, d, cap, pos0,
                                      float(op.attrs.scale), bool(bf16_[size_t(s.output)])});
        break;
      }
      case ir::OpKind::Linear: {
        const int m = nrows(s.output);
        const int kk = int(g_.weight(op.weight).shape.at(1));
        // The members: this op, then its group.
        const std::vector<int> ops = s.member_ops(), outs = s.member_outputs();
        const int64_t sk_tiles = k.streamk() ? streamk_tiles(s) : 0;
        if (k.streamk() && prefill_streamk(m, sk_tiles, num_sms_)) {  // K steps dealt evenly to the SMs
          const GemmTile& t = k.tile(true);
          const int64_t ks = ceil_div(kk, t.bk);
          const uint64_t ws = b.scratch + uint64_t(workspace_offset_);
          const uint64_t counters = b.scratch + uint64_t(counters_offset_);
          MPK_ICHECK(sk_tiles <= counter_count_ && sk_tiles * ks < (int64_t(1) << 31))
              << "prefill: " << sk_tiles << " stream-K tiles of " << ks << " K steps";
          cuda::LaunchConfig c;
          c.grid.x = unsigned(streamk_ctas(sk_tiles * ks, num_sms_));
          MPK_ICHECK(streamk_workspace_bytes(int(c.grid.x), m) <= workspace_bytes_) << "prefill: stream-K workspace";
          c.block.x = unsigned(t.threads());
          c.dynamic_shared = unsigned(t.smem_bytes());
          if (s.swiglu_output >= 0) {  // gate and up, and their silu product
            const int n = cols(s.output);
            pf_launch(k, *k.streamk_swiglu(), c, stream,
                      wgmma_activation_map(ptr(s.inputs[0]), m, kk), wgmma_gate_up_map(weight(op.weight), n, kk),
                      wgmma_gate_up_map(weight(g_.ops[size_t(s.group_ops[0])].weight), n, kk),
                      ptr(s.swiglu_output), ws, counters, m, n, kk, int(bf16_[size_t(s.swiglu_output)]));
            silu_done = true;
            break;
          }
          PfGemmGroup grp{};
          PfTmaMaps maps{};
          PfHeadRope hr{};
          for (size_t j = 0; j < ops.size(); ++j) {
            const ir::Op& mo = g_.ops[size_t(ops[j])];
            grp.w[j] = weight(mo.weight);
            grp.bias[j] = cnst(mo.bias);
            grp.n[j] = cols(outs[j]);
            grp.tiles[j] = int(ceil_div(grp.n[j], t.bn));
            grp.c[j] = ptr(outs[j]);
            if (const uint64_t o = head_rope(s, j, hr, j)) grp.c[j] = o;
            maps.w[j] = wgmma_weight_map(grp.w[j], grp.n[j], kk, t);
          }
          grp.count = int(ops.size());
          const uint64_t res = s.residual >= 0 ? ptr(s.residual) : 0;
          MPK_ICHECK(res == 0 || (ops.size() == 1 && res != grp.c[0])) << "prefill: a residual in its output's memory";
          pf_launch(k, *k.streamk(), c, stream, wgmma_activation_map(ptr(s.inputs[0]), m, kk), maps, grp, res, ws,
                    counters, m, kk, hr);
          break;
        }
        // gate, up and silu_mul as one kernel where the wgmma tile runs without a K split.
        const bool wg = k.tile(true).wgmma;
        bool fused_swiglu = false;
        if (s.swiglu_output >= 0 && k.swiglu()) {
          const GemmLaunch gu = gemm_launch(m, 2LL * cols(s.output), kk, num_sms_, wg);
          fused_swiglu = gu.large && gu.splits == 1;
        }
        if (fused_swiglu) {
          const int n = cols(s.output), half = k.tile(true).bn / 2;  // columns of each per tile
          const TileGrid tg = tile_grid((m + k.tile(true).bm - 1) / k.tile(true).bm, (n + half - 1) / half);
          pf_launch(k, *k.swiglu(), wgmma_swiglu_config(tg, num_sms_), stream,
                    wgmma_activation_map(ptr(s.inputs[0]), m, kk), wgmma_gate_up_map(weight(op.weight), n, kk),
                    wgmma_gate_up_map(weight(g_.ops[size_t(s.group_ops[0])].weight), n, kk),
                    ptr(s.swiglu_output), m, n, kk, tg.g, int(bf16_[size_t(s.swiglu_output)]), int(tg.x),
                    int(tg.y));
          silu_done = true;
          break;
        }
        int n_total = 0;
        for (int o : outs) n_total += cols(o);
        const GemmLaunch whole = gemm_launch(m, n_total, kk, num_sms_, wg);
        // One grid when no member alone makes two waves of large tiles: measured on an H200,
        // grouping q, k, v (Qwen3-0.6B at 1,024 tokens: 2.75 -> 1.32 ms) helps while grids are
        // short, and costs 7-9% where each member already fills waves (Qwen3-8B gate + up at
        // 1,024 and 4,096 tokens, q + k + v at 4,096).
        bool short_grids = true;
        const GemmTile& lt = k.tile(true);
        for (int o : outs)
          short_grids &= (int64_t(m) + lt.bm - 1) / lt.bm * ((cols(o) + lt.bn - 1) / lt.bn) < 2 * int64_t(num_sms_);
        // A short prompt's group on the wgmma tile with its K split (gemm_launch), where a member
        // feeds a head norm + RoPE: each member's partials follow the one before's in the
        // workspace, and pf_gemm_reduce_group sums them and applies the norms and RoPE (their
        // steps then launch nothing). Measured on an H100 at 39 tokens (docs/PERFORMANCE.md):
        // Qwen3-8B's q + k + v with the norms 59.6 -> 52.8 us a layer; but the split grid alone
        // was slower than the members' own launches (60.2 against 45.0 us with a plain reduce;
        // Qwen3-0.6B's gate + up 22.9 against 21.1): the gain is the norms' launches.
        bool feeds_rope = false;
        for (int h : s.head_rope) feeds_rope |= h >= 0;
        const bool split = whole.splits > 1 && whole.large && lt.wgmma && feeds_rope;
        if (ops.size() > 1 && (whole.splits == 1 || split) && short_grids) {  // one grid over the members' tiles
          std::vector<int64_t> member_cols;
          for (int o : outs) member_cols.push_back(cols(o));
          const bool narrow =
              !split && whole.large && k.narrow_group() && wgmma_group_narrow(m, member_cols, num_sms_);
          const GemmTile& t = narrow ? *k.narrow_tile() : k.tile(whole.large);
          const int bn = t.bn;
          PfGemmGroup grp{};
          unsigned tiles = 0;
          for (size_t j = 0; j < ops.size(); ++j) {
            const ir::Op& mo = g_.ops[size_t(ops[j])];
            grp.w[j] = weight(mo.weight);
            grp.bias[j] = cnst(mo.bias);
            grp.c[j] = ptr(outs[j]);
            grp.n[j] = cols(outs[j]);
            grp.tiles[j] = (grp.n[j] + bn - 1) / bn;
            tiles += unsigned(grp.tiles[j]);
          }
          grp.count = int(ops.size());
          PfGemmGroup parts = grp;  // with the split, where the tiles write: each member's partials
          if (split) {
            const int64_t bytes = lay_split_partials(parts, whole.splits, m, b.scratch + uint64_t(workspace_offset_));
            MPK_ICHECK(bytes <= gemm_workspace_bytes(num_sms_)) << "prefill: K-split workspace";
            // The reduce's int walk and its row nest's proved widths (up to 2^20).
            MPK_ICHECK((long long)m * n_total <= ir::kPrefillMaxElements && n_total <= (1 << 20))
                << "prefill: split GEMM of " << m << " x " << n_total;
          }
          const TileGrid tg = tile_grid(whole.grid_m, tiles);
          cuda::LaunchConfig c;
          c.grid.x = tg.x;
          c.grid.y = tg.y;
          c.grid.z = unsigned(whole.splits);
          c.block.x = unsigned(t.threads());
          const K::Id id = whole.large ? K::GemmLargeGroup : K::GemmSmallGroup;
          c.dynamic_shared = unsigned(t.smem_bytes());
          if (t.wgmma) {
            PfTmaMaps maps{};
            for (size_t j = 0; j < ops.size(); ++j)
              maps.w[j] = wgmma_weight_map(grp.w[j], grp.n[j], kk, t);
            PfHeadRope hr;
            bool rope = false;
            for (size_t j = 0; j < ops.size() && !split; ++j)
              if (const uint64_t o = head_rope(s, j, hr, j)) grp.c[j] = o, rope = true;
            if (rope)
              pf_launch(k, *k.group_rope(narrow), c, stream, wgmma_activation_map(ptr(s.inputs[0]), m, kk), maps,
                        grp, m, kk, tg.g, hr);
            else
              pf_launch(k, narrow ? *k.narrow_group() : k[id], c, stream,
                        wgmma_activation_map(ptr(s.inputs[0]), m, kk), maps, parts, m, kk, tg.g);
            if (split) {  // a block per row of each member, with the head norms and RoPE they feed
              cuda::LaunchConfig r;
              r.grid = {unsigned(m), unsigned(grp.count), 1};
              r.block.x = kRowThreads;
              PfRowRope rr;
              for (size_t j = 0; j < ops.size(); ++j) row_rope(s, j, rr);
              pf_launch(k, k[K::GemmReduceGroup], r, stream, parts, whole.splits, grp, m, rr);
            }
          } else {
            pf_launch(k, k[id], c, stream, ptr(s.inputs[0]), grp, m, kk, tg.g);
          }
          break;
        }
        for (size_t j = 0; j < ops.size(); ++j) {  // one launch each (a K split, or alone)
          const ir::Op& mo = g_.ops[size_t(ops[j])];
          const int n = cols(outs[j]);
          const GemmLaunch gl = gemm_launch(m, n, kk, num_sms_, wg);
          const uint64_t res = j == 0 && s.residual >= 0 ? ptr(s.residual) : 0, bias = cnst(mo.bias);
          const uint64_t ws = b.scratch + uint64_t(workspace_offset_), dst = ptr(outs[j]);
          // The tiles read R and write C as __restrict__ (kernels/prefill_gemm.cuh: pf_tile_store).
          MPK_ICHECK(res == 0 || res != dst) << "prefill: a residual in its output's memory";
          MPK_ICHECK(gl.splits == 1 || int64_t(gl.splits) * m * n * 4 <= gemm_workspace_bytes(num_sms_))
              << "prefill: K-split workspace";
          const TileGrid tg = tile_grid(gl.grid_m, gl.grid_n);
          cuda::LaunchConfig c;
          c.grid.x = tg.x;
          c.grid.y = tg.y;
          c.grid.z = unsigned(gl.splits);
          c.block.x = unsigned(k.tile(gl.large).threads());
          const K::Id id = gl.large ? K::GemmLarge : K::GemmSmall;
          c.dynamic_shared = unsigned(k.gemm_smem(id));
          PfHeadRope hr;
          const uint64_t rope = k.tile(gl.large).wgmma && gl.splits == 1 && res == 0 ? head_rope(s, j, hr, 0) : 0;
          if (rope)
            pf_launch(k, *k.rope(), c, stream, wgmma_activation_map(ptr(s.inputs[0]), m, kk),
                      wgmma_weight_map(weight(mo.weight), n, kk, k.tile(gl.large)), bias, rope, m, n, kk, tg.g, hr);
          else if (k.tile(gl.large).wgmma)
            pf_launch(k, k[id], c, stream, wgmma_activation_map(ptr(s.inputs[0]), m, kk),
                      wgmma_weight_map(weight(mo.weight), n, kk, k.tile(gl.large)), bias, res, dst, ws, m, n,
                      kk, tg.g);
          else
            pf_launch(k, k[id], c, stream, ptr(s.inputs[0]), weight(mo.weight), bias, res, dst, ws, m, n, kk,
                      tg.g);
          // Splits only under a wave of tiles: far below the reduce's int walk.
          MPK_ICHECK(gl.splits == 1 || m * n <= ir::kPrefillMaxElements)
              << "prefill: split GEMM of " << m << " x " << n;
          if (gl.splits > 1)
            pf_launch(k, k[K::GemmReduce], prefill_elementwise((long long)m * n), stream, ws, gl.splits, bias, res,
                      dst, m, n);
        }
        break;
      }
      case ir::OpKind::SiluMul: {
        if (std::exchange(silu_done, false)) break;  // the SwiGLU kernel wrote it
        const long long n = (long long)nrows(s.output) * cols(s.output);
        MPK_ICHECK(n <= ir::kPrefillMaxElements) << "prefill: " << n << " elements (prefill_unsupported)";
        pf_launch(k, k[K::SiluMul], prefill_elementwise(n), stream, ptr(s.inputs[0]), ptr(s.inputs[1]), out, n,
                  int(bf16_[size_t(s.output)]));
        break;
      }
      case ir::OpKind::Add: {
        const long long n = (long long)nrows(s.output) * cols(s.output);
        MPK_ICHECK(n <= ir::kPrefillMaxElements) << "prefill: " << n << " elements (prefill_unsupported)";
        pf_launch(k, k[K::Add], prefill_elementwise(n), stream, ptr(s.inputs[0]), ptr(s.inputs[1]), out, n);
        break;
      }
      case ir::OpKind::LastRow:
        view[size_t(s.output)] = ptr(s.inputs[0]) + uint64_t(rows - 1) * uint64_t(cols(s.inputs[0])) * 4;
        break;
      case ir::OpKind::Argmax: {
        cuda::LaunchConfig c;
        c.block.x = kArgmaxThreads;
        pf_launch(k, k[K::Argmax], c, stream, ptr(s.inputs[0]), cols(s.inputs[0]), b.result);
        // The next step's embedding, as the decode megakernel's argmax task leaves it.
        const ir::Op& emb = g_.ops[size_t(steps_.front().op)];
        MPK_ICHECK(emb.kind == ir::OpKind::Embedding) << "prefill: the graph does not start with its embedding";
        cuda::LaunchConfig e;
        e.block.x = kRowThreads;
        pf_launch(k, k[K::Embed], e, stream, weight(emb.weight), b.result, b.embed_out,
                  cols(steps_.front().output));
        break;
      }
      case ir::OpKind::GeluTanhMul: MPK_THROW(Internal) << "prefill: gelu_tanh_mul has no kernel";
    }
    if (after) after(s);
  }
}

}  // namespace mpk::rt
