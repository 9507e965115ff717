// The online-softmax formulas (ir/online_softmax.h) proved over the reals, their printed device
// functions, and the mutation suite: every generated or hand-made mutant that changes the value
// is refuted with a counterexample; rewrites equal over the reals are proved.
#include "superopt/algebra_prover.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace mpk::superopt {
namespace {

using ir::RealExpr;

const RealExpr m = RealExpr::var("m"), M = RealExpr::var("M");
const RealExpr a = RealExpr::var("a"), w = RealExpr::var("w"), p = RealExpr::var("p"), v = RealExpr::var("v");

std::string failed(const ProofRecord& r) {
  std::string s;
  for (const Obligation& o : r.obligations)
    if (o.result != "proved") s += o.name + ": " + o.result + " (" + o.counterexample + ") ";
  return s;
}

bool refuted(const ProofRecord& r) {
  for (const Obligation& o : r.obligations)
    if (o.result == "refuted" && !o.counterexample.empty()) return true;
  return false;
}

TEST(OnlineSoftmaxProof, TheFormulasAreProved) {
  const ProofRecord r = prove_online_softmax(ir::online_softmax_formulas());
  ASSERT_EQ(r.obligations.size(), 4u);
  EXPECT_TRUE(r.proved()) << failed(r);
  EXPECT_NE(r.to_json().find("\"proved\":true"), std::string::npos);
}

// The kernel runs what was proved: the device functions are printed from the same formulas.
TEST(OnlineSoftmaxProof, DeviceFunctionsArePrintedFromTheFormulas) {
  const std::string s = ir::online_softmax_device_functions();
  EXPECT_NE(s.find("float mk_rescale(float m, float M) { return (m == MK_NEG_INF ? 0.f : expf(m - M)); }"),
            std::string::npos) << s;
  EXPECT_NE(s.find("float mk_os_update(float a, float w, float p, float v) { return ((a * w) + (p * v)); }"),
            std::string::npos) << s;
  const ir::OnlineSoftmax other{ir::weight(M, m), a * w + p};
  EXPECT_NE(ir::online_softmax_device_functions(other).find("expf(M - m)"), std::string::npos);
}

TEST(OnlineSoftmaxProof, EveryGeneratedMutantIsRefuted) {
  const ir::OnlineSoftmax& f = ir::online_softmax_formulas();
  int count = 0;
  for (const RealExpr& mw : real_mutants(f.weight)) {
    const ProofRecord r = prove_online_softmax({mw, f.update});
    EXPECT_TRUE(refuted(r)) << "weight = " << ir::to_string(mw) << " not refuted: " << failed(r);
    ++count;
  }
  for (const RealExpr& mu : real_mutants(f.update)) {
    const ProofRecord r = prove_online_softmax({f.weight, mu});
    EXPECT_TRUE(refuted(r)) << "update = " << ir::to_string(mu) << " not refuted: " << failed(r);
    ++count;
  }
  // weight(m, M): its arguments swapped, each variable replaced by the other (3); a*w + p*v:
  // each of the 3 operators swapped, each of the 4 variables replaced by the 3 others (15).
  EXPECT_EQ(count, 3 + 15);
  std::printf("online-softmax mutants generated and refuted: %d\n", count);
}

TEST(OnlineSoftmaxProof, HandMadeMutantsAreRefuted) {
  const ir::OnlineSoftmax& f = ir::online_softmax_formulas();
  struct Case {
    const char* what;
    ir::OnlineSoftmax g;
  };
  for (const Case& c : {
           Case{"rescaled with the wrong sign: e^(M - m)", {ir::weight(M, m), f.update}},
           Case{"the running sum not rescaled", {f.weight, a + p * v}},
           Case{"the new term not weighted", {f.weight, a * w + v}},
           Case{"the output not rescaled: weight 1", {ir::weight(m, m), f.update}},
       }) {
    const ProofRecord r = prove_online_softmax(c.g);
    EXPECT_TRUE(refuted(r)) << c.what << ": " << failed(r);
  }
}

// Rewrites equal over the reals pass.
TEST(OnlineSoftmaxProof, EquivalentRewritesAreProved) {
  const ir::OnlineSoftmax& f = ir::online_softmax_formulas();
  for (const RealExpr& u : {p * v + a * w, w * a + v * p, (a * w + p * v) * RealExpr(1.0)}) {
    const ProofRecord r = prove_online_softmax({f.weight, u});
    EXPECT_TRUE(r.proved()) << ir::to_string(u) << ": " << failed(r);
  }
}

// A real expression's value (no weights) at a point.
double value(const RealExpr& e, const std::map<std::string, double>& at) {
  const RealExpr::Node& n = e.node();
  switch (n.op) {
    case ir::RealOp::Const: return n.value;
    case ir::RealOp::Var: return at.at(n.name);
    case ir::RealOp::Add: return value(n.args[0], at) + value(n.args[1], at);
    case ir::RealOp::Mul: return value(n.args[0], at) * value(n.args[1], at);
    case ir::RealOp::Weight:
    case ir::RealOp::Exp2: break;
  }
  ADD_FAILURE() << "a weight or a power in a polynomial";
  return 0;
}

// Whether two expressions over `vars` agree at a few points with distinct small values (exact
// in doubles: a polynomial identity of low degree that holds there holds everywhere only if it
// is one; differing at any point means not equal).
bool same_at_points(const RealExpr& x, const RealExpr& y, const std::vector<std::string>& vars) {
  for (int k = 0; k < 6; ++k) {
    std::map<std::string, double> at;
    for (size_t i = 0; i < vars.size(); ++i) at[vars[i]] = double((int(i) * 7 + k * 13) % 11 - 5) + 0.5 * k;
    if (value(x, at) != value(y, at)) return false;
  }
  return true;
}

TEST(DotProductProof, TheFormulasAreProved) {
  const ProofRecord r = prove_dot_product(ir::dot_product_formulas());
  ASSERT_EQ(r.obligations.size(), 5u);
  EXPECT_TRUE(r.proved()) << failed(r);
}

TEST(DotProductProof, DeviceFunctionsArePrintedFromTheFormulas) {
  const std::string s = ir::dot_product_device_functions();
  EXPECT_NE(s.find("float mk_dp_step(float a, float w, float y) { return (a + (w * y)); }"), std::string::npos) << s;
  EXPECT_NE(s.find("float mk_dp_stage(float g, float x) { return (g * x); }"), std::string::npos) << s;
  EXPECT_NE(s.find("float mk_dp_add(float a, float b) { return (a + b); }"), std::string::npos) << s;
  EXPECT_NE(s.find("float mk_dp_scale(float v, float s) { return (v * s); }"), std::string::npos) << s;
}

// Every generated mutant of each formula: one that changes the value is refuted with a
// counterexample, one equal to the formula (a rewrite) is proved; most change it.
TEST(DotProductProof, MutantsThatChangeTheValueAreRefuted) {
  const ir::DotProduct& f = ir::dot_product_formulas();
  int generated = 0, wrong = 0;
  auto judge = [&](const ir::DotProduct& g, const RealExpr& mutant, const RealExpr& original,
                   const std::vector<std::string>& vars) {
    ++generated;
    const ProofRecord r = prove_dot_product(g, 5000);
    if (same_at_points(mutant, original, vars)) {
      EXPECT_TRUE(r.proved()) << ir::to_string(mutant) << " equals " << ir::to_string(original) << ": " << failed(r);
    } else {
      ++wrong;
      EXPECT_TRUE(refuted(r)) << ir::to_string(mutant) << " is wrong but not refuted";
    }
  };
  for (const RealExpr& m : real_mutants(f.stage)) judge({m, f.step, f.add, f.scale}, m, f.stage, {"g", "x"});
  for (const RealExpr& m : real_mutants(f.step)) judge({f.stage, m, f.add, f.scale}, m, f.step, {"a", "w", "y"});
  for (const RealExpr& m : real_mutants(f.add)) judge({f.stage, f.step, m, f.scale}, m, f.add, {"a", "b"});
  for (const RealExpr& m : real_mutants(f.scale)) judge({f.stage, f.step, f.add, m}, m, f.scale, {"v", "s"});
  // Hand-made: a bias per K part (added before the fold), the factor applied twice, the staged
  // input already normalised by a factor the kernel then applies again.
  const RealExpr b = RealExpr::var("b"), s = RealExpr::var("s"), vv = RealExpr::var("v");
  EXPECT_TRUE(refuted(prove_dot_product({f.stage, f.step, a + b + b, f.scale}, 5000)));
  EXPECT_TRUE(refuted(prove_dot_product({f.stage, f.step, f.add, vv * s * s}, 5000)));
  EXPECT_TRUE(refuted(prove_dot_product({RealExpr::var("g") * RealExpr::var("x") * RealExpr::var("x"), f.step, f.add,
                                         f.scale}, 5000)));
  EXPECT_GT(wrong, generated / 2);
  std::printf("[mutation] a linear's sums: %d mutants, %d wrong (all refuted)\n", generated, wrong);
}

// Every generated mutant of f's rescale and weight, in f's form: proved when its exponent
// still equals the original's (at sample points), refuted otherwise. Returns {generated, wrong}.
std::pair<int, int> judge_weight_mutants(const ir::PrefillSoftmax& f) {
  int generated = 0, wrong = 0;
  for (bool rescale : {true, false}) {
    const RealExpr& original = rescale ? f.rescale : f.weight;
    std::vector<std::string> vars{rescale ? "m" : "s", "M"};
    if (f.scale_in_exponent) vars.push_back("c");
    for (const RealExpr& mutant : real_mutants(original)) {
      ++generated;
      const ir::PrefillSoftmax g{rescale ? mutant : f.rescale, rescale ? f.weight : mutant, f.update,
                                 f.scale_in_exponent};
      const ProofRecord r = prove_prefill_softmax(g, 5000);
      if (mutant.op() == ir::RealOp::Exp2 &&
          same_at_points(mutant.node().args[0], original.node().args[0], vars)) {
        EXPECT_TRUE(r.proved()) << ir::to_string(mutant) << ": " << failed(r);
      } else {
        ++wrong;
        EXPECT_TRUE(refuted(r)) << ir::to_string(mutant) << " is wrong but not refuted";
      }
    }
  }
  return {generated, wrong};
}

TEST(PrefillSoftmaxProof, TheFormulasAreProved) {
  const ProofRecord r = prove_prefill_softmax(ir::prefill_softmax_formulas());
  ASSERT_EQ(r.obligations.size(), 6u);
  EXPECT_TRUE(r.proved()) << failed(r);
}

TEST(PrefillSoftmaxProof, DeviceFunctionsArePrintedFromTheFormulas) {
  const std::string s = ir::prefill_softmax_device_functions();
  EXPECT_NE(s.find("float pf_os_rescale(float m, float M, float c) { return pf_ex2(((m + (-1.f * M)) * c)); }"),
            std::string::npos) << s;
  EXPECT_NE(s.find("float pf_os_weight(float s, float M, float c) { return pf_ex2(((s * c) + (-1.f * (M * c)))); }"),
            std::string::npos) << s;
  EXPECT_NE(s.find("float pf_os_update(float a, float w, float p, float v) { return ((a * w) + (p * v)); }"),
            std::string::npos) << s;
  EXPECT_NE(s.find("float pf_ss_rescale(float m, float M) { return exp2f((m + (-1.f * M))); }"), std::string::npos) << s;
  EXPECT_NE(s.find("float pf_ss_weight(float s, float M) { return exp2f((s + (-1.f * M))); }"), std::string::npos) << s;
  EXPECT_NE(s.find("float pf_ss_update(float a, float w, float p, float v) { return ((a * w) + (p * v)); }"),
            std::string::npos) << s;
}

// The mma.sync attention's softmax over scaled scores: its exponents are x - M for any scale.
TEST(PrefillSoftmaxProof, TheScaledScoresFormulasAreProved) {
  const ProofRecord r = prove_prefill_softmax(ir::prefill_scaled_softmax_formulas());
  ASSERT_EQ(r.obligations.size(), 6u);
  EXPECT_TRUE(r.proved()) << failed(r);
  EXPECT_NE(r.obligations[0].name.find("(m - M)"), std::string::npos) << r.obligations[0].name;
  EXPECT_EQ(r.obligations[0].name.find("c ("), std::string::npos) << r.obligations[0].name;
}

// Every generated mutant of the two weights: one whose exponent is still c (x - M) is proved,
// every other is refuted (a power dropped, a constant, a variable or an operator changed).
TEST(PrefillSoftmaxProof, MutantsOfTheWeightsAreRefuted) {
  const ir::PrefillSoftmax& f = ir::prefill_softmax_formulas();
  const auto [generated, wrong] = judge_weight_mutants(f);
  const RealExpr s = RealExpr::var("s"), c = RealExpr::var("c");
  for (const ir::PrefillSoftmax& g : {
           ir::PrefillSoftmax{RealExpr::exp2(m - M), f.weight, f.update, true},        // the scale left out
           ir::PrefillSoftmax{f.rescale, RealExpr::exp2(s * c - M), f.update, true},   // the max not scaled
           ir::PrefillSoftmax{RealExpr::exp2((M - m) * c), f.weight, f.update, true},  // the wrong sign
           ir::PrefillSoftmax{f.rescale, f.weight, a + p * v, true},                    // not rescaled
       })
    EXPECT_TRUE(refuted(prove_prefill_softmax(g, 5000))) << ir::to_string(g.rescale) << ", " << ir::to_string(g.weight);
  // Rewrites equal over the reals.
  EXPECT_TRUE(prove_prefill_softmax({RealExpr::exp2(m * c - M * c), RealExpr::exp2((s - M) * c), f.update, true}).proved());
  EXPECT_GT(wrong, generated / 2);
  std::printf("[mutation] prefill softmax weights: %d mutants, %d wrong (all refuted)\n", generated, wrong);
}

// The same over scaled scores: every mutant of exp2f(m - M) and exp2f(s - M) whose exponent is
// not x - M is refuted; the scale put back into the exponent (a kernel that scaled twice) too.
TEST(PrefillSoftmaxProof, MutantsOfTheScaledScoresWeightsAreRefuted) {
  const ir::PrefillSoftmax& f = ir::prefill_scaled_softmax_formulas();
  const auto [generated, wrong] = judge_weight_mutants(f);
  const RealExpr s = RealExpr::var("s"), c = RealExpr::var("c");
  for (const ir::PrefillSoftmax& g : {
           ir::PrefillSoftmax{RealExpr::exp2((m - M) * c, ir::Exp2Fn::Exp2f), f.weight, f.update, false},  // scaled twice
           ir::PrefillSoftmax{f.rescale, RealExpr::exp2(M - s, ir::Exp2Fn::Exp2f), f.update, false},        // the wrong sign
           ir::PrefillSoftmax{f.rescale, f.weight, a * w + p, false},  // the term's value left out
       })
    EXPECT_TRUE(refuted(prove_prefill_softmax(g, 5000))) << ir::to_string(g.rescale) << ", " << ir::to_string(g.weight);
  // The formulas of the scale in the exponent are not this form's (and the converse).
  const ir::PrefillSoftmax& inside = ir::prefill_softmax_formulas();
  EXPECT_TRUE(refuted(prove_prefill_softmax({inside.rescale, inside.weight, f.update, false}, 5000)));
  EXPECT_TRUE(refuted(prove_prefill_softmax({f.rescale, f.weight, f.update, true}, 5000)));
  // A weight is printed as one of the 2^x functions (ir::Exp2Fn, a closed set); either is 2^x.
  EXPECT_TRUE(prove_prefill_softmax({RealExpr::exp2(m + RealExpr(-1.0) * M, ir::Exp2Fn::Exp2f), f.weight, f.update, false}).proved());
  EXPECT_TRUE(prove_prefill_softmax({RealExpr::exp2(m + RealExpr(-1.0) * M), f.weight, f.update, false}).proved());
  EXPECT_STREQ(ir::exp2_function_name(ir::Exp2Fn::PfEx2), "pf_ex2");
  EXPECT_STREQ(ir::exp2_function_name(ir::Exp2Fn::Exp2f), "exp2f");
  EXPECT_GT(wrong, generated / 2);
  std::printf("[mutation] prefill scaled-score softmax weights: %d mutants, %d wrong (all refuted)\n", generated, wrong);
}

}  // namespace
}  // namespace mpk::superopt
