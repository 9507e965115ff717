// The sums of a linear task (kernels/linear.cuh), written once as real expressions: the
// megakernel's source prints them (dot_product_device_functions) and superopt/ proves their
// algebra over the reals (algebra_prover.h). A linear's output row is
// scale(fold of its K parts' sums, s) + bias + residual, each part's sum being the lanes' running
// sums of step(a, w, y) over its K range, added together.
#pragma once

#include <string>

#include "ir/online_softmax.h"

namespace mpk::ir {

struct DotProduct {
  RealExpr stage;  // variables g, x: an RMSNorm input staged as g * x (its factor r comes later)
  RealExpr step;   // variables a, w, y: a running sum plus a weight times a staged input
  RealExpr add;    // variables a, b: two partial sums (lanes, K parts), then bias and residual
  RealExpr scale;  // variables v, s: a finished sum times its input's factor (r, or 1)
};
const DotProduct& dot_product_formulas();

// Device functions printed from the formulas, before kernels/common.cuh: mk_dp_stage(g, x),
// mk_dp_step(a, w, y), mk_dp_add(a, b) and mk_dp_scale(v, s), float.
std::string dot_product_device_functions(const DotProduct& f = dot_product_formulas());

}  // namespace mpk::ir
