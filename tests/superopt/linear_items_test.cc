// The linear tile's work-item formulas (ir/layouts.h): proved for every variant's rows per group
// and K part count; every generated mutant is judged like a brute-force check over small tiles
// (a mutant the prover accepts breaks nothing there; one it refutes comes with a
// counterexample), and the hand-made wrong ones are refuted.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <utility>

#include "base/error.h"
#include "superopt/index_prover.h"
#include "tests/superopt/test_util.h"

namespace mpk::superopt {
namespace {

using ir::IndexExpr;
using ir::LinearItems;

constexpr int64_t kMaxTotal = int64_t(1) << 20;  // rows of one tile
constexpr int64_t kSlots = 256;                   // MPK_MK_KSPLIT_SLOTS

// The obligations checked by enumeration over tiles of 1..max_total rows (false on the first
// violation, an evaluation error included).
bool brute_force(const LinearItems& f, int64_t ks, int64_t R, int64_t max_total) {
  try {
    for (int64_t total = 1; total <= max_total; ++total) {
      const int64_t groups = (total + R - 1) / R;
      std::set<std::pair<int64_t, int64_t>> pairs;
      for (int64_t it = 0; it < groups * ks; ++it) {
        const ir::IndexEnv e = {{"it", it}, {"ks", ks}, {"rows", R}};
        const int64_t row0 = ir::eval(f.row0, e), part = ir::eval(f.part, e);
        if (part < 0 || part >= ks || row0 < 0 || row0 >= groups * R || row0 % R != 0) return false;
        if (row0 > INT32_MAX || part > INT32_MAX) return false;
        pairs.insert({row0, part});
      }
      if (int64_t(pairs.size()) != groups * ks) return false;  // two items share a pair
      if (ks == 1 || ks * total > kSlots) continue;
      std::set<int64_t> slots;
      for (int64_t p = 0; p < ks; ++p)
        for (int64_t r = 0; r < total; ++r) {
          const int64_t s = ir::eval(f.slot, {{"p", p}, {"total", total}, {"r", r}});
          if (s < 0 || s >= kSlots || !slots.insert(s).second) return false;
        }
    }
  } catch (const Error&) {
    return false;
  }
  return true;
}

TEST(LinearItemsProof, TheFormulasAreProvedForEveryVariantAndSplit) {
  for (int64_t R = 1; R <= 4; ++R) {
    for (int64_t ks = 1; ks <= 8; ++ks) {
      const ProofRecord r = prove_linear_items(ir::linear_items_formula(), ks, R, kMaxTotal, kSlots);
      EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
      EXPECT_EQ(r.obligations.size(), ks > 1 ? 6u : 4u);
    }
  }
  EXPECT_TRUE(brute_force(ir::linear_items_formula(), 3, 2, 70));
}

TEST(LinearItemsProof, MutantsAgreeWithBruteForce) {
  const LinearItems& f = ir::linear_items_formula();
  std::vector<LinearItems> all;
  for (const IndexExpr& m : mutants(f.row0)) all.push_back({m, f.part, f.slot, f.item});
  for (const IndexExpr& m : mutants(f.part)) all.push_back({f.row0, m, f.slot, f.item});
  for (const IndexExpr& m : mutants(f.slot)) all.push_back({f.row0, f.part, m, f.item});
  int refuted = 0, accepted = 0;
  for (const LinearItems& m : all) {
    const ProofRecord r = prove_linear_items(m, 3, 2, kMaxTotal, kSlots);
    const bool small_ok = brute_force(m, 3, 2, 70);
    const std::string what = "row0 " + ir::to_string(m.row0) + ", part " + ir::to_string(m.part) +
                             ", slot " + ir::to_string(m.slot);
    for (const Obligation& o : r.obligations) EXPECT_NE(o.result, "unknown") << what;
    if (r.proved()) {
      EXPECT_TRUE(small_ok) << what << ": proved but wrong on a small tile";
      ++accepted;
    } else {
      bool witness = false;
      for (const Obligation& o : r.obligations) witness |= o.result == "refuted" && !o.counterexample.empty();
      EXPECT_TRUE(witness) << what;
      ++refuted;
    }
  }
  std::printf("[prover] linear items: %zu mutants, %d refuted, %d accepted\n", all.size(), refuted,
              accepted);
  EXPECT_GE(refuted, int(all.size()) - 2);
}

TEST(LinearItemsProof, HandMadeWrongItemsAreRefuted) {
  const IndexExpr it = IndexExpr::var("it"), ks = IndexExpr::var("ks"), rows = IndexExpr::var("rows");
  const IndexExpr p = IndexExpr::var("p"), total = IndexExpr::var("total"), r = IndexExpr::var("r");
  const LinearItems& f = ir::linear_items_formula();
  const IndexExpr g = IndexExpr::var("g");
  struct Case {
    const char* what;
    LinearItems l;
    int64_t ks;
  };
  for (const Case& c : {
           Case{"row group stride one short", {it / ks * (rows - 1), f.part, f.slot, f.item}, 3},
           Case{"items dealt by part first", {it % ks * rows, it / ks, f.slot, f.item}, 3},
           Case{"slots overlapping across parts", {f.row0, f.part, p * (total - 1) + r, f.item}, 3},
           // With ks * total = 256 the last slot is 256.
           Case{"slot one past the row", {f.row0, f.part, p * total + r + 1, f.item}, 4},
       }) {
    const ProofRecord res = prove_linear_items(c.l, c.ks, 2, kMaxTotal, kSlots);
    EXPECT_FALSE(res.proved()) << c.what;
    EXPECT_FALSE(brute_force(c.l, c.ks, 2, 70)) << c.what << " (the oracle disagrees)";
  }
  // Equivalent rewrites pass: the K parts of a group dealt in reverse (with its inverse), and
  // the slots laid out row-major.
  const LinearItems reversed{(it / ks) * rows, (ks - 1) - it % ks, f.slot, g * ks + (ks - 1) - p};
  EXPECT_TRUE(prove_linear_items(reversed, 3, 2, kMaxTotal, kSlots).proved()) << failed(prove_linear_items(reversed, 3, 2, kMaxTotal, kSlots));
  EXPECT_TRUE(brute_force(reversed, 3, 2, 70));
  // A wrong inverse cannot prove a right dealing.
  EXPECT_FALSE(prove_linear_items({f.row0, f.part, f.slot, g * ks + (ks - 1) - p}, 3, 2, kMaxTotal, kSlots).proved());
}

}  // namespace
}  // namespace mpk::superopt
