// The decode attention's rows (ir::AttentionRows): the queries, new rows and output in their
// activations, the KV cache, and the step's new row read only by the chunk that appends it;
// proved for the shapes the kernels use, every generated mutant judged like a brute-force
// enumeration of the prover's domain.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "ir/layouts.h"
#include "superopt/index_prover.h"
#include "tests/superopt/test_util.h"

namespace mpk::superopt {
namespace {

using ir::IndexExpr;

// prove_attention_rows' obligations by enumeration, for every KV head count up to max_heads.
bool brute_force_rows(const ir::AttentionRows& f, int64_t C, int64_t G, int64_t D, int64_t cap, int64_t max_heads) {
  auto elem = [&](int64_t hd, int64_t e) { return ir::eval(f.head_elem, {{"hd", hd}, {"e", e}, {"D", D}}); };
  auto qh = [&](int64_t h, int64_t g) { return ir::eval(f.q_head, {{"h", h}, {"g", g}, {"G", G}}); };
  const ir::EvenSplit& split = ir::even_split_formula();
  try {
    for (int64_t hkv = 1; hkv <= max_heads; ++hkv) {
      std::set<int64_t> queries;
      for (int64_t h = 0; h < hkv; ++h)
        for (int64_t g = 0; g < G; ++g)
          for (int64_t e = 0; e < D; ++e) {
            const int64_t q = elem(qh(h, g), e);
            if (q < elem(qh(h, 0), 0) || q >= elem(qh(h + 1, 0), 0) || q < 0 || q >= elem(qh(hkv, 0), 0)) return false;
            if (!queries.insert(q).second) return false;
            const int64_t r = elem(h, e);
            if (r < elem(h, 0) || r >= elem(h + 1, 0) || r < 0 || r >= elem(hkv, 0)) return false;
          }
      for (int64_t hd = 0; hd < hkv * G; ++hd)
        for (int64_t e = 0; e < D; ++e)
          if (elem(hd, e) != elem(hd, 0) + e) return false;
      {
        auto kv = [&](int64_t h, int64_t j, int64_t e) {
          return ir::eval(f.kv_elem, {{"h", h}, {"j", j}, {"e", e}, {"cap", cap}, {"D", D}});
        };
        const int64_t all = kv(hkv, 0, 0);
        std::set<int64_t> cache;
        for (int64_t h = 0; h < hkv; ++h)
          for (int64_t j = 0; j < cap; ++j)
            for (int64_t e = 0; e < D; ++e) {
              const int64_t x = kv(h, j, e);
              if (x != kv(h, j, 0) + e || !cache.insert(x).second) return false;
              if (x < 0 || x >= all || x < kv(h, 0, 0) || x >= kv(h + 1, 0, 0)) return false;
            }
        for (int64_t pos = 0; pos < cap; ++pos)
          for (int64_t c = 0; c < C; ++c) {
            const ir::IndexEnv v = {{"c", c}, {"len", pos + 1}, {"parts", C}};
            const int64_t j0 = ir::eval(split.begin, v), j1 = ir::eval(split.end, v);
            if (c == C - 1 ? !(j0 <= pos && pos < j1) : j1 > pos) return false;
            if (j0 < 0 || j0 > j1 || j1 > pos + 1) return false;
            for (int64_t h = 0; h < hkv; ++h)
              for (int64_t j = j0; j < j1; ++j)
                for (int64_t e = 0; e < D; ++e) {
                  const int64_t x = kv(h, j, e);
                  if (x < 0 || x >= all || x < kv(h, 0, 0) || x >= kv(h + 1, 0, 0)) return false;
                }
          }
      }
    }
  } catch (const Error&) {
    return false;
  }
  return true;
}

// The kernels' shapes: one chunk or several, Qwen3 and Llama 3 groups, head dims 64 .. 256.
TEST(AttentionRowsProofs, TheKernelsShapesAreProved) {
  const ir::AttentionRows& f = ir::attention_rows_formula();
  for (int64_t C : {1, 2, 7, 64})
    for (int64_t G : {1, 8})
      for (int64_t D : {64, 128, 256}) {
        const int64_t cap = C == 7 ? 40960 : 4096;
        const ProofRecord r = prove_attention_rows(f, ir::even_split_formula(), C, G, D, cap, int64_t(1) << 16);
        ASSERT_EQ(r.obligations.size(), 9u);
        EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
      }
  for (int64_t cap = 1; cap <= 6; ++cap) EXPECT_TRUE(brute_force_rows(f, 3, 2, 3, cap, 3));
}

// The evaluated formulas are what the scheduler and the host use, and the kernels print them.
TEST(AttentionRowsProofs, TheEvaluatedAndPrintedFormulas) {
  EXPECT_EQ(ir::head_elem(5, 3, 128), 5 * 128 + 3);
  EXPECT_EQ(ir::q_head(3, 2, 4), 14);
  EXPECT_EQ(ir::kv_elem(2, 7, 5, 512, 128), (2 * 512 + 7) * 128 + 5);
  const ir::AttentionRows& f = ir::attention_rows_formula();
  const std::string mk = ir::layout_device_functions(), pf = ir::prefill_layout_device_functions();
  EXPECT_NE(mk.find("long long mk_kv_elem(long long h, long long j, long long e, long long cap, long long D) { return " +
                    ir::to_c(f.kv_elem) + "; }"),
            std::string::npos)
      << mk;
  EXPECT_NE(mk.find("long long mk_head_elem(long long hd, long long e, long long D) { return " + ir::to_c(f.head_elem)),
            std::string::npos);
  EXPECT_NE(mk.find("long long mk_q_head(long long h, long long g, long long G) { return " + ir::to_c(f.q_head)),
            std::string::npos);
  EXPECT_NE(pf.find("long long pf_kv_elem(long long h, long long j, long long e, long long cap, long long D) { return " +
                    ir::to_c(f.kv_elem) + "; }"),
            std::string::npos)
      << pf;
}

TEST(AttentionRowsProofs, MutantsAgreeWithBruteForce) {
  const ir::AttentionRows& f = ir::attention_rows_formula();
  std::vector<ir::AttentionRows> layouts;
  for (const IndexExpr& m : superopt::mutants(f.head_elem)) layouts.push_back({m, f.q_head, f.kv_elem});
  for (const IndexExpr& m : superopt::mutants(f.q_head)) layouts.push_back({f.head_elem, m, f.kv_elem});
  for (const IndexExpr& m : superopt::mutants(f.kv_elem)) layouts.push_back({f.head_elem, f.q_head, m});
  const int64_t C = 3, G = 2, D = 3, heads = 3, cap = 5;
  std::vector<ir::IndexEnv> elems, qheads, kvs;
  for (int64_t hd = 0; hd <= heads * G; ++hd)
    for (int64_t e = 0; e < D; ++e) elems.push_back({{"hd", hd}, {"e", e}, {"D", D}});
  for (int64_t h = 0; h <= heads; ++h)
    for (int64_t g = 0; g < G; ++g) qheads.push_back({{"h", h}, {"g", g}, {"G", G}});
  for (int64_t h = 0; h <= heads; ++h)
    for (int64_t j = 0; j < cap; ++j)
      for (int64_t e = 0; e < D; ++e) kvs.push_back({{"h", h}, {"j", j}, {"e", e}, {"cap", cap}, {"D", D}});
  Tally tally{"attention rows, 3 chunks, 2 query heads, dim 3, 5 positions, up to 3 KV heads"};
  for (const ir::AttentionRows& m : layouts)
    tally.judge(prove_attention_rows(m, ir::even_split_formula(), C, G, D, cap, heads, 2000).proved(),
                brute_force_rows(m, C, G, D, cap, heads),
                same_values(m.head_elem, f.head_elem, elems) && same_values(m.q_head, f.q_head, qheads) &&
                    same_values(m.kv_elem, f.kv_elem, kvs),
                "head_elem " + ir::to_string(m.head_elem) + ", q_head " + ir::to_string(m.q_head) + ", kv_elem " +
                    ir::to_string(m.kv_elem));
}

// A split that gives the appended row to another chunk too is refuted: the race the obligation
// exists for.
TEST(AttentionRowsProofs, ASplitThatSharesTheNewRowIsRefuted) {
  const IndexExpr c = IndexExpr::var("c"), len = IndexExpr::var("len"), parts = IndexExpr::var("parts");
  const ir::EvenSplit overlapping{c * len / parts, min((c + 1) * len / parts + 1, len)};
  const ProofRecord r = prove_attention_rows(ir::attention_rows_formula(), overlapping, 4, 2, 64, 4096, 8);
  EXPECT_FALSE(r.proved());
  EXPECT_NE(failed(r).find("new row"), std::string::npos) << failed(r);
}

}  // namespace
}  // namespace mpk::superopt
