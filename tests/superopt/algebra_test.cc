// The online-softmax formulas (ir/online_softmax.h) proved over the reals, their printed device
// functions, and the mutation suite: every generated or hand-made mutant that changes the value
// is refuted with a counterexample; rewrites equal over the reals are proved.
#include "superopt/algebra_prover.h"

#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace mpk::superopt
