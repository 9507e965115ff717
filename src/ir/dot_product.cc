#include "ir/dot_product.h"

namespace mpk::ir {

const DotProduct& dot_product_formulas() {
  static const DotProduct f = [] {
    auto v = [](const char* n) { return RealExpr::var(n); };
    return DotProduct{v("g") * v("x"), v("a") + v("w") * v("y"), v("a") + v("b"), v("v") * v("s")};
  }();
  return f;
}

std::string dot_product_device_functions(const DotProduct& f) {
  std::string s = "// Printed from src/ir/dot_product.cc (proved by superopt/): do not edit.\n";
  s += "__device__ __forceinline__ float mk_dp_stage(float g, float x) { return " + to_c(f.stage) + "; }\n";
  s += "__device__ __forceinline__ float mk_dp_step(float a, float w, float y) { return " + to_c(f.step) + "; }\n";
  s += "__device__ __forceinline__ float mk_dp_add(float a, float b) { return " + to_c(f.add) + "; }\n";
  s += "__device__ __forceinline__ float mk_dp_scale(float v, float s) { return " + to_c(f.scale) + "; }\n";
  return s;
}

}  // namespace mpk::ir
