// The relative L2 error ||a - b|| / ||b|| in double, the one comparison of logits mpk makes (the
// search's differential test, the GPU tests): infinity when the sizes differ, b is empty or
// zero, or either holds a non-finite value, so NaN never passes.
#pragma once

#include <cmath>
#include <vector>

namespace mpk {

inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || b.empty()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return den > 0 ? std::sqrt(num / den) : INFINITY;
}

}  // namespace mpk
