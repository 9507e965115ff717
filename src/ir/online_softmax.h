// The online-softmax formulas of attention, written once as real expressions: the megakernel's
// source prints them (online_softmax_device_functions) and superopt/ proves their algebra over
// the reals (algebra_prover.h). A state (m, l, o) stands for the scores s_j and values v_j it
// has seen through l * e^m = sum_j e^(s_j) and o * e^m = sum_j e^(s_j) v_j; an empty state has
// m = -inf and l = o = 0.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace mpk::ir {

// Weight(m, M): the factor that moves a state with max m to max M, e^(m - M), or 0 for an empty
// state (m = -inf), as the device computes it. Exp2(x): 2^x (one argument), printed as pf_ex2
// (the prefill source's ex2.approx.ftz: 2^-inf = +0).
enum class RealOp { Const, Var, Add, Mul, Weight, Exp2 };

class RealExpr {
 public:
  struct Node {
    RealOp op;
    double value = 0;    // Const
    std::string name;    // Var
    std::vector<RealExpr> args;  // two for Add, Mul, Weight; one for Exp2
  };

  RealExpr(double value);  // a constant
  static RealExpr var(std::string name);
  static RealExpr binary(RealOp op, RealExpr a, RealExpr b);
  static RealExpr exp2(RealExpr x);

  const Node& node() const { return *node_; }
  RealOp op() const { return node_->op; }

 private:
  explicit RealExpr(std::shared_ptr<const Node> n) : node_(std::move(n)) {}
  std::shared_ptr<const Node> node_;
};

inline RealExpr operator+(RealExpr a, RealExpr b) { return RealExpr::binary(RealOp::Add, a, b); }
inline RealExpr operator*(RealExpr a, RealExpr b) { return RealExpr::binary(RealOp::Mul, a, b); }
inline RealExpr weight(RealExpr m, RealExpr M) { return RealExpr::binary(RealOp::Weight, m, M); }

inline RealExpr operator-(RealExpr a, RealExpr b) { return a + RealExpr(-1.0) * b; }

// C source over float operands (MK_NEG_INF, expf, pf_ex2), every operation parenthesised.
std::string to_c(const RealExpr& e);
// "((a * w) + (p * v))"-like text for messages and tests.
std::string to_string(const RealExpr& e);

struct OnlineSoftmax {
  RealExpr weight;  // variables m, M: a state's factor at a common max
  RealExpr update;  // variables a, w, p, v: a running sum a at factor w plus a term p * v
};
const OnlineSoftmax& online_softmax_formulas();

// Device functions printed from the formulas, after kernels/common.cuh (MK_NEG_INF):
// mk_rescale(m, M) and mk_os_update(a, w, p, v), float.
std::string online_softmax_device_functions(const OnlineSoftmax& f = online_softmax_formulas());

// The prefill attention's weights (kernels/prefill_wgmma_attention.cuh). Its running maximum is
// over raw scores and the scale c (> 0, in log2 units) is applied inside the exponent, so that a
// weight is one FFMA and one ex2: rescale(m, M, c) = 2^((m - M) c), weight(s, M, c) =
// 2^(s c - M c). Both are 2^(c (x - y)): the online softmax's weight(x, y) for the base 2^c,
// and the states are updated by the online softmax's update (its algebra holds for any base).
// An empty state (m = -inf) and a masked score (s = -inf) give 2^-inf = 0 as weight() does,
// for c > 0 (the host launches this attention only with a positive scale) and a finite M
// (every row's first key block holds key 0): IEEE facts the kernel relies on, not proved.
struct PrefillSoftmax {
  RealExpr rescale;  // variables m, M, c
  RealExpr weight;   // variables s, M, c
  RealExpr update;   // variables a, w, p, v: OnlineSoftmax::update
};
const PrefillSoftmax& prefill_softmax_formulas();

// pf_os_rescale(m, M, c), pf_os_weight(s, M, c) and pf_os_update(a, w, p, v), float, for the
// prefill source after kernels/prefill_common.cuh (pf_ex2).
std::string prefill_softmax_device_functions(const PrefillSoftmax& f = prefill_softmax_formulas());

}  // namespace mpk::ir
