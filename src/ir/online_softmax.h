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
// state (m = -inf), as the device computes it. Exp2(x): 2^x (one argument), printed as a call
// of one of the device functions that compute it (Exp2Fn; both give 2^-inf = +0).
enum class RealOp { Const, Var, Add, Mul, Weight, Exp2 };
// pf_ex2 (the prefill source's ex2.approx.ftz) or CUDA's exp2f: a closed set, so that every
// Exp2 the prover reads as 2^x is printed as a function that computes 2^x.
enum class Exp2Fn { PfEx2, Exp2f };
const char* exp2_function_name(Exp2Fn fn);

class RealExpr {
 public:
  struct Node {
    RealOp op;
    double value = 0;    // Const
    std::string name;    // Var
    std::vector<RealExpr> args;  // two for Add, Mul, Weight; one for Exp2
    Exp2Fn fn = Exp2Fn::PfEx2;   // Exp2's device function
  };

  RealExpr(double value);  // a constant
  static RealExpr var(std::string name);
  static RealExpr binary(RealOp op, RealExpr a, RealExpr b);
  static RealExpr exp2(RealExpr x, Exp2Fn device_function = Exp2Fn::PfEx2);

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

// C source over float operands (MK_NEG_INF, expf, Exp2's function), every operation parenthesised.
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

// The prefill attentions' weights. Both run the online softmax in base 2, in one of two forms:
//  - scale in the exponent (kernels/prefill_wgmma_attention.cuh): the running maximum is over
//    raw scores and the scale c (> 0, in log2 units) is applied inside the exponent, so that a
//    weight is one FFMA and one ex2: rescale(m, M, c) = 2^((m - M) c), weight(s, M, c) =
//    2^(s c - M c). Both are 2^(c (x - y)): the online softmax's weight(x, y) for the base 2^c.
//    A masked score or an empty state (-inf) gives 2^-inf = 0 only for c > 0 (the host
//    launches this attention only with a positive scale).
//  - scaled scores (kernels/prefill_attention.cuh): the scores are multiplied by c (any sign)
//    before the maximum, rescale(m, M) = 2^(m - M), weight(s, M) = 2^(s - M): the online
//    softmax's weight for the base 2 over the scaled scores.
// The states are updated by the online softmax's update (its algebra holds for any base). An
// empty state and a masked score give weight 0 as weight() does for a finite M (every row's
// first key block holds key 0): IEEE facts the kernels rely on, not proved.
struct PrefillSoftmax {
  RealExpr rescale;  // variables m, M, and c when the scale is in the exponent
  RealExpr weight;   // variables s, M, and c when the scale is in the exponent
  RealExpr update;   // variables a, w, p, v: OnlineSoftmax::update
  bool scale_in_exponent;
};
const PrefillSoftmax& prefill_softmax_formulas();         // the wgmma attention's (pf_ex2)
const PrefillSoftmax& prefill_scaled_softmax_formulas();  // the mma.sync attention's (exp2f)

// <prefix>_rescale(m, M[, c]), <prefix>_weight(s, M[, c]) and <prefix>_update(a, w, p, v),
// float, for the prefill source after kernels/prefill_common.cuh (pf_ex2): pf_os_* from
// prefill_softmax_formulas(), pf_ss_* from prefill_scaled_softmax_formulas().
std::string prefill_softmax_device_functions(const PrefillSoftmax& f, const std::string& prefix);
std::string prefill_softmax_device_functions();  // both sets

}  // namespace mpk::ir
