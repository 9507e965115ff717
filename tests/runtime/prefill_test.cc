// The tensor-core prefill without a device: which models it takes, the program it builds from
// a graph (every op once, fusions, tail, activation slots that never overlap while live), and
// its kernels compiled for sm_90a without spills.
#include "runtime/prefill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "base/error.h"
#include "ir/builder.h"
#include "ir/prefill_nests.h"
#include "ir/rope.h"
#include "ir/layouts.h"
#include "model/model.h"
#include "runtime/megakernel.h"
#include "runtime/proofs.h"
#include "runtime/wgmma_asm.h"

namespace mpk::rt {
namespace {

struct Loaded {
  std::unique_ptr<model::Model> model;
  ir::Graph g;
  sched::Plan plan;
  MemoryPlan mem;
};

Loaded load(const std::string& name, int64_t capacity = 64) {
  Loaded l;
  l.model = model::load(std::string(MPK_TEST_DATA) + "/" + name);
  l.g = ir::build(l.model->config);
  l.plan = sched::plan(l.g, megakernel_plan_options(l.g, 8, capacity));
  l.mem = plan_memory(l.g, l.plan.tasks, l.model->dtype, capacity);
  return l;
}

TEST(Prefill, TakesBf16ModelsOnly) {
  for (const char* name : {"qwen3-bf16", "qwen2-bf16", "llama-bf16-sharded"}) {
    const Loaded l = load(name);
    EXPECT_EQ(prefill_unsupported(l.g, DType::BF16), "") << name;
  }
  const Loaded f = load("qwen3-f32");
  EXPECT_NE(prefill_unsupported(f.g, DType::F32).find("bf16"), std::string::npos);
  EXPECT_THROW(PrefillProgram(f.g, f.mem, 16, 132, false), Error);
  model::Config c = f.model->config;
  c.head_dim = 256;
  const ir::Graph wide = ir::build(c, DType::BF16);
  EXPECT_NE(prefill_unsupported(wide, DType::BF16).find("head_dim 256"), std::string::npos);
  // A RoPE wider than the head norm and RoPE kernel's buffers, or odd, is refused by name.
  ir::Graph odd = load("qwen3-bf16").g;
  for (ir::Op& op : odd.ops)
    if (op.kind == ir::OpKind::Rope) op.attrs.head_dim = 258;
  EXPECT_NE(prefill_unsupported(odd, DType::BF16).find("rope over head_dim 258"), std::string::npos)
      << prefill_unsupported(odd, DType::BF16);
  // A chunk of SiLU-gated rows past the element-wise kernels' int walk is refused by name.
  model::Config big = f.model->config;
  big.intermediate_size = ir::kPrefillMaxElements / int64_t(kPrefillChunk) + 8;
  const std::string why = prefill_unsupported(ir::build(big, DType::BF16), DType::BF16);
  EXPECT_NE(why.find("silu_mul over rows of " + std::to_string(big.intermediate_size)), std::string::npos) << why;
  big.intermediate_size -= 8 + big.intermediate_size % 8;  // the largest taken (a multiple of 8)
  EXPECT_EQ(prefill_unsupported(ir::build(big, DType::BF16), DType::BF16), "");
  // More KV cache planes than the KV shadow's grid rows.
  ir::Graph deep = load("qwen3-bf16").g;
  deep.kv_cache.num_layers = int(ir::kPrefillMaxPlanes / (2 * deep.kv_cache.num_kv_heads)) + 1;
  EXPECT_NE(prefill_unsupported(deep, DType::BF16).find("KV cache planes"), std::string::npos)
      << prefill_unsupported(deep, DType::BF16);
  deep.kv_cache.num_layers -= 1;
  EXPECT_EQ(prefill_unsupported(deep, DType::BF16), "");
}

// The coverage text names the attention entry enqueue_attention launches: the wgmma one on
// sm_90a for head dim 128 and a positive scale only.
TEST(Prefill, CoverageNamesTheAttentionEntryThatRuns) {
  model::Config c = load("qwen3-f32").model->config;
  c.head_dim = 128;
  ir::Graph g = ir::build(c, DType::BF16);
  EXPECT_TRUE(use_wgmma_attention(128, 0.09));
  EXPECT_NE(prefill_kernels_for(g, ir::OpKind::Attention, "sm_90a").find("pf_attention_wgmma"), std::string::npos);
  EXPECT_NE(prefill_kernels_for(g, ir::OpKind::Attention, "sm_80").find("pf_attention_128"), std::string::npos);
  bool first = true;
  for (ir::Op& op : g.ops)
    if (op.kind == ir::OpKind::Attention && !std::exchange(first, false)) op.attrs.scale = -op.attrs.scale;
  EXPECT_NE(prefill_kernels_for(g, ir::OpKind::Attention, "sm_90a").find("pf_attention_wgmma | pf_attention_128"),
            std::string::npos);  // layers of both kinds
  for (ir::Op& op : g.ops)
    if (op.kind == ir::OpKind::Attention) op.attrs.scale = -std::abs(op.attrs.scale);
  EXPECT_FALSE(use_wgmma_attention(128, -0.09));
  EXPECT_NE(prefill_kernels_for(g, ir::OpKind::Attention, "sm_90a").find("pf_attention_128"), std::string::npos);
  c.head_dim = 64;
  EXPECT_FALSE(use_wgmma_attention(64, 0.125));
  EXPECT_NE(prefill_kernels_for(ir::build(c, DType::BF16), ir::OpKind::Attention, "sm_90a").find("pf_attention_64"),
            std::string::npos);
}

// A head norm is run with the RoPE that reads it only when both see the same heads: a RoPE of
// another head shape (same row width) keeps its own step.
TEST(Prefill, HeadNormTakesOnlyARopeOfItsShape) {
  const Loaded l = load("qwen3-bf16");
  ir::Graph g = l.g;
  for (ir::Op& op : g.ops)
    if (op.kind == ir::OpKind::Rope) op.attrs.head_dim /= 2, op.attrs.num_heads *= 2;
  const PrefillProgram p(g, l.mem, 16, 132, false), q(l.g, l.mem, 16, 132, false);
  int ropes = 0, fused = 0;
  for (const PrefillStep& s : p.steps()) {
    EXPECT_LT(s.rope_op, 0);
    ropes += s.kind == ir::OpKind::Rope;
  }
  for (const PrefillStep& s : q.steps()) fused += s.rope_op >= 0;
  EXPECT_EQ(ropes, 2 * l.g.config.num_layers);
  EXPECT_EQ(fused, 2 * l.g.config.num_layers);
  // The head norms left alone are proved for their own shapes, the RoPEs for theirs.
  const int64_t hq = l.g.config.num_heads, hkv = l.g.config.num_kv_heads, d = l.g.config.head_dim;
  const std::vector<std::pair<int64_t, int64_t>> want = {{hkv, d}, {hq, d}, {2 * hkv, d / 2}, {2 * hq, d / 2}};
  std::vector<std::pair<int64_t, int64_t>> got = prefill_head_shapes(g);
  std::sort(got.begin(), got.end());
  std::vector<std::pair<int64_t, int64_t>> sorted = want;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(got, sorted);
}

// Liveness from the steps, independently of the allocator: a tensor lives from the step writing
// it to its last reader (a SwiGLU step writes the next step's output and reads its input through
// the next step); two live tensors' byte ranges never overlap, and every slot lies in the
// scratch. Returns the bytes a slot per tensor would take.
int64_t expect_disjoint_live_slots(const ir::Graph& g, const PrefillProgram& p, int64_t rows) {
  const auto& t = g.tensors;
  std::vector<int> first(t.size(), -1), last(t.size(), -1);
  for (size_t s = 0; s < p.steps().size(); ++s) {
    const PrefillStep& st = p.steps()[s];
    if (first[size_t(st.output)] < 0) first[size_t(st.output)] = int(s);  // the SwiGLU step's, if any
    for (int o : st.group_outputs) first[size_t(o)] = int(s);
    for (int h : st.head_rope)  // the projection's epilogue may write the head norm's output
      if (h >= 0) first[size_t(p.steps()[size_t(h)].output)] = int(s);
    if (st.swiglu_output >= 0) {
      first[size_t(st.swiglu_output)] = int(s);
      last[size_t(st.inputs[0])] = std::max(last[size_t(st.inputs[0])], int(s) + 1);
    }
    std::vector<int> in = st.inputs;
    if (st.residual >= 0) in.push_back(st.residual);
    for (int i : in) {
      // last_row's output is a view: reading it reads its base.
      int base = i;
      for (const PrefillStep& v : p.steps())
        if (v.kind == ir::OpKind::LastRow && v.output == i) base = v.inputs[0];
      last[size_t(base)] = std::max(last[size_t(base)], int(s));
      last[size_t(i)] = std::max(last[size_t(i)], int(s));
    }
  }
  std::vector<int> placed;
  for (size_t i = 0; i < t.size(); ++i) {
    if (p.slot_offset(int(i)) < 0) continue;
    EXPECT_GE(first[i], 0) << t[i].name;
    placed.push_back(int(i));
  }
  const std::vector<bool> bf16 = prefill_bf16_tensors(g);
  auto bytes = [&](int i) {
    const auto& s = t[size_t(i)].shape;
    return (s[0] == ir::kTokens ? rows : s[0]) * s.back() * (bf16[size_t(i)] ? 2 : 4);
  };
  int64_t unshared = 0;
  for (int a : placed) {
    unshared += bytes(a);
    EXPECT_LE(p.slot_offset(a) + bytes(a), p.scratch_bytes()) << t[size_t(a)].name;
    for (int b : placed) {
      if (a >= b) continue;
      const bool overlap_time = first[size_t(a)] <= last[size_t(b)] && first[size_t(b)] <= last[size_t(a)];
      const bool overlap_bytes = p.slot_offset(a) < p.slot_offset(b) + bytes(b) &&
                                 p.slot_offset(b) < p.slot_offset(a) + bytes(a);
      EXPECT_FALSE(overlap_time && overlap_bytes) << t[size_t(a)].name << " and " << t[size_t(b)].name;
    }
  }
  return unshared;
}

class PrefillPrograms : public ::testing::TestWithParam<std::string> {};

TEST_P(PrefillPrograms, CoverEveryOpWithDisjointLiveSlots) {
  const Loaded l = load(GetParam());
  const int64_t rows = 96;
  const PrefillProgram p(l.g, l.mem, rows, 132, false);
  // Every op once: a step is one op, or a linear with the add that is its only reader.
  std::set<int> ops;
  int fused = 0, tails = 0, grouped = 0, swiglu = 0, ropes = 0;
  for (const PrefillStep& s : p.steps()) {
    EXPECT_TRUE(ops.insert(s.op).second);
    if (s.residual >= 0) {
      ++fused;
      EXPECT_EQ(l.g.ops[size_t(s.op)].kind, ir::OpKind::Linear);
      EXPECT_EQ(l.g.ops[size_t(s.op) + 1].kind, ir::OpKind::Add);
      EXPECT_TRUE(ops.insert(s.op + 1).second);
      EXPECT_EQ(s.output, l.g.ops[size_t(s.op) + 1].output);
    }
    for (size_t j = 0; j < s.group_ops.size(); ++j) {  // projections of the same input
      const ir::Op& o = l.g.ops[size_t(s.group_ops[j])];
      EXPECT_TRUE(ops.insert(s.group_ops[j]).second);
      EXPECT_EQ(o.kind, ir::OpKind::Linear);
      EXPECT_EQ(o.inputs[0], s.inputs[0]);
      EXPECT_EQ(o.output, s.group_outputs[j]);
      ++grouped;
    }
    tails += s.tail;
    if (s.rope_op >= 0) {  // a head norm with the RoPE that is its only reader
      ++ropes;
      const ir::Op& r = l.g.ops[size_t(s.rope_op)];
      EXPECT_TRUE(ops.insert(s.rope_op).second);
      EXPECT_EQ(l.g.ops[size_t(s.op)].kind, ir::OpKind::HeadRmsNorm);
      EXPECT_EQ(r.kind, ir::OpKind::Rope);
      EXPECT_EQ(r.inputs[0], l.g.ops[size_t(s.op)].output);
      EXPECT_EQ(s.output, r.output);
    }
    if (s.swiglu_output >= 0) {  // gate with up, then their silu_mul
      ++swiglu;
      const ir::Op& next = l.g.ops[size_t(s.group_ops.at(0)) + 1];
      EXPECT_EQ(next.kind, ir::OpKind::SiluMul);
      EXPECT_EQ(next.inputs, (std::vector<int>{s.output, s.group_outputs.at(0)}));
      EXPECT_EQ(next.output, s.swiglu_output);
    }
  }
  EXPECT_EQ(swiglu, l.g.config.num_layers);
  EXPECT_EQ(ropes, l.g.config.qk_norm ? 2 * l.g.config.num_layers : 0);  // q and k
  EXPECT_EQ(ops.size(), l.g.ops.size());
  EXPECT_EQ(grouped, 3 * l.g.config.num_layers);  // k, v with q; up with gate
  EXPECT_EQ(fused, 2 * l.g.config.num_layers);  // o_proj and down_proj
  EXPECT_EQ(tails, 4);                          // last_row, final norm, LM head, argmax
  const int64_t unshared = expect_disjoint_live_slots(l.g, p, rows);
  const std::vector<bool> bf16 = prefill_bf16_tensors(l.g);
  const auto& t = l.g.tensors;
  EXPECT_LT(p.scratch_bytes() - p.workspace_bytes() - p.counter_count() * 4, unshared * 2 / 3);  // slots are reused
  // The projections' operands are the bf16 outputs of the norms, the gating and attention.
  for (const ir::Op& op : l.g.ops)
    if (op.kind == ir::OpKind::Linear) {
      EXPECT_TRUE(bf16[size_t(op.inputs[0])]) << t[size_t(op.output)].name;
    }
  int n_bf16 = 0;
  for (bool b : bf16) n_bf16 += b;
  EXPECT_EQ(n_bf16, 4 * l.g.config.num_layers + 1);  // attn/mlp norms, attention, gating; final norm
  // The logits and the argmax are not in the scratch; last_row is a view.
  EXPECT_LT(p.slot_offset(l.g.logits), 0);
  EXPECT_LT(p.slot_offset(l.g.next_token), 0);
}

// The same over random shapes (layers, widths, heads, grouped-query ratios, head dims, q/k norms,
// biases, tied embeddings) and chunk sizes: every op in one step, slots never shared while live.
TEST(Prefill, RandomShapesKeepLiveSlotsDisjoint) {
  uint32_t state = 2026;
  auto pick = [&](uint32_t n) {  // xorshift32 in [0, n)
    state ^= state << 13, state ^= state >> 17, state ^= state << 5;
    return int(state % n);
  };
  const model::Config base = load("qwen3-bf16").model->config;
  for (int trial = 0; trial < 40; ++trial) {
    model::Config c = base;
    c.num_layers = 1 + pick(4);
    c.num_kv_heads = 1 + pick(4);
    c.num_heads = c.num_kv_heads * (1 + pick(4));
    c.head_dim = 8 * (1 + pick(16));  // q_dim a multiple of 8: o_proj's K
    c.hidden_size = 8 * (2 + pick(40));
    c.intermediate_size = 8 * (2 + pick(60));
    c.vocab_size = 50 + pick(500);
    c.qk_norm = pick(2) == 0;
    c.attention_bias = pick(2) == 0;
    c.tie_word_embeddings = pick(2) == 0;
    const ir::Graph g = ir::build(c, DType::BF16);
    ASSERT_EQ(prefill_unsupported(g, DType::BF16), "");
    MemoryPlan mem;  // the constructor reads the weight dtype only
    mem.weight_dtype = DType::BF16;
    const int64_t rows = std::vector<int64_t>{1, 7, 64, 200}[size_t(pick(4))];
    const PrefillProgram p(g, mem, rows, 8 + pick(130), false);
    std::set<int> ops;
    for (const PrefillStep& s : p.steps()) {
      ops.insert(s.op);
      if (s.residual >= 0) ops.insert(s.op + 1);
      ops.insert(s.group_ops.begin(), s.group_ops.end());
      if (s.rope_op >= 0) ops.insert(s.rope_op);
    }
    EXPECT_EQ(ops.size(), g.ops.size()) << "trial " << trial;
    expect_disjoint_live_slots(g, p, rows);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "trial " << trial << ": layers " << c.num_layers << ", heads " << c.num_heads << "/"
                    << c.num_kv_heads << " x " << c.head_dim << ", hidden " << c.hidden_size << ", rows " << rows;
      break;
    }
  }
}

// With fuse_head_rope, q's and k's projections name the head norm + RoPE step that their wgmma
// epilogue can run (heads of kHeadRopeDim only), v's none; the fixtures' heads of 24 none at
// all, nor any model without the option. The epilogue's cos and sin tables: inside the scratch
// after every slot and the workspace, one per set of frequencies, cos and sin of float(p) *
// inv_freq[j] at rope_cos_offset and rope_sin_offset for every position below the KV capacity.
TEST(Prefill, HeadRopeEpilogueTakesQAndKOfHeadsOf128) {
  const Loaded l = load("qwen3-bf16");
  model::Config c = l.model->config;
  c.head_dim = kHeadRopeDim;
  c.num_heads = 4, c.num_kv_heads = 2, c.hidden_size = 256;
  ASSERT_TRUE(c.qk_norm);
  const ir::Graph wide_g = ir::build(c, DType::BF16);
  MemoryPlan mem;
  mem.weight_dtype = DType::BF16;
  mem.kv_capacity = 333;
  for (const auto& [wide, fuse] : {std::pair{true, true}, std::pair{false, true}, std::pair{true, false}}) {
    const ir::Graph& g = wide ? wide_g : l.g;
    const PrefillProgram p(g, wide ? mem : l.mem, 300, 132, fuse);
    int taken = 0;
    std::set<int64_t> tables;
    for (const PrefillStep& s : p.steps()) {
      if (s.kind != ir::OpKind::Linear) {
        EXPECT_TRUE(s.head_rope.empty());
        continue;
      }
      ASSERT_EQ(s.head_rope.size(), 1 + s.group_ops.size());
      for (size_t j = 0; j < s.head_rope.size(); ++j) {
        if (s.head_rope[j] < 0) continue;
        ++taken;
        const PrefillStep& h = p.steps()[size_t(s.head_rope[j])];
        EXPECT_EQ(h.kind, ir::OpKind::HeadRmsNorm);
        ASSERT_GE(h.rope_op, 0);
        EXPECT_EQ(h.inputs[0], j == 0 ? s.output : s.group_outputs[j - 1]);
        EXPECT_NE(j, 2u) << "v is not normed";
        const ir::Op& rope = g.ops[size_t(h.rope_op)];
        const std::vector<float> f = ir::rope_inv_freq(rope.attrs.head_dim, rope.attrs.rope_theta,
                                                       rope.attrs.rope_scaling);
        const int64_t cos_at = p.rope_cos_offset(h.rope_op), sin_at = p.rope_sin_offset(h.rope_op);
        tables.insert(cos_at);
        ASSERT_GE(cos_at, p.rope_tables_offset());
        ASSERT_LE(sin_at + mem.kv_capacity * (kHeadRopeDim / 2) * 4,
                  p.rope_tables_offset() + int64_t(p.rope_tables().size()) * 4);
        ASSERT_LE(p.rope_tables_offset() + int64_t(p.rope_tables().size()) * 4, p.scratch_bytes());
        for (int64_t pos = 0; pos < mem.kv_capacity; ++pos)
          for (int jj = 0; jj < kHeadRopeDim / 2; ++jj) {
            const float angle = float(pos) * f[size_t(jj)];
            const size_t e = size_t(pos * (kHeadRopeDim / 2) + jj);
            ASSERT_EQ(p.rope_tables()[size_t(cos_at - p.rope_tables_offset()) / 4 + e], std::cos(angle));
            ASSERT_EQ(p.rope_tables()[size_t(sin_at - p.rope_tables_offset()) / 4 + e], std::sin(angle));
          }
      }
    }
    EXPECT_EQ(taken, wide && fuse ? 2 * c.num_layers : 0);
    // q and k share their frequencies: one table (cos, then sin) of the capacity's positions.
    EXPECT_EQ(tables.size(), size_t(wide && fuse ? 1 : 0));
    EXPECT_EQ(p.rope_tables().size(), wide && fuse ? size_t(2 * mem.kv_capacity * (kHeadRopeDim / 2)) : 0u);
    // Every slot ends before the tables.
    const std::vector<bool> bf16 = prefill_bf16_tensors(g);
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      const auto& sh = g.tensors[t].shape;
      if (p.slot_offset(int(t)) >= 0) {
        EXPECT_LE(p.slot_offset(int(t)) + (sh[0] == ir::kTokens ? 300 : sh[0]) * sh.back() * (bf16[t] ? 2 : 4),
                  p.rope_tables_offset());
      }
    }
    expect_disjoint_live_slots(g, p, 300);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PrefillPrograms,
                         ::testing::Values("qwen3-bf16", "qwen2-bf16", "llama-bf16-sharded"));

// Grids covering the output, K parts of four steps or more (the even split's proofs cover
// every step once), the workspace bound held, large tiles only for about a wave or more (or,
// where they are wgmma tiles, split parts making half a wave to a wave); the split counts the
// proofs must cover.
TEST(Prefill, GemmLaunchesCoverTheirShapes) {
  for (const bool wgmma : {false, true})
    for (int sms : {1, 8, 132})
      for (int64_t m : {1, 39, 64, 150, 1024, 4096})
        for (int64_t n : {24, 1024, 4096, 12288, 151936})
          for (int64_t k : {8, 48, 1024, 3072, 12288}) {
            const GemmLaunch g = gemm_launch(m, n, k, sms, wgmma);
            const int64_t bm = g.large ? 128 : 64, bn = g.large ? 256 : 128, bk = g.large ? 64 : 32;
            const int64_t ktiles = (k + bk - 1) / bk, tiles = int64_t(g.grid_m) * g.grid_n;
            ASSERT_GE(int64_t(g.grid_m) * bm, m);
            ASSERT_GE(int64_t(g.grid_n) * bn, n);
            ASSERT_LT(int64_t(g.grid_m - 1) * bm, m);
            ASSERT_GE(g.splits, 1);
            ASSERT_LE(int64_t(g.splits), std::max<int64_t>(ktiles / 4, 1)) << "four K steps or more per part";
            if (g.splits > 1) {
              EXPECT_LE(int64_t(g.splits) * m * n * 4, gemm_workspace_bytes(sms)) << m << " " << n << " " << k;
            }
            if (g.large && tiles * 4 < int64_t(sms) * 3) {  // a short grid of wgmma tiles, split
              EXPECT_TRUE(wgmma);
              EXPECT_LE(m, 128) << "one tile row";
              EXPECT_LE(tiles * g.splits, sms);
              EXPECT_GE(2 * tiles * g.splits, sms);
            } else if (g.large) {
              EXPECT_EQ(g.splits, 1);
            }
          }
  // Qwen3-8B at 39 rows on 132 SMs: q and o_proj (16 tiles) and down take eight parts of the
  // wgmma tile, gate + up's 96 tiles it unsplit (the SwiGLU entry); k and v (4 tiles: 64 CTAs
  // at most) stay on the small tile, but q + k + v as one grid (24 tiles) takes five parts of it.
  // Qwen3-0.6B's projections alone all stay on the small tile (q + k + v together too); gate +
  // up as one grid (24 tiles) would take four parts of the wgmma tile, but with no head norm to
  // fold into its reduce the program runs them one by one (PrefillProgram::enqueue).
  EXPECT_EQ(gemm_launch(39, 4096, 4096, 132, true).splits, 8);
  const GemmLaunch qkv = gemm_launch(39, 6144, 4096, 132, true);
  EXPECT_TRUE(qkv.large && qkv.splits == 5);
  EXPECT_TRUE(gemm_launch(39, 4096, 12288, 132, true).large);
  const GemmLaunch gate_up = gemm_launch(39, 2 * 12288, 4096, 132, true);
  EXPECT_TRUE(gate_up.large && gate_up.splits == 1);
  EXPECT_FALSE(gemm_launch(39, 1024, 4096, 132, true).large);
  for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{{2048, 1024}, {1024, 1024}, {4096, 1024},
                                                                     {1024, 2048}, {3072, 1024}, {1024, 3072}})
    EXPECT_FALSE(gemm_launch(39, n, k, 132, true).large) << n << " x " << k;
  const GemmLaunch gate_up_06 = gemm_launch(39, 6144, 1024, 132, true);
  EXPECT_TRUE(gate_up_06.large && gate_up_06.splits == 4);
  // More than one tile row launches as without the wgmma rule (Qwen3-0.6B's o_proj at 1,024 rows:
  // 32 large tiles, the small tile split in two).
  for (int64_t m : {129, 1024})
    for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1024, 2048}, {1024, 3072}, {4096, 4096}}) {
      const GemmLaunch a = gemm_launch(m, n, k, 132, true), b = gemm_launch(m, n, k, 132, false);
      EXPECT_TRUE(a.large == b.large && a.splits == b.splits) << m << " " << n << " x " << k;
    }
  const Loaded l = load("qwen3-bf16");
  const std::vector<int64_t> counts = prefill_split_counts(l.g, 4096, 132);
  ASSERT_FALSE(counts.empty());
  EXPECT_EQ(counts.front(), 1);
  // Each projection step's launches: its members alone and all of them as one grid.
  const PrefillProgram plan(l.g, l.mem, 4096, 132, true);
  for (const bool wgmma : {false, true})
    for (int64_t m : {1, 39, 150, 4096})
      for (const PrefillStep& st : plan.steps()) {
        if (st.kind != ir::OpKind::Linear) continue;
        int64_t n_total = 0;
        const int64_t k = l.g.weight(l.g.ops[size_t(st.op)].weight).shape.at(1);
        for (int o : st.member_ops()) {
          const int64_t n = l.g.weight(l.g.ops[size_t(o)].weight).shape.at(0);
          n_total += n;
          const int64_t s = gemm_launch(m, n, k, 132, wgmma).splits;
          EXPECT_TRUE(std::binary_search(counts.begin(), counts.end(), s)) << s;
        }
        const int64_t s = gemm_launch(m, n_total, k, 132, wgmma).splits;
        EXPECT_TRUE(std::binary_search(counts.begin(), counts.end(), s)) << s << " for a group of " << n_total;
      }
}

// Stream-K launches (one tile row): every CTA count a program's projection steps take is one
// the proofs cover (prefill_split_counts), with four K steps or more per CTA and at most one CTA
// per SM; the partials fit the workspace and the tiles the counters. On the fixtures and on
// Qwen3-0.6B's and Qwen3-8B's shapes, on 132 SMs and on 1.
TEST(Prefill, StreamKLaunchesAreProvedAndFitTheirBuffers) {
  for (const char* name : {"qwen3-bf16", "qwen2-bf16", "llama-bf16-sharded"}) {
    Loaded l = load(name);
    for (const auto& [hidden, inter, heads] : {std::tuple{0, 0, 0}, std::tuple{1024, 3072, 16},
                                               std::tuple{4096, 12288, 32}}) {
      model::Config c = l.model->config;
      if (hidden) c.hidden_size = hidden, c.intermediate_size = inter, c.num_heads = heads, c.num_kv_heads = 8;
      if (hidden) c.head_dim = 128, c.vocab_size = 151936;
      const ir::Graph g = ir::build(c, DType::BF16);
      const sched::Plan plan = sched::plan(g, megakernel_plan_options(g, 8, 64));
      const MemoryPlan mem = plan_memory(g, plan.tasks, DType::BF16, 64);
      for (const int sms : {132, 1}) {
        const std::vector<int64_t> counts = prefill_split_counts(g, 4096, sms);
        const PrefillProgram p(g, mem, 128, sms, true);
        int checked = 0;
        for (const PrefillStep& s : p.steps()) {
          if (s.kind != ir::OpKind::Linear) continue;
          const int64_t tiles = p.streamk_tiles(s), k = g.weight(g.ops[size_t(s.op)].weight).shape.at(1);
          const int64_t units = tiles * ((k + 63) / 64);
          const int ctas = streamk_ctas(units, sms);
          EXPECT_TRUE(std::binary_search(counts.begin(), counts.end(), ctas)) << name << " " << hidden << " " << ctas;
          EXPECT_GE(ctas, 1);
          EXPECT_LE(ctas, sms);
          EXPECT_TRUE(units < kStreamkMinSteps || units / ctas >= kStreamkMinSteps) << units << " on " << ctas;
          EXPECT_LE(tiles, p.counter_count());
          EXPECT_LE(streamk_workspace_bytes(ctas, 128), p.workspace_bytes());
          ++checked;
        }
        EXPECT_EQ(checked, 4 * c.num_layers + 1);  // q+k+v, o, gate+up, down; the logits
      }
    }
  }
  // Stream-K where the tiles make half a wave to three quarters of one, in one tile row:
  // Qwen3-8B's gate + up (96 SwiGLU tiles), not its q + k + v (24), Qwen3-0.6B's gate + up (24)
  // or the LM head (594).
  EXPECT_TRUE(prefill_streamk(39, 96, 132));
  EXPECT_TRUE(prefill_streamk(128, 66, 132));
  EXPECT_FALSE(prefill_streamk(129, 96, 132));
  EXPECT_FALSE(prefill_streamk(39, 24, 132));
  EXPECT_FALSE(prefill_streamk(39, 65, 132));
  EXPECT_FALSE(prefill_streamk(39, 99, 132));
  EXPECT_FALSE(prefill_streamk(1, 594, 132));
  EXPECT_EQ(streamk_ctas(3, 132), 1);
  EXPECT_EQ(streamk_ctas(96 * 64, 132), 132);
  EXPECT_EQ(streamk_ctas(16 * 16, 132), 64);
}

// The narrow wgmma tile where its waves take less time: Qwen3-8B's q, k and v at 1,024 rows
// (192 wide tiles are two waves of 132, the second short; 384 narrow ones three nearly full).
// Elsewhere the wide tile stays: Qwen3-0.6B's q, k and v at 1,024 rows (128 wide tiles, one
// wave) and at 4,096, Qwen3-8B's at 4,096, and any grid on one SM.
TEST(Prefill, NarrowWgmmaTileWhereItFillsWaves) {
  const std::vector<int64_t> q8b = {4096, 1024, 1024}, q06b = {2048, 1024, 1024};
  EXPECT_TRUE(wgmma_group_narrow(1024, q8b, 132));
  EXPECT_FALSE(wgmma_group_narrow(1024, q06b, 132));
  EXPECT_FALSE(wgmma_group_narrow(4096, q06b, 132));
  EXPECT_FALSE(wgmma_group_narrow(4096, q8b, 132));
  EXPECT_FALSE(wgmma_group_narrow(1024, q8b, 1));
  ASSERT_NE(gemm_narrow_tile("sm_90a"), nullptr);
  EXPECT_EQ(gemm_narrow_tile("sm_90a")->bn, 128);
  EXPECT_EQ(gemm_narrow_tile("sm_80"), nullptr);
}

// What a load proves before the prefill kernels may run (runtime/proofs.h), on a real shape's
// split counts: every record proved, and the record a cache entry keeps.
TEST(Prefill, ProofsHoldForTheSplitsAndTilesTheKernelsUse) {
  const model::Config c = [] {
    model::Config q = load("qwen3-bf16").model->config;  // Qwen3-0.6B's projection shapes
    q.hidden_size = 1024, q.intermediate_size = 3072, q.num_heads = 16, q.num_kv_heads = 8, q.head_dim = 128;
    q.vocab_size = 151936;
    return q;
  }();
  const ir::Graph g = ir::build(c, DType::BF16);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int64_t> counts = prefill_split_counts(g, 4096, 132);
  const std::vector<std::pair<int64_t, int64_t>> heads = prefill_head_shapes(g);
  ASSERT_EQ(heads, (std::vector<std::pair<int64_t, int64_t>>{{8, 128}, {16, 128}}));  // K and Q
  const std::vector<PlanProof> proofs =
      prefill_proofs(counts, prefill_padded_head_dim(g), heads, {g.kv_cache.num_kv_heads, g.kv_cache.head_dim});
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  size_t obligations = 0;
  for (const PlanProof& p : proofs) {
    EXPECT_TRUE(p.record.proved()) << p.use << ": " << p.record.subject;
    obligations += p.record.obligations.size();
  }
  // 2 mma.sync GEMM tiles x 3, the two wgmma tiles 1 (its operands by TMA) + 2 descriptors +
  // 2 swizzles each, attention 3 + pairs 1 + its softmax 1, orders, ldmatrix 3, P 1; head dim 128:
  // the wgmma attention's Q, K and V descriptors, its 64-row swizzle, its Q staging and its
  // softmax; the row kernels' nests (embedding, RMSNorm, argmax, SiLU-gating, add, split-K
  // reduce and row reduce, the KV append and shadow; head norm with and without RoPE per shape)
  EXPECT_EQ(proofs.size(), counts.size() + 25 + 6 + kTileGroup + 9 + 2 * heads.size());
  const std::string record = verification_record(proofs);
  EXPECT_NE(record.find("wgmma descriptors read W where the TMA stored it"), std::string::npos);
  EXPECT_NE(record.find("prefill gemm_128x256: output tile"), std::string::npos);
  EXPECT_NE(record.find("prefill wgmma_128x256: 128-byte swizzle of 256 rows"), std::string::npos);
  EXPECT_NE(record.find("prefill wgmma_128x128: 128-byte swizzle of 128 rows"), std::string::npos);
  EXPECT_NE(record.find("prefill wgmma_128x128: output tile"), std::string::npos);
  EXPECT_NE(record.find("ldmatrix lane addresses of B operands by .trans (V)"), std::string::npos);
  EXPECT_NE(record.find("P as the A operand from the score accumulators"), std::string::npos);
  EXPECT_NE(record.find("P V's descriptors read the values (MN-major) where the TMA stored them"), std::string::npos);
  EXPECT_NE(record.find("weights, rescale and update over scaled scores"), std::string::npos);
  EXPECT_NE(record.find("prefill KV shadow: its loop nest, head dim 128"), std::string::npos);
  std::printf("%zu split counts (%lld..%lld), %zu proofs, %zu obligations in %.0f ms\n", counts.size(),
              (long long)counts.front(), (long long)counts.back(), proofs.size(), obligations, ms);
}

// The GEMM grids in the tile order: groups of at most kTileGroup tile rows, no more block rows
// than needed, and every tile reached by one block of the grid (the formula the kernels print).
TEST(Prefill, TileGridsCoverEveryTileOnce) {
  const ir::TileOrder& f = ir::tile_order_formula();
  for (int64_t nm = 1; nm <= 40; ++nm)
    for (int64_t nn : {1, 2, 16, 24, 96}) {
      const TileGrid t = tile_grid(nm, nn);
      ASSERT_GE(t.g, 1);
      ASSERT_LE(t.g, kTileGroup);
      EXPECT_EQ(int64_t(t.x), t.g * nn);
      EXPECT_LT((int64_t(t.y) - 1) * t.g, nm) << "a block row with no tile";
      std::set<std::pair<int64_t, int64_t>> seen;
      for (int64_t y = 0; y < int64_t(t.y); ++y)
        for (int64_t x = 0; x < int64_t(t.x); ++x) {
          const int64_t m = ir::eval(f.m, {{"x", x}, {"y", y}, {"g", t.g}}), n = ir::eval(f.n, {{"x", x}, {"g", t.g}});
          if (m < nm) {
            EXPECT_TRUE(seen.insert({m, n}).second) << m << " " << n;
          }
        }
      EXPECT_EQ(int64_t(seen.size()), nm * nn) << nm << " x " << nn;
    }
}

// Both sources compiled for sm_90a: the H200's (wgmma large tiles) and the one of devices
// without wgmma (mma.sync large tiles), which the GPU tests run on the H200 too.
// The printed wgmma wrappers name every accumulator once, then A's and B's operands and the
// predicate's source in the order their constraints list them (the prefill compile test below
// runs them through NVRTC and ptxas).
TEST(Prefill, WgmmaWrappersNameEveryOperand) {
  const std::string ss = wgmma_function("pf_wgmma_256", 256, false);
  EXPECT_NE(ss.find("pf_wgmma_256(float (&d)[128], unsigned long long da, unsigned long long db, int accumulate)"),
            std::string::npos) << ss;
  EXPECT_NE(ss.find("setp.ne.b32 p, %130, 0;"), std::string::npos) << ss;
  EXPECT_NE(ss.find("m64n256k16.f32.bf16.bf16"), std::string::npos) << ss;
  EXPECT_NE(ss.find("%126, %127}, %128, %129, p, 1, 1, 0, 0;"), std::string::npos) << ss;
  EXPECT_NE(ss.find("\"+f\"(d[127])\n      : \"l\"(da), \"l\"(db), \"r\"(accumulate));"), std::string::npos) << ss;
  const std::string rs = wgmma_function("pf_wgmma_128_rs", 128, true);
  EXPECT_NE(rs.find("setp.ne.b32 p, %69, 0;"), std::string::npos) << rs;
  EXPECT_NE(rs.find("%63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;"), std::string::npos) << rs;
  EXPECT_NE(rs.find("\"r\"(a[3]), \"l\"(db), \"r\"(1));"), std::string::npos) << rs;
  for (int n : {64, 128, 256}) {
    const std::string f = wgmma_function("f", n, false);
    for (int i = 0; i < n / 2; ++i)
      EXPECT_NE(f.find("\"+f\"(d[" + std::to_string(i) + "])"), std::string::npos) << n << " " << i;
    EXPECT_EQ(f.find("\"+f\"(d[" + std::to_string(n / 2) + "])"), std::string::npos) << n;
  }
  EXPECT_THROW(wgmma_function("f", 12, false), Error);
}

// Launches overlap the kernel before them (PrefillKernels::overlap), so no entry may touch memory
// before pf_wait_prior: it must be each entry's first statement, in the macros' entries too.
TEST(Prefill, EveryEntryWaitsForTheKernelBeforeFirst) {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const std::string src = prefill_source(arch);
    int entries = 0;
    for (size_t at = src.find("__global__"); at != std::string::npos; at = src.find("__global__", at + 1)) {
      const size_t open = src.find('{', at);
      ASSERT_NE(open, std::string::npos);
      const size_t first = src.find_first_not_of(" \t\n\\", open + 1);  // a macro's line ends too
      EXPECT_EQ(src.compare(first, 16, "pf_wait_prior();"), 0)
          << arch << ": the entry at " << src.substr(at, open - at) << " begins with "
          << src.substr(first, 60);
      ++entries;
    }
    // The rows' nine, the GEMM macro's two and the two reduces, attention's macro; on sm_90a
    // the wgmma macros' seven (stream-K's two with them) and the wgmma attention.
    EXPECT_EQ(entries, prefill_wgmma(arch) ? 22 : 14) << arch;
  }
  // pf_wait_prior itself: the wait, then the trigger, only where the launches exist.
  const std::string src = prefill_source("sm_90a");
  const size_t def = src.find("void pf_wait_prior()");
  ASSERT_NE(def, std::string::npos);
  const size_t wait = src.find("griddepcontrol.wait;", def), go = src.find("griddepcontrol.launch_dependents;", def);
  EXPECT_LT(wait, go);
  EXPECT_LT(src.find("#if __CUDA_ARCH__ >= 900", def), wait);
}

TEST(Prefill, KernelsCompileForSm90aWithoutSpills) {
  for (const char* source_arch : {"sm_90a", "sm_80"}) {
    cuda::CompileRequest r;
    r.source = prefill_source(source_arch);
    r.name = "mpk_prefill.cu";
    r.arch = "sm_90a";
    r.options = prefill_compile_options();
    r.options.push_back("--ptxas-options=-v");
    const cuda::CompileResult c = cuda::compile(r);
    ASSERT_FALSE(c.cubin.empty());
    // ptxas serializes every wgmma of a kernel whose accumulators it cannot keep in flight.
    EXPECT_EQ(c.log.find("Potential Performance Loss"), std::string::npos) << c.log;
    // Nor any other warning of NVRTC or ptxas (the log holds ptxas's -v lines besides).
    EXPECT_EQ(c.log.find("warning"), std::string::npos) << c.log;
    const std::string large = gemm_tile(true, source_arch).entry, small = gemm_tile(false, source_arch).entry;
    EXPECT_EQ(large, prefill_wgmma(source_arch) ? "pf_wgmma_128x256" : "pf_gemm_128x256");
    std::vector<std::string> entries = {"pf_embed", "pf_rms_norm", "pf_head_rms_norm", "pf_head_norm_rope",
                                        "pf_kv_store", "pf_kv_shadow", "pf_silu_mul", "pf_add", "pf_argmax", large,
                                        small, large + "_group", small + "_group", "pf_gemm_reduce",
                                        "pf_attention_16", "pf_attention_32", "pf_attention_64", "pf_attention_128"};
    if (prefill_wgmma(source_arch)) {
      const std::string narrow = gemm_narrow_tile(source_arch)->entry;
      for (const std::string& e : {large + "_swiglu", std::string("pf_attention_wgmma"), narrow + "_group",
                                   large + "_rope", large + "_group_rope", narrow + "_group_rope", large + "_streamk",
                                   large + "_streamk_swiglu"})
        entries.push_back(e);
    }
    for (const std::string& e : entries) {
      const cuda::PtxasInfo info = cuda::parse_ptxas_info(c.log, e.c_str());
      EXPECT_GT(info.registers, 0) << e << "\n" << c.log;
      EXPECT_EQ(info.spill_store_bytes, 0) << e;
      EXPECT_EQ(info.spill_load_bytes, 0) << e;
      std::printf("%s %-22s %3d registers, %6d bytes static shared\n", source_arch, e.c_str(), info.registers,
                  info.static_smem_bytes);
    }
  }
}

}  // namespace
}  // namespace mpk::rt
