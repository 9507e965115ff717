// The prefill row kernels' loop nests (ir/prefill_nests.h): proved for every shape, the same
// obligations by running them, printed as the nests, and every mutant of their expressions
// judged against running it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "ir/layouts.h"
#include "ir/prefill_nests.h"
#include "superopt/loop_prover.h"
#include "tests/superopt/loop_nest_util.h"
#include "tests/superopt/test_util.h"

namespace mpk::superopt {
namespace {

using ir::IndexExpr;

struct Case {
  const ir::LoopNest* nest;
  const char* what;
  size_t obligations;
  ir::IndexEnv fixed;  // for running it, with `var` in [1, count)
  const char* var;
  int64_t count;
  std::map<std::string, int64_t> proved = {};  // fixed for the proof (the load's shape)
  size_t stride = 1;                           // every stride-th mutant judged; 0: none (no
                                               // expression but the bare index to mutate)
};

// The case run for every `var` in [1, count): each shape has at least one element.
bool runs_right(const Case& c, const ir::LoopNest& n, int64_t count) {
  for (int64_t x = 1; x < count; ++x) {
    ir::IndexEnv env = c.fixed;
    env[c.var] = x;
    if (!brute_force(n, env, "unused", 1)) return false;
  }
  return true;
}

std::vector<Case> cases() {
  // The head norm and RoPE run with 3 heads of 8, buffers of 16 floats and 2 warps, rows 1 .. 5;
  // proved for Qwen3-8B's query and KV heads (the load proves each model's shapes).
  const ir::IndexEnv rope = {{"heads", 3}, {"half", 4}, {"MD", 16}, {"nw", 2}, {"threads", 64}};
  auto with = [](ir::IndexEnv e, int64_t norm) { return e["norm"] = norm, e; };
  return {{&ir::prefill_embed_nest(), "embedding", 7, {{"row", 2}, {"tok", 3}, {"threads", 3}}, "H", 40},
          {&ir::prefill_rms_norm_nest(), "RMSNorm", 16, {{"row", 3}, {"threads", 4}}, "H", 40},
          {&ir::prefill_argmax_nest(), "argmax scan", 5, {{"threads", 5}}, "V", 40},
          {&ir::prefill_silu_mul_nest(), "SiLU-gating", 13, {{"stride", 7}}, "n", 40, {}, 0},
          {&ir::prefill_add_nest(), "add", 10, {{"stride", 7}}, "n", 40, {}, 0},
          {&ir::prefill_gemm_reduce_nest(), "split-K reduce", 14, {{"N", 3}, {"splits", 3}, {"stride", 5}}, "n", 20},
          // Row 2 in 3 parts, planes 25 elements longer than a row, rows of 1 .. 19 elements.
          {&ir::prefill_gemm_reduce_row_nest(), "split-K row reduce", 11,
           {{"row", 2}, {"gap", 25}, {"splits", 3}, {"threads", 4}}, "N", 20},
          // The KV append of 2 KV heads of 6 into a capacity of 9 from position 2: chunks of
          // 1 .. 9 rows (those past the capacity write nothing); proved for Qwen3's 8 of 128.
          {&ir::prefill_kv_store_nest(), "KV append", 19, {{"Hkv", 2}, {"half", 3}, {"cap", 9}, {"pos0", 2}, {"stride", 5}},
           "T", 10, {{"Hkv", 8}, {"half", 64}}, 2},
          // The shadow of plane 2 (heads of 6, capacity 9) from position 2: 1 .. 9 positions (a
          // range past the capacity writes nothing); proved for head dim 128.
          {&ir::prefill_kv_shadow_nest(), "KV shadow", 7, {{"p", 2}, {"half", 3}, {"cap", 9}, {"from", 2}, {"stride", 5}},
           "len", 10, {{"half", 64}}, 4},
          {&ir::prefill_head_rms_norm_nest(), "head norm", 11, {{"heads", 3}, {"half", 20}, {"nw", 2}, {"threads", 64}},
           "row", 4, {{"heads", 32}, {"half", 64}}, 3},
          {&ir::prefill_head_norm_rope_nest(), "head norm and RoPE, normed", 31, with(rope, 1), "row", 6,
           {{"heads", 32}, {"half", 64}}, 6},
          {&ir::prefill_head_norm_rope_nest(), "head norm and RoPE, copied", 31, with(rope, 0), "row", 6,
           {{"heads", 8}, {"half", 64}}, 6}};
}

TEST(PrefillNests, AreProvedForEveryShape) {
  for (const Case& c : cases()) {
    const ProofRecord r = prove_loop_nest(*c.nest, c.what, c.proved);
    EXPECT_TRUE(r.proved()) << c.what << ": " << failed(r);
    EXPECT_EQ(r.obligations.size(), c.obligations) << c.what;
    EXPECT_TRUE(runs_right(c, *c.nest, c.count)) << c.what;
  }
}

TEST(PrefillNests, ThePrintedFunctionsAreTheNests) {
  for (const Case& c : cases()) {
    const ir::LoopNest& n = *c.nest;
    const std::string p = ir::print(n);
    EXPECT_EQ(p.rfind(n.signature + " {\n", 0), 0u) << p;
    for (const ir::Param& q : n.params)
      EXPECT_EQ(p.find("const int " + q.name + " = " + q.c + ";") != std::string::npos,
                ir::names(p.substr(p.find('{')), q.name))
          << q.name;
    for (const ir::Access& a : n.accesses) {
      EXPECT_NE(p.find(element(a)), std::string::npos) << c.what << ": " << a.name << "\n" << p;
      EXPECT_EQ(p.find('{' + a.name + '}'), std::string::npos) << "access " << a.name << " left unprinted";
    }
  }
  const std::string rms = ir::print(ir::prefill_rms_norm_nest());
  EXPECT_NE(rms.find("for (int i = threadIdx.x; i < H; i += threads) {"), std::string::npos) << rms;
  EXPECT_NE(rms.find("const int threads = PF_ROW_THREADS;"), std::string::npos) << rms;
  const std::string add = ir::print(ir::prefill_add_nest());  // the grid's threads
  EXPECT_NE(add.find("for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += stride) {"),
            std::string::npos)
      << add;
}

TEST(PrefillNests, WrongNestsAreRefuted) {
  // The scaling pass one element past the row: out of the row, and of the weight.
  ir::LoopNest past = ir::prefill_rms_norm_nest();
  ASSERT_EQ(past.body[3].kind, ir::Stmt::Loop);
  past.body[3].expr = IndexExpr::var("H") + 1;
  const ProofRecord r = prove_loop_nest(past, "RMSNorm", {});
  EXPECT_FALSE(r.proved());
  EXPECT_NE(failed(r).find("inside"), std::string::npos) << failed(r);
  // The embedding reading its own output row of the table instead of the token's.
  ir::LoopNest own = ir::prefill_embed_nest();
  own.accesses[0].index = IndexExpr::var("row") * IndexExpr::var("H") + IndexExpr::var("i");
  EXPECT_FALSE(prove_loop_nest(own, "embedding", {}).proved());
  EXPECT_FALSE(brute_force(own, {{"row", 2}, {"tok", 3}, {"threads", 3}}, "H", 4));
  // A warp staging past its own slots of the buffer (head dim 256: its MD slots are full).
  ir::LoopNest spill = ir::prefill_head_norm_rope_nest();
  ASSERT_EQ(spill.accesses[7].name, "hw");
  spill.accesses[7].index = IndexExpr::var("i") + 128;
  const ProofRecord sp = prove_loop_nest(spill, "head norm and RoPE", {{"heads", 16}, {"half", 128}});
  EXPECT_FALSE(sp.proved());
  EXPECT_NE(failed(sp).find("hw inside buffer"), std::string::npos) << failed(sp);
  EXPECT_TRUE(prove_loop_nest(ir::prefill_head_norm_rope_nest(), "head norm and RoPE", {{"heads", 16}, {"half", 128}})
                  .proved());
  // A grid-strided walk over up to INT32_MAX elements: its last step leaves int.
  ir::LoopNest wide = ir::prefill_add_nest();
  ASSERT_EQ(wide.params[0].name, "n");
  wide.params[0].hi = INT32_MAX;
  const ProofRecord w = prove_loop_nest(wide, "add", {});
  EXPECT_FALSE(w.proved());
  EXPECT_NE(failed(w).find("loops"), std::string::npos) << failed(w);
}

// The KV append's pairs (chunk row, element) land at their places in the cache: distinct, even
// (each holds a pair of floats), inside [0, Hkv cap D), at position pos0 + row / Hkv.
TEST(PrefillNests, KvAppendPlacesAreDistinctPairsOfTheCache) {
  const ir::Access& kc = ir::prefill_kv_store_nest().accesses[2];
  ASSERT_EQ(kc.name, "kc");
  for (const int64_t hkv : {1, 2, 3})
    for (const int64_t D : {2, 6})
      for (const int64_t pos0 : {0, 3}) {
        const int64_t cap = 11, T = cap - pos0;  // the chunk fills the cache
        std::set<int64_t> seen;
        for (int64_t th = 0; th < T * hkv; ++th)
          for (int64_t d = 0; d < D; d += 2) {
            const int64_t p = ir::eval(kc.place, {{"array", th}, {"index", d}, {"Hkv", hkv}, {"pos0", pos0},
                                                   {"cap", cap}, {"D", D}});
            EXPECT_TRUE(p % 2 == 0 && p >= 0 && p + 1 < hkv * cap * D) << p;
            EXPECT_TRUE(seen.insert(p).second) << p;
            EXPECT_EQ(p, ir::kv_elem(th % hkv, pos0 + th / hkv, d, cap, D));
          }
      }
}

TEST(PrefillNests, MutantsAgreeWithRunningThem) {
  for (const Case& c : cases()) {
    if (c.stride == 0) continue;
    Tally tally{c.what};
    const std::map<std::string, int64_t> fixed(c.fixed.begin(), c.fixed.end());
    judge_mutants(*c.nest, fixed, c.stride,
                  [&](const ir::LoopNest& m) { return runs_right(c, m, std::min<int64_t>(c.count, 12)); }, tally);
  }
}

}  // namespace
}  // namespace mpk::superopt
