// Task kernels' loop nests (ir/loop_nest.h): printed as the kernels run them and proved by
// superopt/prove_loop_nest. Every generated mutant of a nest's loop bounds, lets, guards and
// addresses is judged against an interpreter of the nest that runs every iteration.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "ir/layouts.h"
#include "ir/task_nests.h"
#include "superopt/loop_prover.h"
#include "tests/superopt/loop_nest_util.h"
#include "tests/superopt/test_util.h"

namespace mpk::superopt {
namespace {

using ir::IndexExpr;

TEST(LoopNestProofs, TheMergeIsProvedForTheKernelsShapes) {
  for (int64_t C : {2, 64})
    for (int64_t G : {1, 8})
      for (int64_t D : {64, 256})
        for (int64_t B : {1, 16}) {
          const ProofRecord r = prove_loop_nest(ir::attention_merge_nest(), "attention merge",
                                                {{"C", C}, {"G", G}, {"D", D}, {"B", B}});
          ASSERT_EQ(r.obligations.size(), 12u);
          EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
        }
  EXPECT_TRUE(brute_force(ir::attention_merge_nest(), {{"C", 5}, {"G", 2}, {"D", 3}, {"B", 2}, {"threads", 32}}, "h", 3));
}

TEST(LoopNestProofs, TheCombineIsProvedForTheKernelsShapes) {
  for (int64_t C : {1, 64})
    for (int64_t G : {1, 5})
      for (int64_t D : {64, 128})
        for (int64_t HP : {1, 4}) {
          const ProofRecord r =
              prove_loop_nest(ir::attention_combine_nest(), "attention combine",
                              {{"C", C}, {"G", G}, {"D", D}, {"HP", HP}, {"nw", 16}, {"threads", 512}});
          ASSERT_EQ(r.obligations.size(), 17u);
          EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
        }
  for (int64_t C : {1, 3})
    EXPECT_TRUE(brute_force(ir::attention_combine_nest(),
                            {{"C", C}, {"G", 5}, {"D", 3}, {"HP", 2}, {"nw", 3}, {"threads", 96}}, "h", 3));
}

// The shapes the pass runs: a query group of 1 to 5 heads, head dimension 64 or 128 under a
// maximum of 128 (DC 4) or its own (DC 2 for 64), 1 or 4 heads a pass, 16 warps; the KV head,
// capacity, chunk bounds and first head symbolic.
TEST(LoopNestProofs, TheAttentionPassIsProvedForTheKernelsShapes) {
  for (int64_t G : {1, 5})
    for (auto [D, DC] : {std::pair<int64_t, int64_t>{64, 2}, {64, 4}, {128, 4}})
      for (int64_t HP : {1, 4}) {
        const ProofRecord r = prove_loop_nest(ir::attention_pass_nest(), "attention pass",
                                              {{"G", G}, {"D", D}, {"DC", DC}, {"HP", HP}, {"nw", 16}, {"threads", 512}});
        ASSERT_EQ(r.obligations.size(), 26u);
        EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
      }
  for (int64_t g0 : {0, 2, 4})
    EXPECT_TRUE(brute_force(ir::attention_pass_nest(),
                            {{"G", 3}, {"D", 3}, {"DC", 1}, {"HP", 2}, {"nw", 2}, {"threads", 64}, {"kvh", 1},
                             {"cap", 10}, {"g0", g0}, {"j0", 2}},
                            "j1", 11));
}

// Attention's staging for the kernels' shapes: a query group of 1 to 17 heads (17 with 16 warps:
// a warp stages two), head dimension 64 or 128 under a maximum of 128 (DC 4, DH 2) or its own
// (64: DC 2, DH 1), 16 warps; the KV head, capacity, position, chunk bounds and the append mode
// symbolic.
TEST(LoopNestProofs, AttentionsStagingIsProvedForTheKernelsShapes) {
  for (auto [D, DC] : {std::pair<int64_t, int64_t>{64, 2}, {64, 4}, {128, 4}}) {
    for (int64_t G : {1, 8, 17}) {
      const ProofRecord r = prove_loop_nest(ir::attention_stage_nest(), "attention stage",
                                            {{"G", G}, {"D", D}, {"DC", DC}, {"DH", DC / 2}, {"nw", 16}, {"threads", 512}});
      ASSERT_EQ(r.obligations.size(), 36u);
      EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    }
    const ProofRecord c =
        prove_loop_nest(ir::attention_head_consts_nest(), "attention head consts", {{"D", D}, {"DC", DC}, {"DH", DC / 2}});
    ASSERT_EQ(c.obligations.size(), 10u);
    EXPECT_TRUE(c.proved()) << c.subject << ": " << failed(c);
    const ProofRecord f = prove_loop_nest(ir::attention_kv_first_nest(), "attention kv first",
                                          {{"D", D}, {"DC", DC}, {"nw", 16}, {"threads", 512}});
    ASSERT_EQ(f.obligations.size(), 9u);
    EXPECT_TRUE(f.proved()) << f.subject << ": " << failed(f);
  }
  // Head dims that fit the registers, odd ones included (RoPE's pairs then leave the last
  // element); a warp with two heads.
  for (int64_t G : {3, 4})
    for (int64_t A : {0, 1})
      EXPECT_TRUE(brute_force(ir::attention_stage_nest(),
                              {{"G", G}, {"kvh", 1}, {"cap", 6}, {"pos", 4}, {"A", A}, {"DC", 2}, {"DH", 1}, {"nw", 2},
                               {"threads", 64}},
                              "D", 65));
  EXPECT_TRUE(brute_force(ir::attention_head_consts_nest(), {{"DC", 2}, {"DH", 1}, {"threads", 32}}, "D", 65));
  for (int64_t pos : {0, 2, 5, 9})
    EXPECT_TRUE(brute_force(ir::attention_kv_first_nest(),
                            {{"D", 33}, {"kvh", 1}, {"cap", 10}, {"j0", 2}, {"pos", pos}, {"DC", 2}, {"nw", 3},
                             {"threads", 96}},
                            "j1", 11));
  // Without the position's guard a warp loads this step's key row, which no event has released.
  ir::LoopNest open = ir::attention_kv_first_nest();
  const ir::Block inner = open.body[5].body[0].body;  // a copy: assigned from within itself, freed first
  open.body[5].body = inner;
  const ProofRecord r = prove_loop_nest(open, "attention kv first", {{"D", 128}, {"DC", 4}, {"nw", 16}, {"threads", 512}});
  EXPECT_FALSE(r.proved());
  EXPECT_NE(failed(r).find("k inside row"), std::string::npos) << failed(r);  // its position out of the history
  // Blocks of two and three warps (on the flat cache index Z3 took up to 10 s on `once` there).
  for (int64_t nw : {2, 3}) {
    EXPECT_TRUE(prove_loop_nest(ir::attention_kv_first_nest(), "attention kv first",
                                {{"D", 12}, {"DC", 2}, {"nw", nw}, {"threads", 32 * nw}})
                    .proved());
    EXPECT_TRUE(prove_loop_nest(ir::attention_pass_nest(), "attention pass",
                                {{"G", 4}, {"D", 24}, {"DC", 2}, {"HP", 4}, {"nw", nw}, {"threads", 32 * nw}})
                    .proved());
  }
}

// The proofs are about K and V as pairs (position - j0, element); the address printed for a
// pair (its place) is the cache's row formula at that position and element.
TEST(LoopNestProofs, AttentionsKVPairsArePrintedAtTheirCacheRows) {
  int checked = 0;
  for (const ir::LoopNest* n : {&ir::attention_pass_nest(), &ir::attention_kv_first_nest()})
    for (const ir::Access& a : n->accesses) {
      if (a.name != "k" && a.name != "v") continue;
      const IndexExpr at = ir::substitute(a.place, {{"array", a.array}, {"index", a.index}});
      for (int64_t kvh : {0, 3})
        for (int64_t j0 : {0, 5})
          for (int64_t j = j0; j < j0 + 4; ++j)
            for (int64_t e : {0, 1, 23}) {
              const ir::IndexEnv env = {{"kvh", kvh}, {"cap", 64}, {"D", 24}, {"j0", j0}, {"j", j}, {"jf", j}, {"e", e}};
              EXPECT_EQ(ir::eval(at, env), ir::kv_elem(kvh, j, e, 64, 24)) << a.name << " at " << j << ", " << e;
            }
      ++checked;
    }
  EXPECT_EQ(checked, 4);
}

TEST(LoopNestProofs, TheSplitKFoldIsProvedForEveryPartCount) {
  for (int64_t ks = 2; ks <= 8; ++ks) {
    const ProofRecord r = prove_loop_nest(ir::linear_fold_nest(), "linear fold",
                                          {{"ks", ks}, {"S", 256}, {"threads", 512}});  // MPK_MK_KSPLIT_SLOTS
    ASSERT_EQ(r.obligations.size(), 7u);
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
  }
  for (int64_t ks : {1, 2, 3, 5})  // one part: nothing to fold; 5 parts of 4 rows exceed 16 slots
    EXPECT_TRUE(brute_force(ir::linear_fold_nest(), {{"ks", ks}, {"S", 16}, {"threads", 3}}, "total", 9));
  // Without the slots' guard, 3 parts of a 100-row tile read past 256 slots.
  ir::LoopNest open = ir::linear_fold_nest();
  ir::Block inner = open.body[0].body[0].body;  // a copy: assigned from within itself, freed first
  open.body[0].body = inner;
  EXPECT_FALSE(prove_loop_nest(open, "linear fold", {{"ks", 3}, {"S", 256}, {"threads", 512}}).proved());
}

// A linear tile's work items over the warps: every row's sum (one part) or every (part, row)
// slot (several) stored once and every one, the last row group's rows one at a time included.
TEST(LoopNestProofs, TheLinearItemsAreProvedPerTileShape) {
  for (const auto& [R, total, nw] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 32, 16}, {2, 7, 16}, {3, 31, 16}, {3, 100, 15}, {4, 30, 16}})
    for (int64_t ks : {1, 2, 3, 8}) {
      const ProofRecord r = prove_loop_nest(ir::linear_items_nest(), "linear items",
                                            {{"R", R}, {"total", total}, {"ks", ks}, {"S", 256}, {"nw", nw}});
      EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    }
  for (int64_t ks : {1, 2, 3})
    EXPECT_TRUE(brute_force(ir::linear_items_nest(), {{"R", 3}, {"ks", ks}, {"S", 64}, {"nw", 4}}, "total", 20));
  // Without the last group's loop its rows are never stored; starting its items one later
  // stores the wrong warp's ones twice or skips them.
  ir::LoopNest no_last = ir::linear_items_nest();
  ASSERT_EQ(no_last.body.back().var, "it");
  no_last.body.pop_back();
  const std::map<std::string, int64_t> at = {{"R", 3}, {"total", 31}, {"ks", 2}, {"S", 256}, {"nw", 16}};
  EXPECT_NE(failed(prove_loop_nest(no_last, "linear items", at)).find("cover"), std::string::npos);
  EXPECT_FALSE(brute_force(no_last, {{"R", 3}, {"ks", 2}, {"S", 64}, {"nw", 4}}, "total", 20));
  ir::LoopNest shifted = ir::linear_items_nest();
  shifted.body.back().start = shifted.body.back().start + 1;
  EXPECT_FALSE(prove_loop_nest(shifted, "linear items", at).proved());
  EXPECT_FALSE(brute_force(shifted, {{"R", 3}, {"ks", 2}, {"S", 64}, {"nw", 4}}, "total", 20));
}

// A warp's dot products over a K part: every row's vectors read once, every one, whole rounds
// and the lane's last partial one; the first round from registers loaded before the events.
TEST(LoopNestProofs, TheLinearDotProductsAreProvedForEveryPart) {
  for (const auto& [U, R, V] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 8}, {1, 2, 8}, {4, 1, 8}, {4, 2, 8}, {4, 4, 4}, {8, 2, 8}}) {
    for (int64_t F : {int64_t(0), 32 * U}) {
      const ProofRecord r =
          prove_loop_nest(ir::linear_dot_nest(), "linear dot", {{"F", F}, {"U", U}, {"R", R}, {"V", V}});
      EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    }
    const ProofRecord r = prove_loop_nest(ir::linear_dot_first_nest(), "linear dot first", {{"U", U}, {"R", R}});
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
  }
  for (int64_t R : {1, 3}) {
    const ProofRecord r = prove_loop_nest(ir::linear_dot_scalar_nest(), "linear dot scalar", {{"R", R}});
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
  }
  // The interpreter agrees: parts of 0 .. 299 vectors (two whole rounds of 4 loads and a partial one).
  for (int64_t F : {0, 128})
    EXPECT_TRUE(brute_force(ir::linear_dot_nest(), {{"v0", 5}, {"F", F}, {"U", 4}, {"R", 2}, {"V", 8}, {"threads", 32}},
                            "n", 300));
  EXPECT_TRUE(brute_force(ir::linear_dot_first_nest(), {{"v0", 5}, {"U", 4}, {"R", 2}, {"threads", 32}}, "n", 300));
  EXPECT_TRUE(brute_force(ir::linear_dot_scalar_nest(), {{"k0", 3}, {"R", 2}, {"threads", 32}}, "n", 100));
  // Rounds from 0 with the first in registers: the first round's weights counted twice.
  ir::LoopNest twice = ir::linear_dot_nest();
  ASSERT_EQ(twice.body[3].var, "i");
  twice.body[3].start = IndexExpr::var("v0") + IndexExpr::var("lane");
  const ProofRecord r = prove_loop_nest(twice, "linear dot", {{"F", 128}, {"U", 4}, {"R", 2}, {"V", 8}});
  EXPECT_NE(failed(r).find("w inside rest"), std::string::npos) << failed(r);
  // Products dropped: a whole round's last load never multiplied, the first round's registers
  // never used. The loads are all there; the input's cover (every row's every element reached
  // by a product) refutes both.
  ir::LoopNest short_round = ir::linear_dot_nest();
  ASSERT_EQ(short_round.body[3].body[5].var, "j");
  short_round.body[3].body[5].expr = IndexExpr::var("U") - 1;
  const ProofRecord s = prove_loop_nest(short_round, "linear dot", {{"F", 0}, {"U", 4}, {"R", 2}, {"V", 8}});
  EXPECT_NE(failed(s).find("x cover"), std::string::npos) << failed(s);
  ir::LoopNest unused = ir::linear_dot_nest();
  ASSERT_EQ(unused.body[2].body[1].var, "j");
  unused.body[2].body[1].expr = 0;
  const ProofRecord u = prove_loop_nest(unused, "linear dot", {{"F", 128}, {"U", 4}, {"R", 2}, {"V", 8}});
  EXPECT_NE(failed(u).find("x cover"), std::string::npos) << failed(u);
}

// The linear's input staging, for the kernels' block sizes and the models' input lengths (in
// units of W floats: the plan proves its own lengths, a symbolic length timed out), every length
// up to 29 by running it; with the loads' guard off by one, a round's last load reads past the
// input.
TEST(LoopNestProofs, TheLinearInputStagingIsProvedForTheModelsLengths) {
  for (int64_t threads : {128, 480, 512})
    for (const auto& [n, W] : {std::pair<int64_t, int64_t>{256, 4}, {1024, 1}, {1024, 4}, {3072, 4}, {4096, 1},
                               {3072, 1}, {12288, 1}, {1027, 1}}) {
      const ProofRecord r =
          prove_loop_nest(ir::linear_stage_nest(), "linear stage", {{"threads", threads}, {"n", n}, {"W", W}});
      ASSERT_EQ(r.obligations.size(), 12u);
      EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    }
  for (int64_t W : {1, 4})
    EXPECT_TRUE(brute_force(ir::linear_stage_nest(), {{"W", W}, {"U", 2}, {"threads", 3}}, "n", 30));
  ir::LoopNest open = ir::linear_stage_nest();
  ir::Stmt& loads = open.body[2].body[1].body[1];
  ASSERT_EQ(loads.kind, ir::Stmt::If);
  loads.step = IndexExpr::var("n") + 1;
  const ProofRecord r = prove_loop_nest(open, "linear stage", {{"threads", 128}, {"n", 1155}, {"W", 4}});
  EXPECT_FALSE(r.proved());
  EXPECT_NE(failed(r).find("x inside in"), std::string::npos) << failed(r);
}

TEST(LoopNestProofs, TheArgmaxNestsAreProvedForEveryTokenId) {
  for (int64_t threads : {128, 512}) {
    const ProofRecord p = prove_loop_nest(ir::argmax_partials_nest(), "argmax partials", {{"threads", threads}});
    ASSERT_EQ(p.obligations.size(), 7u);
    EXPECT_TRUE(p.proved()) << p.subject << ": " << failed(p);
    for (const auto& [H, V] : {std::pair<int64_t, int64_t>{1024, 151936}, {4096, 151936}, {4096, 128256}, {100, 7}}) {
      const ProofRecord r = prove_loop_nest(ir::embedding_row_nest(), "embedding row",
                                            {{"H", H}, {"V", V}, {"threads", threads}});
      ASSERT_EQ(r.obligations.size(), 8u);
      EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    }
  }
  EXPECT_TRUE(brute_force(ir::argmax_partials_nest(), {{"threads", 4}}, "n", 11));
  for (int64_t threads : {128, 512}) {
    const ProofRecord p = prove_loop_nest(ir::linear_argmax_nest(), "linear argmax", {{"threads", threads}});
    ASSERT_EQ(p.obligations.size(), 4u);
    EXPECT_TRUE(p.proved()) << p.subject << ": " << failed(p);
  }
  // A loop past the tile's rows reads a logit outside it.
  ir::LoopNest past = ir::linear_argmax_nest();
  past.body[1].expr = IndexExpr::var("total") + 1;
  EXPECT_FALSE(prove_loop_nest(past, "linear argmax", {{"threads", 128}}).proved());
  EXPECT_TRUE(brute_force(ir::linear_argmax_nest(), {{"o", 1000}, {"threads", 4}}, "total", 11));
  for (int64_t feed : {-2, -1, 0, 2, 3, 4})  // the guard lets 0 .. V - 1 through
    EXPECT_TRUE(brute_force(ir::embedding_row_nest(), {{"V", 3}, {"feed", feed}, {"U", 8}, {"threads", 3}}, "H", 30));
  // Without the guard's lower bound a negative token id reads before the table.
  ir::LoopNest open = ir::embedding_row_nest();
  const ir::Stmt inner = open.body[1].body[0];  // a copy: assigned from within itself, freed first
  open.body[1] = inner;
  const ProofRecord r = prove_loop_nest(open, "embedding row", {{"H", 64}, {"V", 1000}, {"threads", 128}});
  EXPECT_FALSE(r.proved());
  EXPECT_NE(failed(r).find("row inside table"), std::string::npos) << failed(r);
}

// The printed function is the nest: its parameters, loops, guards and every address.
TEST(LoopNestProofs, ThePrintedMergeIsTheNest) {
  const ir::LoopNest& n = ir::attention_merge_nest();
  const std::string c = ir::print(n);
  EXPECT_EQ(c.rfind(n.signature + " {\n", 0), 0u) << c;
  for (const ir::Param& p : n.params)
    EXPECT_EQ(c.find("const int " + p.name + " = " + p.c + ";") != std::string::npos, ir::names(c, p.name)) << p.name;
  EXPECT_NE(c.find("for (int idx = threadIdx.x; idx < (G * D); idx += threads) {"), std::string::npos) << c;
  EXPECT_NE(c.find("for (int c0 = 0; c0 < C; c0 += B) {"), std::string::npos) << c;
  EXPECT_NE(c.find("if ((c0 + j) < C) {"), std::string::npos) << c;
  const IndexExpr g = ir::substitute(ir::grid_items_formula().row, {{"cols", IndexExpr::var("D")}});
  EXPECT_NE(c.find("const int g = " + ir::to_c(g, ir::CType::Int) + ";"), std::string::npos) << c;
  for (const ir::Access& a : n.accesses) EXPECT_NE(c.find(element(a)), std::string::npos);
  EXPECT_EQ(c.find('{' + n.accesses[0].name + '}'), std::string::npos) << "an access left unprinted";
}

TEST(LoopNestProofs, ThePrintedCombineIsTheNest) {
  const ir::LoopNest& n = ir::attention_combine_nest();
  const std::string c = ir::print(n);
  EXPECT_EQ(c.rfind(n.signature + " {\n", 0), 0u) << c;
  for (const ir::Param& p : n.params)
    EXPECT_EQ(c.find("const int " + p.name + " = " + p.c + ";") != std::string::npos, ir::names(c, p.name)) << p.name;
  // Bound where the body binds it, not at the top.
  EXPECT_NE(c.find("for (int g0 = 0; g0 < G; g0 += HP) {\n    pass(g0);\n    mk_sync();\n"
                   "    const int C = t.num_chunks;\n"),
            std::string::npos)
      << c;
  EXPECT_EQ(c.find("const int C = t.num_chunks;"), c.rfind("const int C = t.num_chunks;")) << "C bound twice";
  EXPECT_NE(c.find("const int hn = min((G - g0), HP);"), std::string::npos) << c;
  EXPECT_NE(c.find("for (int idx = threadIdx.x; idx < (hn * D); idx += threads) {"), std::string::npos) << c;
  EXPECT_NE(c.find("if (C < 2) {"), std::string::npos) << c;
  EXPECT_NE(c.find("if (1 < C) {"), std::string::npos) << c;
  for (const ir::Access& a : n.accesses) {
    EXPECT_NE(c.find(element(a)), std::string::npos) << a.name;
    EXPECT_EQ(c.find('{' + a.name + '}'), std::string::npos) << "access " << a.name << " left unprinted";
  }
}

TEST(LoopNestProofs, TheFoldedDownProjectionsNestsAreProved) {
  auto proved = [](const ir::LoopNest& n, const char* what, const std::map<std::string, int64_t>& fixed,
                   size_t obligations) {
    const ProofRecord r = prove_loop_nest(n, what, fixed);
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    EXPECT_EQ(r.obligations.size(), obligations) << r.subject;
  };
  proved(ir::fold_act_nest(), "fold act", {{"threads", 512}}, 10);
  for (int64_t threads : {128, 512})
    for (int64_t vp2 : {1, 2, 4, 8, 16, 32})
      for (int64_t V : {4, 8})
        proved(ir::fold_rows_nest(), "fold rows", {{"vp2", vp2}, {"V", V}, {"U", 4}, {"nw", threads / 32}, {"threads", threads}},
               11);
  // The scalar loop walks rows x cols in int: proved for the plan's shapes.
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1024, 96}, {4096, 200}, {5, 3}})
    proved(ir::fold_scalar_nest(), "fold scalar", {{"rows", rows}, {"cols", cols}, {"threads", 512}}, 9);
  proved(ir::fold_out_nest(), "fold out", {{"threads", 512}}, 13);
  EXPECT_TRUE(brute_force(ir::fold_act_nest(), {{"threads", 3}}, "cols", 9));
  for (int64_t vp2 : {1, 2, 4, 8})
    for (int64_t vpr = vp2 / 2 + 1; vpr <= vp2; ++vpr)
      EXPECT_TRUE(brute_force(ir::fold_rows_nest(),
                              {{"vpr", vpr}, {"vp2", vp2}, {"LD", 9}, {"V", 4}, {"U", 2}, {"nw", 2}, {"threads", 64}},
                              "rows", 70))
          << vp2 << " " << vpr;
  EXPECT_TRUE(brute_force(ir::fold_scalar_nest(), {{"cols", 3}, {"LD", 5}, {"threads", 4}}, "rows", 9));
  for (int64_t Q : {0, 1, 2})
    EXPECT_TRUE(brute_force(ir::fold_out_nest(), {{"Q", Q}, {"threads", 3}}, "rows", 4 * Q + 7));
  // Rounds that forget the warp: every warp reads the same rows.
  ir::LoopNest same = ir::fold_rows_nest();
  ir::Stmt& g0 = same.body[0].body[7].body[0];
  ASSERT_EQ(g0.var, "g0");
  g0.expr = IndexExpr::var("k") * (IndexExpr::var("nw") * IndexExpr::var("U"));
  const ProofRecord r = prove_loop_nest(same, "fold rows", {{"vp2", 8}, {"V", 8}, {"U", 4}, {"nw", 16}, {"threads", 512}});
  EXPECT_NE(failed(r).find("w once"), std::string::npos) << failed(r);
}

TEST(LoopNestProofs, TheTopKDrawsPassOverTheLogitsIsProved) {
  // Eight vectors in flight per thread (the top-k draw's passes) and two (the nucleus draw's).
  for (const auto& [n, U] : {std::pair{&ir::sample_scan_nest(), int64_t(8)}, std::pair{&ir::sample_scan2_nest(), int64_t(2)}}) {
    for (int64_t threads : {128, 480, 512}) {
      const ProofRecord r = prove_loop_nest(*n, "sample scan", {{"threads", threads}});
      EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
      EXPECT_EQ(r.obligations.size(), 8u);
    }
    for (int64_t threads : {1, 3}) EXPECT_TRUE(brute_force(*n, {{"U", U}, {"threads", threads}}, "n", 70));
  }
  for (int64_t threads : {128, 512})
    for (int64_t n : {151936, 128256, 4097, 1 << 24}) {
      const ProofRecord r =
          prove_loop_nest(ir::sample_stride_nest(), "sample stride", {{"n", n}, {"S", 2048}, {"threads", threads}});
      EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
      EXPECT_EQ(r.obligations.size(), 6u);
    }
  EXPECT_TRUE(brute_force(ir::sample_stride_nest(), {{"S", 8}, {"U", 8}, {"threads", 3}}, "n", 40));
  for (const ir::LoopNest* n : {&ir::sample_weights_nest(), &ir::sample_nucleus_draw_nest()}) {
    const ProofRecord r = prove_loop_nest(*n, "sample candidates", {{"threads", 512}});
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    EXPECT_EQ(r.obligations.size(), n == &ir::sample_weights_nest() ? 7u : 4u);
    EXPECT_TRUE(brute_force(*n, {{"threads", 3}}, "n", 20));
  }
  // Whole vectors up to n / 4 + 1 read a vector past the logits.
  ir::LoopNest past = ir::sample_scan_nest();
  ASSERT_EQ(past.body[1].var, "n4");
  past.body[1].expr = IndexExpr::var("n") / 4 + 1;
  EXPECT_NE(failed(prove_loop_nest(past, "sample scan", {{"threads", 128}})).find("l4 inside"), std::string::npos);
}

// The top-k draw's histogram reset (every bin once), the nucleus's total and cut by one thread
// (each weight read once in the total, at most once up to the cut) and the radix select's walk
// down the histogram (each bin at most once, inside); the nucleus draw's bins cleared (counts
// and masses, every bin once) and the walk down their masses.
TEST(LoopNestProofs, TheDrawsHistogramAndCutAreProved) {
  for (int64_t threads : {128, 480, 512}) {
    const ProofRecord r = prove_loop_nest(ir::sample_hist_clear_nest(), "sample hist clear", {{"threads", threads}});
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    const ProofRecord m = prove_loop_nest(ir::sample_mass_clear_nest(), "sample mass clear", {{"threads", threads}});
    EXPECT_TRUE(m.proved()) << m.subject << ": " << failed(m);
  }
  EXPECT_TRUE(brute_force(ir::sample_mass_clear_nest(), {{"B", 256}, {"threads", 7}}, "x", 1));
  // One bin past the last cleared.
  ir::LoopNest past_bins = ir::sample_mass_clear_nest();
  past_bins.body[0].expr = IndexExpr::var("B") + 1;
  EXPECT_NE(failed(prove_loop_nest(past_bins, "sample mass clear", {{"threads", 128}})).find("bin inside"),
            std::string::npos);
  EXPECT_FALSE(brute_force(past_bins, {{"B", 256}, {"threads", 7}}, "x", 1));
  for (const ir::LoopNest* n : {&ir::sample_cut_nest(), &ir::sample_total_nest()}) {
    const ProofRecord c = prove_loop_nest(*n, "sample cut", {});
    EXPECT_TRUE(c.proved()) << c.subject << ": " << failed(c);
    EXPECT_TRUE(brute_force(*n, {{"U", 8}, {"threads", 1}}, "k", 40));
  }
  EXPECT_EQ(prove_loop_nest(ir::sample_total_nest(), "sample total", {}).obligations.size(), 5u);
  // A round that loads one weight past the last: outside the weights.
  for (const ir::LoopNest* n : {&ir::sample_cut_nest(), &ir::sample_total_nest()}) {
    ir::LoopNest past = *n;
    ir::Stmt& rounds = past.body[2];
    ir::Stmt& load = rounds.body[rounds.body.size() - 2].body[2];  // the loads' guard j < k
    ASSERT_EQ(load.kind, ir::Stmt::If);
    load.step = load.step + 1;
    EXPECT_NE(failed(prove_loop_nest(past, "sample cut", {})).find("w inside"), std::string::npos);
    EXPECT_FALSE(brute_force(past, {{"U", 8}, {"threads", 1}}, "k", 40));
  }
  // Rounds of 7 weights loaded 8 at a time: each round's last weight read twice.
  ir::LoopNest overlap = ir::sample_total_nest();
  overlap.body[2].step = 7;
  EXPECT_NE(failed(prove_loop_nest(overlap, "sample total", {})).find("w once"), std::string::npos);
  const ProofRecord mw = prove_loop_nest(ir::sample_mass_walk_nest(), "sample mass walk", {});
  EXPECT_TRUE(mw.proved()) << mw.subject << ": " << failed(mw);
  EXPECT_TRUE(brute_force(ir::sample_mass_walk_nest(), {{"B", 256}, {"threads", 1}}, "x", 1));
  ir::LoopNest high = ir::sample_mass_walk_nest();
  high.body[1].body[0].expr = IndexExpr::var("B") - IndexExpr::var("i");
  EXPECT_NE(failed(prove_loop_nest(high, "sample mass walk", {})).find("bin inside"), std::string::npos);
  const ProofRecord w = prove_loop_nest(ir::sample_walk_nest(), "sample walk", {});
  EXPECT_TRUE(w.proved()) << w.subject << ": " << failed(w);
  EXPECT_TRUE(brute_force(ir::sample_walk_nest(), {{"B", 256}, {"threads", 1}}, "x", 1));
  // The walk from bin B down: its first read past the top bin.
  ir::LoopNest top = ir::sample_walk_nest();
  ir::Stmt& bin = top.body[2].body[0];
  ASSERT_EQ(bin.kind, ir::Stmt::Let);
  bin.expr = IndexExpr::var("B") - IndexExpr::var("i");
  EXPECT_NE(failed(prove_loop_nest(top, "sample walk", {})).find("bin inside"), std::string::npos);
  EXPECT_FALSE(brute_force(top, {{"B", 256}, {"threads", 1}}, "x", 1));
  // Down by half a bin a step: each bin read twice.
  ir::LoopNest slow = ir::sample_walk_nest();
  slow.body[2].body[0].expr = IndexExpr::var("B") - 1 - IndexExpr::var("i") / 2;
  EXPECT_NE(failed(prove_loop_nest(slow, "sample walk", {})).find("bin once"), std::string::npos);
  EXPECT_FALSE(brute_force(slow, {{"B", 256}, {"threads", 1}}, "x", 1));
}

// The draw's bitonic sort: its padding (every key of [n, m) zeroed once) and a stage at every
// compare distance (each key read once, every one, by the item and side the formula's inverse
// names), for the kernels' block sizes.
TEST(LoopNestProofs, TheDrawsSortIsProved) {
  for (int64_t threads : {128, 480, 512}) {
    const ProofRecord p = prove_loop_nest(ir::sample_sort_pad_nest(), "sample sort pad", {{"threads", threads}});
    EXPECT_TRUE(p.proved()) << p.subject << ": " << failed(p);
  }
  for (int64_t s = 1; s <= 2048; s *= 2) {
    const ProofRecord r = prove_loop_nest(ir::sample_sort_stage_nest(), "sample sort stage", {{"s", s}, {"threads", 512}});
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
  }
  EXPECT_TRUE(brute_force(ir::sample_sort_pad_nest(), {{"m", 64}, {"threads", 7}}, "n", 65));
  EXPECT_TRUE(brute_force(ir::sample_sort_stage_nest(), {{"s", 4}, {"threads", 7}}, "q", 9));
  // Padding from n - 1: the last real key zeroed.
  ir::LoopNest early = ir::sample_sort_pad_nest();
  early.body[1].start = IndexExpr::var("n") - 1 + IndexExpr::var("tid");
  EXPECT_NE(failed(prove_loop_nest(early, "sample sort pad", {{"threads", 128}})).find("key inside"), std::string::npos);
  EXPECT_FALSE(brute_force(early, {{"m", 64}, {"threads", 7}}, "n", 65));
  // Side 1 at lo + s + 1: past the keys in the last item, and a key never read.
  ir::LoopNest wide = ir::sample_sort_stage_nest();
  ir::Stmt& side = wide.body[0].body[2].body[0];
  ASSERT_EQ(side.kind, ir::Stmt::Let);
  side.expr = IndexExpr::var("a") + IndexExpr::var("side") * (IndexExpr::var("s") + 1);
  EXPECT_FALSE(prove_loop_nest(wide, "sample sort stage", {{"s", 4}, {"threads", 128}}).proved());
  EXPECT_FALSE(brute_force(wide, {{"s", 4}, {"threads", 7}}, "q", 9));
  // Items up to m rather than m / 2: the second half reads past the keys.
  ir::LoopNest twice = ir::sample_sort_stage_nest();
  twice.body[0].expr = IndexExpr::var("q") * IndexExpr::var("s") * 2;
  EXPECT_NE(failed(prove_loop_nest(twice, "sample sort stage", {{"s", 4}, {"threads", 128}})).find("key inside"),
            std::string::npos);
}

TEST(LoopNestProofs, ThePrintedArgmaxAndLinearNestsAreTheNests) {
  for (const ir::LoopNest* n : {&ir::argmax_partials_nest(), &ir::embedding_row_nest(), &ir::linear_fold_nest(),
                                &ir::linear_argmax_nest(), &ir::fold_act_nest(), &ir::fold_rows_nest(),
                                &ir::fold_scalar_nest(), &ir::fold_out_nest(), &ir::sample_scan_nest(),
                                &ir::sample_weights_nest(), &ir::sample_nucleus_draw_nest(), &ir::sample_stride_nest(),
                                &ir::linear_stage_nest(), &ir::linear_dot_nest(), &ir::linear_dot_first_nest(),
                                &ir::linear_dot_scalar_nest(), &ir::attention_pass_nest(),
                                &ir::attention_head_consts_nest(), &ir::attention_kv_first_nest(),
                                &ir::attention_stage_nest(), &ir::linear_items_nest(),
                                &ir::sample_hist_clear_nest(), &ir::sample_cut_nest(), &ir::sample_walk_nest(),
                                &ir::sample_total_nest(), &ir::sample_mass_clear_nest(), &ir::sample_mass_walk_nest(),
                                &ir::sample_scan2_nest(),
                                &ir::sample_sort_pad_nest(), &ir::sample_sort_stage_nest()}) {
    const std::string c = ir::print(*n);
    EXPECT_EQ(c.rfind(n->signature + " {\n", 0), 0u) << c;
    for (const ir::Param& p : n->params)  // bound at the top where the body names it
      EXPECT_EQ(c.find("const int " + p.name + " = " + p.c + ";") != std::string::npos,
                ir::names(c.substr(c.find('{')), p.name))
          << p.name;
    for (const ir::Access& a : n->accesses) {
      EXPECT_NE(c.find(element(a)), std::string::npos) << a.name;
      EXPECT_EQ(c.find('{' + a.name + '}'), std::string::npos) << "access " << a.name << " left unprinted";
    }
  }
  const std::string e = ir::print(ir::embedding_row_nest());
  EXPECT_NE(e.find("  const int tid = threadIdx.x;\n  if (-1 < feed) {\n    if (feed < V) {\n"), std::string::npos) << e;
  EXPECT_NE(e.find("for (int j0 = 0; j0 < H; j0 += (threads * U)) {"), std::string::npos) << e;
  EXPECT_NE(ir::print(ir::argmax_partials_nest()).find("for (int j = threadIdx.x; j < n; j += threads) {"),
            std::string::npos);
  // The staging: both operands' loads of a round before its first prologue.
  const std::string st = ir::print(ir::linear_stage_nest());
  const size_t stage_round = st.find("for (int i0 = tid; i0 < n; i0 += (threads * U)) {");
  ASSERT_NE(stage_round, std::string::npos) << st;
  const size_t stage_use = st.find("mk_stage_unit(t.input_mode, vec_, xv[u], bv[u], ss)", stage_round);
  ASSERT_NE(stage_use, std::string::npos) << st;
  EXPECT_LT(st.find("if (b) bv[u] = mk_ld_unit(vec_, &b[(((long long)W) * ((long long)i))]);", stage_round), stage_use)
      << st;
  // A warp's nest: the lane, not the block's thread. Every load of a whole round goes out before
  // the round's first use of one.
  const std::string d = ir::print(ir::linear_dot_nest());
  EXPECT_NE(d.find("  const int lane = threadIdx.x & 31;\n"), std::string::npos) << d;
  const size_t round = d.find("  int i = ((v0 + F) + lane);\n  for (; i < (v1 - (32 * (U - 1))); i += (32 * U)) {");
  ASSERT_NE(round, std::string::npos) << d;
  const size_t load = d.find("u[r][j] = mk_ld_w<Smem>(&((const uint4*)w[r])[(i + (32 * j))]);", round);
  const size_t use = d.find("MkW<DT>::unpack(u[r][j], f);", round);
  const size_t tail = d.find("  if (i < v1) {", round);  // the partial round, where the whole ones stopped
  EXPECT_LT(load, use) << d;
  EXPECT_LT(d.rfind("mk_ld_w", tail), use) << "a whole round's load after its first use";
  // The attention pass: the warp and lane by shift and mask, the warp's positions from its own;
  // a position's K and V rows loaded before the heads use them; the states after the loop.
  const std::string ap = ir::print(ir::attention_pass_nest());
  EXPECT_NE(ap.find("  const int tid = threadIdx.x;\n  const int w = ((int)((unsigned)tid >> 5));\n"
                    "  const int lane = (tid & 31);\n"),
            std::string::npos)
      << ap;
  const size_t positions = ap.find("for (int j = (j0 + w); j < j1; j += nw) {");
  ASSERT_NE(positions, std::string::npos) << ap;
  const size_t k_load = ap.find("kr[c] = pre ? kpre[c] : kc[", positions);
  const size_t score = ap.find("s += qk[(((g0 + h) * D) + e)] * kr[c];", positions);
  EXPECT_LT(k_load, score) << ap;
  EXPECT_LT(score, ap.find("wst[((((w * HP) + h) * (D + 2)) + e)] = acc[h][c];", score)) << ap;
}

// Nests that look right to a careless model: each is refuted where the C goes wrong.
TEST(LoopNestProofs, WhatTheCGetsWrongIsRefuted) {
  const IndexExpr n = IndexExpr::var("n"), j = IndexExpr::var("j");
  auto nest = [&](ir::Block body, IndexExpr index) {
    ir::LoopNest m;
    m.signature = "__device__ void f(float* out, int n)";
    m.params = {{"n", "n", 1, 1 << 20}, {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"out", 0, n}};
    m.accesses = {{"out", "out", "out", index, true, {}}};
    m.body = std::move(body);
    return m;
  };
  auto proved = [](const ir::LoopNest& m) { return prove_loop_nest(m, "test", {}).proved(); };
  // A strided loop writes each element once; the same store outside it, in every thread, not.
  EXPECT_TRUE(proved(nest({ir::loop("j", ir::LoopKind::Threads, n, 1, {ir::code("{out} = 0.f;")})}, j)));
  EXPECT_FALSE(proved(nest({ir::loop("j", ir::LoopKind::Serial, n, 1, {ir::code("{out} = 0.f;")})}, j)));
  EXPECT_FALSE(proved(nest({ir::code("{out} = 0.f;")}, 0)));
  // An inner loop hides the outer one of the same name: its j runs to 2n, past the range.
  EXPECT_FALSE(proved(nest({ir::loop("j", ir::LoopKind::Threads, n, 1,
                                     {ir::loop("j", ir::LoopKind::Unrolled, n * 2, 1, {ir::code("{out} = 0.f;")})})},
                           j)));
  // A loop whose last increment overflows int: n near 2^31 with a step of 2^30.
  ir::LoopNest big = nest({ir::loop("j", ir::LoopKind::Threads, n, 1,
                                    {ir::loop("k", ir::LoopKind::Serial, n, 1 << 30, {ir::code("{out} = 0.f;")})})},
                          j);
  big.params[0].hi = INT32_MAX;
  big.accesses[0].once = false;
  EXPECT_FALSE(proved(big));
  // A thread's warp and lane by shift and mask: element 32 w + lane of n = threads is each
  // thread's own; the lane taken by a shift is not; a mask that is not 2^k - 1 and a shift by
  // an int's width are refused.
  {
    const IndexExpr tid = IndexExpr::var("tid"), w = IndexExpr::var("w"), lane = IndexExpr::var("lane");
    auto lanes = [&](IndexExpr warp, IndexExpr ln) {
      ir::LoopNest m = nest({ir::thread("tid"), ir::let("w", warp), ir::let("lane", ln), ir::code("{out} = 0.f;")},
                            w * 32 + lane);
      m.ranges[0].end = IndexExpr::var("threads");
      return prove_loop_nest(m, "test", {{"threads", 512}});
    };
    EXPECT_TRUE(lanes(tid >> 5, tid & 31).proved());
    EXPECT_FALSE(lanes(tid >> 5, tid >> 4).proved());
    EXPECT_FALSE(lanes(tid >> 4, tid & 31).proved());
    EXPECT_THROW(lanes(tid >> 5, tid & 30), Error);
    EXPECT_THROW(lanes(tid >> 32, tid & 31), Error);  // an int shifted by its width: undefined
  }
  // A loop variable may not hide a parameter.
  EXPECT_THROW(prove_loop_nest(nest({ir::loop("n", ir::LoopKind::Threads, n, 1, {ir::code("{out} = 0.f;")})}, 0),
                               "test", {}),
               Error);
  // Shapes the model does not cover are refused, not proved: a block-strided loop after the
  // thread binding (thread t takes only j = t mod threads, which the model does not know: this
  // one writes a fraction of the elements its cover claims), one inside another, a barrier
  // where threads take different paths.
  const IndexExpr threads = IndexExpr::var("threads"), tid = IndexExpr::var("tid"), x = IndexExpr::var("x");
  ir::LoopNest strided = nest({ir::thread("tid"), ir::loop("j", ir::LoopKind::Threads, n, 1, {ir::code("{out} = 0.f;")})},
                              j * threads + tid);
  strided.ranges[0].end = n * threads;
  strided.accesses[0].covers = {{{{"x", n * threads}}, x, {{"j", x / threads}, {"tid", x % threads}}}};
  try {
    prove_loop_nest(strided, "test", {{"threads", 32}});
    ADD_FAILURE() << "a block-strided loop after the thread binding was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("after the thread binding"), std::string::npos) << e.what();
  }
  EXPECT_THROW(prove_loop_nest(nest({ir::loop("i", ir::LoopKind::Threads, n, 1,
                                              {ir::loop("j", ir::LoopKind::Threads, n, 1, {ir::code("{out} = 0.f;")})})},
                                    j),
                               "test", {}),
               Error);
  EXPECT_THROW(prove_loop_nest(nest({ir::loop("j", ir::LoopKind::Threads, n, 1, {ir::code("{out} = 0.f; mk_sync();")})}, j),
                               "test", {}),
               Error);
  for (const char* barrier : {"__syncthreads();", "const float s = pf_block_sum(x);"})
    EXPECT_THROW(prove_loop_nest(nest({ir::loop("j", ir::LoopKind::Threads, n, 1, {ir::code("{out} = 0.f;"),
                                                                                     ir::code(barrier)})},
                                      j),
                                 "test", {}),
                 Error)
        << barrier;
  // A cover's mode must hold wherever its access runs: written for n < 5, covered "when n < 1"
  // (never: the cover would say nothing) is refuted; "when n < 5" is proved.
  ir::LoopNest moded = nest({ir::guard(n, 5, {ir::loop("j", ir::LoopKind::Threads, n, 1, {ir::code("{out} = 0.f;")})})}, j);
  moded.accesses[0].covers = {{{{"x", n}}, x, {{"j", x}}, {{n, 1}}}};
  EXPECT_FALSE(proved(moded));
  moded.accesses[0].covers[0].when = {{n, 5}};
  EXPECT_TRUE(proved(moded));
  // A parameter the body binds is out of scope before its bind, as in the printed C.
  EXPECT_THROW(prove_loop_nest(nest({ir::loop("j", ir::LoopKind::Threads, n, 1, {ir::code("{out} = 0.f;")}),
                                     ir::bind("n")},
                                    j),
                               "test", {}),
               Error);
  EXPECT_TRUE(proved(nest({ir::bind("n"), ir::loop("j", ir::LoopKind::Threads, n, 1, {ir::code("{out} = 0.f;")})}, j)));
}

TEST(LoopNestProofs, MutantsOfTheMergeAgreeWithRunningIt) {
  Tally tally{"attention merge nest, 5 chunks, 2 query heads, dim 3, 2 a batch, KV heads 0..2"};
  judge_mutants(ir::attention_merge_nest(), {{"C", 5}, {"G", 2}, {"D", 3}, {"B", 2}}, "h", 3, 4, tally);
}

TEST(LoopNestProofs, MutantsOfTheEmbeddingRowAgreeWithRunningIt) {
  Tally tally{"embedding row nest, vocabulary 3, 8 a round, 3 threads, token -1..3, hidden 1..29"};
  // Every token id the prover's domain holds near the table: -1 .. V.
  judge_mutants(ir::embedding_row_nest(), {{"V", 3}, {"U", 8}, {"threads", 3}}, 1,
                [](const ir::LoopNest& m) {
                  for (int64_t feed = -1; feed <= 3; ++feed)
                    if (!brute_force(m, {{"V", 3}, {"feed", feed}, {"U", 8}, {"threads", 3}}, "H", 30)) return false;
                  return true;
                },
                tally);
}

TEST(LoopNestProofs, MutantsOfTheSplitKFoldAgreeWithRunningIt) {
  Tally tally{"split-K fold nest, 3 parts, 16 slots, 3 threads, tiles of 0..8 rows"};
  judge_mutants(ir::linear_fold_nest(), {{"ks", 3}, {"S", 16}, {"threads", 3}}, "total", 9, 1, tally);
}

TEST(LoopNestProofs, MutantsOfTheFoldsColumnsAgreeWithRunningThem) {
  const std::map<std::string, int64_t> fixed = {{"vpr", 3}, {"vp2", 4}, {"LD", 5}, {"V", 4},
                                                {"U", 2},   {"nw", 2},  {"threads", 64}};
  EXPECT_TRUE(prove_loop_nest(ir::fold_rows_nest(), "fold rows", fixed, 300).proved());
  Tally tally{"fold rows nest, 3 vectors in groups of 4 lanes, 2 a round, 2 warps, 0..39 rows (every third)"};
  judge_mutants(ir::fold_rows_nest(), fixed, "rows", 40, 3, tally);
}

TEST(LoopNestProofs, MutantsOfTheLinearInputStagingAgreeWithRunningIt) {
  for (int64_t W : {1, 4}) {
    // The nest itself proves in the mutants' setting (any length, the mutants' limit), so a
    // refuted mutant is refuted for its change, not for the prover's limits.
    EXPECT_TRUE(prove_loop_nest(ir::linear_stage_nest(), "linear stage", {{"W", W}, {"U", 2}, {"threads", 3}}, 300)
                    .proved());
    Tally tally{W == 1 ? "linear stage nest, single floats, 2 a round, 3 threads, inputs of 0..29 units"
                       : "linear stage nest, 16-byte vectors, 2 a round, 3 threads, inputs of 0..29 units"};
    judge_mutants(ir::linear_stage_nest(), {{"W", W}, {"U", 2}, {"threads", 3}}, "n", 30, 1, tally);
  }
}

TEST(LoopNestProofs, MutantsOfTheLinearDotProductsAgreeWithRunningThem) {
  for (int64_t F : {0, 64}) {
    Tally tally{F == 0 ? "linear dot nest, 2 loads a round, 2 rows, 4-element vectors, parts of 0..149 vectors"
                       : "linear dot nest, the first round in registers, 2 loads a round, 2 rows, parts of 0..149"};
    judge_mutants(ir::linear_dot_nest(), {{"v0", 3}, {"F", F}, {"U", 2}, {"R", 2}, {"V", 4}, {"threads", 32}}, "n",
                  150, 12, tally);
  }
}

TEST(LoopNestProofs, MutantsOfTheLinearFirstRoundAndUnalignedLoopAgreeWithRunningThem) {
  Tally first{"linear dot first nest, 2 loads, 2 rows, parts of 0..99 vectors"};
  judge_mutants(ir::linear_dot_first_nest(), {{"v0", 3}, {"U", 2}, {"R", 2}, {"threads", 32}}, "n", 100, 1, first);
  Tally scalar{"linear dot scalar nest, 2 rows, parts of 0..99 elements"};
  judge_mutants(ir::linear_dot_scalar_nest(), {{"k0", 3}, {"R", 2}, {"threads", 32}}, "n", 100, 1, scalar);
}

TEST(LoopNestProofs, MutantsOfTheCombineAgreeWithRunningIt) {
  for (int64_t C : {1, 3}) {
    Tally tally{C == 1 ? "attention combine nest, 1 chunk, 3 query heads, dim 2, 2 a pass, 2 warps, KV heads 0..2"
                       : "attention combine nest, 3 chunks, 3 query heads, dim 2, 2 a pass, 2 warps, KV heads 0..2"};
    judge_mutants(ir::attention_combine_nest(),
                  {{"C", C}, {"G", 3}, {"D", 2}, {"HP", 2}, {"nw", 2}, {"threads", 64}}, "h", 3, C == 1 ? 8 : 4, tally);
  }
}

TEST(LoopNestProofs, MutantsOfTheAttentionStagingAgreeWithRunningIt) {
  Tally stage{"attention stage nest, 3 query heads, dim 37 of at most 64, 2 warps, KV head 1, positions 0..5, both modes"};
  const std::map<std::string, int64_t> fixed = {{"G", 3}, {"D", 37}, {"DC", 2}, {"DH", 1}, {"nw", 2}, {"threads", 64}};
  judge_mutants(ir::attention_stage_nest(), fixed, 10,
                [&](const ir::LoopNest& m) {
                  for (int64_t A : {0, 1}) {
                    ir::IndexEnv env(fixed.begin(), fixed.end());
                    env.insert({{"kvh", 1}, {"cap", 6}, {"A", A}});
                    if (!brute_force(m, env, "pos", 6)) return false;
                  }
                  return true;
                },
                stage);
}

TEST(LoopNestProofs, MutantsOfTheAttentionFirstRowAgreeWithRunningIt) {
  Tally first{"attention kv first nest, dim 33 of at most 64, 3 warps, chunk from 2, positions 2 and 5, ends 0..10"};
  const std::map<std::string, int64_t> ff = {{"D", 33}, {"DC", 2}, {"nw", 3}, {"threads", 96}};
  judge_mutants(ir::attention_kv_first_nest(), ff, 4,
                [&](const ir::LoopNest& m) {
                  for (int64_t pos : {2, 5}) {
                    ir::IndexEnv env(ff.begin(), ff.end());
                    env.insert({{"kvh", 1}, {"cap", 10}, {"j0", 2}, {"pos", pos}});
                    if (!brute_force(m, env, "j1", 11)) return false;
                  }
                  return true;
                },
                first);
}

TEST(LoopNestProofs, MutantsOfTheAttentionHeadConstantsAgreeWithRunningThem) {
  Tally consts{"attention head consts nest, dims 0..64 of at most 64"};
  judge_mutants(ir::attention_head_consts_nest(), {{"DC", 2}, {"DH", 1}, {"threads", 32}}, "D", 65, 1, consts);
}

TEST(LoopNestProofs, MutantsOfTheAttentionPassAgreeWithRunningIt) {
  Tally tally{"attention pass nest, 3 query heads, dim 3, 2 a pass, 2 warps, first head 0 and 2, chunks from 2 to 2..10"};
  const std::map<std::string, int64_t> fixed = {{"G", 3}, {"D", 3}, {"DC", 1}, {"HP", 2}, {"nw", 2}, {"threads", 64}};
  judge_mutants(ir::attention_pass_nest(), fixed, 3,
                [&](const ir::LoopNest& m) {
                  for (int64_t g0 : {0, 2}) {
                    ir::IndexEnv env(fixed.begin(), fixed.end());
                    env.insert({{"kvh", 1}, {"cap", 10}, {"g0", g0}, {"j0", 2}});
                    if (!brute_force(m, env, "j1", 11)) return false;
                  }
                  return true;
                },
                tally);
}

}  // namespace
}  // namespace mpk::superopt
