// Attention's state layout (ir::AttentionStates): the chunk partials in global memory and the
// warps' states in shared memory, proved for the shapes the kernels use; every generated mutant
// of the printed formulas is judged like a brute-force enumeration of the prover's domain.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "ir/layouts.h"
#include "superopt/index_prover.h"
#include "tests/superopt/test_util.h"

namespace mpk::superopt {
namespace {

using ir::IndexExpr;

int64_t slot(const ir::AttentionStates& f, int64_t row, int64_t e, int64_t D) {
  return ir::eval(f.slot, {{"row", row}, {"e", e}, {"D", D}});
}
int64_t prow(const ir::AttentionStates& f, int64_t h, int64_t c, int64_t g, int64_t C, int64_t G) {
  return ir::eval(f.partial_row, {{"h", h}, {"c", c}, {"g", g}, {"C", C}, {"G", G}});
}

// prove_attention_partials' obligations by enumeration, for every KV head count up to max_heads.
bool brute_force_partials(const ir::AttentionStates& f, int64_t C, int64_t G, int64_t D, int64_t max_heads) {
  try {
    for (int64_t hkv = 1; hkv <= max_heads; ++hkv) {
      const int64_t size = slot(f, prow(f, hkv, 0, 0, C, G), 0, D);
      std::set<int64_t> seen;
      for (int64_t h = 0; h < hkv; ++h)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t g = 0; g < G; ++g)
            for (int64_t e = 0; e < D + 2; ++e) {
              auto base = [&](int64_t hh, int64_t cc) { return slot(f, prow(f, hh, cc, 0, C, G), 0, D); };
              const int64_t S = slot(f, prow(f, h, c, g, C, G), e, D), b = base(h, c);
              if (S < 0 || S >= size || S < b || S >= b + slot(f, G, 0, D)) return false;
              if (b + slot(f, g, 0, D) + e != S) return false;
              const int64_t rel = slot(f, prow(f, 0, c, g, C, G), 0, D) + e;
              if (base(h, 0) + rel != S || S < base(h, 0) || S >= base(h, C)) return false;
              for (int64_t k = 0; k < C; ++k)
                if (base(h, k) - slot(f, prow(f, 0, k, 0, C, G), 0, D) + rel != S) return false;
              if (!seen.insert(S).second) return false;
            }
    }
  } catch (const Error&) {
    return false;
  }
  return true;
}

// prove_attention_warp_states' obligations by enumeration.
bool brute_force_warp_states(const ir::AttentionStates& f, int64_t nw, int64_t hp, int64_t D) {
  auto row_at = [&](int64_t w, int64_t i) {
    return slot(f, ir::eval(f.warp_row, {{"w", w}, {"i", i}, {"hp", hp}}), 0, D);
  };
  try {
    const int64_t region = row_at(nw, 0);
    std::set<int64_t> seen;
    for (int64_t w = 0; w < nw; ++w)
      for (int64_t i = 0; i < hp; ++i)
        for (int64_t e = 0; e < D + 2; ++e) {
          const int64_t at = row_at(w, i) + e;
          if (at < 0 || at >= region || !seen.insert(at).second) return false;
          if (slot(f, ir::eval(f.warp_row, {{"w", w}, {"i", i}, {"hp", hp}}), e, D) != at) return false;
        }
  } catch (const Error&) {
    return false;
  }
  return true;
}

// The kernels' shapes: Qwen3 and Llama 3 groups (2..8 query heads a KV head), head dims 64 ..
// 256, chunk counts 2 .. 16; 16 compute warps (15 with the controller warp), 1 .. 8 heads a pass.
TEST(AttentionStatesProofs, TheKernelsShapesAreProved) {
  const ir::AttentionStates& f = ir::attention_states_formula();
  for (int64_t C : {2, 5, 16})
    for (int64_t G : {2, 8})
      for (int64_t D : {64, 128, 256}) {
        const ProofRecord r = prove_attention_partials(f, C, G, D, int64_t(1) << 16);
        ASSERT_EQ(r.obligations.size(), 6u);
        EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
      }
  for (int64_t nw : {15, 16})
    for (int64_t hp : {1, 4, 8})
      for (int64_t D : {64, 256}) {
        const ProofRecord r = prove_attention_warp_states(f, nw, hp, D);
        ASSERT_EQ(r.obligations.size(), 4u);
        EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
      }
  EXPECT_TRUE(brute_force_partials(f, 3, 2, 4, 3));
  EXPECT_TRUE(brute_force_warp_states(f, 3, 2, 4));
}

// The evaluated formulas are what the scheduler and the host use: a chunk's rows follow each
// other, a head's chunks too.
TEST(AttentionStatesProofs, TheEvaluatedFormulas) {
  EXPECT_EQ(ir::state_slot(3, 5, 128), 3 * 130 + 5);
  EXPECT_EQ(ir::partial_row(2, 1, 3, 4, 8), (2 * 4 + 1) * 8 + 3);
  EXPECT_EQ(ir::warp_state_row(5, 2, 4), 22);
  const std::string s = ir::layout_device_functions();
  EXPECT_NE(s.find("long long mk_state_slot(long long row, long long e, long long D) { return " +
                   ir::to_c(ir::attention_states_formula().slot) + "; }"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("int mk_smem_state(int row, int e, int D) { return ((row * (D + 2)) + e); }"), std::string::npos)
      << s;
  EXPECT_NE(s.find("int mk_warp_row(int w, int i, int hp) { return ((w * hp) + i); }"), std::string::npos) << s;
}

TEST(AttentionStatesProofs, MutantsOfThePartialsAgreeWithBruteForce) {
  const ir::AttentionStates& f = ir::attention_states_formula();
  std::vector<ir::AttentionStates> layouts;
  for (const IndexExpr& m : superopt::mutants(f.slot)) layouts.push_back({m, f.partial_row, f.warp_row});
  for (const IndexExpr& m : superopt::mutants(f.partial_row)) layouts.push_back({f.slot, m, f.warp_row});
  const int64_t C = 3, G = 2, D = 4, heads = 3;
  std::vector<ir::IndexEnv> slots, rows;
  for (int64_t row = 0; row <= heads * C * G; ++row)
    for (int64_t e = 0; e < D + 2; ++e) slots.push_back({{"row", row}, {"e", e}, {"D", D}});
  for (int64_t h = 0; h <= heads; ++h)
    for (int64_t c = 0; c <= C; ++c)
      for (int64_t g = 0; g <= G; ++g) rows.push_back({{"h", h}, {"c", c}, {"g", g}, {"C", C}, {"G", G}});
  Tally tally{"attention partials, 3 chunks, 2 query heads, dim 4, up to 3 KV heads"};
  for (const ir::AttentionStates& m : layouts)
    tally.judge(prove_attention_partials(m, C, G, D, heads, 2000).proved(), brute_force_partials(m, C, G, D, heads),
                same_values(m.slot, f.slot, slots) && same_values(m.partial_row, f.partial_row, rows),
                "slot " + ir::to_string(m.slot) + ", partial_row " + ir::to_string(m.partial_row));
}

TEST(AttentionStatesProofs, MutantsOfTheWarpStatesAgreeWithBruteForce) {
  const ir::AttentionStates& f = ir::attention_states_formula();
  std::vector<ir::AttentionStates> layouts;
  for (const IndexExpr& m : superopt::mutants(f.slot)) layouts.push_back({m, f.partial_row, f.warp_row});
  for (const IndexExpr& m : superopt::mutants(f.warp_row)) layouts.push_back({f.slot, f.partial_row, m});
  const int64_t nw = 3, hp = 2, D = 4;
  std::vector<ir::IndexEnv> slots, rows;
  for (int64_t row = 0; row <= nw * hp; ++row)
    for (int64_t e = 0; e < D + 2; ++e) slots.push_back({{"row", row}, {"e", e}, {"D", D}});
  for (int64_t w = 0; w <= nw; ++w)
    for (int64_t i = 0; i < hp; ++i) rows.push_back({{"w", w}, {"i", i}, {"hp", hp}});
  Tally tally{"attention warp states, 3 warps, 2 heads a pass, dim 4"};
  for (const ir::AttentionStates& m : layouts)
    tally.judge(prove_attention_warp_states(m, nw, hp, D, 2000).proved(), brute_force_warp_states(m, nw, hp, D),
                same_values(m.slot, f.slot, slots) && same_values(m.warp_row, f.warp_row, rows),
                "slot " + ir::to_string(m.slot) + ", warp_row " + ir::to_string(m.warp_row));
}

}  // namespace
}  // namespace mpk::superopt
